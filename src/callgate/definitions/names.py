"""Tool names from elsewhere, mapped reversibly onto the names every provider accepts.

Providers accept tool names matching ``^[a-zA-Z0-9_-]{1,64}$``. Definitions
written elsewhere use dots (``billing.refund``), slashes, spaces or longer
names. `tool_name` maps such a name to an accepted one: each other character
becomes ``_``; a name that was changed gets a short hash of the original
appended when the plain mapping would be ambiguous (it collides with a name
in use, or had to be cut to 64 characters). The original is kept on the tool
(`ToolSpec.external_name`), so the mapping is reversible and reported.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container

__all__ = ["VALID_NAME", "tool_name"]

VALID_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_OTHER = re.compile(r"[^a-zA-Z0-9_-]")


def tool_name(name: str, taken: Container[str] = ()) -> str:
    """An accepted tool name for ``name`` (itself if it is accepted), distinct from ``taken``."""
    if VALID_NAME.fullmatch(name):
        return name
    plain = _OTHER.sub("_", name) or "tool"
    if len(plain) <= 64 and plain not in taken:
        return plain
    suffix = "_" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return plain[: 64 - len(suffix)] + suffix

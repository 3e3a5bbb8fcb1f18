"""Text any backend can store: the ledger's last line against hostile strings.

The parse stage rejects model text that is not valid Unicode before it is
decided on, but a ledger also stores what tools return and what people and
programs write, and one record SQLite or PostgreSQL cannot encode must not
stop it recording. When a write or read fails only because of such text, it
is tried once more with every string made storable: a lone UTF-16 surrogate
written as the six characters ``\\udXXX``, a NUL (which PostgreSQL text
cannot hold) as ``\\u0000``. Hashes are computed on the storable text, so
``verify`` agrees with what was stored.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["is_unstorable", "storable", "storable_items", "storable_text"]

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    """``text`` with lone surrogates and NULs written as ``\\uXXXX`` escapes."""
    return _UNSTORABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def storable(value: Any) -> Any:
    """``value`` with every string in it made storable: strings, the keys and values of
    dicts, lists, tuples and the fields of dataclass records. Other objects are kept."""
    kind = type(value)
    if kind is str:
        return storable_text(value) if _UNSTORABLE.search(value) else value
    if kind is dict:
        return {storable(k): storable(v) for k, v in value.items()}
    if kind is list:
        return [storable(v) for v in value]
    if kind is tuple:
        return tuple(storable(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            if f.init:
                old = getattr(value, f.name)
                new = storable(old)
                if new is not old:
                    changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value


def storable_items(items: Sequence[Any]) -> list[Any]:
    """Ledger write items (kind, payload) with their payloads made storable."""
    try:
        return [storable(item) for item in items]
    except RecursionError:  # a result nested beyond reach: keep it, the retry will say
        return list(items)


def is_unstorable(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure to encode text for the database (and nothing else)."""
    if isinstance(exc, UnicodeEncodeError):
        return True
    text = str(exc)
    return "surrogates not allowed" in text or "cannot contain NUL" in text

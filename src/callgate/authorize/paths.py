"""Paths into a tool's output records: where an ``output_trust`` label applies.

Kept apart from `callgate.authorize.provenance` so that `callgate.authorize.readers`
can read reader paths without importing the index that uses it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from callgate.errors import DefinitionError

__all__ = ["TrustPath"]


@dataclass(frozen=True, slots=True)
class TrustPath:
    """Where in an output record an ``output_trust`` label applies.

    Written as segments joined by ``.``: a name (``owner.email``), a JSON string
    for a key holding a dot or a quote (``meta."x.y"``), or ``*`` for any one key
    (``files.*.id``). Lists are transparent: ``attachments.name`` is the name of
    every attachment. ``keys(path)`` labels the keys of the mapping at ``path``
    (``keys(shared_with)``: the addresses a file is shared with); ``keys()`` the
    record's own field names. A path names one place only: a key holding a dot
    is always quoted, so ``a.b`` is never the key ``"a.b"``.
    """

    segments: tuple[str | None, ...]
    """The names on the way; None for ``*``."""
    keys: bool = False
    """Whether the label is on the keys of the mapping at the path."""

    @classmethod
    def parse(cls, text: str) -> TrustPath:
        """Read a path; `DefinitionError` names what is wrong and how to write it."""
        inner, keys = text, False
        if text.startswith("keys(") and text.endswith(")"):
            inner, keys = text[5:-1], True
        if not inner:
            if keys:
                return cls((), keys=True)
            raise DefinitionError("an output_trust path is empty; name a field, e.g. 'id'")
        segments: list[str | None] = []
        i = 0
        while True:
            if inner.startswith('"', i):
                end = _closing_quote(inner, i)
                if end < 0:
                    raise DefinitionError(
                        f"output_trust path {text!r}: the quoted key at position {i} is not "
                        'closed; write it as a JSON string, e.g. meta."x.y"'
                    )
                segments.append(json.loads(inner[i : end + 1]))
                i = end + 1
                if i < len(inner) and inner[i] != ".":
                    raise DefinitionError(
                        f"output_trust path {text!r}: expected '.' after the quoted key at "
                        f"position {i}, got {inner[i]!r}"
                    )
            else:
                end = inner.find(".", i)
                end = len(inner) if end < 0 else end
                name = inner[i:end]
                if not name or '"' in name:
                    raise DefinitionError(
                        f"output_trust path {text!r}: segment {len(segments) + 1} is "
                        f"{name!r}; write names joined by '.', quote a key holding '.' "
                        'or \'"\' as a JSON string (meta."x.y"), or use * for any key'
                    )
                segments.append(None if name == "*" else name)
                i = end
            if i >= len(inner):
                return cls(tuple(segments), keys=keys)
            i += 1  # the dot
            if i >= len(inner):
                raise DefinitionError(f"output_trust path {text!r} ends with '.'; name a field")

    def matches(self, path: tuple[str, ...]) -> bool:
        """Whether this path names the place ``path`` (the keys on the way to it)."""
        if len(path) != len(self.segments):
            return False
        return all(s is None or s == p for s, p in zip(self.segments, path, strict=True))


def _closing_quote(text: str, start: int) -> int:
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i
        i += 1
    return -1

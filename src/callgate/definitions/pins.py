"""Approved digests of definitions that come from elsewhere (agent cards, skill folders).

A definition is pinned by the hash of its content: the first one seen is
recorded as approved (trust on first use) unless ``trust_first=False``; a
different one later is not approved until a person calls `DigestPins.approve`.
The file is JSON, ``{name: "sha256:..."}``, replaced atomically on each write.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from callgate.errors import DefinitionError

__all__ = ["DigestPins"]


class DigestPins:
    """Approved digests, one per name, kept in a JSON file."""

    def __init__(self, path: str | Path, *, trust_first: bool = True) -> None:
        self.path = Path(path)
        self.trust_first = trust_first

    def _read(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise DefinitionError(f"{self.path}: not a pin file ({exc})") from exc
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise DefinitionError(f"{self.path}: not a pin file (expected {{name: digest}})")
        return data

    def pinned(self, name: str) -> str | None:
        """The approved digest for ``name``, if any."""
        return self._read().get(name)

    def approve(self, name: str, digest: str) -> None:
        """Record ``digest`` as the approved one for ``name``."""
        data = self._read()
        data[name] = digest
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".pins-")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, sort_keys=True)
        os.replace(tmp, self.path)

    def check(self, name: str, digest: str) -> bool:
        """Whether ``digest`` is approved for ``name`` (pinning it first if none is)."""
        pinned = self.pinned(name)
        if pinned is None and self.trust_first:
            self.approve(name, digest)
            return True
        return pinned == digest

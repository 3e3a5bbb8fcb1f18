"""Canonical JSON and the hashes built on it (request hashes, approval bindings)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel

__all__ = ["canonical_arguments", "canonical_json", "digest"]


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def canonical_arguments(arguments: BaseModel) -> str:
    """Canonical JSON of validated arguments, defaults filled in; a set's items sorted, so
    equal sets give equal text whatever order built them."""
    return canonical_json(_sets_sorted(arguments.model_dump(), arguments.model_dump(mode="json")))


def _sets_sorted(python: Any, data: Any) -> Any:
    """``data`` (the JSON dump) with the lists that were sets in ``python`` (the Python dump
    of the same value, walked in the same order) sorted by their items' canonical text."""
    if isinstance(python, set | frozenset) and isinstance(data, list):
        items = [_sets_sorted(p, d) for p, d in zip(python, data, strict=False)]
        return sorted(items, key=canonical_json)
    if isinstance(python, dict) and isinstance(data, dict):
        return {
            key: _sets_sorted(p, d)
            for (_, p), (key, d) in zip(python.items(), data.items(), strict=False)
        }
    if isinstance(python, list | tuple) and isinstance(data, list):
        return [_sets_sorted(p, d) for p, d in zip(python, data, strict=False)]
    return data


def digest(*parts: str) -> str:
    """A SHA-256 hex digest of the parts, joined unambiguously.

    Any ``str`` can be digested, even one holding a lone surrogate (a legal
    JSON escape a model may send): such code points are encoded as they are
    (``surrogatepass``), so hashing model text never raises.
    """
    if len(parts) == 2 and parts[0] and "\x00" not in parts[0]:
        return hashlib.sha256(
            f"{parts[0]}\x00{parts[1]}".encode("utf-8", "surrogatepass")
        ).hexdigest()
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()

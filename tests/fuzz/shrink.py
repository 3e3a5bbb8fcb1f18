"""Make a failing fuzz input small, and save it where a person can run it again.

`shrink` greedily removes keys, items and halves of strings while the input
still fails the same way (same stage, exception type and location), within a
budget of checks and seconds. `save_reproducer` writes the input as a pickle,
a Python literal when it has one, and a script that runs it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import pickle
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .generate import Case, _containers, _get
from .harness import Bench


def _replace(root: Any, path: tuple[Any, ...], new: Any) -> Any:
    """``root`` with the node at ``path`` replaced by ``new``; only ancestors are copied."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy = dict(root) if isinstance(root, dict) else list(root)
    copy[head] = _replace(root[head], rest, new)
    return copy


def _without(root: Any, path: tuple[Any, ...], key: Any) -> Any:
    node = _get(root, path)
    smaller = dict(node) if isinstance(node, dict) else list(node)
    del smaller[key]
    return _replace(root, path, smaller)


def candidates(payload: Any) -> Iterator[Any]:
    """Smaller versions of ``payload``, biggest cuts first."""
    if isinstance(payload, str):
        n = len(payload)
        if n > 1:
            yield payload[: n // 2]
            yield payload[n // 2 :]
            for i in range(0, n, max(1, n // 16)):
                yield payload[:i] + payload[i + max(1, n // 16) :]
        return
    paths = _containers(payload, 60)
    for path in paths:
        node = _get(payload, path)
        if isinstance(node, list) and len(node) > 1:
            half = len(node) // 2
            yield _replace(payload, path, node[:half])
            yield _replace(payload, path, node[half:])
        keys = list(node) if isinstance(node, dict) else range(len(node))
        for key in keys:
            yield _without(payload, path, key)
    for path in paths:
        node = _get(payload, path)
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            if isinstance(value, str) and len(value) > 1:
                yield _replace(payload, (*path, key), value[: len(value) // 2])
            elif isinstance(value, dict | list) and value:
                yield _replace(payload, (*path, key), type(value)())


def shrink(
    case: Case, key: tuple[str, str, str], scratch: Path, budget: int = 300, seconds: float = 30
) -> Case:
    """A smaller input that still fails with ``key`` (the input itself if none is found)."""
    directory = scratch / "shrink"
    directory.mkdir(exist_ok=True)
    bench = Bench(directory, hard_limit=10.0)
    deadline = time.monotonic() + seconds

    def fails(payload: Any) -> bool:
        trial = dataclasses.replace(case, payload=payload, cut_ids=set())
        return key in {f.key for f in bench.check(trial).failures}

    best = case.payload
    if not fails(best):
        return case
    plain = _plain(best)
    if plain is not None and fails(plain):
        best = plain  # the same failure without the SDK objects: shrink the plain data
    improved = True
    while improved and budget > 0 and time.monotonic() < deadline:
        improved = False
        for smaller in candidates(best):
            budget -= 1
            if fails(smaller):
                best, improved = smaller, True
                break
            if budget <= 0 or time.monotonic() > deadline:
                break
    with contextlib.suppress(Exception):
        bench.close()
    return dataclasses.replace(case, payload=best, mutations=[*case.mutations, "shrunk"])


def _plain(payload: Any) -> Any:
    """``payload`` with SDK objects dumped to plain data, or None if that fails."""
    try:
        if isinstance(payload, BaseModel):
            return payload.model_dump(mode="json", by_alias=True)
        if isinstance(payload, list):
            return [
                p.model_dump(mode="json", by_alias=True) if isinstance(p, BaseModel) else p
                for p in payload
            ]
    except (ValueError, RecursionError, TypeError):
        return None
    return payload


def literal(value: Any, limit: int = 4000) -> str | None:
    """``value`` as a Python literal (huge integers as expressions), or None if too big/deep."""
    out: list[str] = []
    size = 0

    def write(node: Any, depth: int) -> None:
        nonlocal size
        if depth > 150 or size > limit:
            raise OverflowError
        if isinstance(node, bool) or node is None or isinstance(node, float):
            text = repr(node)
        elif isinstance(node, int):
            digits = node.bit_length() * 30103 // 100000
            text = repr(node) if digits < 4000 else f"(10**{digits + 1} - 1) // 9"
        elif isinstance(node, str):
            text = repr(node) if len(node) < 200 else f"{node[:20]!r} * {len(node) // 20}"
        elif isinstance(node, dict):
            out.append("{")
            for k, v in node.items():
                write(k, depth + 1)
                out.append(": ")
                write(v, depth + 1)
                out.append(", ")
            text = "}"
        elif isinstance(node, list):
            out.append("[")
            for v in node:
                write(v, depth + 1)
                out.append(", ")
            text = "]"
        elif isinstance(node, BaseModel):
            out.append(f"{type(node).__name__}.model_construct(**")
            write(dict(vars(node)), depth + 1)
            text = ")"
        else:
            text = repr(node)
        size += len(text)
        out.append(text)

    try:
        write(value, 0)
    except (OverflowError, ValueError, RecursionError):
        return None
    return "".join(out).replace(", }", "}").replace(", ]", "]")


def save_reproducer(case: Case, key: tuple[str, ...], stem: Path) -> Path:
    """Write ``stem``.pickle, .txt (the input as a literal) and .py; returns the .py path."""

    def dump() -> None:
        sys.setrecursionlimit(100_000)
        stem.with_suffix(".pickle").write_bytes(pickle.dumps(case.payload))

    previous = threading.stack_size(512 * 1024 * 1024)
    limit = sys.getrecursionlimit()
    try:
        thread = threading.Thread(target=dump)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(previous)
        sys.setrecursionlimit(limit)
    shown = literal(case.payload)
    if shown is None:
        shown = f"<too large or deep for a literal: see {stem.with_suffix('.pickle')}>"
    stem.with_suffix(".txt").write_text(shown + "\n", encoding="utf-8", errors="surrogatepass")
    kind = "StreamAssembler" if case.stream else "extract"
    script = f'''"""Reproducer: {key} ({case.label}, seed {case.seed}, index {case.index}).

Run from the repository root: .venv/bin/python {stem.with_suffix(".py")}
"""
import pickle
import sys

sys.path.insert(0, ".")
from tests.fuzz.generate import Case
from tests.fuzz.harness import Bench, scratch_directory

payload = pickle.loads(open({str(stem.with_suffix(".pickle"))!r}, "rb").read())
case = Case(seed={case.seed}, index={case.index}, provider={case.provider!r},
            stream={case.stream!r}, source={case.source!r}, payload=payload,
            cut_ids=set({sorted(case.cut_ids)!r}))
print("via {case.provider}.{kind}:", Bench(scratch_directory()).check(case))
'''
    path = stem.with_suffix(".py")
    path.write_text(script, encoding="utf-8")
    return path

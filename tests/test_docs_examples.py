"""Docs pages whose ``python`` examples run: each prints what the page says it prints
(the trailing ``# `` lines of the example), in a scratch directory it leaves empty."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"

PAGES = {"definitions.md": 5, "integrations.md": 3, "observability.md": 2}
"""Each page checked, and how many examples it has at least (a renamed fence would
silently test nothing)."""


def examples(page: Path) -> list[tuple[str, list[str]]]:
    """Each ``python`` block of the page and the output its trailing ``# `` lines promise."""
    found = []
    for block in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
        lines = block.rstrip("\n").split("\n")
        expected: list[str] = []
        while lines and lines[-1].startswith("# "):
            expected.insert(0, lines.pop()[2:])
        found.append(("\n".join(lines), expected))
    return found


CASES = [
    pytest.param(name, index, id=f"{name}-{index + 1}")
    for name in PAGES
    for index in range(len(examples(DOCS / name)))
]


@pytest.mark.parametrize(("name", "index"), CASES)
def test_the_pages_example_runs_and_prints_what_it_says(
    name: str, index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example runs as written (in a scratch directory) and prints the promised lines."""
    code, expected = examples(DOCS / name)[index]
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"{name} example {index + 1}", "exec"), {"__name__": "example"})
    printed = [line.rstrip() for line in out.getvalue().splitlines()]
    assert printed == expected
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(("name", "least"), PAGES.items())
def test_the_page_has_examples(name: str, least: int) -> None:
    """The page's examples are found (a renamed fence would silently test nothing)."""
    assert len(examples(DOCS / name)) >= least

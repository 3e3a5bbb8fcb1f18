"""docs/definitions.md: every ``python`` example runs, and prints what the page says it
prints (the trailing ``# `` lines of the example)."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "definitions.md"


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


@pytest.mark.parametrize("index", range(len(examples(PAGE))))
def test_the_pages_example_runs_and_prints_what_it_says(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example runs as written (in a scratch directory) and prints the promised lines."""
    code, expected = examples(PAGE)[index]
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"{PAGE.name} example {index + 1}", "exec"), {"__name__": "example"})
    printed = [line.rstrip() for line in out.getvalue().splitlines()]
    assert printed == expected
    assert os.listdir(tmp_path) == []


def test_the_page_has_examples() -> None:
    """The page's examples are found (a renamed fence would silently test nothing)."""
    assert len(examples(PAGE)) == 5

"""docs/policy.md: the examples of planned calls, owned and designated records and readers run
as written (their imports included), so a reader can paste them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "policy.md"
MARKS = ("PlannedCall(", "Owned(", "Readers(")


def blocks() -> list[str]:
    """The page's python examples that declare plans, record labels or readers."""
    found = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    return [b for b in found if any(mark in b for mark in MARKS)]


def test_the_page_has_those_examples() -> None:
    """Three examples are found (a renamed fence would silently test nothing)."""
    assert len(blocks()) >= 3


@pytest.mark.parametrize("index", range(3))
def test_the_example_runs_as_written(index: int) -> None:
    """The example runs in a fresh namespace: nothing it uses is left unimported."""
    code = blocks()[index]
    exec(compile(code, f"policy.md example {index + 1}", "exec"), {"__name__": "example"})

"""The three examples in docs/integrations.md run as written, print what the page says
they print, and their policy allows a refund within the bound without asking a person
(``allow(refund, amount<=50)`` beside an unconditional ``ask(refund)`` asked for every
refund: ask beats allow)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

from callgate import Status, ToolCall

PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def _examples() -> list[str]:
    """The page's python blocks that end with their expected output as comments."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    return [b for b in blocks if "print(" in b and b.rstrip().splitlines()[-1].startswith("# ")]


def _expected(block: str) -> list[str]:
    lines = block.rstrip().splitlines()
    tail: list[str] = []
    while lines and lines[-1].startswith("# "):
        tail.insert(0, lines.pop()[2:])
    return tail


@pytest.mark.parametrize("block", _examples(), ids=["openai_agents", "pydantic_ai", "langgraph"])
def test_an_example_prints_what_the_page_says_and_its_policy_allows_within_the_bound(
    block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run the block; compare its output with the comment lines that close it; then a
    refund of 30 (within the bound) submitted to the example's run is admitted without a
    person (it reaches the execute stage), and one of 90 waits for a person."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "example"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(PAGE), "exec"), namespace)
    printed = [line.rstrip() for line in out.getvalue().splitlines()]
    assert printed == _expected(block)
    run = namespace["run"]
    small, large = run.submit(
        [
            ToolCall(
                id="t30",
                name="refund",
                arguments='{"order_id": "o-2", "amount": 30, "operation_id": "op-30"}',
            ),
            ToolCall(
                id="t90",
                name="refund",
                arguments='{"order_id": "o-3", "amount": 90, "operation_id": "op-90"}',
            ),
        ]
    )
    # admitted without a person: it ran (ok; under PydanticAI, whose tool runs only inside
    # the agent's run, the execute stage says so: error, nothing done)
    assert small.status in (Status.OK, Status.ERROR)
    assert small.stage.value == "execute"
    assert large.status is Status.PENDING

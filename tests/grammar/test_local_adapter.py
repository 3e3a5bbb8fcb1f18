"""The local model adapter's parts that need no model: its prompt, its checks, its records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from callgate import DefinitionError, MemoryLedger
from callgate.llms.local import DECODE_EVENT, DecodeStats, LocalModel, record_decodes, tool_prompt
from callgate.providers import text

from .support import plain_registry


def test_the_prompt_lists_every_tool_and_the_one_way_to_call() -> None:
    """The system prompt holds the run's system text, each tool's name, description and
    schema as JSON, and the Hermes tag the text format reads."""
    tools = text.tool_definitions(list(plain_registry()))
    prompt = tool_prompt("Be brief.", tools)
    assert prompt.startswith("Be brief.")
    assert "<tool_call>" in prompt
    listed = [json.loads(line) for line in prompt.splitlines() if line.startswith('{"name"')]
    assert [t["name"] for t in listed] == ["get_order", "ship", "measure", "ping"]
    assert listed[0]["parameters"] == plain_registry().get("get_order").input_schema  # type: ignore[union-attr]


def test_without_tools_the_prompt_is_the_system_text() -> None:
    """No tools shown: no call instructions either."""
    assert tool_prompt("Hello.", []) == "Hello."


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"constrain": "regex"}, "constrain must be"),
        ({"max_tokens": 0}, "max_tokens must be"),
        ({"temperature": -1.0}, "temperature must be"),
    ],
)
def test_bad_options_raise_at_once(kwargs: dict[str, object], message: str, tmp_path: Path) -> None:
    """A misspelt constraint or an impossible bound is a DefinitionError before any load."""
    with pytest.raises(DefinitionError, match=message):
        LocalModel(tmp_path / "m.gguf", **kwargs)  # type: ignore[arg-type]


def test_a_missing_model_file_is_named(tmp_path: Path) -> None:
    """A path with no file is refused with the path in the message (nothing is downloaded)."""
    with pytest.raises(DefinitionError, match=r"no GGUF model file at .*m\.gguf"):
        LocalModel(tmp_path / "m.gguf")


def test_decode_timings_are_recorded_as_events_of_the_run() -> None:
    """record_decodes writes one model.decode event per call, with every timing."""
    ledger = MemoryLedger()
    stats = DecodeStats(
        step=1,
        model="m",
        constraint="llguidance",
        grammar="g",
        prompt_tokens=10,
        output_tokens=5,
        prompt_seconds=0.1,
        decode_seconds=0.2,
        mask_seconds=0.01,
        compile_seconds=0.3,
        stopped="end",
    )
    record_decodes(ledger, "run-1", [stats, stats])
    events = [r for r in ledger.audit() if r.kind == DECODE_EVENT]
    assert len(events) == 2
    assert events[0].run_id == "run-1"
    assert events[0].data["mask_seconds"] == 0.01
    assert events[0].data["compile_seconds"] == 0.3


def test_the_model_spec_names_a_local_model_and_its_constraint(tmp_path: Path) -> None:
    """--model local:PATH[+constraint] reaches LocalModel (a missing file is named) and an
    unknown constraint is refused with the three that exist."""
    from callgate.llms import model_from_spec

    with pytest.raises(DefinitionError, match="no GGUF model file"):
        model_from_spec(f"local:{tmp_path / 'm.gguf'}+gbnf")
    with pytest.raises(DefinitionError, match="llguidance, gbnf or none"):
        model_from_spec(f"local:{tmp_path / 'm.gguf'}+regex")

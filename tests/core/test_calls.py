"""`callgate.calls`: the records that flow through the pipeline.

`ToolCall` and `RawCall` are frozen keyword-only records; `Observation` answers one call
and is an error for every status but ``ok``; the enums' values are the strings the
ledger and the provider formats carry.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from callgate.calls import Observation, Provenance, RawCall, Stage, Status, ToolCall


def test_status_values_are_the_recorded_strings() -> None:
    """The five outcomes are the lowercase strings of DESIGN.md's outcome table."""
    assert [s.value for s in Status] == ["ok", "error", "unknown", "rejected", "pending"]
    assert Status("pending") is Status.PENDING
    assert Status.OK == "ok"


def test_stage_values_follow_the_pipeline() -> None:
    """The stages, in pipeline order, are the strings an observation reports: the stage
    names of the docs (README, docs/architecture.md)."""
    assert [s.value for s in Stage] == [
        "parse",
        "validate",
        "authorize",
        "approve",
        "schedule",
        "execute",
        "verify",
    ]


def test_provenance_values() -> None:
    """Tool output is 'untrusted'; callgate's own text is 'gate'."""
    assert {p.value for p in Provenance} == {"untrusted", "trusted", "gate"}


def _observation(status: Status, **extra: Any) -> Observation:
    return Observation(
        call_id="call_0",
        tool="t",
        status=status,
        stage=Stage.EXECUTE,
        content="",
        retryable=False,
        **extra,
    )


@pytest.mark.parametrize("status", list(Status))
def test_every_status_but_ok_is_an_error(status: Status) -> None:
    """`is_error` is False for ``ok`` only, as provider formats want it."""
    assert _observation(status).is_error is (status is not Status.OK)


def test_an_observation_defaults_to_gate_provenance_and_no_extras() -> None:
    """Unless told otherwise an observation is callgate's own text, with no result or approval."""
    observation = _observation(Status.REJECTED)
    assert observation.provenance is Provenance.GATE
    assert observation.result is None
    assert observation.approval_id is None
    assert observation.details == ()
    assert observation.attempts == 0
    assert observation.truncated_from is None
    assert observation.repaired is False


def test_a_tool_call_has_empty_arguments_of_its_own_by_default() -> None:
    """Default arguments: an empty mapping per call, never shared; no deps, not repaired."""
    first, second = ToolCall(id="a", name="t"), ToolCall(id="b", name="t")
    assert first.arguments == {}
    assert first.after == ()
    assert first.repaired is False
    assert first.arguments is not second.arguments


def test_a_tool_call_keeps_text_or_decoded_arguments() -> None:
    """Arguments may be the JSON text the model sent or an already decoded mapping."""
    assert ToolCall(id="a", name="t", arguments='{"x": 1}').arguments == '{"x": 1}'
    assert ToolCall(id="a", name="t", arguments={"x": 1}).arguments == {"x": 1}


@pytest.mark.parametrize(
    "record",
    [
        ToolCall(id="a", name="t"),
        RawCall(id="a", name="t", arguments_text="{}", format="openai"),
    ],
)
def test_calls_are_frozen(record: ToolCall | RawCall) -> None:
    """A proposed call cannot be changed after it is made (its id is what the answer names)."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.id = "b"  # type: ignore[misc]


def test_records_are_keyword_only() -> None:
    """Positional construction fails, so fields can be added without breaking callers."""
    with pytest.raises(TypeError):
        ToolCall("a", "t")  # type: ignore[misc]
    with pytest.raises(TypeError):
        Observation("a", "t", Status.OK, Stage.EXECUTE, "", True)  # type: ignore[misc]


def test_calls_compare_by_value() -> None:
    """Two calls with the same fields are equal (and hashable when their arguments are text)."""
    assert ToolCall(id="a", name="t", arguments="{}") == ToolCall(id="a", name="t", arguments="{}")
    assert (
        len(
            {ToolCall(id="a", name="t", arguments="{}")}
            | {ToolCall(id="a", name="t", arguments="{}")}
        )
        == 1
    )
    assert ToolCall(id="a", name="t") != ToolCall(id="a", name="u")

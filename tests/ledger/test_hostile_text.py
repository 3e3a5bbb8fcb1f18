"""Text a database cannot store never stops a ledger recording (every backend).

Model text that is not valid Unicode (a lone UTF-16 surrogate, which JSON's
``\\ud800`` escape can carry) is rejected at the parse stage wherever the model
put it; text from elsewhere (a tool's result, a NUL PostgreSQL text cannot
hold) is stored with such characters written as ``\\uXXXX`` escapes. Either
way the next call is recorded, the chain verifies, and the ledger closes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from callgate import Authority, Gate, Registry, Stage, Status, ToolCall
from callgate.ledger import Ledger
from callgate.ledger.base import CallState

AUTHORITY = Authority(principal="tester", grants=["read:notes", "write:notes"])


def _gate(ledger: Ledger, seen: list[Any]) -> Gate:
    registry = Registry()

    @registry.tool(effects="read:notes", risk="read")
    def read_note(q: str) -> str:
        """Read a note."""
        seen.append(q)
        return f"note for {q}"

    @registry.tool(effects="write:notes")
    def odd_output(q: str) -> dict[str, str]:
        """A tool whose result holds text no database can encode as it is."""
        seen.append(q)
        return {"k\udc00": "v\ud800", "nul": "a\x00b"}

    return Gate(registry, ledger=ledger)


def _still_records(ledger: Ledger, gate: Gate) -> None:
    """A plain call after the hostile one runs and is recorded; the chain verifies."""
    run = gate.run(authority=AUTHORITY)
    [obs] = run.submit([ToolCall(id="after", name="read_note", arguments='{"q": "x"}')])
    assert obs.status is Status.OK
    record = ledger.get_call(run.id, "after")
    assert record is not None
    assert record.state is CallState.OK
    check = ledger.verify()
    assert check.ok, check.problems


HOSTILE_CALLS = [
    pytest.param(
        ToolCall(id="call\ud800", name="read_note", arguments='{"q": "x"}'), "id", id="id"
    ),
    pytest.param(
        ToolCall(id="c1", name="read\udfff_note", arguments='{"q": "x"}'), "name", id="name"
    ),
    pytest.param(
        ToolCall(id="c1", name="read_note", arguments='{"q": "x\\ud800"}'), "q", id="escape"
    ),
    pytest.param(ToolCall(id="c1", name="read_note", arguments='{"q": "x\ud800"}'), None, id="raw"),
    pytest.param(ToolCall(id="c1", name="read_note", arguments={"q": "\ud800"}), "q", id="mapping"),
]


@pytest.mark.parametrize(("call", "field"), HOSTILE_CALLS)
def test_text_that_is_not_unicode_is_rejected_at_parse_and_the_ledger_goes_on(
    make_ledger: Callable[..., Ledger], call: ToolCall, field: str | None
) -> None:
    """Text that is not valid Unicode is an invalid_text parse rejection; the ledger goes on."""
    ledger = make_ledger()
    seen: list[Any] = []
    gate = _gate(ledger, seen)
    run = gate.run(authority=AUTHORITY)
    [obs] = run.submit([call])
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.PARSE
    assert obs.call_id == call.id  # answered under the id the model sent, for pairing
    assert obs.details[0]["rule"] == "invalid_text"
    assert obs.details[0].get("field") == field
    assert seen == []
    _still_records(ledger, gate)


def test_the_rejection_of_an_unencodable_id_can_be_read_back(
    make_ledger: Callable[..., Ledger],
) -> None:
    """Looked up by the id the model sent, the recorded rejection is found on every backend."""
    ledger = make_ledger()
    gate = _gate(ledger, [])
    run = gate.run(authority=AUTHORITY)
    run.submit([ToolCall(id="call\ud800", name="read_note", arguments='{"q": "x"}')])
    record = ledger.get_call(run.id, "call\ud800")
    assert record is not None
    assert record.state is CallState.REJECTED
    assert record.stage == "parse"


def test_a_lone_surrogate_in_a_batch_rejects_only_that_call(
    make_ledger: Callable[..., Ledger],
) -> None:
    """A lone surrogate in one call id rejects that call only; the other call runs."""
    ledger = make_ledger()
    seen: list[Any] = []
    gate = _gate(ledger, seen)
    run = gate.run(authority=AUTHORITY)
    observations = run.submit(
        [
            ToolCall(id="bad\ud800", name="read_note", arguments='{"q": "x"}'),
            ToolCall(id="good", name="read_note", arguments='{"q": "y"}'),
        ]
    )
    assert [o.status for o in observations] == [Status.REJECTED, Status.OK]
    assert seen == ["y"]
    _still_records(ledger, gate)


def test_a_tool_result_no_database_can_encode_is_stored_escaped(
    make_ledger: Callable[..., Ledger],
) -> None:
    """Lone surrogates and NUL in a side-effecting tool's result: recorded, chain intact."""
    ledger = make_ledger()
    seen: list[Any] = []
    gate = _gate(ledger, seen)
    run = gate.run(authority=AUTHORITY)
    [obs] = run.submit([ToolCall(id="w1", name="odd_output", arguments='{"q": "x"}')])
    assert obs.status is Status.OK
    assert obs.result == {"k\udc00": "v\ud800", "nul": "a\x00b"}  # the caller's own copy
    record = ledger.get_call(run.id, "w1")
    assert record is not None
    assert record.state is CallState.OK
    _still_records(ledger, gate)


def test_a_nul_in_a_call_id_is_recorded(make_ledger: Callable[..., Ledger]) -> None:
    """NUL is valid Unicode (so not a parse rejection) but PostgreSQL text cannot hold it."""
    ledger = make_ledger()
    gate = _gate(ledger, [])
    run = gate.run(authority=AUTHORITY)
    [obs] = run.submit([ToolCall(id="a\x00b", name="read_note", arguments='{"q": "x"}')])
    assert obs.status is Status.OK
    assert obs.call_id == "a\x00b"
    assert ledger.get_call(run.id, "a\x00b") is not None
    _still_records(ledger, gate)

"""A bug in callgate is callgate's failure, never reported as the model's mistake."""

from __future__ import annotations

import logging

import pytest

import callgate.gate.admission
from callgate import Authority, Gate, Policy, Registry, Stage, Status, ToolCall, allow, deny
from callgate.parse import visible

AUTHORITY = Authority(principal="p", grants=["write:notes"])


def _gate(ran: list[str], policy: Policy | None = None) -> Gate:
    registry = Registry()

    @registry.tool(effects="write:notes")
    def save(text: str) -> str:
        """Save a note."""
        ran.append(text)
        return "saved"

    return Gate(registry, policy=policy)


def test_a_bug_inside_admission_is_answered_as_callgates_failure(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug in admission is an internal_error rejection, logged and audited; nothing runs."""
    ran: list[str] = []
    gate = _gate(ran)
    # A callgate function called with the wrong arguments: the error is raised inside
    # callgate's own code, as a real bug would be.
    monkeypatch.setattr(callgate.gate.admission.Admission, "_canonical", staticmethod(visible))
    run = gate.run(authority=AUTHORITY)
    with caplog.at_level(logging.ERROR, logger="callgate"):
        [obs] = run.submit([ToolCall(id="c1", name="save", arguments={"text": "hi"})])
    assert obs.status is Status.REJECTED
    assert obs.details[0]["rule"] == "internal_error"
    assert "This is not a problem with your call, and nothing was executed" in obs.content
    assert "check" not in obs.content.lower()  # not sent to fix its arguments
    assert ran == []
    assert any(r.exc_info for r in caplog.records)  # logged with its traceback
    assert [r.kind for r in gate.ledger.audit()] == ["gate.internal_error"]


def test_a_bug_in_callgates_policy_code_is_not_a_hook_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bug in callgate's authorize is an internal_error rejection, and the tool does not run."""
    ran: list[str] = []
    gate = _gate(ran)
    monkeypatch.setattr(callgate.gate.admission, "authorize", visible)
    [obs] = gate.run(authority=AUTHORITY).submit(
        [ToolCall(id="c1", name="save", arguments={"text": "hi"})]
    )
    assert obs.details[0]["rule"] == "internal_error"
    assert ran == []


def test_a_failing_rule_predicate_is_still_the_tools_hook_failure() -> None:
    """An application predicate that raises on these values is a ``hook_failed``
    rejection at the authorize stage, as before."""
    ran: list[str] = []

    def explode(args: object) -> bool:
        raise KeyError("no such note")

    policy = Policy([deny("save", when=explode), allow("*")])
    [obs] = (
        _gate(ran, policy)
        .run(authority=AUTHORITY)
        .submit([ToolCall(id="c1", name="save", arguments={"text": "hi"})])
    )
    assert obs.stage is Stage.AUTHORIZE
    assert obs.details[0]["rule"] == "hook_failed"
    assert ran == []


def test_a_failing_hook_is_logged_for_the_developer(caplog: pytest.LogCaptureFixture) -> None:
    """The model reads only the exception's type; the developer finds it in the log."""

    def explode(args: object) -> bool:
        raise AttributeError("'dict' object has no attribute 'n'")

    policy = Policy([deny("save", when=explode), allow("*")])
    with caplog.at_level(logging.WARNING, logger="callgate"):
        _gate([], policy).run(authority=AUTHORITY).submit(
            [ToolCall(id="c1", name="save", arguments={"text": "hi"})]
        )
    [record] = [r for r in caplog.records if "hook of tool 'save'" in r.getMessage()]
    assert "has no attribute 'n'" in record.getMessage()


def test_a_duplicate_id_in_a_batch_is_audited() -> None:
    """Two calls with one id in a batch are both rejected (call_id) and audited as call.bad_id."""
    gate = _gate([])
    observations = gate.run(authority=AUTHORITY).submit(
        [
            ToolCall(id="d", name="save", arguments={"text": "a"}),
            ToolCall(id="d", name="save", arguments={"text": "b"}),
        ]
    )
    assert [o.details[0]["rule"] for o in observations] == ["call_id", "call_id"]
    events = [r for r in gate.ledger.audit() if r.kind == "call.bad_id"]
    assert [(r.call_id, r.data["tool"]) for r in events] == [("d", "save"), ("d", "save")]

"""A hostile planning turn: whatever else the model puts in it, nothing runs, and only its
``plan`` call (names of the run's tools, values for their parameters) binds the run."""

from __future__ import annotations

from callgate import Status
from callgate.agent import replay
from callgate.agent.planning import PLAN
from callgate.llms import calls

from .test_intent import poisoned_office
from .test_plan_first import run_agent


def test_real_calls_in_the_planning_turn_never_run() -> None:
    """A planning turn that also proposes delete_file runs nothing; after the mail, the
    deletion (outside the plan) waits for a person."""
    office = poisoned_office()
    planning = calls(
        (PLAN, {"tools": ["read_mail"]}, "plan-1"),
        ("delete_file", {"file_id": "77"}, "d-0"),
    )
    script = [
        planning,
        calls(("read_mail", {"mail_id": "m-2"})),
        calls(("delete_file", {"file_id": "77"})),
    ]
    result, _, gate = run_agent(office, script, plan_first=True)
    assert office.did("delete_file") == []
    assert result.paused
    [pending] = [o for o in result.observations if o.status is Status.PENDING]
    assert pending.tool == "delete_file"
    recorded = sorted(gate.ledger.calls(run_id=result.run_id), key=lambda r: r.created_at)
    assert [(r.tool, r.state.value) for r in recorded] == [
        ("read_mail", "ok"),
        ("delete_file", "pending"),
    ]


def test_hostile_plan_arguments_bind_nothing_they_should_not() -> None:
    """Tool names that are globs, not text or too long, and bound values that are objects,
    are dropped: the plan keeps read_mail alone and the deletion after the mail waits."""
    office = poisoned_office()
    hostile = {
        "tools": ["read_mail", "*", "delete_*", {"name": "delete_file"}, 7, "x" * 10_000],
        "arguments": {"read_mail": {"mail_id": [{"$ne": None}]}, "delete_file": {"file_id": "77"}},
    }
    script = [
        calls((PLAN, hostile, "plan-1")),
        calls(("read_mail", {"mail_id": "m-2"})),
        calls(("delete_file", {"file_id": "77"})),
    ]
    result, _, gate = run_agent(office, script, plan_first=True)
    assert office.did("delete_file") == []
    assert result.paused
    (entry,) = replay(gate.ledger, result.run_id).of_kind("agent.plan")
    assert entry.data["tools"] == ["read_mail"]
    assert entry.data["arguments"] == {}

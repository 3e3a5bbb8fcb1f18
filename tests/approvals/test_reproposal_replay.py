"""A call that needs approval, proposed again after it ran (issue 29).

Every framework re-proposes an approved call under a fresh call id. Two faults followed:
a third proposal with the same idempotency key opened a new approval request (a person
asked to approve what already happened) instead of replaying the recorded outcome; and
``run.resume()`` rejected the first proposal "already released" though the approval had
released the same call under another id. Over the memory and SQLite ledgers; a second
process is a new `Gate` on the same store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from callgate import (
    ApprovalStatus,
    Authority,
    Gate,
    MemoryLedger,
    Policy,
    Registry,
    Stage,
    Status,
    ToolCall,
    ToolFailure,
    ask,
)
from callgate.ledger import Ledger
from callgate.ledger.base import AttemptRecord, Outcome

BACKENDS = ["memory", "sqlite"]

ARGS = {"order_id": "o-1", "amount": 80, "op": "op-1"}
ALICE = Authority(principal="alice", grants=["spend:USD"])


def _gate(ledger: Ledger, ran: list[str], *, keyed: bool = True, fail: bool = False) -> Gate:
    """A gate whose refund always asks; ``ran`` collects each execution's op."""
    tools = Registry()
    options: dict[str, Any] = {"idempotency_key": "{op}"} if keyed else {}

    @tools.tool(effects="spend:USD", **options)
    def refund(order_id: str, amount: float, op: str) -> str:
        """Refund an order."""
        ran.append(op)
        if fail:
            raise ToolFailure("the payment back end refused the refund")
        return f"refunded {amount}"

    return Gate(tools, policy=Policy([ask("refund")]), ledger=ledger)


def _approve_and_run(gate: Gate, run: Any, args: dict[str, Any] = ARGS) -> str:
    """c1 waits; a person approves; the model proposes it again as c2, which runs."""
    [first] = run.submit([ToolCall(id="c1", name="refund", arguments=args)])
    assert first.status is Status.PENDING, first.content
    assert first.approval_id is not None
    gate.approvals.approve(first.approval_id, by="lead")
    [second] = run.submit([ToolCall(id="c2", name="refund", arguments=args)])
    assert second.status is not Status.PENDING, second.content
    return first.approval_id


def _pending_requests(gate: Gate) -> list[str]:
    return [r.id for r in gate.approvals.list(ApprovalStatus.PENDING)]


def test_the_same_key_replays_in_the_same_run_and_in_another_process(
    make_ledger: Callable[..., Ledger],
) -> None:
    """An approved call proposed again under the same key replays its outcome, in its run and from
    another process of the same scope, with no new approval request."""
    ran: list[str] = []
    gate = _gate(make_ledger(), ran)
    run = gate.run(authority=ALICE)
    _approve_and_run(gate, run)
    assert ran == ["op-1"]

    [third] = run.submit([ToolCall(id="c3", name="refund", arguments=ARGS)])
    assert (third.status, third.approval_id) == (Status.OK, None), third.content
    assert "already ran" in third.content
    assert "refunded 80" in third.content
    assert third.call_id == "c3"
    assert _pending_requests(gate) == []
    assert run.pending_approvals == []

    # Another process, another run of the same principal and scope: still a replay.
    other = _gate(make_ledger(), ran)
    [again] = other.run(authority=ALICE).submit([ToolCall(id="x1", name="refund", arguments=ARGS)])
    assert (again.status, again.approval_id) == (Status.OK, None), again.content
    assert ran == ["op-1"]
    assert _pending_requests(other) == []


def test_another_scope_different_arguments_or_a_failed_run_still_ask(
    make_ledger: Callable[..., Ledger],
) -> None:
    """Another principal's call, or the same key with other values, is no replay: a person is asked
    and nothing more runs."""
    ran: list[str] = []
    gate = _gate(make_ledger(), ran)
    _approve_and_run(gate, gate.run(authority=ALICE))

    # Another principal's key is another key: a person decides.
    bob = Authority(principal="bob", grants=["spend:USD"])
    [theirs] = gate.run(authority=bob).submit([ToolCall(id="b1", name="refund", arguments=ARGS)])
    assert theirs.status is Status.PENDING, theirs.content
    # The same key with other values is not a replay: it asks, as before the fix (and
    # would be an idempotency conflict at execution).
    changed = {**ARGS, "amount": 500}
    [other] = gate.run(authority=ALICE).submit(
        [ToolCall(id="d1", name="refund", arguments=changed)]
    )
    assert other.status is Status.PENDING, other.content
    assert ran == ["op-1"]


def test_a_call_that_failed_is_not_replayed_it_asks_again(
    make_ledger: Callable[..., Ledger],
) -> None:
    """An ``error`` outcome frees the key (the effect did not happen): a person decides."""
    ran: list[str] = []
    gate = _gate(make_ledger(), ran, fail=True)
    run = gate.run(authority=ALICE)
    _approve_and_run(gate, run)
    [third] = run.submit([ToolCall(id="c3", name="refund", arguments=ARGS)])
    assert third.status is Status.PENDING, third.content
    assert ran == ["op-1"]


class _StaleIndex(MemoryLedger):
    """A ledger whose attempt rows say the key's call ended ``ok`` while the key itself
    (what `begin_attempt` decides by) holds nothing: a stale or edited index."""

    def attempts(self, run_id: str, call_id: str) -> Sequence[AttemptRecord]:
        rows = super().attempts(run_id, call_id)
        ok = Outcome(status="ok", content="refunded 80", finished_at=0.0)
        return [
            AttemptRecord(
                run_id=a.run_id,
                call_id=a.call_id,
                attempt=a.attempt,
                tool_version=a.tool_version,
                idempotency_key=a.idempotency_key,
                request_hash=a.request_hash,
                started_at=a.started_at,
                outcome=ok,
                worker=a.worker,
            )
            for a in rows
        ]


def test_an_index_that_claims_a_replay_never_runs_the_call_without_approval() -> None:
    """The replay is decided by the ledger's key at execution; when it does not replay,
    the unapproved call is stopped before its handler (``error``: nothing happened)."""
    ran: list[str] = []
    gate = _gate(_StaleIndex(), ran, fail=True)
    run = gate.run(authority=ALICE)
    _approve_and_run(gate, run)
    assert ran == ["op-1"]
    [third] = run.submit([ToolCall(id="c3", name="refund", arguments=ARGS)])
    assert ran == ["op-1"], "the handler ran without a person's approval"
    assert third.status is Status.ERROR, third.content
    assert "approval" in third.content
    assert third.approval_id is None


@pytest.mark.parametrize("rebuilt", [False, True], ids=["same_process", "rebuilt"])
@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed"])
def test_resume_answers_the_first_proposal_with_the_outcome_of_the_call_that_ran(
    make_ledger: Callable[..., Ledger], keyed: bool, rebuilt: bool
) -> None:
    """c1 waited; the approval released the same values proposed again as c2. Resumed (here,
    or rebuilt by another process from the ledger, where c1 is still recorded pending), c1
    is answered with c2's outcome under its own id, and nothing runs again."""
    ran: list[str] = []
    gate = _gate(make_ledger(), ran, keyed=keyed)
    run = gate.run(authority=ALICE)
    _approve_and_run(gate, run)
    assert run.pending_approvals == []
    if rebuilt:
        run = _gate(make_ledger(), ran, keyed=keyed).resume_run(run.id, authority=ALICE)
        assert run.pending_approvals == []
    answers = run.resume()
    assert [(o.call_id, o.status) for o in answers] == [("c1", Status.OK)], [
        (o.call_id, o.status.value, o.content[:80]) for o in answers
    ]
    assert "refunded 80" in answers[0].content
    assert ran == ["op-1"]


def test_a_call_released_twice_under_its_own_id_is_still_refused(
    make_ledger: Callable[..., Ledger],
) -> None:
    """The fix answers for *another* call that used the approval; the same call released
    by two resumes is still refused the second time (nothing runs twice)."""
    ran: list[str] = []
    gate = _gate(make_ledger(), ran, keyed=False)
    run = gate.run(authority=ALICE)
    [first] = run.submit([ToolCall(id="c1", name="refund", arguments=ARGS)])
    assert first.approval_id is not None
    gate.approvals.approve(first.approval_id, by="lead")
    stale = _gate(make_ledger(), ran, keyed=False).resume_run(run.id, authority=ALICE)
    [done] = run.resume()
    assert done.status is Status.OK, done.content
    [refused] = stale.resume()
    assert (refused.status, refused.stage) == (Status.REJECTED, Stage.APPROVE)
    assert ran == ["op-1"]

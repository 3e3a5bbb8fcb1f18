"""Two gate-side faults the adapters meet when a model proposes an approved call again (every
framework re-proposes under a fresh call id). Their fix lives in callgate's gate
(``admission.py``), not in the adapters; tests/approvals/test_reproposal_replay.py covers
it on the memory and SQLite ledgers."""

from __future__ import annotations

from typing import Any

from callgate import Authority, Gate, MemoryLedger, Policy, Registry, Status, ToolCall, ask

ARGS = {"order_id": "o-1", "amount": 80, "op": "op-1"}


def _run() -> tuple[Gate, Any, list[str]]:
    ran: list[str] = []
    tools = Registry()

    @tools.tool(effects="spend:USD", idempotency_key="{op}")
    def refund(order_id: str, amount: float, op: str) -> str:
        """Refund."""
        ran.append(op)
        return f"refunded {amount}"

    gate = Gate(tools, policy=Policy([ask("refund")]), ledger=MemoryLedger())
    return gate, gate.run(authority=Authority(principal="p", grants=["spend:USD"])), ran


def _approved_and_ran() -> tuple[Gate, Any, list[str]]:
    """c1 waits; a person approves; the model proposes it again as c2, which runs."""
    gate, run, ran = _run()
    [first] = run.submit([ToolCall(id="c1", name="refund", arguments=ARGS)])
    assert first.approval_id is not None
    gate.approvals.approve(first.approval_id, by="lead")
    [second] = run.submit([ToolCall(id="c2", name="refund", arguments=ARGS)])
    assert second.status is Status.OK
    assert ran == ["op-1"]
    return gate, run, ran


def test_a_third_proposal_with_the_same_key_replays_instead_of_asking_again() -> None:
    """Proposed a third time (c3, same arguments and idempotency key), the call that already
    ran is replayed (its recorded outcome); it used to open a new approval request."""
    _, run, ran = _approved_and_ran()
    [third] = run.submit([ToolCall(id="c3", name="refund", arguments=ARGS)])
    assert third.status is Status.OK
    assert third.approval_id is None
    assert ran == ["op-1"]


def test_resume_does_not_reject_a_call_released_under_another_id() -> None:
    """run.resume() after the approval released the call as c2: c1 is answered with c2's
    outcome (or left out), not rejected 'already released this call once'."""
    _, run, _ = _approved_and_ran()
    observations = run.resume()
    assert all(o.status is not Status.REJECTED for o in observations), [
        (o.call_id, o.status.value, o.content[:60]) for o in observations
    ]

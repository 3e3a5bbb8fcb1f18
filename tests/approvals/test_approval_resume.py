"""Resuming a run that waits for approvals, from the ledger, as another process would.

"Another process" here is a new ledger object on the same database and a new
`Gate` (tests/approvals/test_approval_processes.py uses real processes). The
effects file counts executed refunds on the back end. On the memory backend
the "restart" reuses the same ledger object, which is what a memory ledger is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from approval_domain import (
    ALICE,
    POLICY,
    effects,
    gate,
    read_order,
    refund_call,
    registry,
    set_revision,
)

from callgate import ApprovalStatus, Authority, Gate, Policy, Stage, Status, ToolCall, ask, deny
from callgate.ledger import CallState, Ledger, LedgerError


@pytest.fixture
def effects_file(tmp_path: Path) -> Path:
    return tmp_path / "effects.jsonl"


def submit_and_stop(
    make_ledger: Callable[..., Ledger], effects_file: Path, amount: float = 20, **options: object
) -> tuple[str, str]:
    """Process A: read the order, propose a refund that asks; return (run id, approval id)."""
    ledger = make_ledger()
    g = gate(ledger, effects_file, **options)
    run = g.run(authority=ALICE)
    [read] = run.submit([read_order()])
    assert read.status is Status.OK
    [pending] = run.submit([refund_call("refund-1", amount)])
    assert (pending.status, pending.stage) == (Status.PENDING, Stage.APPROVE), pending.content
    assert pending.approval_id is not None
    return run.id, pending.approval_id


def process_b(make_ledger: Callable[..., Ledger], effects_file: Path, **options: object) -> Gate:
    return gate(make_ledger(), effects_file, **options)


def test_approved_call_resumes_in_another_process_and_runs_once(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """A stops pending; a person approves; B rebuilds the run and runs the refund, once."""
    run_id, approval_id = submit_and_stop(make_ledger, effects_file)
    make_ledger().approvals().approve(approval_id, by="maria")

    b = process_b(make_ledger, effects_file)
    run = b.resume_run(run_id, authority=ALICE)
    assert run.pending_approvals == [approval_id]
    [done] = run.resume()

    assert (done.call_id, done.status) == ("refund-1", Status.OK), done.content
    assert effects(effects_file) == [{"tool": "refund", "order_id": "o1", "amount": 20.0}]
    assert run.resume() == []
    record = b.ledger.get_call(run_id, "refund-1")
    assert record is not None
    assert record.state is CallState.OK
    used = b.approvals.get(approval_id)
    assert used is not None
    assert (used.status, used.used_by) == (ApprovalStatus.USED, f"{run_id}/refund-1")
    kinds = [r.kind for r in b.ledger.audit() if r.kind.startswith("approval.")]
    assert kinds == ["approval.requested", "approval.approved", "approval.used"]
    assert b.ledger.verify().ok


def test_resuming_again_in_a_third_process_runs_nothing(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """A third process resuming a finished run finds nothing pending and runs nothing again."""
    run_id, approval_id = submit_and_stop(make_ledger, effects_file)
    make_ledger().approvals().approve(approval_id, by="maria")
    process_b(make_ledger, effects_file).resume_run(run_id, authority=ALICE).resume()

    again = process_b(make_ledger, effects_file).resume_run(run_id, authority=ALICE)

    assert again.pending_approvals == []
    assert again.resume() == []
    assert len(effects(effects_file)) == 1


def test_two_rebuilt_runs_resumed_one_after_the_other_run_the_call_once(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """Both rebuilt before either resumed: the second finds the approval used, runs nothing."""
    run_id, approval_id = submit_and_stop(make_ledger, effects_file)
    make_ledger().approvals().approve(approval_id, by="maria")
    first = process_b(make_ledger, effects_file).resume_run(run_id, authority=ALICE)
    second = process_b(make_ledger, effects_file).resume_run(run_id, authority=ALICE)

    [ran] = first.resume()
    [refused] = second.resume()

    assert ran.status is Status.OK
    assert (refused.status, refused.stage) == (Status.REJECTED, Stage.APPROVE)
    assert "already released" in refused.content
    assert len(effects(effects_file)) == 1
    record = second.gate.ledger.get_call(run_id, "refund-1")
    assert record is not None
    assert record.state is CallState.OK
    assert [a.approval_id for a in second.gate.approvals.list(ApprovalStatus.PENDING)] == []


def test_a_pending_call_stays_pending_on_resume(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """Resuming before a decision runs nothing and keeps the approval pending."""
    run_id, approval_id = submit_and_stop(make_ledger, effects_file)
    run = process_b(make_ledger, effects_file).resume_run(run_id, authority=ALICE)
    assert run.resume() == []
    assert run.pending_approvals == [approval_id]
    assert effects(effects_file) == []


def test_a_denied_call_is_rejected_at_approval_on_resume(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """A denied call resumes as a final approval rejection with the reason; ledger row rejected."""
    run_id, approval_id = submit_and_stop(make_ledger, effects_file)
    make_ledger().approvals().deny(approval_id, by="maria", reason="not eligible")

    b = process_b(make_ledger, effects_file)
    [obs] = b.resume_run(run_id, authority=ALICE).resume()

    assert (obs.status, obs.stage, obs.retryable) == (Status.REJECTED, Stage.APPROVE, False)
    assert "not eligible" in obs.content
    assert effects(effects_file) == []
    record = b.ledger.get_call(run_id, "refund-1")
    assert record is not None
    assert record.state is CallState.REJECTED


def test_approval_of_20_does_not_release_200_in_another_process(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """Approved 20 USD; B's model proposes 200 USD: pending again, under a new request."""
    run_id, approval_id = submit_and_stop(make_ledger, effects_file)
    make_ledger().approvals().approve(approval_id, by="maria")

    run = process_b(make_ledger, effects_file).resume_run(run_id, authority=ALICE)
    [two_hundred] = run.submit([refund_call("refund-2", 200)])

    assert two_hundred.status is Status.PENDING
    assert two_hundred.approval_id not in (None, approval_id)
    assert effects(effects_file) == []
    [twenty] = run.resume()
    assert twenty.status is Status.OK
    assert effects(effects_file) == [{"tool": "refund", "order_id": "o1", "amount": 20.0}]
    assert run.pending_approvals == [two_hundred.approval_id]


def test_a_changed_resource_version_needs_a_new_approval(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """An approval of revision 1 does not release the call once the order is at revision 2."""
    run_id, approval_id = submit_and_stop(make_ledger, effects_file)
    make_ledger().approvals().approve(approval_id, by="maria")
    set_revision(effects_file, "o1", 2)

    [obs] = process_b(make_ledger, effects_file).resume_run(run_id, authority=ALICE).resume()

    assert obs.status is Status.PENDING
    assert obs.approval_id != approval_id
    assert effects(effects_file) == []


def test_an_approval_that_expired_before_the_resume_releases_nothing(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """An approval expired before the resume releases nothing: a new request, no effect."""
    run_id, approval_id = submit_and_stop(make_ledger, effects_file, approval_ttl=0.3)
    make_ledger().approvals().approve(approval_id, by="maria")
    time.sleep(0.35)

    [obs] = process_b(make_ledger, effects_file).resume_run(run_id, authority=ALICE).resume()

    assert obs.status is Status.PENDING
    assert obs.approval_id != approval_id
    assert effects(effects_file) == []


def test_a_policy_that_now_denies_wins_over_the_approval(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """A policy that now denies rejects the resumed call at policy; the approval stays unspent."""
    run_id, approval_id = submit_and_stop(make_ledger, effects_file)
    make_ledger().approvals().approve(approval_id, by="maria")
    frozen = Policy([*POLICY.rules, deny("refund", reason="refunds are frozen")])

    b = Gate(registry(effects_file), policy=frozen, ledger=make_ledger())
    [obs] = b.resume_run(run_id, authority=ALICE).resume()

    assert (obs.status, obs.stage) == (Status.REJECTED, Stage.AUTHORIZE)
    assert effects(effects_file) == []
    assert b.approvals.get(approval_id).status is ApprovalStatus.APPROVED  # type: ignore[union-attr]


def test_the_evidence_is_rebuilt_for_preconditions(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """refund needs an ok get_order in the run: B knows it from the ledger, not from memory."""
    run_id, _ = submit_and_stop(make_ledger, effects_file)

    run = process_b(make_ledger, effects_file).resume_run(run_id, authority=ALICE)

    [item] = list(run.evidence)
    assert (item.call_id, item.tool, dict(item.arguments)) == (
        "read-1",
        "get_order",
        {"order_id": "o1"},
    )
    assert item.result == {"order_id": "o1", "status": "delivered", "total": 250}
    [other] = run.submit([refund_call("refund-3", 30, order_id="o2")])
    assert (other.status, other.stage) == (Status.REJECTED, Stage.AUTHORIZE)
    assert "get_order" in other.content


def test_without_the_evidence_the_precondition_fails_on_resume(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """The same resume, with the evidence dropped, is rejected: the rebuild is what lets it run."""
    run_id, approval_id = submit_and_stop(make_ledger, effects_file)
    make_ledger().approvals().approve(approval_id, by="maria")
    run = process_b(make_ledger, effects_file).resume_run(run_id, authority=ALICE)
    run.evidence = type(run.evidence)()

    [obs] = run.resume()

    assert (obs.status, obs.stage) == (Status.REJECTED, Stage.AUTHORIZE)
    assert effects(effects_file) == []


def pay(call_id: str = "pay-1") -> ToolCall:
    return ToolCall(
        id=call_id,
        name="pay",
        arguments={"iban": "DE89370400440532013000", "amount": 5, "pin": "4321"},
    )


def test_a_call_with_secret_fields_is_not_stored_in_clear_and_is_sent_again(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """The pin never reaches the ledger; B cannot rebuild the call, says so, runs nothing;
    the model sending the same call again runs it under the approval."""
    a = gate(make_ledger(), effects_file)
    run_a = a.run(authority=ALICE)
    [pending] = run_a.submit([pay()])
    assert pending.approval_id is not None
    request = a.approvals.get(pending.approval_id)
    assert request is not None
    assert "4321" not in request.arguments_json
    assert request.resumable is False
    a.approvals.approve(pending.approval_id, by="maria")

    run_b = process_b(make_ledger, effects_file).resume_run(run_a.id, authority=ALICE)
    [told] = run_b.resume()

    assert (told.status, told.stage, told.retryable) == (Status.REJECTED, Stage.APPROVE, True)
    assert "send exactly the same call again" in told.content.lower()
    assert effects(effects_file) == []
    [ran] = run_b.submit([pay()])
    assert ran.status is Status.OK, ran.content
    assert effects(effects_file) == [
        {"tool": "pay", "iban": "DE89370400440532013000", "amount": 5.0}
    ]


def test_a_call_with_secret_fields_still_resumes_in_its_own_process(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """In its own process, an approved call with secret fields resumes and runs once."""
    g = gate(make_ledger(), effects_file)
    run = g.run(authority=ALICE)
    [pending] = run.submit([pay()])
    assert pending.approval_id is not None
    g.approvals.approve(pending.approval_id, by="maria")
    [ran] = run.resume()
    assert ran.status is Status.OK
    assert len(effects(effects_file)) == 1


def test_a_denied_call_with_secret_fields_is_rejected_on_resume(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """A denied secret-field call is rejected on resume elsewhere; its row holds no secret."""
    a = gate(make_ledger(), effects_file)
    run_a = a.run(authority=ALICE)
    [pending] = run_a.submit([pay()])
    assert pending.approval_id is not None
    a.approvals.deny(pending.approval_id, by="maria", reason="unknown payee")

    b = process_b(make_ledger, effects_file)
    [obs] = b.resume_run(run_a.id, authority=ALICE).resume()

    assert (obs.status, obs.stage, obs.retryable) == (Status.REJECTED, Stage.APPROVE, False)
    assert "unknown payee" in obs.content
    record = b.ledger.get_call(run_a.id, "pay-1")
    assert record is not None
    assert record.state is CallState.REJECTED
    assert "4321" not in record.arguments


def test_resuming_an_unknown_run_is_an_error(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """resume_run of a run the ledger has no calls of raises LedgerError."""
    with pytest.raises(LedgerError, match="no calls of run"):
        process_b(make_ledger, effects_file).resume_run("run_nope", authority=ALICE)


def test_a_run_resumes_only_under_its_own_principal(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """resume_run under another principal raises LedgerError and runs nothing."""
    run_id, approval_id = submit_and_stop(make_ledger, effects_file)
    make_ledger().approvals().approve(approval_id, by="maria")
    mallory = Authority(principal="mallory", grants=["spend:USD<=1000", "read:orders"])
    with pytest.raises(LedgerError, match="resume it under the authority it ran with"):
        process_b(make_ledger, effects_file).resume_run(run_id, authority=mallory)
    assert effects(effects_file) == []


def test_the_model_resending_the_approved_call_then_resume_runs_it_once(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """The model sends the approved call again under a new id (it runs); the old pending
    call, resumed afterwards, finds its approval used by that call, runs nothing, and is
    answered with that call's outcome (issue 29: not rejected 'already released')."""
    g = gate(make_ledger(), effects_file)
    run = g.run(authority=ALICE)
    run.submit([read_order()])
    [pending] = run.submit([refund_call("refund-1")])
    assert pending.approval_id is not None
    g.approvals.approve(pending.approval_id, by="maria")

    [again] = run.submit([refund_call("refund-1-again")])
    [resumed] = run.resume()

    assert again.status is Status.OK
    assert (resumed.status, resumed.stage) == (Status.OK, Stage.EXECUTE), resumed.content
    assert resumed.content.endswith(again.content)
    assert len(effects(effects_file)) == 1


def test_requests_are_stored_in_the_ledger_the_gate_was_given(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """No approvals= given: the pending request is in the ledger's store (a new ledger
    object on the same database sees it)."""
    _, approval_id = submit_and_stop(make_ledger, effects_file)
    request = make_ledger().approvals().get(approval_id)
    assert request is not None
    assert (request.tool, request.call_id, request.principal) == ("refund", "refund-1", "alice")
    assert request.preview == "refund 20.00 USD to o1"
    assert request.policy_version == POLICY.version
    assert request.resumable is True


def test_ask_rules_still_apply_to_a_gate_with_its_own_approvals_store(
    make_ledger: Callable[..., Ledger], effects_file: Path
) -> None:
    """With its own approvals store, an ask rule still pauses the call, request in that store."""
    from callgate import MemoryApprovals

    store = MemoryApprovals()
    g = Gate(
        registry(effects_file),
        policy=Policy([ask("get_order")]),
        ledger=make_ledger(),
        approvals=store,
    )
    [obs] = g.run(authority=ALICE).submit([read_order()])
    assert obs.status is Status.PENDING
    assert store.get(obs.approval_id or "") is not None

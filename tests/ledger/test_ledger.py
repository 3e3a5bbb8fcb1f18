"""The ledger contract, run against every backend (memory, SQLite, PostgreSQL).

Each test states one rule of `callgate.ledger.base`: the state machine, the
idempotency matching rule, outcomes, resolution, and the audit chain.
"""

from __future__ import annotations

import itertools
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from callgate.ledger import (
    AttemptFinish,
    AttemptStart,
    CallRecord,
    CallState,
    ClaimKind,
    Ledger,
    Outcome,
    SQLiteLedger,
)
from callgate.ledger.base import LedgerError

DAY = 24 * 3600.0


def decision(
    call_id: str, *, run_id: str = "run-1", state: CallState = CallState.ADMITTED, key: str = ""
) -> CallRecord:
    now = time.time()
    return CallRecord(
        run_id=run_id,
        call_id=call_id,
        tool="charge",
        tool_version="v1",
        principal="alice",
        arguments='{"amount":5}',
        state=state,
        stage="policy",
        request_hash="h1",
        idempotency_key=key or f"{run_id}/{call_id}",
        decided_by="allow charge",
        effects=("spend:USD",),
        created_at=now,
        updated_at=now,
    )


def start(
    call_id: str,
    *,
    run_id: str = "run-1",
    key: str = "",
    request_hash: str = "h1",
    side_effecting: bool = True,
    attempt: int = 1,
    at: float | None = None,
    retention: float = DAY,
) -> AttemptStart:
    now = time.time() if at is None else at
    return AttemptStart(
        run_id=run_id,
        call_id=call_id,
        tool="charge",
        tool_version="v1",
        attempt=attempt,
        idempotency_key=key or f"{run_id}/{call_id}",
        request_hash=request_hash,
        started_at=now,
        key_expires_at=now + retention,
        side_effecting=side_effecting,
    )


def finish(
    s: AttemptStart, status: str = "ok", *, content: str = '{"charge":"ch_1"}', reconciled=False
) -> AttemptFinish:
    return AttemptFinish(
        run_id=s.run_id,
        call_id=s.call_id,
        attempt=s.attempt,
        idempotency_key=s.idempotency_key,
        outcome=Outcome(
            status=status, content=content, finished_at=time.time(), reconciled=reconciled
        ),
        side_effecting=s.side_effecting,
    )


def run_call(ledger: Ledger, call_id: str, status: str = "ok", **kw: object) -> AttemptStart:
    """Admit, start and finish one call."""
    ledger.record_decision(decision(call_id, key=str(kw.get("key", ""))))
    s = start(call_id, **kw)  # type: ignore[arg-type]
    assert ledger.begin_attempt(s).kind is ClaimKind.RUN
    assert ledger.finish_attempt(finish(s, status))
    return s


# -- state machine ------------------------------------------------------------------


def test_a_decision_is_recorded_and_found_by_every_filter(ledger: Ledger) -> None:
    """A recorded decision is found by run, state and call id filters, with effects and rule."""
    ledger.record_decision(decision("c1"))
    ledger.record_decision(decision("c2", run_id="run-2", state=CallState.REJECTED))
    assert [c.call_id for c in ledger.calls()] == ["c1", "c2"]
    assert [c.call_id for c in ledger.calls(run_id="run-2")] == ["c2"]
    assert [c.call_id for c in ledger.calls(state=CallState.ADMITTED)] == ["c1"]
    assert [c.run_id for c in ledger.calls(call_id="c2")] == ["run-2"]
    c1 = ledger.get_call("run-1", "c1")
    assert c1 is not None
    assert c1.effects == ("spend:USD",)
    assert c1.decided_by == "allow charge"
    assert ledger.get_call("run-1", "nope") is None


def test_an_attempt_runs_then_its_outcome_is_recorded(ledger: Ledger) -> None:
    """begin_attempt claims RUN and marks the call running; finish_attempt records ok."""
    ledger.record_decision(decision("c1"))
    s = start("c1")
    assert ledger.begin_attempt(s).kind is ClaimKind.RUN
    running = ledger.get_call("run-1", "c1")
    assert running is not None
    assert running.state is CallState.RUNNING
    assert running.attempts == 1
    [attempt] = ledger.attempts("run-1", "c1")
    assert attempt.outcome is None
    assert attempt.idempotency_key == "run-1/c1"
    assert attempt.worker == ledger.worker
    assert ledger.finish_attempt(finish(s))
    done = ledger.get_call("run-1", "c1")
    assert done is not None
    assert done.state is CallState.OK
    [attempt] = ledger.attempts("run-1", "c1")
    assert attempt.outcome is not None
    assert attempt.outcome.content == '{"charge":"ch_1"}'


def test_a_finished_call_does_not_go_back(ledger: Ledger) -> None:
    """Forward only: an outcome over a finished call, or a decision over a run call, is refused."""
    s = run_call(ledger, "c1")
    assert not ledger.finish_attempt(finish(s, "error"))
    ledger.record_decision(decision("c1"))  # the same call id proposed again
    call = ledger.get_call("run-1", "c1")
    assert call is not None
    assert call.state is CallState.OK


def test_a_pending_call_may_be_admitted_later(ledger: Ledger) -> None:
    """A call recorded pending may be recorded admitted later and then run."""
    ledger.record_decision(decision("c1", state=CallState.PENDING))
    ledger.record_decision(decision("c1", state=CallState.ADMITTED))
    assert ledger.begin_attempt(start("c1")).kind is ClaimKind.RUN


def test_a_read_only_call_may_be_retried_after_an_unknown_outcome(ledger: Ledger) -> None:
    """A read-only call whose outcome was unknown runs a second attempt, ending ok."""
    ledger.record_decision(decision("c1"))
    first = start("c1", side_effecting=False)
    ledger.begin_attempt(first)
    ledger.finish_attempt(finish(first, "unknown"))
    second = start("c1", side_effecting=False, attempt=2)
    assert ledger.begin_attempt(second).kind is ClaimKind.RUN
    assert ledger.finish_attempt(finish(second))
    call = ledger.get_call("run-1", "c1")
    assert call is not None
    assert call.state is CallState.OK
    assert call.attempts == 2
    assert [a.attempt for a in ledger.attempts("run-1", "c1")] == [1, 2]


# -- idempotency ----------------------------------------------------------------------


def test_same_key_and_request_after_finish_replays_the_outcome(ledger: Ledger) -> None:
    """A finished key with the same request replays its outcome to the new call: no attempt."""
    run_call(ledger, "c1", key="op-1")
    ledger.record_decision(decision("c2", key="op-1"))
    claim = ledger.begin_attempt(start("c2", key="op-1"))
    assert claim.kind is ClaimKind.REPLAY
    assert claim.holder == ("run-1", "c1")
    assert claim.outcome is not None
    assert claim.outcome.content == '{"charge":"ch_1"}'
    replayed = ledger.get_call("run-1", "c2")
    assert replayed is not None
    assert replayed.state is CallState.OK
    assert ledger.attempts("run-1", "c2") == []


def test_same_key_while_running_is_in_progress_never_a_second_run(ledger: Ledger) -> None:
    """A key held by a running call is IN_PROGRESS for another call, which is rejected."""
    ledger.record_decision(decision("c1", key="op-1"))
    assert ledger.begin_attempt(start("c1", key="op-1")).kind is ClaimKind.RUN
    ledger.record_decision(decision("c2", key="op-1"))
    claim = ledger.begin_attempt(start("c2", key="op-1"))
    assert claim.kind is ClaimKind.IN_PROGRESS
    assert claim.holder == ("run-1", "c1")
    second = ledger.get_call("run-1", "c2")
    assert second is not None
    assert second.state is CallState.REJECTED


def test_same_key_with_different_arguments_is_a_conflict(ledger: Ledger) -> None:
    """A used key with another request hash is a CONFLICT."""
    run_call(ledger, "c1", key="op-1")
    ledger.record_decision(decision("c2", key="op-1"))
    claim = ledger.begin_attempt(start("c2", key="op-1", request_hash="h2"))
    assert claim.kind is ClaimKind.CONFLICT


def test_an_expired_key_counts_as_absent(ledger: Ledger) -> None:
    """A key older than its retention is free: another request under it runs."""
    long_ago = time.time() - 2 * DAY
    run_call(ledger, "c1", key="op-1", at=long_ago)
    ledger.record_decision(decision("c2", key="op-1"))
    assert ledger.begin_attempt(start("c2", key="op-1", request_hash="h2")).kind is ClaimKind.RUN


def test_a_key_is_kept_for_its_retention_window(ledger: Ledger) -> None:
    """A key within its retention window replays."""
    an_hour_ago = time.time() - 3600
    run_call(ledger, "c1", key="op-1", at=an_hour_ago, retention=2 * 3600)
    ledger.record_decision(decision("c2", key="op-1"))
    assert ledger.begin_attempt(start("c2", key="op-1")).kind is ClaimKind.REPLAY


def test_an_unknown_outcome_replays_as_unknown(ledger: Ledger) -> None:
    """A key whose outcome is unknown replays unknown, never runs again."""
    run_call(ledger, "c1", "unknown", key="op-1")
    ledger.record_decision(decision("c2", key="op-1"))
    claim = ledger.begin_attempt(start("c2", key="op-1"))
    assert claim.kind is ClaimKind.REPLAY
    assert claim.outcome is not None
    assert claim.outcome.status == "unknown"


def test_read_only_calls_do_not_claim_keys(ledger: Ledger) -> None:
    """Two read-only calls under one key both run: reads claim no key."""
    ledger.record_decision(decision("c1", key="shared"))
    ledger.record_decision(decision("c2", key="shared"))
    assert (
        ledger.begin_attempt(start("c1", key="shared", side_effecting=False)).kind is ClaimKind.RUN
    )
    assert (
        ledger.begin_attempt(start("c2", key="shared", side_effecting=False)).kind is ClaimKind.RUN
    )


def test_a_call_id_that_comes_back_is_replayed_not_run_again(ledger: Ledger) -> None:
    """A finished call id decided again replays, with no second attempt."""
    run_call(ledger, "c1")
    ledger.record_decision(decision("c1"))
    assert ledger.begin_attempt(start("c1")).kind is ClaimKind.REPLAY
    assert len(ledger.attempts("run-1", "c1")) == 1


# -- resolution -------------------------------------------------------------------


def test_a_person_resolves_an_unknown_call_and_the_key_replays_it(ledger: Ledger) -> None:
    """resolve settles an unknown call as ok, audited with who and note; its key replays ok."""
    run_call(ledger, "c1", "unknown", key="op-1")
    resolved = ledger.resolve("run-1", "c1", status="ok", by="dana", note="charge ch_9 in Stripe")
    assert resolved.state is CallState.OK
    assert resolved.reconciled
    last = ledger.audit()[-1]
    assert last.kind == "attempt.ok"
    assert last.data["actor"] == "dana"
    assert last.data["note"] == "charge ch_9 in Stripe"
    ledger.record_decision(decision("c2", key="op-1"))
    claim = ledger.begin_attempt(start("c2", key="op-1"))
    assert claim.kind is ClaimKind.REPLAY
    assert claim.outcome is not None
    assert claim.outcome.status == "ok"


def test_only_an_unknown_call_can_be_resolved(ledger: Ledger) -> None:
    """resolve of an ok call or a missing call raises LedgerError saying which."""
    run_call(ledger, "c1")
    with pytest.raises(LedgerError, match="only an unknown call"):
        ledger.resolve("run-1", "c1", status="error", by="dana", note="no")
    with pytest.raises(LedgerError, match="no call"):
        ledger.resolve("run-1", "zzz", status="ok", by="dana", note="no")


# -- audit ------------------------------------------------------------------------------


def test_every_decision_and_outcome_is_audited_in_a_valid_chain(ledger: Ledger) -> None:
    """Decision, start, outcome and events are audited with their data in a verifying chain."""
    run_call(ledger, "c1")
    ledger.record_event("approval.decided", run_id="run-1", call_id="c1", data={"by": "dana"})
    kinds = [r.kind for r in ledger.audit()]
    assert kinds == ["call.admitted", "attempt.started", "attempt.ok", "approval.decided"]
    first = ledger.audit()[0]
    assert first.data["actor"] == "alice"
    assert first.data["decided_by"] == "allow charge"
    assert first.data["tool"] == "charge"
    assert first.data["arguments"] == '{"amount":5}'
    assert ledger.audit()[2].data["evidence_id"] == "c1"
    check = ledger.verify()
    assert check.ok
    assert check.records == 4
    assert check.head == ledger.audit()[-1].hash


def test_audit_records_link_to_the_one_before(ledger: Ledger) -> None:
    """Audit records are numbered upward from 1 (PostgreSQL may skip numbers), each
    prev_hash the hash of the one before it (in its run's chain: here, one run)."""
    run_call(ledger, "c1")
    records = ledger.audit()
    seqs = [r.seq for r in records]
    assert len(seqs) == 3
    assert seqs == sorted(set(seqs))
    assert records[0].prev_hash == "0" * 64
    for before, after in itertools.pairwise(records):
        assert after.prev_hash == before.hash


# -- durability and concurrency -------------------------------------------------------


def test_a_reopened_ledger_holds_everything(make_ledger: Callable[..., Ledger]) -> None:
    """A reopened durable ledger keeps calls and keys (replay) and verifies."""
    if make_ledger.backend == "memory":  # type: ignore[attr-defined]
        pytest.skip("the memory ledger does not outlive its process")
    first = make_ledger()
    run_call(first, "c1", key="op-1")
    first.record_decision(decision("c2", state=CallState.REJECTED))
    first.close()
    again = make_ledger()
    assert [c.state for c in again.calls()] == [CallState.OK, CallState.REJECTED]
    again.record_decision(decision("c3", key="op-1"))
    assert again.begin_attempt(start("c3", key="op-1")).kind is ClaimKind.REPLAY
    assert again.verify().ok


def test_two_ledgers_racing_for_one_key_let_exactly_one_run(
    make_ledger: Callable[..., Ledger],
) -> None:
    """Two ledgers on one store racing for one key: one RUN, one IN_PROGRESS."""
    ledgers = [make_ledger(), make_ledger()]
    for i, ledger in enumerate(ledgers):
        ledger.record_decision(decision(f"c{i}", run_id=f"run-{i}", key="op-1"))
    barrier = threading.Barrier(2)
    kinds: list[ClaimKind] = []

    def go(i: int) -> None:
        barrier.wait()
        kinds.append(ledgers[i].begin_attempt(start(f"c{i}", run_id=f"run-{i}", key="op-1")).kind)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(kinds) == [ClaimKind.IN_PROGRESS, ClaimKind.RUN]


def test_concurrent_async_attempts_share_commits(make_ledger: Callable[..., Ledger]) -> None:
    """16 concurrent async attempts all end ok in at most 4 commits; the ledger verifies."""
    ledger = make_ledger()
    transactions = 0
    if hasattr(ledger, "_transact"):
        inner = ledger._transact

        def counted(items, *, durable):  # type: ignore[no-untyped-def]
            nonlocal transactions
            transactions += 1
            return inner(items, durable=durable)

        ledger._transact = counted  # type: ignore[method-assign]
    starts = [start(f"c{i}") for i in range(16)]
    for s in starts:
        ledger.record_decision(decision(s.call_id))

    async def one(s: AttemptStart) -> None:
        assert (await ledger.abegin_attempt(s)).kind is ClaimKind.RUN
        await anyio.sleep(0)
        assert await ledger.afinish_attempt(finish(s))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for s in starts:
                tg.start_soon(one, s)

    anyio.run(main)
    assert all(c.state is CallState.OK for c in ledger.calls())
    assert len(ledger.calls()) == 16
    if hasattr(ledger, "_transact"):
        assert transactions <= 4, "16 calls should share a few commits, not take 32"
    assert ledger.verify().ok


def test_a_transaction_that_fails_on_a_locked_database_keeps_other_calls_decisions(
    tmp_path: Path,
) -> None:
    """A deferred `admitted` decision taken by a transaction that then fails (the file is
    locked by another process) is put back, never lost: the call keeps its row, so its
    attempt is recorded, recovery can see it, and a person can resolve it."""
    path = tmp_path / "callgate.db"
    ledger = SQLiteLedger(str(path), timeout=0.2)
    record = CallRecord(
        run_id="r1",
        call_id="c1",
        tool="charge",
        tool_version="v1",
        principal="alice",
        arguments="{}",
        state=CallState.ADMITTED,
        stage="policy",
    )
    ledger.record_decision(record)
    start = AttemptStart(
        run_id="r1",
        call_id="c1",
        tool="charge",
        tool_version="v1",
        attempt=1,
        idempotency_key="k1",
        request_hash="h1",
        started_at=1.0,
        key_expires_at=4e9,
        side_effecting=True,
    )
    other = sqlite3.connect(str(path), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(Exception, match="locked"):
        ledger.begin_attempt(start)
    other.execute("ROLLBACK")
    other.close()
    kept = ledger.get_call("r1", "c1")
    assert kept is not None
    assert kept.state is CallState.ADMITTED
    assert ledger.begin_attempt(start).kind.value == "run"
    running = ledger.get_call("r1", "c1")
    assert running is not None
    assert running.state is CallState.RUNNING
    ledger.close()


def test_deleting_the_end_of_the_trail_together_with_its_head_row_is_detected(
    tmp_path: Path,
) -> None:
    """The head row is part of the evidence: removing it with the last records must not
    leave a shorter chain that verifies (the checkpoint written at close binds the head)."""
    path = tmp_path / "callgate.db"
    ledger = SQLiteLedger(str(path))
    for i in range(3):
        ledger.record_event("note", run_id="r1", call_id=None, data={"i": i})
    assert ledger.verify().ok
    ledger.close()
    raw = sqlite3.connect(str(path))
    raw.execute("DELETE FROM journal WHERE seq >= 2 AND run_id = 'r1'")
    raw.execute("DELETE FROM chains WHERE chain = 'r:r1'")
    raw.commit()
    raw.close()
    reopened = SQLiteLedger(str(path))
    check = reopened.verify()
    reopened.close()
    assert not check.ok
    assert any("binds record 3" in p and "missing" in p for p in check.problems)
    assert any("has no head row" in p for p in check.problems)

"""A SQLite transaction whose records directly follow the journal's truth is folded as the
process's own when it commits (`JournalTruth.follows`), and only then."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from callgate.errors import LedgerError
from callgate.ledger import AttemptFinish, AttemptStart, CallRecord, CallState, Outcome
from callgate.ledger.base import GENESIS, AuditRecord, audit_hash
from callgate.ledger.chains import anchored
from callgate.ledger.sqlite import SQLiteLedger
from callgate.ledger.truth import JournalTruth


def _start(call_id: str, key: str) -> AttemptStart:
    now = time.time()
    return AttemptStart(
        run_id="r1",
        call_id=call_id,
        tool="charge",
        tool_version="v1",
        attempt=1,
        idempotency_key=key,
        request_hash="h",
        started_at=now,
        key_expires_at=now + 3600,
        side_effecting=True,
    )


def _finish(call_id: str, key: str) -> AttemptFinish:
    return AttemptFinish(
        run_id="r1",
        call_id=call_id,
        attempt=1,
        idempotency_key=key,
        outcome=Outcome(status="ok", content="done", finished_at=time.time()),
    )


def test_an_outcome_is_in_the_truth_once_committed(tmp_path: Path) -> None:
    """The outcome a lone writer records is in its truth at once, not after a read back."""
    ledger = SQLiteLedger(tmp_path / "l.db", worker="w")
    try:
        ledger.begin_attempt(_start("c1", "k1"))
        assert ledger.finish_attempt(_finish("c1", "k1"))
        key = ledger._truth.key("k1")
        assert key is not None
        assert key.status == "ok"
        assert ledger._truth.top == ledger.audit_head()[0]  # type: ignore[index]
    finally:
        ledger.close()


def test_records_after_another_writers_are_read_not_assumed(tmp_path: Path) -> None:
    """When another writer committed in between, the outcome waits for the next read of the
    journal, which then has both writers' records."""
    path = tmp_path / "l.db"
    a, b = SQLiteLedger(path, worker="a"), SQLiteLedger(path, worker="b")
    try:
        a.begin_attempt(_start("c1", "k1"))
        b.begin_attempt(_start("c2", "k2"))
        assert a.finish_attempt(_finish("c1", "k1"))
        key = a._truth.key("k1")
        assert key is not None
        assert key.status is None
        a.begin_attempt(_start("c3", "k3"))  # reads the journal
        k1, k2 = a._truth.key("k1"), a._truth.key("k2")
        assert k1 is not None
        assert k1.status == "ok"
        assert k2 is not None
        assert k2.run_id == "r1"
        assert k2.call_id == "c2"
        assert a.verify().ok
    finally:
        a.close()
        b.close()


def test_a_moved_head_row_is_still_caught(tmp_path: Path) -> None:
    """A run's head row moved under the writer: its next records do not link to the truth's,
    are not folded as its own, and the next read stops side effects."""
    path = tmp_path / "l.db"
    ledger = SQLiteLedger(path, worker="w")
    try:
        ledger.begin_attempt(_start("c1", "k1"))
        edit = sqlite3.connect(path)
        edit.execute("UPDATE chains SET hash = ? WHERE chain = 'r:r1'", ("f" * 64,))
        edit.commit()
        edit.close()
        ledger.finish_attempt(_finish("c1", "k1"))
        key = ledger._truth.key("k1")
        assert key is None or key.status is None
        with pytest.raises(LedgerError, match="does not verify"):
            ledger.begin_attempt(_start("c2", "k2"))
    finally:
        ledger.close()


def _decision(call_id: str, key: str) -> CallRecord:
    now = time.time()
    return CallRecord(
        run_id="r1",
        call_id=call_id,
        tool="charge",
        tool_version="v1",
        principal="p",
        arguments="{}",
        state=CallState.ADMITTED,
        stage="policy",
        request_hash="h",
        idempotency_key=key,
        created_at=now,
        updated_at=now,
    )


def test_a_moved_root_row_is_still_caught(tmp_path: Path) -> None:
    """The root chain's head row moved under the writer: its next records anchor to a root
    record the journal does not have, are not folded as its own, and the next side effect
    is refused (as a read of them refuses it)."""
    path = tmp_path / "l.db"
    ledger = SQLiteLedger(path, worker="w")
    try:
        ledger.begin_attempt(_start("c1", "k1"))
        ledger.finish_attempt(_finish("c1", "k1"))
        ledger.checkpoint()
        edit = sqlite3.connect(path)
        edit.execute("UPDATE chains SET hash = ? WHERE chain = 'r:'", ("f" * 64,))
        edit.commit()
        edit.close()
        ledger.record_decision(_decision("c2", "k2"))
        with pytest.raises(LedgerError, match="does not verify"):
            ledger.begin_attempt(_start("c2", "k2"))
    finally:
        ledger.close()


def _anchored(seq: int, prev: str, anchor: tuple[int, str]) -> AuditRecord:
    text = anchored("{}", anchor)
    h = audit_hash(prev, seq, 1.0, "call.note", "r1", "c", text, None)
    return AuditRecord(
        seq=seq,
        at=1.0,
        kind="call.note",
        run_id="r1",
        call_id="c",
        data={},
        prev_hash=prev,
        hash=h,
        data_json=text,
    )


def test_records_anchored_to_a_root_the_fold_lacks_do_not_follow() -> None:
    """Records that link to the fold's heads but anchor to a root record it does not have
    (a moved root head row) are not folded as the process's own: they are read, and
    refused, at the next read."""
    truth = JournalTruth()
    truth.dense = True
    truth.mark = 0
    root = AuditRecord(
        seq=1,
        at=1.0,
        kind="journal.checkpoint",
        run_id="",
        call_id=None,
        data={},
        prev_hash=GENESIS,
        hash=audit_hash(GENESIS, 1, 1.0, "journal.checkpoint", "", None, "{}", None),
        data_json="{}",
        chain="r:",
    )
    truth.trusted(root)
    assert truth.follows([_anchored(2, GENESIS, (1, root.hash))])
    assert not truth.follows([_anchored(2, GENESIS, (1, "f" * 64))])
    assert not truth.follows([_anchored(2, GENESIS, (7, root.hash))])

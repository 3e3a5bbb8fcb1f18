"""A SQLite transaction whose records directly follow the journal's truth is folded as the
process's own when it commits (`JournalTruth.follows`), and only then."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from callgate.errors import LedgerError
from callgate.ledger import AttemptFinish, AttemptStart, Outcome
from callgate.ledger.sqlite import SQLiteLedger


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

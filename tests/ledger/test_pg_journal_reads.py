"""How much of the journal a PostgreSQL writer reads back per transaction (issue 31).

Each write transaction that consults the journal's truth reads the records committed
since its last read. A session elsewhere that holds a transaction open (another worker
between its two round trips, a long report, ``pg_dump``) must not make every writer
read, again and again, every record committed since that session began: the records read
per transaction stay bounded by what others committed since, whatever other sessions
hold open.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from callgate.ledger import AttemptFinish, AttemptStart, CallRecord, CallState, Outcome

psycopg = pytest.importorskip("psycopg")


def _ledger(dsn: str, worker: str) -> Any:
    from callgate.ledger import PostgresLedger

    return PostgresLedger(dsn, worker=worker, min_size=1, max_size=1)


def _call(ledger: Any, run_id: str, call_id: str) -> None:
    """One side-effecting call with an idempotency key: a decision, a start, a finish."""
    now = time.time()
    key = f"k-{run_id}-{call_id}"
    ledger.record_decision(
        CallRecord(
            run_id=run_id,
            call_id=call_id,
            tool="charge",
            tool_version="v1",
            principal="alice",
            arguments="{}",
            state=CallState.ADMITTED,
            stage="policy",
            request_hash="h",
            idempotency_key=key,
            created_at=now,
            updated_at=now,
        )
    )
    start = AttemptStart(
        run_id=run_id,
        call_id=call_id,
        tool="charge",
        tool_version="v1",
        attempt=1,
        idempotency_key=key,
        request_hash="h",
        started_at=now,
        key_expires_at=now + 60,
        side_effecting=True,
    )
    assert ledger.begin_attempt(start).kind.value == "run"
    finish = AttemptFinish(
        run_id=run_id,
        call_id=call_id,
        attempt=1,
        idempotency_key=key,
        outcome=Outcome(status="ok", content="{}", finished_at=now),
    )
    assert ledger.finish_attempt(finish)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of journal rows each PostgreSQL journal read returned, in order."""
    from callgate.ledger import pg_dialect

    counts: list[int] = []
    original = pg_dialect._since_rows

    def since_rows(rows: Any, mark: Any) -> Any:
        found, after = original(rows, mark)
        counts.append(len(found))
        return found, after

    monkeypatch.setattr(pg_dialect, "_since_rows", since_rows)
    return counts


@pytest.fixture
def holder(pg_dsn: str) -> Iterator[Any]:
    """A session holding a transaction open (with a transaction id) for the whole test."""
    conn = psycopg.connect(pg_dsn)
    conn.execute("SELECT pg_current_xact_id()")  # opens the transaction, assigns its id
    try:
        yield conn
    finally:
        conn.rollback()
        conn.close()


def test_records_read_per_transaction_stay_bounded_while_a_session_holds_one_open(
    pg_dsn: str, holder: Any, reads: list[int]
) -> None:
    """With another session's transaction open, a writer reads each record committed by
    others once: its later transactions read only what was committed since."""
    mine, other = _ledger(pg_dsn, "mine"), _ledger(pg_dsn, "other")
    try:
        _call(mine, "ra", "c0")  # the first read: the whole journal
        for n in range(30):  # another writer commits about a hundred records
            _call(other, "rb", f"c{n}")
        written = len(reads)
        _call(mine, "ra", "c1")  # reads the other writer's records (once)
        caught_up = reads[written:]
        assert max(caught_up) >= 90, caught_up
        before = len(reads)
        for n in range(2, 6):
            _call(mine, "ra", f"c{n}")  # nobody else wrote: only this writer's last records
        later = reads[before:]
        assert later, "the writer's transactions read no journal"
        assert max(later) <= 10, (
            f"a transaction read back {max(later)} journal rows (each read: {later}) although "
            "only this writer committed since its last read: expected at most 10 (its own "
            "last transaction's records); the read must not start at the oldest transaction "
            "another session holds open"
        )
    finally:
        mine.close()
        other.close()


def test_a_writer_still_reads_what_a_transaction_open_at_its_last_read_commits(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records of another writer's transaction that was open (between its round trips)
    while this writer read the journal are folded by this writer's next read: nothing
    committed late is skipped."""
    from callgate.ledger.sql_tx import Transaction

    mine, other = _ledger(pg_dsn, "mine"), _ledger(pg_dsn, "other")
    holding, release = threading.Event(), threading.Event()
    finish = Transaction.finish

    def slow_finish(self: Any, last: str) -> None:
        if threading.current_thread().name == "slow" and not holding.is_set():
            # Its transaction has an id before the other writer reads (as one that has
            # locked or written rows has); its records are sent with its commit.
            self.cur.execute("SELECT pg_current_xact_id()")
            self.cur.fetchall()
            holding.set()
            release.wait(30)
        finish(self, last)

    monkeypatch.setattr(Transaction, "finish", slow_finish)
    failed: list[BaseException] = []

    def slow_call() -> None:
        try:
            _call(other, "rb", "c1")
        except BaseException as exc:  # reported by the main thread
            failed.append(exc)
            holding.set()

    try:
        _call(mine, "ra", "c0")
        _call(other, "rb", "c0")
        worker = threading.Thread(target=slow_call, name="slow")
        worker.start()
        assert holding.wait(30), "the other writer never reached its commit"
        with psycopg.connect(pg_dsn) as bump:  # a later transaction ends first: the open
            bump.execute("SELECT pg_current_xact_id()")  # one is below the snapshot's xmax
        _call(mine, "ra", "c1")  # reads while the other writer's transaction is open
        release.set()
        worker.join(30)
        assert not failed, failed
        _call(mine, "ra", "c2")  # must fold what the other writer committed late
        truth = mine._truth
        assert truth.key("k-rb-c0") is not None
        assert truth.key("k-rb-c1") is not None, "a record committed late was never folded"
        with psycopg.connect(pg_dsn) as conn:
            row = conn.execute("SELECT seq, hash FROM chains WHERE chain = 'r:rb'").fetchone()
        assert truth.heads.get("r:rb") == (row[0], row[1]), "the fold stops short of rb's head"
    finally:
        release.set()
        mine.close()
        other.close()

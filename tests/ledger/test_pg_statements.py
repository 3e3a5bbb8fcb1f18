"""What a PostgreSQL write transaction asks of the server (issue 31): statements bound on
the server and prepared once per session (not a text parsed and planned each time), two
round trips, and plans that PostgreSQL keeps instead of making one per transaction.

The protocol messages are read from libpq's trace of the ledger's one connection.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from callgate.ledger import AttemptFinish, AttemptStart, CallRecord, CallState, Outcome

psycopg = pytest.importorskip("psycopg")


def _call(ledger: Any, call_id: str) -> tuple[AttemptStart, AttemptFinish]:
    now = time.time()
    ledger.record_decision(
        CallRecord(
            run_id="r1",
            call_id=call_id,
            tool="charge",
            tool_version="v1",
            principal="alice",
            arguments="{}",
            state=CallState.ADMITTED,
            stage="policy",
            request_hash="h",
            idempotency_key=f"k-{call_id}",
            created_at=now,
            updated_at=now,
        )
    )
    start = AttemptStart(
        run_id="r1",
        call_id=call_id,
        tool="charge",
        tool_version="v1",
        attempt=1,
        idempotency_key=f"k-{call_id}",
        request_hash="h",
        started_at=now,
        key_expires_at=now + 60,
        side_effecting=True,
    )
    finish = AttemptFinish(
        run_id="r1",
        call_id=call_id,
        attempt=1,
        idempotency_key=f"k-{call_id}",
        outcome=Outcome(status="ok", content="{}", finished_at=now),
    )
    return start, finish


def _ledger(dsn: str, **options: Any) -> Any:
    from callgate.ledger import PostgresLedger

    return PostgresLedger(dsn, worker="w", min_size=1, max_size=1, **options)


def _calls(ledger: Any, names: list[str]) -> None:
    for name in names:
        start, finish = _call(ledger, name)
        assert ledger.begin_attempt(start).kind.value == "run"
        assert ledger.finish_attempt(finish)


class _Trace:
    """libpq's protocol trace of the ledger's connection, one message a line."""

    def __init__(self, ledger: Any, path: Path) -> None:
        self.ledger = ledger
        self.path = path
        self._file: Any = None

    def __enter__(self) -> _Trace:
        self._file = self.path.open("w")
        with self.ledger._pool.connection() as conn:
            conn.pgconn.trace(self._file.fileno())
            conn.pgconn.set_trace_flags(
                psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE
            )
        return self

    def __exit__(self, *exc: object) -> None:
        with self.ledger._pool.connection() as conn:
            conn.pgconn.untrace()
        self._file.close()

    def messages(self) -> list[tuple[str, str, str]]:
        """(direction F or B, message type, the rest) of each message."""
        found = []
        for line in self.path.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) >= 3:
                found.append((parts[0], parts[2].strip(), "\t".join(parts[3:]).strip()))
        return found


def _round_trips(messages: list[tuple[str, str, str]]) -> int:
    """How many times the client sent and then waited for an answer."""
    trips, last = 0, "B"
    for direction, _, _ in messages:
        if direction == "B" and last == "F":
            trips += 1
        last = direction
    return trips


@pytest.fixture
def warm(pg_dsn: str) -> Iterator[Any]:
    """A ledger on one connection that has written a few calls of run r1."""
    ledger = _ledger(pg_dsn)
    try:
        _calls(ledger, ["c0", "c1", "c2"])
        yield ledger
    finally:
        ledger.close()


def test_a_warm_write_transaction_sends_prepared_statements(warm: Any, tmp_path: Path) -> None:
    """A side-effecting call's two write transactions send no statement text but the
    journal read's (planned per value): every other statement runs a prepared one."""
    with _Trace(warm, tmp_path / "trace.txt") as trace:
        _calls(warm, ["c3"])
    messages = trace.messages()
    sent = [kind for direction, kind, _ in messages if direction == "F"]
    assert "Query" not in sent, "a statement text sent as a simple query (parsed and planned)"
    parses = [rest for direction, kind, rest in messages if direction == "F" and kind == "Parse"]
    assert len(parses) <= 2, parses  # the journal read, once per transaction at most
    assert all("FROM journal WHERE xid" in text for text in parses), parses
    binds = [rest for direction, kind, rest in messages if direction == "F" and kind == "Bind"]
    named = [rest for rest in binds if rest.split()[1] != '""']
    assert len(named) >= 10, binds


def test_a_write_transaction_is_two_round_trips(warm: Any, tmp_path: Path) -> None:
    """The start and the outcome of a call are two round trips each: the locks and reads,
    then the writes and the COMMIT."""
    start, finish = _call(warm, "c3")
    with _Trace(warm, tmp_path / "begin.txt") as trace:
        assert warm.begin_attempt(start).kind.value == "run"
    with _Trace(warm, tmp_path / "finish.txt") as trace2:
        assert warm.finish_attempt(finish)
    for messages in (trace.messages(), trace2.messages()):
        assert _round_trips(messages) == 2, messages
        answers = [rest for direction, kind, rest in messages if kind == "CommandComplete"]
        assert answers[0] == '"BEGIN"', answers
        assert answers[-1] == '"COMMIT"', answers


def test_the_write_statements_keep_one_cached_plan(warm: Any) -> None:
    """After a dozen calls no prepared statement of the write path is still planned for each
    transaction (PostgreSQL plans a statement five times, then keeps a generic plan when it
    is as good: a statement over a list of values, or a join it misjudges, is not)."""
    _calls(warm, [f"d{i}" for i in range(12)])
    with warm._pool.connection() as conn:
        rows = conn.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE from_sql = false"
        ).fetchall()
    assert len(rows) >= 10, rows
    replanned = [(text[:80], custom) for text, generic, custom in rows if custom > 5]
    assert not replanned, replanned


def test_prepare_false_leaves_no_prepared_statement(pg_dsn: str) -> None:
    """``prepare=False`` (a pooler that does not keep prepared statements): the calls are
    written, read back many times, and the session holds no prepared statement."""
    ledger = _ledger(pg_dsn, prepare=False)
    try:
        _calls(ledger, ["c0", "c1", "c2", "c3", "c4", "c5", "c6"])
        for _ in range(7):  # more than psycopg's prepare_threshold
            assert ledger.verify().ok
        with ledger._pool.connection() as conn:
            row = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
        assert row is not None
        assert row[0] == 0
        assert ledger.verify().ok
    finally:
        ledger.close()

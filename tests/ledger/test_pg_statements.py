"""What a PostgreSQL write transaction asks of the server (issue 31): statements the session
prepared once (``EXECUTE``), not texts parsed and planned for each transaction; two round
trips; and plans that PostgreSQL keeps instead of making one per transaction.

The texts are those the ledger's client-side binding cursor sends (one per round trip).
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterator
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


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the ledger's client-side cursors send, in order."""
    texts: list[str] = []
    original = psycopg.ClientCursor.execute

    def execute(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        texts.append(str(query))
        return original(self, query, params, **kw)

    monkeypatch.setattr(psycopg.ClientCursor, "execute", execute)
    return texts


@pytest.fixture
def warm(pg_dsn: str) -> Iterator[Any]:
    """A ledger on one connection that has written a few calls of run r1."""
    ledger = _ledger(pg_dsn)
    try:
        _calls(ledger, ["c0", "c1", "c2"])
        yield ledger
    finally:
        ledger.close()


_ARGS = re.compile(r"\(.*?\)(?=; |$)", re.S)
"""An EXECUTE's arguments (the test's values hold no '; ')."""


def _statements(text: str) -> list[str]:
    return [part.strip() for part in text.split("; ")]


def test_a_warm_write_transaction_runs_prepared_statements(warm: Any, sent: list[str]) -> None:
    """A side-effecting call's two write transactions are four texts of BEGIN, EXECUTEs of
    the session's prepared statements, the journal read (planned per value) and COMMIT:
    nothing else is parsed and planned again."""
    _calls(warm, ["c3"])
    assert len(sent) == 4, sent  # two round trips per transaction
    statements = [s for text in sent for s in _statements(text)]
    other = [
        s[:60]
        for s in statements
        if s not in ("BEGIN", "COMMIT")
        and not s.startswith("EXECUTE callgate_")
        and "FROM journal WHERE xid >=" not in s
    ]
    assert not other, other
    assert sum(s.startswith("EXECUTE callgate_") for s in statements) >= 10, statements
    assert all(s.startswith("BEGIN") for s in sent[::2]), sent
    assert all(s.endswith("COMMIT") for s in sent[1::2]), sent


def test_a_cold_session_prepares_in_the_same_round_trip(pg_dsn: str, sent: list[str]) -> None:
    """On a new connection the PREPAREs go in the text that first runs each statement: no
    round trip of their own."""
    ledger = _ledger(pg_dsn)
    try:
        _calls(ledger, ["c0", "c1"])
    finally:
        ledger.close()
    preparing = [t for t in sent if "PREPARE callgate_" in t]
    assert preparing, sent
    alone = [t[:120] for t in preparing if "EXECUTE callgate_" not in t]
    assert not alone, alone


def test_the_write_statements_keep_one_cached_plan(warm: Any) -> None:
    """After a dozen calls no prepared statement of the write path is still planned for each
    transaction (PostgreSQL plans a statement five times, then keeps a generic plan when it
    is as good: a statement over a list of values, or a join it misjudges, is not)."""
    _calls(warm, [f"d{i}" for i in range(12)])
    with warm._pool.connection() as conn:
        rows = conn.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE starts_with(name, 'callgate_')"
        ).fetchall()
    assert len(rows) >= 10, rows
    replanned = [(text[:80], custom) for text, generic, custom in rows if custom > 5]
    assert not replanned, replanned


def test_a_failed_transaction_leaves_the_session_usable(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction that fails after naming statements to prepare (and before the server
    ran its PREPAREs) leaves the ledger able to write: it reads again what its session has
    prepared."""
    from callgate.ledger import pg_prepared

    original = pg_prepared.PreparingCursor.execute
    failed: list[str] = []

    def execute(self: Any, statement: Any, params: Any = None, /) -> Any:
        if not failed and "COMMIT" in str(statement):
            failed.append(str(statement))
            raise psycopg.OperationalError("the connection broke (a test)")
        return original(self, statement, params)

    monkeypatch.setattr(pg_prepared.PreparingCursor, "execute", execute)
    from callgate.ledger import LedgerError

    ledger = _ledger(pg_dsn)  # a new session: its first COMMIT text prepares the writes
    try:
        start, _ = _call(ledger, "x0")
        start = dataclasses.replace(start, run_id="r2")
        with pytest.raises((psycopg.OperationalError, LedgerError)):
            ledger.begin_attempt(start)
        assert "PREPARE callgate_" in failed[0]
        assert ledger.begin_attempt(start).kind.value == "run"  # the same statements
        _calls(ledger, ["c7", "c8"])
        assert ledger.verify().ok
    finally:
        ledger.close()


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
    finally:
        ledger.close()

"""A PostgreSQL write transaction is two round trips (issue 31): the locks, record numbers
and the rows it reads go as one text, its writes and the commit as another. A round trip
is one ``execute`` on the ledger's cursor (client-side binding sends one text each). With
prepared statements (the default): tests/ledger/test_pg_statements.py."""

from __future__ import annotations

import time
from typing import Any

import pytest

from callgate.ledger import AttemptFinish, AttemptStart, CallRecord, CallState, Outcome

psycopg = pytest.importorskip("psycopg")


@pytest.fixture
def executes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the ledger's client-side cursors send, in order."""
    sent: list[str] = []
    original = psycopg.ClientCursor.execute

    def execute(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        sent.append(str(query))
        return original(self, query, params, **kw)

    monkeypatch.setattr(psycopg.ClientCursor, "execute", execute)
    return sent


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


def test_a_side_effecting_call_is_two_round_trips_per_commit(
    pg_dsn: str, executes: list[str]
) -> None:
    """A durable start (with its deferred admission) and a durable outcome: two round trips
    each, the first opening with BEGIN and the locks, the second ending with COMMIT."""
    from callgate.ledger import PostgresLedger

    ledger = PostgresLedger(pg_dsn, worker="w", prepare=False)  # the statements' texts
    try:
        for warm in ("c0", "c1"):  # the run's chain exists, the truth has read the journal
            start, finish = _call(ledger, warm)
            ledger.begin_attempt(start)
            ledger.finish_attempt(finish)
        start, finish = _call(ledger, "c2")
        executes.clear()
        assert ledger.begin_attempt(start).kind.value == "run"
        begin = list(executes)
        executes.clear()
        assert ledger.finish_attempt(finish)
        end = list(executes)
    finally:
        ledger.close()
    for texts in (begin, end):
        assert len(texts) == 2, texts
        assert texts[0].startswith("BEGIN")
        assert "FOR UPDATE" in texts[0]
        assert texts[1].endswith("COMMIT")

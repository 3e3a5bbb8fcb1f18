"""The statements a PostgreSQL session keeps prepared for the ledger (issue 31, review r2):
bounded in number and size, prepared again when the session lost or changed them, and
never one the ledger did not prepare."""

from __future__ import annotations

import time
from typing import Any

import pytest

from callgate.ledger import AttemptStart, CallRecord, CallState, LedgerError

psycopg = pytest.importorskip("psycopg")


def _ledger(dsn: str, **options: Any) -> Any:
    from callgate.ledger import PostgresLedger

    return PostgresLedger(dsn, worker="w", min_size=1, max_size=1, **options)


def _decide(ledger: Any, run: str, call: str, key: str | None = None) -> None:
    now = time.time()
    ledger.record_decision(
        CallRecord(
            run_id=run,
            call_id=call,
            tool="t",
            tool_version="v",
            principal="p",
            arguments="{}",
            state=CallState.ADMITTED,
            stage="policy",
            request_hash="h",
            idempotency_key=key,
            created_at=now,
            updated_at=now,
        )
    )


def _begin(ledger: Any, run: str, call: str, key: str | None, *, effect: bool = True) -> str:
    now = time.time()
    start = AttemptStart(
        run_id=run,
        call_id=call,
        tool="t",
        tool_version="v",
        attempt=1,
        idempotency_key=key,
        request_hash="h",
        started_at=now,
        key_expires_at=now + 60 if key else 0,
        side_effecting=effect,
    )
    kind: str = ledger.begin_attempt(start).kind.value
    return kind


def _prepared(ledger: Any) -> list[tuple[str, str]]:
    with ledger._pool.connection() as conn:
        rows = conn.execute(
            "SELECT name, statement FROM pg_prepared_statements "
            "WHERE starts_with(name, 'callgate_')"
        ).fetchall()
    return [(str(name), str(text)) for name, text in rows]


def test_batches_of_1_to_50_calls_keep_a_bounded_number_of_statements(pg_dsn: str) -> None:
    """Transactions of 1..50 status-only call updates leave at most `MAX_PREPARED`
    statements of bounded size, under 4 MB of cached plans, prepared on the session (each
    batch size used to add its own, kept for the connection's life: 133 after these
    batches)."""
    from callgate.ledger.pg_prepared import MAX_PREPARED, MAX_TEXT

    ledger = _ledger(pg_dsn)
    try:
        most = 0
        for n in range(1, 51):
            run = f"run{n}"
            for i in range(n):
                _decide(ledger, run, f"c{i}")
            ledger.record_event("note.x", run_id=run, call_id=None, data={})
            for i in range(n):  # deferred: n call updates in the next transaction
                assert _begin(ledger, run, f"c{i}", None, effect=False) == "run"
            ledger.record_event("note.x", run_id=run, call_id=None, data={})
            most = max(most, len(_prepared(ledger)))
        assert most <= MAX_PREPARED, most
        with ledger._pool.connection() as conn:
            row = conn.execute(
                "SELECT max(length(statement)) FROM pg_prepared_statements "
                "WHERE starts_with(name, 'callgate_')"
            ).fetchone()
            plans = conn.execute(
                "SELECT sum(total_bytes) FROM pg_backend_memory_contexts "
                "WHERE name IN ('CachedPlan', 'CachedPlanSource', 'CachedPlanQuery')"
            ).fetchone()
        assert plans is not None
        assert plans[0] < 4 * 2**20, plans  # 16 MB when each batch size was kept
        assert row is not None
        # The text of the whole round trip that prepared them (several PREPAREs).
        assert row[0] < 20 * MAX_TEXT, row
        assert ledger.get_call("run50", "c49").attempts == 1
        assert ledger.verify().ok
    finally:
        ledger.close()


def test_a_lost_statement_keeps_the_deferred_decision(pg_dsn: str) -> None:
    """``DEALLOCATE ALL`` on the ledger's session (a pooler's reset): the next write
    prepares again and succeeds, and another call's deferred decision, already
    acknowledged, is committed with it (it used to fail the write with
    InvalidSqlStatementName and drop the decision)."""
    ledger = _ledger(pg_dsn)
    try:
        _decide(ledger, "r1", "a")
        ledger.record_event("note.x", run_id="r1", call_id=None, data={})
        _decide(ledger, "r1", "b")  # deferred to the next transaction
        with ledger._pool.connection() as conn:
            conn.execute("DEALLOCATE ALL")
        ledger.record_event("note.y", run_id="r2", call_id=None, data={})
        found = ledger.get_call("r1", "b")
        assert found is not None
        assert found.state is CallState.ADMITTED
        ledger.record_event("note.z", run_id="r2", call_id=None, data={})
        kinds = [(r.run_id, r.kind) for r in ledger.audit()]
        assert ("r2", "note.y") in kinds
        assert ("r2", "note.z") in kinds
        assert ledger.verify().ok
    finally:
        ledger.close()


def test_a_changed_column_type_does_not_brick_the_session(pg_dsn: str) -> None:
    """A column of a prepared read changes type (``ALTER TABLE … TYPE bigint``): the next
    write prepares its statements again and every later one succeeds (each used to fail
    with "cached plan must not change result type")."""
    ledger = _ledger(pg_dsn)
    try:
        _decide(ledger, "r0", "c", "K")
        assert _begin(ledger, "r0", "c", "K") == "run"
        with psycopg.connect(pg_dsn, autocommit=True) as other:
            other.execute("ALTER TABLE idempotency_keys ALTER COLUMN attempt TYPE bigint")
        for i in range(1, 4):
            _decide(ledger, f"r{i}", "c", "K")
            assert _begin(ledger, f"r{i}", "c", "K") == "in_progress"
            _decide(ledger, f"r{i}", "d", f"K{i}")
            assert _begin(ledger, f"r{i}", "d", f"K{i}") == "run"
    finally:
        ledger.close()


def test_a_foreign_statement_under_the_ledgers_name_is_never_run(pg_dsn: str) -> None:
    """The session already holds another statement under the name of the ledger's
    advisory-lock statement: the ledger drops it and prepares its own, so a begin holds
    the key's advisory lock (it used to run the foreign no-op: no lock)."""
    from callgate.ledger import pg_dialect, sql_writes
    from callgate.ledger.pg_prepared import prepared_form

    ledger = _ledger(pg_dsn)
    found = prepared_form(pg_dialect._LOCK_ONE, 1)
    assert found is not None
    name, prepare, _ = found
    with ledger._pool.connection() as conn:
        conn.execute(f"PREPARE {name}(bigint) AS SELECT NULL::void WHERE $1 IS NULL")
    other = psycopg.connect(pg_dsn, autocommit=True)
    seen: list[int] = []
    original = sql_writes._begin

    def spy(tx: Any, start: Any) -> Any:
        row = other.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")
        seen.append(int(row.fetchone()[0]))
        return original(tx, start)

    try:
        for i in range(3):
            _decide(ledger, f"r{i}", "c", f"k{i}")
            assert _begin(ledger, f"r{i}", "c", f"k{i}") == "run"
        sql_writes._begin = spy
        _decide(ledger, "r9", "c", "k9")
        assert _begin(ledger, "r9", "c", "k9") == "run"
        assert seen
        assert all(count >= 1 for count in seen), seen
        held = dict(_prepared(ledger))
        assert prepare in held[name], held[name][:200]
    finally:
        sql_writes._begin = original
        other.close()
        ledger.close()


def test_statements_lost_twice_in_a_row_name_prepare_false(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session that loses the ledger's statements again when the write is tried once
    more (a transaction-mode pooler) raises `LedgerError` naming ``prepare=False``, and
    keeps the deferred records for the next write; ``prepare=False`` then writes them."""
    from callgate.ledger import pg_prepared

    ledger = _ledger(pg_dsn)
    try:
        _decide(ledger, "r1", "a")
        ledger.record_event("note.x", run_id="r1", call_id=None, data={})
        _decide(ledger, "r1", "b")  # deferred
        # Each write finds its statements prepared, but the session has none of them.
        monkeypatch.setattr(pg_prepared.PreparedStatements, "use", lambda *_: False)
        with pytest.raises(LedgerError, match=r"prepare=False") as raised:
            ledger.record_event("note.y", run_id="r2", call_id=None, data={})
        assert "26000" in str(raised.value)
        assert len(ledger._deferred) == 1
        monkeypatch.undo()
        ledger._prepare = False
        ledger.record_event("note.z", run_id="r2", call_id=None, data={})
        found = ledger.get_call("r1", "b")
        assert found is not None
        assert found.state is CallState.ADMITTED
    finally:
        ledger.close()


def test_the_least_recently_used_statement_is_dropped_in_the_same_round_trip(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With room for 4 statements a session never holds more, each ``DEALLOCATE`` travels
    in a text that also runs the transaction's statements (no round trip of its own), and
    the calls are written as before."""
    from callgate.ledger import pg_prepared

    monkeypatch.setattr(pg_prepared, "MAX_PREPARED", 4)
    texts: list[str] = []
    original = psycopg.ClientCursor.execute

    def execute(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        texts.append(str(query))
        return original(self, query, params, **kw)

    monkeypatch.setattr(psycopg.ClientCursor, "execute", execute)
    ledger = _ledger(pg_dsn)
    try:
        for i in range(6):
            _decide(ledger, "r1", f"c{i}", f"k{i}")
            assert _begin(ledger, "r1", f"c{i}", f"k{i}") == "run"
            assert len(_prepared(ledger)) <= 4
        dropping = [t for t in texts if "DEALLOCATE " in t]
        assert dropping, texts
        alone = [t[:120] for t in dropping if "EXECUTE callgate_" not in t]
        assert not alone, alone
        assert ledger.verify().ok
    finally:
        ledger.close()


def test_statements_the_session_holds_with_the_expected_text_are_used(pg_dsn: str) -> None:
    """A ledger that does not know its session already holds its statements (behind a
    pooler, another client prepared them) fails its PREPAREs once, then uses those
    statements, dropping none."""
    ledger = _ledger(pg_dsn)
    try:
        _decide(ledger, "r1", "a", "k1")
        assert _begin(ledger, "r1", "a", "k1") == "run"
        before = dict(_prepared(ledger))
        for prepared in ledger._sessions.values():
            prepared.names.clear()  # as a client new to a shared server session
        _decide(ledger, "r1", "b", "k2")
        assert _begin(ledger, "r1", "b", "k2") == "run"
        after = dict(_prepared(ledger))
        assert set(before) <= set(after)
        assert all(after[name] == text for name, text in before.items())
        assert ledger.verify().ok
    finally:
        ledger.close()

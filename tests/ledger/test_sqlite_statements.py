"""What a SQLite write transaction sends, and that what it skips reading is what it would read.

`SqliteDialect` answers the chain heads, the root head, the last record number and the
journal since the truth's mark from what this connection's last transaction left, while
``PRAGMA data_version`` says nobody else committed. The statement counts below are
traced with ``sqlite3.Connection.set_trace_callback``; the answers are checked against
the file by a dialect that reads everything as well and compares.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from callgate.canonical import digest
from callgate.ledger import (
    AttemptFinish,
    AttemptStart,
    CallRecord,
    CallState,
    Outcome,
    sqlite_dialect,
)
from callgate.ledger.sql_dialects import Dialect, Opened
from callgate.ledger.sql_schema import Cursor
from callgate.ledger.sql_statements import JOURNAL_COLUMNS, SELECT_CALL, SELECT_KEY
from callgate.ledger.sqlite import SQLiteLedger
from callgate.ledger.sqlite_dialect import SqliteDialect

READ = Dialect()
"""The shared dialect: reads everything from the file."""


def _decision(run_id: str, call_id: str, key: str) -> CallRecord:
    now = time.time()
    return CallRecord(
        run_id=run_id,
        call_id=call_id,
        tool="charge",
        tool_version="1",
        principal="p",
        arguments='{"amount":1}',
        state=CallState.ADMITTED,
        stage="policy",
        request_hash=digest("charge", key),
        idempotency_key=key,
        decided_by="granted",
        created_at=now,
        updated_at=now,
    )


def _start(run_id: str, call_id: str, key: str) -> AttemptStart:
    now = time.time()
    return AttemptStart(
        run_id=run_id,
        call_id=call_id,
        tool="charge",
        tool_version="1",
        attempt=1,
        idempotency_key=key,
        request_hash=digest("charge", key),
        started_at=now,
        key_expires_at=now + 3600,
        side_effecting=True,
    )


def _finish(run_id: str, call_id: str, key: str) -> AttemptFinish:
    return AttemptFinish(
        run_id=run_id,
        call_id=call_id,
        attempt=1,
        idempotency_key=key,
        outcome=Outcome(status="ok", content="{}", finished_at=time.time()),
    )


def side_call(ledger: SQLiteLedger, run_id: str, call_id: str, key: str | None = None) -> str:
    """One side-effecting call as the execute stage drives it: decision, claim, outcome."""
    key = key or f"{run_id}/{call_id}"
    ledger.record_decision(_decision(run_id, call_id, key))
    claim = ledger.begin_attempt(_start(run_id, call_id, key))
    if claim.kind.value == "run":
        ledger.finish_attempt(_finish(run_id, call_id, key))
    return claim.kind.value


class Traced:
    """The statements a ledger's connection sends, split into write transactions."""

    def __init__(self, ledger: SQLiteLedger) -> None:
        self.ledger = ledger
        self.log: list[str] = []

    def __enter__(self) -> Traced:
        self.ledger._conn.set_trace_callback(self.log.append)
        return self

    def __exit__(self, *exc: object) -> None:
        self.ledger._conn.set_trace_callback(None)

    @property
    def statements(self) -> list[str]:
        """The statements sent (not those SQLite runs inside one: ``-- PRAGMA ...``)."""
        return [s for s in self.log if not s.startswith("--")]

    def transactions(self) -> list[list[str]]:
        found: list[list[str]] = []
        for statement in self.statements:
            if statement == "BEGIN IMMEDIATE":
                found.append([])
            if found:
                found[-1].append(statement)
        return found


def test_a_durable_sqlite_transaction_sends_at_most_eight_statements(tmp_path: Path) -> None:
    """A side-effecting call's two write transactions send at most 8 statements each (its
    begin and commit, at most two reads, and one write per table it changes), 15 in all."""
    ledger = SQLiteLedger(tmp_path / "callgate.db")
    try:
        for n in range(5):
            side_call(ledger, "run", f"warm{n}")
        with Traced(ledger) as traced:
            for n in range(10):
                side_call(ledger, "run", f"c{n}")
        sizes = [len(t) for t in traced.transactions()]
        assert len(sizes) == 20, sizes
        assert max(sizes) <= 8, traced.transactions()[sizes.index(max(sizes))]
        assert len(traced.statements) <= 15 * 10, len(traced.statements)
    finally:
        ledger.close()


def test_a_batch_of_sixteen_reads_each_table_once(tmp_path: Path) -> None:
    """16 concurrent side-effecting calls read their calls' and keys' rows in one statement
    per table per transaction, not one per call: at most 40 statements per batch."""
    ledger = SQLiteLedger(tmp_path / "callgate.db")

    async def one(run_id: str, call_id: str) -> None:
        key = f"{run_id}/{call_id}"
        ledger.record_decision(_decision(run_id, call_id, key))
        claim = await ledger.abegin_attempt(_start(run_id, call_id, key))
        assert claim.kind.value == "run"
        await ledger.afinish_attempt(_finish(run_id, call_id, key))

    async def batches(first: int, count: int) -> None:
        for b in range(first, first + count):
            async with anyio.create_task_group() as tg:
                for i in range(16):
                    tg.start_soon(one, "run", f"c{b}_{i}")

    try:
        anyio.run(batches, 0, 2)
        with Traced(ledger) as traced:
            anyio.run(batches, 2, 4)
        per_batch = len(traced.statements) / 4
        assert per_batch <= 40, traced.statements[:80]
        reads = [s for s in traced.statements if s.startswith("SELECT")]
        assert len(reads) <= 2 * 4, reads
    finally:
        ledger.close()


class CheckedDialect(SqliteDialect):
    """A `SqliteDialect` that also reads everything it answers from the file, and compares."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.compared = 0
        self.prefetched = 0

    def open(
        self,
        cur: Cursor,
        prelude: Sequence[tuple[str, Sequence[Any]]],
        names: Sequence[str],
        chains: Sequence[str],
        **kw: Any,
    ) -> Opened:
        got = super().open(cur, prelude, names, chains, **kw)
        fresh = READ.open(cur, (), names, chains, **kw)
        assert got.heads == fresh.heads, (chains, got.heads, fresh.heads)
        assert got.root == fresh.root, (got.root, fresh.root)
        if got.prefetched:
            calls = [cur.execute(SELECT_CALL, c).fetchone() for c in kw["calls"]]
            keys = [cur.execute(SELECT_KEY, (k,)).fetchone() for k in kw["keys"]]
            assert sorted(map(tuple, got.calls)) == sorted(tuple(r) for r in calls if r), calls
            assert sorted(map(tuple, got.keys)) == sorted(tuple(r) for r in keys if r), keys
            self.prefetched += 1
        self.compared += 1
        return got

    def numbers(self, cur: Cursor, count: int, last: int | None) -> list[int]:
        got = super().numbers(cur, count, last)
        if last is None:
            assert got == READ.numbers(cur, count, None), got
            self.compared += 1
        return got

    def since(self, cur: Cursor, mark: int | None) -> tuple[list[Any], int | None]:
        got = super().since(cur, mark)
        fresh = READ.since(cur, mark)
        assert [tuple(r) for r in got[0]] == [tuple(r) for r in fresh[0]], mark
        assert got[1] == fresh[1], (got[1], fresh[1])
        self.compared += 1
        return got


@pytest.mark.parametrize("limits", [None, (3, 2)], ids=["kept", "forgetful"])
def test_what_a_sqlite_transaction_skips_reading_is_what_the_file_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limits: tuple[int, int] | None
) -> None:
    """Two ledgers of one process writing shared runs and keys in random turns (past a
    checkpoint): every head, root head, record number, journal read and prefetched row
    the dialect answers equals what the file holds, and both ledgers verify; also when
    it may keep only 3 records and 2 heads."""
    if limits is not None:
        monkeypatch.setattr(sqlite_dialect, "KEPT_RECORDS", limits[0])
        monkeypatch.setattr(sqlite_dialect, "KEPT_HEADS", limits[1])
    path = tmp_path / "callgate.db"
    pair = [SQLiteLedger(path, worker="a"), SQLiteLedger(path, worker="b")]
    dialects = [CheckedDialect(ledger._rows) for ledger in pair]
    for ledger, dialect in zip(pair, dialects, strict=True):
        ledger._dialect = dialect
    rng = random.Random(7)
    ran = 0
    try:
        for n in range(160):
            who = 0 if n < 100 else rng.randrange(2)  # a long turn first: past a checkpoint
            ledger = pair[who]
            run_id = rng.choice(["r1", "r2", "r3"])
            shared = f"shared{n % 5}" if rng.random() < 0.3 else None
            ran += side_call(ledger, run_id, f"c{n}", shared) == "run"
            if rng.random() < 0.2:
                ledger.record_event("note.x", run_id=run_id, call_id=None, data={"n": n})
        for ledger in pair:
            check = ledger.verify()
            assert check.ok, check.problems
        assert sum(d.compared for d in dialects) > 300
        assert sum(d.prefetched for d in dialects) > 100
        assert sum(d.reads for d in dialects) > 10  # the other ledger's commits were seen
        assert min(d.reads for d in dialects) < 140  # and many transactions read nothing
    finally:
        for ledger in pair:
            ledger.close()


@pytest.mark.parametrize("size", [1, 16, 400])
def test_a_batch_read_finds_each_row_by_its_primary_key(tmp_path: Path, size: int) -> None:
    """The one read of a transaction's calls' and keys' rows searches both tables by their
    primary keys (never a scan, which would grow with the ledger)."""
    ledger = SQLiteLedger(tmp_path / "callgate.db")
    try:
        text = sqlite_dialect._read_text(True, size, size)
        plan = ledger._conn.execute("EXPLAIN QUERY PLAN " + text, ["x"] * (3 * size)).fetchall()
        details = [str(row[3]) for row in plan]
        assert not [d for d in details if d.startswith("SCAN") and "calls" in d], details
        assert not [d for d in details if d.startswith("SCAN") and "idempotency" in d], details
        assert sum("USING PRIMARY KEY" in d for d in details) == 2, details
    finally:
        ledger.close()


def test_kept_journal_rows_have_the_columns_a_journal_read_returns() -> None:
    """The rows a `SqliteDialect` keeps of its own records are in ``JOURNAL_COLUMNS`` order."""
    assert JOURNAL_COLUMNS == "seq, at, kind, run_id, call_id, data, prev_hash, hash, chain"

"""`verify` of a ledger other writers are writing reads one snapshot (issue 31 review).

Its reads (the journal, the chain heads, the calls, keys, approvals and orphan rows)
must all see the same committed state: read one after another, a record committed
between two of them looks like a deleted tail or an edited row, and `callgate ledger
verify` said TAMPERED about an untampered ledger whenever anything was writing.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from callgate.ledger import SQLiteLedger


def _write_until(ledger: Any, stop: threading.Event, written: list[int]) -> None:
    """Record events into three runs until told to stop."""
    i = 0
    while not stop.is_set():
        i += 1
        ledger.record_event("note.written", run_id=f"run{i % 3}", call_id=None, data={"i": i})
        written.append(i)


def _verify_while_writing(writer: Any, reader: Any) -> list[tuple[str, ...]]:
    """Verify ten times while ``writer`` writes; the problems of each failed verify."""
    stop = threading.Event()
    written: list[int] = []
    thread = threading.Thread(target=_write_until, args=(writer, stop, written))
    thread.start()
    failed = []
    try:
        while len(written) < 20:
            stop.wait(0.01)
        start = len(written)
        for _ in range(10):
            check = reader.verify()
            if not check.ok:
                failed.append(check.problems[:3])
        assert len(written) > start, "the writer wrote nothing while verify ran"
    finally:
        stop.set()
        thread.join()
    return failed


def test_verify_of_a_sqlite_ledger_being_written_is_ok(tmp_path: Path) -> None:
    """A read-only verify of a SQLite ledger another connection writes into says ok."""
    path = tmp_path / "live.db"
    writer = SQLiteLedger(path, worker="writer")
    reader = SQLiteLedger(path, read_only=True)
    try:
        assert _verify_while_writing(writer, reader) == []
    finally:
        reader.close()
        writer.close()
    check = SQLiteLedger(path, read_only=True)
    assert check.verify().ok
    check.close()


def test_verify_of_a_postgres_ledger_being_written_is_ok(pg_dsn: str) -> None:
    """A read-only verify of a PostgreSQL ledger another session writes into says ok."""
    pytest.importorskip("psycopg")
    from callgate.ledger import PostgresLedger

    writer = PostgresLedger(pg_dsn, worker="writer")
    writer.record_event("note.written", run_id="run0", call_id=None, data={"i": 0})
    reader = PostgresLedger(pg_dsn, read_only=True)
    try:
        assert _verify_while_writing(writer, reader) == []
    finally:
        reader.close()
        writer.close()

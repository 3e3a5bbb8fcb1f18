"""``callgate ledger migrate``: bring a ledger written by an older callgate to this schema.

Opening a ledger for writing migrates it too; this does it on purpose, says what
it did (which versions, how many calls, keys and approvals moved into the
journal, which approvals must be decided again) and verifies the result.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from dataclasses import dataclass, field

from callgate.ledger.base import AuditCheck, Ledger, LedgerError
from callgate.ledger.journal import MIGRATED
from callgate.ledger.migrate import check_old_chain, old_chain_query
from callgate.ledger.postgres import PostgresLedger
from callgate.ledger.sql_schema import SCHEMA_VERSION
from callgate.ledger.sqlite import SQLiteLedger
from callgate.ledger.truth import resolve_chain_key

__all__ = ["Migration", "migrate_postgres", "migrate_sqlite"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    """What `migrate_sqlite` / `migrate_postgres` did."""

    from_version: int
    to_version: int
    calls: int = 0
    keys: int = 0
    approvals: int = 0
    approved_without_decision: tuple[str, ...] = ()
    """Approvals the old table said were approved with no decision in the old audit trail:
    moved as pending, to be decided again."""
    check: AuditCheck | None = field(default=None)
    """``verify`` of the migrated ledger."""


def migrate_sqlite(path: str | os.PathLike[str], chain_key: bytes | str | None = None) -> Migration:
    """Migrate the SQLite ledger at ``path`` in place (one transaction) and verify it
    (``chain_key``: a keyed ledger's key, else from the environment)."""
    key = resolve_chain_key(chain_key)
    where = os.fspath(path)
    if not os.path.isfile(where):
        raise LedgerError(f"no ledger at {where}; pass the path of an existing callgate.db")
    uri = "file:" + urllib.parse.quote(os.path.abspath(where)) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
        try:
            tables = {
                str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            if not tables >= _LEDGER_TABLES or not tables & {"audit", "journal"}:
                raise LedgerError(
                    f"{where} is not a callgate ledger: it lacks callgate's tables (expected "
                    "schema_version, calls, idempotency_keys, approvals and audit or journal); "
                    "nothing was changed"
                )
            row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
            before = int(row[0]) if row and row[0] is not None else 0
            if 0 < before < SCHEMA_VERSION:
                rows = conn.execute(old_chain_query(before)).fetchall()
                check_old_chain(rows, where, key)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise LedgerError(
            f"{where} is not a callgate ledger (no schema version could be read: {exc}); "
            "nothing was changed"
        ) from None
    with SQLiteLedger(where, worker="callgate-migrate", chain_key=key) as ledger:
        return _report(ledger, before)


def migrate_postgres(dsn: str, chain_key: bytes | str | None = None) -> Migration:
    """Migrate the PostgreSQL ledger at ``dsn`` (one transaction, under the migration lock)
    and verify it (``chain_key``: a keyed ledger's key, else from the environment)."""
    import psycopg

    key = resolve_chain_key(chain_key)
    try:
        conn = psycopg.connect(dsn, autocommit=True)
    except psycopg.Error as exc:
        raise LedgerError(f"cannot reach the PostgreSQL ledger: {exc}".strip()) from exc
    with conn:
        try:
            row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        except psycopg.Error as exc:
            raise LedgerError(
                "the database is not a callgate ledger (no schema version could be read: "
                f"{str(exc).splitlines()[0]}); nothing was changed"
            ) from None
        before = int(row[0]) if row and row[0] is not None else 0
        if 0 < before < SCHEMA_VERSION:
            rows = conn.execute(old_chain_query(before)).fetchall()
            check_old_chain(rows, "the PostgreSQL ledger", key)
    ledger = PostgresLedger(dsn, worker="callgate-migrate", chain_key=key)
    try:
        return _report(ledger, before)
    finally:
        ledger.close()


_LEDGER_TABLES = {"schema_version", "calls", "idempotency_keys", "approvals"}


def _report(ledger: Ledger, before: int) -> Migration:
    check = ledger.verify()
    if before >= SCHEMA_VERSION:
        return Migration(from_version=before, to_version=SCHEMA_VERSION, check=check)
    markers = [r for r in ledger.records(run_id="") if r.kind == MIGRATED]
    data = markers[-1].data if markers else {}
    return Migration(
        from_version=before,
        to_version=SCHEMA_VERSION,
        calls=int(data.get("calls") or 0),
        keys=int(data.get("keys") or 0),
        approvals=int(data.get("approvals") or 0),
        approved_without_decision=tuple(data.get("approved_without_decision") or ()),
        check=check,
    )

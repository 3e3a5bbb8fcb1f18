"""The SQL ledgers' schema: the tables, the migrations that create them, and the
cursor protocol the ledger's statements run on.

Kept apart from the statements and the writes because it changes by adding a
migration, never by editing one; a backend applies it when it opens a database.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from callgate.ledger.base import GENESIS, LedgerError

__all__ = [
    "HEAD_QUERY",
    "HEAD_SEQ",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Cursor",
    "MigrationHook",
    "apply_migrations",
    "pending_migrations",
]


class Cursor(Protocol):
    """The part of a DB-API cursor the ops use (sqlite3 and psycopg both have it)."""

    @property
    def rowcount(self) -> int: ...

    @property
    def description(self) -> Any: ...

    def execute(self, sql: Any, params: Any = ..., /) -> Any: ...

    def executemany(self, sql: Any, params: Iterable[Any], /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


HEAD_SEQ = 2**62
"""The key of the audit table's head row (the last record's number and hash)."""
HEAD_QUERY = f"SELECT data, hash FROM journal WHERE seq = {HEAD_SEQ}"

# -- schema --------------------------------------------------------------------

# Each migration is a list of statements; {real} and {bigint} are the dialect's
# types. A migration is never edited once released: add the next one instead.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE calls (
            run_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            tool TEXT NOT NULL,
            tool_version TEXT,
            principal TEXT NOT NULL,
            arguments TEXT NOT NULL,
            state TEXT NOT NULL,
            stage TEXT NOT NULL,
            request_hash TEXT,
            idempotency_key TEXT,
            decided_by TEXT,
            message TEXT NOT NULL,
            effects TEXT NOT NULL,
            approval_id TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            reconciled INTEGER NOT NULL DEFAULT 0,
            created_at {real} NOT NULL,
            updated_at {real} NOT NULL,
            PRIMARY KEY (run_id, call_id)
        ){without_rowid}""",
        """CREATE TABLE attempts (
            run_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            tool_version TEXT NOT NULL,
            idempotency_key TEXT NOT NULL,
            request_hash TEXT NOT NULL,
            started_at {real} NOT NULL,
            worker TEXT NOT NULL,
            status TEXT,
            content TEXT,
            error TEXT,
            stage TEXT,
            finished_at {real},
            reconciled INTEGER NOT NULL DEFAULT 0,
            transaction_id TEXT,
            PRIMARY KEY (run_id, call_id, attempt)
        ){without_rowid}""",
        """CREATE TABLE idempotency_keys (
            key TEXT PRIMARY KEY,
            request_hash TEXT NOT NULL,
            run_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            expires_at {real} NOT NULL
        ){without_rowid}""",
        """CREATE TABLE audit (
            seq {bigint} PRIMARY KEY,
            at {real} NOT NULL,
            kind TEXT NOT NULL,
            run_id TEXT NOT NULL,
            call_id TEXT,
            data TEXT NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL
        )""",
        # The head: the last record's number and hash, kept in a row of its own at the
        # far end of the table, so that moving it touches the page new records go to.
        "INSERT INTO audit (seq, at, kind, run_id, call_id, data, prev_hash, hash) "
        f"VALUES ({HEAD_SEQ}, 0, '@head', '', NULL, '0', '', '{GENESIS}')",
    ),
    # 2: approval requests (callgate.ledger.approvals_sql).
    (
        """CREATE TABLE approvals (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            principal TEXT NOT NULL,
            tool TEXT NOT NULL,
            arguments_json TEXT NOT NULL,
            arguments_hash TEXT NOT NULL,
            resource_version TEXT,
            effects TEXT NOT NULL,
            preview TEXT NOT NULL,
            policy_version TEXT,
            created_at {real} NOT NULL,
            expires_at {real} NOT NULL,
            status TEXT NOT NULL,
            decided_by TEXT,
            decided_at {real},
            reason TEXT,
            used_at {real},
            used_by TEXT,
            resumable INTEGER NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX approvals_effect ON approvals (principal, tool, arguments_hash)",
        "CREATE INDEX approvals_status ON approvals (status, created_at)",
    ),
    # 3: the journal is the truth (callgate.ledger.journal). The audit trail becomes the
    # journal, a call lists its records, a key and an approval say which record
    # holds their outcome or decision, and attempts are read from the journal: the
    # `MIGRATION_HOOKS` entry for 3 moves the old rows into records, then drops them.
    (
        "ALTER TABLE audit RENAME TO journal",
        # A call's records: listed in its row (no index on the journal, which would cost
        # every commit a page); records of no call, or written before the call's row
        # existed, are listed here.
        "ALTER TABLE calls ADD COLUMN records TEXT NOT NULL DEFAULT ''",
        # A key's calls: a key whose row is missing is checked against them.
        "CREATE INDEX calls_key ON calls (idempotency_key)",
        """CREATE TABLE journal_orphans (
            run_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            seq {bigint} NOT NULL,
            PRIMARY KEY (run_id, call_id, seq)
        ){without_rowid}""",
        "ALTER TABLE idempotency_keys ADD COLUMN status TEXT",
        "ALTER TABLE idempotency_keys ADD COLUMN outcome_seq {bigint}",
        "ALTER TABLE approvals ADD COLUMN decision_seq {bigint}",
    ),
    # 4: a chain per run (callgate.ledger.chains). The records so far keep their one chain
    # (named '@v3' in the new chain column; new records write NULL: their run's chain);
    # each chain's head is a row of `chains`, and the head row of the journal goes (the
    # `MIGRATION_HOOKS` entry for 4 moves it into `chains` and writes a first checkpoint).
    # On PostgreSQL records are numbered by a sequence, and each carries the id of the
    # transaction that wrote it, which is how a reader finds what committed since it last
    # read (callgate.ledger.truth).
    (
        "ALTER TABLE journal ADD COLUMN chain TEXT DEFAULT '@v3'",
        "{journal_xid}",
        "{journal_xid_index}",
        "{journal_seq}",
        """CREATE TABLE chains (
            chain TEXT PRIMARY KEY,
            seq {bigint} NOT NULL,
            hash TEXT NOT NULL,
            bound INTEGER NOT NULL DEFAULT 0
        ){without_rowid}""",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


def pending_migrations(current: int) -> list[tuple[int, tuple[str, ...]]]:
    """The migrations to apply to a ledger at schema version ``current``, in order."""
    if current > SCHEMA_VERSION:
        raise LedgerError(
            f"the ledger's schema is version {current}, newer than this callgate knows "
            f"({SCHEMA_VERSION}); upgrade callgate to open it"
        )
    return [(v + 1, MIGRATIONS[v]) for v in range(current, SCHEMA_VERSION)]


MigrationHook = Callable[["Cursor", Callable[[str], str]], None]


def apply_migrations(
    cur: Cursor,
    sql: Callable[[str], str],
    types: Mapping[str, str],
    hooks: Mapping[int, MigrationHook] | None = None,
) -> int:
    """Bring the schema to `SCHEMA_VERSION` inside the caller's transaction; the old version.

    ``types`` fills the dialect's column types (``real``, ``bigint``, ``without_rowid``)
    and its own statements (``journal_xid``, ``journal_xid_index``, ``journal_seq``: empty
    where the dialect has none) into the DDL; ``hooks[v]`` runs after migration ``v``'s
    statements (moving data).
    """
    cur.execute(
        "CREATE TABLE IF NOT EXISTS schema_version "
        f"(version INTEGER PRIMARY KEY, applied_at {types['real']} NOT NULL)"
    )
    cur.execute("SELECT max(version) FROM schema_version")
    row = cur.fetchone()
    current = int(row[0]) if row and row[0] is not None else 0
    for version, statements in pending_migrations(current):
        for statement in statements:
            text = statement.format(**types)
            if text:  # a statement of one dialect only
                cur.execute(text)
        if hooks and version in hooks:
            hooks[version](cur, sql)
        cur.execute(
            sql("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)"),
            (version, time.time()),
        )
    return current

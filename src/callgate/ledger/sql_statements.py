"""The SQL ledgers' statement texts and the builders of their multi-row forms.

Text only, no execution: the writer (`callgate.ledger.sql_writes`) runs them, and a
backend translates their ``?`` placeholders into its own. A transaction reads the
rows it needs one by one (by primary key) and writes every changed row at its end,
one multi-row statement per table, so a group commit of N calls costs a handful of
statements, not N times as many.
"""

from __future__ import annotations

import functools

from callgate.ledger.sql_schema import HEAD_SEQ

CALL_COLUMNS = (
    "run_id, call_id, tool, tool_version, principal, arguments, state, stage, request_hash, "
    "idempotency_key, decided_by, message, effects, approval_id, attempts, reconciled, "
    "created_at, updated_at, records"
)
KEY_COLUMNS = "key, request_hash, run_id, call_id, attempt, expires_at, status, outcome_seq"
APPROVAL_COLUMNS = (
    "id, run_id, call_id, principal, tool, arguments_json, arguments_hash, resource_version, "
    "effects, preview, policy_version, created_at, expires_at, status, decided_by, decided_at, "
    "reason, used_at, used_by, resumable, decision_seq"
)
JOURNAL_COLUMNS = "seq, at, kind, run_id, call_id, data, prev_hash, hash, chain"
LEGACY_JOURNAL_COLUMNS = "seq, at, kind, run_id, call_id, data, prev_hash, hash"
"""The journal's columns before schema 4 (the data step of migration 3 writes these)."""

CHUNK = 64
"""Rows per statement: well under every database's limit on parameters."""


@functools.cache
def values(width: int, rows: int) -> str:
    """``(?, ?, …), (…)``: ``rows`` rows of ``width`` placeholders."""
    one = "(" + ", ".join("?" * width) + ")"
    return ", ".join([one] * rows)


def _upsert(table: str, columns: str, key: str, rows: int) -> str:
    names = [c.strip() for c in columns.split(",")]
    keys = {k.strip() for k in key.split(",")}
    update = ", ".join(f"{c} = excluded.{c}" for c in names if c not in keys)
    return (
        f"INSERT INTO {table} ({columns}) VALUES {values(len(names), rows)} "
        f"ON CONFLICT ({key}) DO UPDATE SET {update}"
    )


@functools.cache
def upsert_calls(rows: int) -> str:
    return _upsert("calls", CALL_COLUMNS, "run_id, call_id", rows)


@functools.cache
def upsert_keys(rows: int) -> str:
    return _upsert("idempotency_keys", KEY_COLUMNS, "key", rows)


@functools.cache
def upsert_approvals(rows: int) -> str:
    return _upsert("approvals", APPROVAL_COLUMNS, "id", rows)


@functools.cache
def insert_journal(rows: int) -> str:
    return f"INSERT INTO journal ({JOURNAL_COLUMNS}) VALUES {values(9, rows)}"


@functools.cache
def insert_legacy_journal(rows: int) -> str:
    return f"INSERT INTO journal ({LEGACY_JOURNAL_COLUMNS}) VALUES {values(8, rows)}"


@functools.cache
def upsert_chains(rows: int) -> str:
    """Move chain heads (a checkpoint binds them later: ``bound`` = 0)."""
    return (
        f"INSERT INTO chains (chain, seq, hash, bound) VALUES {values(4, rows)} "
        "ON CONFLICT (chain) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, bound = 0"
    )


@functools.cache
def json_rows(statement: str) -> tuple[str, tuple[str, ...]]:
    """A multi-row ``INSERT … VALUES (?, …), …`` as one that takes all its rows as one JSON
    parameter (PostgreSQL: ``json_populate_recordset``), and its column names: one
    parameter to bind instead of one per value."""
    head, _, rest = statement.partition(" VALUES ")
    table = head.split()[2]
    columns = head[head.index("(") + 1 : head.rindex(")")]
    tail = rest[rest.index(" ON CONFLICT") :] if " ON CONFLICT" in rest else ""
    names = tuple(c.strip() for c in columns.split(","))
    return (
        f"{head} SELECT {columns} FROM json_populate_recordset(NULL::{table}, ?::json){tail}",
        names,
    )


JSON_UPDATE_CALL_STATUS = (
    "UPDATE calls AS c SET state = v.state, stage = v.stage, attempts = v.attempts, "
    "reconciled = v.reconciled, updated_at = v.updated_at, records = v.records "
    "FROM json_populate_recordset(NULL::calls, ?::json) AS v "
    "WHERE c.run_id = v.run_id AND c.call_id = v.call_id"
)
STATUS_COLUMNS = (
    "state",
    "stage",
    "attempts",
    "reconciled",
    "updated_at",
    "records",
    "run_id",
    "call_id",
)
UPDATE_CALL_STATUS = (
    "UPDATE calls SET state = ?, stage = ?, attempts = ?, reconciled = ?, updated_at = ?, "
    "records = ? WHERE run_id = ? AND call_id = ?"
)


@functools.lru_cache(maxsize=256)
def with_statements(statements: tuple[str, ...]) -> str:
    """Data-modifying statements as one (PostgreSQL: the first ones as ``WITH`` parts of the
    last), their placeholders in the same order. They run on one snapshot, so none may
    read what another writes, nor change a row another changes: a transaction's writes are
    one statement per table and row."""
    *first, last = statements
    if not first:
        return last
    parts = ", ".join(f"w{i} AS ({text})" for i, text in enumerate(first))
    return f"WITH {parts} {last}"


@functools.cache
def insert_orphans(rows: int) -> str:
    return f"INSERT INTO journal_orphans (run_id, call_id, seq) VALUES {values(3, rows)}"


ORPHANS_OF_CALL = "SELECT seq FROM journal_orphans WHERE run_id = ? AND call_id = ?"
ORPHANS_OF_RUN = "SELECT seq FROM journal_orphans WHERE run_id = ?"
SELECT_CALL = f"SELECT {CALL_COLUMNS} FROM calls WHERE run_id = ? AND call_id = ?"
SELECT_KEY = f"SELECT {KEY_COLUMNS} FROM idempotency_keys WHERE key = ?"
SELECT_APPROVAL = f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?"
SELECT_RECORD = f"SELECT {JOURNAL_COLUMNS} FROM journal WHERE seq = ?"
SELECT_LEGACY_RECORD = f"SELECT {LEGACY_JOURNAL_COLUMNS} FROM journal WHERE seq = ?"
NEWEST_RECORD = f"SELECT {JOURNAL_COLUMNS} FROM journal ORDER BY seq DESC LIMIT 1"
CHAIN_HEADS = "SELECT chain, seq, hash FROM chains"
BIND_CHAIN = "UPDATE chains SET bound = 1 WHERE chain = ? AND seq = ?"
HEAD = f"SELECT data, hash FROM journal WHERE seq = {HEAD_SEQ}"
SET_HEAD = f"UPDATE journal SET data = ?, hash = ? WHERE seq = {HEAD_SEQ}"
RESET_INDEXES = (
    "DELETE FROM calls",
    "DELETE FROM idempotency_keys",
    "DELETE FROM approvals",
    "DELETE FROM journal_orphans",
)

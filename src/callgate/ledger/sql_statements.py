"""The SQL ledgers' statement texts and the builders of their multi-row forms.

Text only, no execution: the writes (`callgate.ledger.sql_writes`) run them, and a
backend translates their ``?`` placeholders into its own.
"""

from __future__ import annotations

import functools

from callgate.ledger.base import CallState
from callgate.ledger.sql_schema import HEAD_SEQ

# -- statements ----------------------------------------------------------------------
#
# Every write is a multi-row statement over a VALUES list, so that a group commit of
# N calls costs a handful of statements, not N times as many; one call is a group of
# one (and a lone read-only call writes its decision, start and outcome together:
# `_read_call`). Statements are written with ``?`` placeholders; a backend translates them.

_CALL_COLUMNS = (
    "run_id, call_id, tool, tool_version, principal, arguments, state, stage, request_hash, "
    "idempotency_key, decided_by, message, effects, approval_id, attempts, reconciled, "
    "created_at, updated_at"
)
_CHUNK = 64
"""Rows per statement: well under every database's limit on parameters."""


@functools.cache
def _values(width: int, rows: int) -> str:
    one = "(" + ", ".join("?" * width) + ")"
    return ", ".join([one] * rows)


def _returning(rows: int, columns: str) -> str:
    """How a conditional upsert of ``rows`` rows tells which it wrote (`_written`): a
    chunk returns their keys; one row's row count says it, and RETURNING would cost
    SQLite nearly as much again as the rest of the statement."""
    return f" RETURNING {columns}" if rows > 1 else ""


# The states a decision may overwrite (`callgate.ledger.base.may_decide`).
_DECIDE_FROM = {
    CallState.PROPOSED: "'proposed'",
    CallState.PENDING: "'proposed', 'pending', 'rejected'",
    CallState.REJECTED: "'proposed', 'pending', 'admitted', 'rejected'",
    CallState.ADMITTED: "'proposed', 'pending', 'rejected'",
    # An admitted call whose attempt starts in the same transaction is written as running.
    CallState.RUNNING: "'proposed', 'pending', 'rejected'",
}
_DECIDE_SET = (
    "tool = excluded.tool, "
    "tool_version = excluded.tool_version, principal = excluded.principal, "
    "arguments = excluded.arguments, state = excluded.state, stage = excluded.stage, "
    "request_hash = excluded.request_hash, idempotency_key = excluded.idempotency_key, "
    "decided_by = excluded.decided_by, message = excluded.message, "
    "effects = excluded.effects, approval_id = excluded.approval_id, "
    "updated_at = excluded.updated_at, attempts = excluded.attempts"
)


@functools.cache
def _decide_sql(state: CallState, rows: int) -> str:
    return (
        f"INSERT INTO calls ({_CALL_COLUMNS}) VALUES {_values(18, rows)} "
        f"ON CONFLICT (run_id, call_id) DO UPDATE SET {_DECIDE_SET} "
        f"WHERE calls.state IN ({_DECIDE_FROM[state]})" + _returning(rows, "run_id, call_id")
    )


# UPDATE ... FROM (VALUES ...) costs several times a plain UPDATE in SQLite, so row
# updates run as executemany; when some row does not match, rows are read back.
_TO_RUNNING = (
    "UPDATE calls SET state = 'running', attempts = ?, updated_at = ? "
    "WHERE run_id = ? AND call_id = ? AND (state = 'admitted' OR (? = 1 AND state = 'unknown'))"
)


@functools.cache
def _claim_sql(rows: int) -> str:
    return (
        "INSERT INTO idempotency_keys (key, request_hash, run_id, call_id, attempt, expires_at) "
        f"VALUES {_values(6, rows)} "
        "ON CONFLICT (key) DO UPDATE SET request_hash = excluded.request_hash, "
        "run_id = excluded.run_id, call_id = excluded.call_id, attempt = excluded.attempt, "
        "expires_at = excluded.expires_at "
        # A key whose attempt ended 'error' (the effect did not happen) holds nothing; one
        # that ended 'ok' is free once expired; one whose attempt has no known outcome
        # (still running, crashed, unknown) never expires: taking it over could run the
        # effect a second time (`callgate.ledger.base.claim_for_key`).
        "WHERE EXISTS (SELECT 1 FROM attempts a WHERE a.run_id = idempotency_keys.run_id "
        "AND a.call_id = idempotency_keys.call_id AND a.attempt = idempotency_keys.attempt "
        "AND (a.status = 'error' OR (a.status = 'ok' AND idempotency_keys.expires_at <= ?)))"
        + _returning(rows, "key, run_id, call_id")
    )


_ATTEMPT_START_COLUMNS = (
    "run_id, call_id, attempt, tool_version, idempotency_key, request_hash, started_at, worker"
)


@functools.cache
def _insert_attempts_sql(rows: int) -> str:
    return (
        f"INSERT INTO attempts ({_ATTEMPT_START_COLUMNS}) VALUES {_values(8, rows)} "
        "ON CONFLICT (run_id, call_id, attempt) DO NOTHING"
    )


_FINISH_CALL = (
    "UPDATE calls SET state = ?, stage = ?, "
    "reconciled = CASE WHEN ? = 1 THEN 1 ELSE reconciled END, updated_at = ? "
    "WHERE run_id = ? AND call_id = ? AND (state = 'running' OR (? = 1 AND state = 'unknown'))"
)
_FINISH_ATTEMPT = (
    "UPDATE attempts SET status = ?, content = ?, error = ?, stage = ?, finished_at = ?, "
    "reconciled = ?, transaction_id = ? WHERE run_id = ? AND call_id = ? AND attempt = ?"
)

# A read-only call decided, started and finished in one transaction (`_read_call`): its
# decision row written with its outcome's state, and its attempt row with its outcome.
# The call's conflict rule is the running decision's (`_decide_sql`); on a conflict,
# ``reconciled`` is set the way `_FINISH_CALL` would set it; the row count says whether
# it was written. The attempt's conflict updates exactly what `_FINISH_ATTEMPT` would.
_DECIDE_FINISHED = (
    f"INSERT INTO calls ({_CALL_COLUMNS}) VALUES {_values(18, 1)} "
    f"ON CONFLICT (run_id, call_id) DO UPDATE SET {_DECIDE_SET}, "
    "reconciled = CASE WHEN ? = 1 THEN 1 ELSE calls.reconciled END "
    f"WHERE calls.state IN ({_DECIDE_FROM[CallState.RUNNING]})"
)
_INSERT_FINISHED_ATTEMPT = (
    f"INSERT INTO attempts ({_ATTEMPT_START_COLUMNS}, status, content, error, stage, "
    f"finished_at, reconciled, transaction_id) VALUES {_values(15, 1)} "
    "ON CONFLICT (run_id, call_id, attempt) DO UPDATE SET status = excluded.status, "
    "content = excluded.content, error = excluded.error, stage = excluded.stage, "
    "finished_at = excluded.finished_at, reconciled = excluded.reconciled, "
    "transaction_id = excluded.transaction_id"
)

_CALL_STAMP = "SELECT state, updated_at FROM calls WHERE run_id = ? AND call_id = ?"
_CALL_EXISTS = "SELECT 1 FROM calls WHERE run_id = ? AND call_id = ?"
_KEY = (
    "SELECT k.request_hash, k.run_id, k.call_id, k.expires_at, "
    "a.status, a.content, a.error, a.stage, a.finished_at, a.reconciled, a.transaction_id "
    "FROM idempotency_keys k LEFT JOIN attempts a "
    "ON a.run_id = k.run_id AND a.call_id = k.call_id AND a.attempt = k.attempt "
    "WHERE k.key = ?"
)
_SETTLE = (
    "UPDATE calls SET state = ?, stage = ?, attempts = 0, updated_at = ? "
    "WHERE run_id = ? AND call_id = ? AND state = 'running'"
)


_INSERT_AUDIT = (
    "INSERT INTO audit (seq, at, kind, run_id, call_id, data, prev_hash, hash) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_SET_HEAD = f"UPDATE audit SET data = ?, hash = ? WHERE seq = {HEAD_SEQ}"

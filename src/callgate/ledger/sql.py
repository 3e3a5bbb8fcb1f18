"""What SQLite and PostgreSQL ledgers share: the schema, every statement, every rule.

A backend supplies a connection, a transaction runner and its dialect (the
placeholder, the column types, how to lock the audit head and how to commit
without waiting for the disk); the writes are written here once, each over
every item of its kind in a transaction (`run_items`; a lone call's items take
a shorter way to the same rows), and so is the group commit that lets
concurrent async callers share a transaction.

Durability classes, the reason this module exists:

* a side-effecting attempt's start and outcome commit **durably** before the
  ledger call returns (the handler runs only after its attempt is on disk);
* an ``admitted`` decision and a read-only attempt's start are **deferred**:
  they ride along with the next transaction, which always runs them first;
* everything else (rejections, read-only outcomes, events) commits **lightly**:
  visible to other processes and safe from a crash of this process, but not
  waited onto the disk (SQLite ``synchronous=NORMAL``, PostgreSQL
  ``synchronous_commit=off``); the next durable commit makes it durable too.
"""

from __future__ import annotations

import abc
import functools
import itertools
import json
import operator
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from typing import Any, Protocol

import anyio
import anyio.to_thread
import pydantic_core

from callgate.approvals import Approvals
from callgate.ledger.base import (
    GENESIS,
    AttemptFinish,
    AttemptRecord,
    AttemptStart,
    AuditCheck,
    AuditRecord,
    CallRecord,
    CallState,
    Claim,
    ClaimKind,
    Ledger,
    LedgerError,
    Outcome,
    audit_hash,
    claim_for_key,
    default_worker,
    finish_data,
    settled_state,
    verify_chain,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SqlLedger", "apply_migrations", "pending_migrations"]


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
HEAD_QUERY = f"SELECT data, hash FROM audit WHERE seq = {HEAD_SEQ}"

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


def _dumps(data: Any) -> str:
    return pydantic_core.to_json(data, fallback=str).decode()


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


def _written(cur: Cursor, rows: Sequence[Any], key: Callable[[Any], Any]) -> Iterable[Any]:
    """The keys of the rows a conditional upsert wrote (``key``: a row's, as returned)."""
    if len(rows) == 1:
        return (key(rows[0]),) if cur.rowcount == 1 else ()
    return [tuple(row) for row in cur.fetchall()]


_DECIDE_FROM = {
    CallState.PROPOSED: "'proposed'",
    CallState.PENDING: "'proposed', 'pending'",
    CallState.REJECTED: "'proposed', 'pending', 'admitted'",
    CallState.ADMITTED: "'proposed', 'pending'",
    # An admitted call whose attempt starts in the same transaction is written as running.
    CallState.RUNNING: "'proposed', 'pending'",
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
        "WHERE idempotency_keys.expires_at <= ? "
        # A key whose attempt has no known outcome (still running, crashed, unknown) never
        # expires: taking it over could run the effect a second time.
        "AND EXISTS (SELECT 1 FROM attempts a WHERE a.run_id = idempotency_keys.run_id "
        "AND a.call_id = idempotency_keys.call_id AND a.attempt = idempotency_keys.attempt "
        "AND a.status IN ('ok', 'error'))" + _returning(rows, "key, run_id, call_id")
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


def _chunks(rows: Sequence[Any], key: Callable[[Any], Any] | None = None) -> list[Sequence[Any]]:
    """Rows in order, cut into statements of at most `_CHUNK` rows; with ``key``, also cut
    before a row whose key is already in the chunk (one statement may not touch a row twice)."""
    if len(rows) <= 1:  # one call: the usual case
        return [rows] if rows else []
    if key is None:
        return [rows[i : i + _CHUNK] for i in range(0, len(rows), _CHUNK)]
    chunks: list[Sequence[Any]] = []
    chunk: list[Any] = []
    seen: set[Any] = set()
    for row in rows:
        k = key(row)
        if len(chunk) >= _CHUNK or k in seen:
            chunks.append(chunk)
            chunk, seen = [], set()
        chunk.append(row)
        seen.add(k)
    chunks.append(chunk)
    return chunks


class _Tx:
    """One open transaction: a cursor, plus the audit records it will append at the end."""

    __slots__ = ("_audit", "cur", "sql")

    def __init__(self, cur: Cursor, sql: Callable[[str], str]) -> None:
        self.cur = cur
        self.sql = sql
        self._audit: list[tuple[float, str, str, str | None, str]] = []

    def x(self, statement: str, params: Sequence[Any] = ()) -> Cursor:
        """Execute one statement (written with ``?`` placeholders)."""
        self.cur.execute(self.sql(statement), params)
        return self.cur

    def rows(self, statement: str, rows: Sequence[Sequence[Any]], *extra: Any) -> Cursor:
        """Execute a multi-row statement, written for ``len(rows)`` rows, over ``rows``
        (``extra`` parameters follow them)."""
        if len(rows) == 1:
            params: Sequence[Any] = (*rows[0], *extra) if extra else rows[0]
        else:
            params = [*itertools.chain.from_iterable(rows), *extra]
        self.cur.execute(self.sql(statement), params)
        return self.cur

    def many(self, statement: str, rows: Sequence[Sequence[Any]]) -> int:
        """Execute one statement for each row; how many rows it changed in all."""
        if len(rows) == 1:
            self.cur.execute(self.sql(statement), rows[0])
        else:
            self.cur.executemany(self.sql(statement), rows)
        return int(self.cur.rowcount)

    def event(self, kind: str, run_id: str, call_id: str | None, data: Mapping[str, Any]) -> None:
        """Queue an audit record; it is chained and written when the transaction ends."""
        self._audit.append((time.time(), kind, run_id, call_id, _dumps(data)))

    def write_audit(self, head_sql: str) -> None:
        """Chain the queued audit records to the head, insert them and move the head."""
        queued = self._audit
        if not queued:
            return
        cur = self.cur
        cur.execute(head_sql)
        last, prev = cur.fetchone()
        seq = int(last)
        rows: list[tuple[Any, ...]] = []
        for at, kind, run_id, call_id, data in queued:
            seq += 1
            h = audit_hash(prev, seq, at, kind, run_id, call_id, data)
            rows.append((seq, at, kind, run_id, call_id, data, prev, h))
            prev = h
        queued.clear()
        self.many(_INSERT_AUDIT, rows)
        cur.execute(self.sql(_SET_HEAD), (str(seq), prev))


# -- the writes: each takes every item of its kind in a transaction ------------------

DECIDE, BEGIN, FINISH, EVENT, APPLY = range(5)
Item = tuple[int, Any]
"""One write: its kind and its payload (a record, a start, a finish, an event, or, for
``APPLY``, a function of the open `_Tx` that must not raise: approvals use it)."""

_NOTHING: frozenset[Any] = frozenset()
_call_key = operator.itemgetter(0, 1)
"""A decision row's call: (run id, call id)."""
_claim_key = operator.itemgetter(0, 2, 3)
"""A claim row's key, run id and call id."""


def _decide(
    tx: _Tx, records: Sequence[CallRecord], starting: Mapping[tuple[str, str], AttemptStart]
) -> set[tuple[str, str]]:
    """Write decisions; the calls in ``starting`` (admitted, with an attempt starting in
    this transaction) are written as running. Returns those that were written so."""
    by_state: dict[CallState, list[tuple[Any, ...]]] = {}
    for r in records:
        start = (
            starting.get((r.run_id, r.call_id))
            if starting and r.state is CallState.ADMITTED
            else None
        )
        state = CallState.RUNNING if start is not None else r.state
        row = (
            r.run_id,
            r.call_id,
            r.tool,
            r.tool_version,
            r.principal,
            r.arguments,
            state.value,
            r.stage,
            r.request_hash,
            r.idempotency_key,
            r.decided_by,
            r.message,
            _dumps(r.effects),
            r.approval_id,
            start.attempt if start is not None else r.attempts,
            int(r.reconciled),
            r.created_at,
            start.started_at if start is not None else r.updated_at,
        )
        rows = by_state.get(state)
        if rows is None:
            by_state[state] = [row]
        else:
            rows.append(row)
    running: set[tuple[str, str]] = set()
    for state, rows in by_state.items():
        for chunk in _chunks(rows, _call_key):
            cur = tx.rows(_decide_sql(state, len(chunk)), chunk)
            if state is CallState.RUNNING:
                running.update(_written(cur, chunk, _call_key))
    for r in records:
        _decision_event(tx, r)
    return running


def _decision_event(tx: _Tx, r: CallRecord) -> None:
    tx.event(
        f"call.{r.state.value}",
        r.run_id,
        r.call_id,
        {
            "actor": r.principal,
            "tool": r.tool,
            "tool_version": r.tool_version,
            "arguments": r.arguments,
            "stage": r.stage,
            "decided_by": r.decided_by,
            "effects": list(r.effects),
            "approval_id": r.approval_id,
            "message": r.message,
        },
    )


def _started_event(tx: _Tx, s: AttemptStart, worker: str) -> None:
    tx.event(
        "attempt.started",
        s.run_id,
        s.call_id,
        {
            "actor": worker,
            "attempt": s.attempt,
            "idempotency_key": s.idempotency_key,
            "request_hash": s.request_hash,
            "tool_version": s.tool_version,
        },
    )


def _outcome_from(row: Sequence[Any]) -> Outcome | None:
    """An outcome from (status, content, error, stage, finished_at, reconciled, transaction_id)."""
    if row[0] is None:
        return None
    return Outcome(
        status=row[0],
        content=row[1] or "",
        error=row[2],
        stage=row[3] or "execute",
        finished_at=row[4] or 0.0,
        reconciled=bool(row[5]),
        transaction_id=row[6],
    )


def _existing_claim(tx: _Tx, start: AttemptStart) -> Claim | None:
    """What the key's current holder says about this attempt (None: it may be taken)."""
    row = tx.x(_KEY, (start.idempotency_key,)).fetchone()
    if row is None:
        return None
    return claim_for_key(
        start,
        request_hash=row[0],
        holder=(row[1], row[2]),
        expires_at=row[3],
        outcome=_outcome_from(row[4:]),
    )


def _start_stamp(s: AttemptStart) -> tuple[str, str, str, float]:
    return s.run_id, s.call_id, "running", s.started_at


def _taking_key(taking: tuple[int, AttemptStart]) -> str:
    return taking[1].idempotency_key


def _begin(
    tx: _Tx, starts: Sequence[AttemptStart], worker: str, premoved: Set[tuple[str, str]]
) -> list[Claim]:
    """Claim keys and record attempts as running; a key already held settles its call.

    ``premoved``: calls already written as running by their decision in this transaction.
    """
    moving = [s for s in starts if (s.run_id, s.call_id) not in premoved] if premoved else starts
    if not moving:  # all written as running by their decisions
        moved = [True] * len(starts)
    else:
        changed = _changed(
            tx,
            _TO_RUNNING,
            [
                (
                    s.attempt,
                    s.started_at,
                    s.run_id,
                    s.call_id,
                    int(s.attempt > 1 and not s.side_effecting),
                )
                for s in moving
            ],
            moving,
            _start_stamp,
        )
        if moving is starts:
            moved = changed
        else:
            rest = iter(changed)
            moved = [(s.run_id, s.call_id) in premoved or next(rest) for s in starts]
    claims: list[Claim] = [_RUN] * len(starts)
    taking: list[tuple[int, AttemptStart]] = []
    for i, s in enumerate(starts):
        if not s.side_effecting:
            continue
        if moved[i] or tx.x(_CALL_EXISTS, (s.run_id, s.call_id)).fetchone() is None:
            taking.append((i, s))
        else:
            # The call id came back after its call ran: answer by its key, never run again.
            claims[i] = _existing_claim(tx, s) or _held(s)
    if taking:
        now = time.time()
        for chunk in _chunks(taking, _taking_key):
            rows: list[tuple[Any, ...]] = [
                (
                    s.idempotency_key,
                    s.request_hash,
                    s.run_id,
                    s.call_id,
                    s.attempt,
                    s.key_expires_at,
                )
                for _, s in chunk
            ]
            taken = set(_written(tx.rows(_claim_sql(len(chunk)), rows, now), rows, _claim_key))
            for i, s in chunk:
                if (s.idempotency_key, s.run_id, s.call_id) not in taken:
                    claims[i] = _existing_claim(tx, s) or _held(s)
    running = []
    for s, claim, was_moved in zip(starts, claims, moved, strict=True):
        if claim is _RUN:
            running.append(s)
            continue
        if was_moved:  # undo the move to running: the call settles
            state, stage = settled_state(claim)
            tx.x(_SETTLE, (state.value, stage, s.started_at, s.run_id, s.call_id))
        tx.event(
            f"idempotency.{claim.kind.value}",
            s.run_id,
            s.call_id,
            {"actor": worker, "holder": list(claim.holder) if claim.holder else None},
        )
    for chunk in _chunks(running):
        tx.rows(
            _insert_attempts_sql(len(chunk)),
            [
                (
                    s.run_id,
                    s.call_id,
                    s.attempt,
                    s.tool_version,
                    s.idempotency_key,
                    s.request_hash,
                    s.started_at,
                    worker,
                )
                for s in chunk
            ],
        )
    for s in running:
        _started_event(tx, s, worker)
    return claims


def _held(start: AttemptStart) -> Claim:
    return Claim(kind=ClaimKind.IN_PROGRESS, holder=(start.run_id, start.call_id))


_RUN = Claim(kind=ClaimKind.RUN)


def _finish_stamp(f: AttemptFinish) -> tuple[str, str, str, float]:
    return f.run_id, f.call_id, f.outcome.status, f.outcome.finished_at


def _finish(tx: _Tx, finishes: Sequence[AttemptFinish], worker: str) -> list[bool]:
    """Record outcomes; a call whose state forbids it keeps its record (False)."""
    rows = []
    for f in finishes:
        o = f.outcome
        rows.append(
            (
                o.status,
                o.stage,
                int(o.reconciled),
                o.finished_at,
                f.run_id,
                f.call_id,
                int(o.reconciled and o.status != "unknown"),
            )
        )
    applied = _changed(tx, _FINISH_CALL, rows, finishes, _finish_stamp)
    if all(applied):
        done = finishes
    else:
        applied = [
            ok or tx.x(_CALL_EXISTS, (f.run_id, f.call_id)).fetchone() is None
            for f, ok in zip(finishes, applied, strict=True)
        ]
        done = [f for f, ok in zip(finishes, applied, strict=True) if ok]
    if done:
        tx.many(
            _FINISH_ATTEMPT,
            [
                (
                    f.outcome.status,
                    f.outcome.content,
                    f.outcome.error,
                    f.outcome.stage,
                    f.outcome.finished_at,
                    int(f.outcome.reconciled),
                    f.outcome.transaction_id,
                    f.run_id,
                    f.call_id,
                    f.attempt,
                )
                for f in done
            ],
        )
    for f in done:
        tx.event(f"attempt.{f.outcome.status}", f.run_id, f.call_id, finish_data(f, worker))
    return applied


def _read_call(tx: _Tx, r: CallRecord, s: AttemptStart, f: AttemptFinish, worker: str) -> list[Any]:
    """A read-only call's decision, start and outcome, as a lone read-only call commits
    them: two statements where `_decide`, `_begin` and `_finish` take four.

    Same rows, results and audit records: once the decision is written as running,
    the start only inserts the attempt and the outcome's updates are certain to apply,
    so the decision is written with the outcome and the attempt inserted with it. If the
    decision is not written (the call is past deciding), nothing was, and the start
    and the outcome go the general way.
    """
    o = f.outcome
    reconciled = int(o.reconciled)
    written = tx.x(
        _DECIDE_FINISHED,
        (
            r.run_id,
            r.call_id,
            r.tool,
            r.tool_version,
            r.principal,
            r.arguments,
            o.status,
            o.stage,
            r.request_hash,
            r.idempotency_key,
            r.decided_by,
            r.message,
            _dumps(r.effects),
            r.approval_id,
            s.attempt,
            reconciled or int(r.reconciled),
            r.created_at,
            o.finished_at,
            reconciled,
        ),
    ).rowcount
    _decision_event(tx, r)
    if written != 1:
        return [None, _begin(tx, (s,), worker, _NOTHING)[0], _finish(tx, (f,), worker)[0]]
    tx.x(
        _INSERT_FINISHED_ATTEMPT,
        (
            s.run_id,
            s.call_id,
            s.attempt,
            s.tool_version,
            s.idempotency_key,
            s.request_hash,
            s.started_at,
            worker,
            o.status,
            o.content,
            o.error,
            o.stage,
            o.finished_at,
            reconciled,
            o.transaction_id,
        ),
    )
    _started_event(tx, s, worker)
    tx.event(f"attempt.{o.status}", f.run_id, f.call_id, finish_data(f, worker))
    return [None, _RUN, True]


def _is_read_call(items: Sequence[Item]) -> bool:
    """Whether ``items`` are one read-only call's decision, first start and its outcome."""
    (k0, r), (k1, s), (k2, f) = items
    return (
        k0 == DECIDE
        and k1 == BEGIN
        and k2 == FINISH
        and r.state is CallState.ADMITTED
        and not s.side_effecting
        and s.attempt == 1
        and f.attempt == 1
        and r.run_id == s.run_id == f.run_id
        and r.call_id == s.call_id == f.call_id
    )


def _changed(
    tx: _Tx,
    statement: str,
    rows: Sequence[Sequence[Any]],
    items: Sequence[Any],
    stamp: Callable[[Any], tuple[str, str, str, float]],
) -> list[bool]:
    """Run a conditional update of calls for every row; which rows it changed.

    All of them, usually. When some did not match (a state the change is not
    allowed from), each call is read back: a changed one carries this
    change's stamp (its new state and time). ``stamp``: an item's run id,
    call id, state and time.
    """
    if not rows:
        return []
    if tx.many(statement, rows) == len(rows):
        return [True] * len(rows)
    out = []
    for item in items:
        run_id, call_id, state, at = stamp(item)
        current = tx.x(_CALL_STAMP, (run_id, call_id)).fetchone()
        out.append(current is not None and current[0] == state and current[1] == at)
    return out


def run_items(tx: _Tx, items: Sequence[Item], worker: str, head_sql: str) -> list[Any]:
    """Apply every item in one transaction: decisions, then attempt starts, then outcomes,
    then events, then ``APPLY`` functions (each kind in the order given), then the audit
    records they produced."""
    results: list[Any]
    if len(items) == 1:  # a lone write: nothing to group
        results = [_run_one(tx, items[0], worker)]
    elif len(items) == 2 and items[0][0] == DECIDE and items[1][0] == BEGIN:
        # A decision and a start (a lone side-effecting call's first transaction):
        # what `_run_grouped` does with them, minus the grouping.
        r, s = items[0][1], items[1][1]
        starting = {(s.run_id, s.call_id): s} if s.attempt == 1 else {}
        results = [None, _begin(tx, (s,), worker, _decide(tx, (r,), starting))[0]]
    elif len(items) == 3 and _is_read_call(items):  # a lone read-only call
        results = _read_call(tx, items[0][1], items[1][1], items[2][1], worker)
    else:
        results = _run_grouped(tx, items, worker)
    tx.write_audit(head_sql)
    return results


def _run_one(tx: _Tx, item: Item, worker: str) -> Any:
    """One item on its own: what `_run_grouped` does with it, minus the grouping."""
    kind, payload = item
    if kind == DECIDE:
        _decide(tx, (payload,), {})
        return None
    if kind == BEGIN:
        return _begin(tx, (payload,), worker, _NOTHING)[0]
    if kind == FINISH:
        return _finish(tx, (payload,), worker)[0]
    if kind == EVENT:
        event_kind, run_id, call_id, data = payload
        tx.event(event_kind, run_id, call_id, data)
        return None
    return payload(tx)


def _run_grouped(tx: _Tx, items: Sequence[Item], worker: str) -> list[Any]:
    """Items of every kind: each kind's items in one write (see `run_items`)."""
    by_kind: tuple[list[int], ...] = ([], [], [], [], [])
    for i, (kind, _) in enumerate(items):
        by_kind[kind].append(i)
    decides, begins, finishes, events, applies = by_kind
    results: list[Any] = [None] * len(items)
    running: Set[tuple[str, str]] = _NOTHING
    if decides:
        starting: dict[tuple[str, str], AttemptStart] = {}
        for i in begins:
            start = items[i][1]
            if start.attempt == 1:
                starting[(start.run_id, start.call_id)] = start
        running = _decide(tx, [items[i][1] for i in decides], starting)
    if begins:
        claims = _begin(tx, [items[i][1] for i in begins], worker, running)
        for i, claim in zip(begins, claims, strict=True):
            results[i] = claim
    if finishes:
        applied = _finish(tx, [items[i][1] for i in finishes], worker)
        for i, ok in zip(finishes, applied, strict=True):
            results[i] = ok
    for i in events:
        kind, run_id, call_id, data = items[i][1]
        tx.event(kind, run_id, call_id, data)
    for i in applies:
        results[i] = items[i][1](tx)
    return results


# -- the ledger -------------------------------------------------------------------


class _Waiter:
    """One async caller's item in a group commit, and its result."""

    __slots__ = ("durable", "error", "item", "result")

    def __init__(self, item: Item, durable: bool) -> None:
        self.item = item
        self.durable = durable
        self.result: Any = None
        self.error: BaseException | None = None


class _Group:
    """The group commit of one event loop: the queue, whether a leader drains it, and
    the event set once the queue's commit is done (one per queue, made by the first
    caller that waits for it, not one per caller)."""

    __slots__ = ("done", "leading", "queue")

    def __init__(self) -> None:
        self.queue: list[_Waiter] = []
        self.done: anyio.Event | None = None
        self.leading = False


def _head_problem(records: Sequence[AuditRecord], problem: str) -> AuditCheck:
    checked = verify_chain(records, None)
    return AuditCheck(
        ok=False,
        records=checked.records,
        head=checked.head,
        problems=(*checked.problems, problem),
        first_bad_seq=checked.first_bad_seq or (checked.records + 1),
    )


class SqlLedger(Ledger):
    """The writes, reads and group commit of a SQL ledger.

    A backend adds a connection and a transaction runner (`_transact`) and
    a read (`_query`). Writes that need not be durable on their own are
    *deferred*: kept in memory and applied first by the next transaction.
    """

    def __init__(self, *, worker: str | None) -> None:
        self.worker = worker or default_worker()
        self._deferred: list[Item] = []
        self._deferred_lock = threading.Lock()
        self._groups: dict[int, _Group] = {}

    # -- what a backend provides --------------------------------------------------

    @abc.abstractmethod
    def _transact(self, items: Sequence[Item], *, durable: bool) -> list[Any]:
        """Apply the deferred items, then ``items``, in one transaction (`run_items`).

        ``durable``: return only once the commit is on disk.
        """

    @abc.abstractmethod
    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run one read statement (``?`` placeholders) and return its rows."""

    # -- helpers for backends -----------------------------------------------------

    def _take_deferred(self) -> list[Item]:
        with self._deferred_lock:
            taken, self._deferred = self._deferred, []
        return taken

    def _restore_deferred(self, items: list[Item]) -> None:
        """Put back deferred writes a failed transaction took, ahead of newer ones."""
        if items:
            with self._deferred_lock:
                self._deferred[:0] = items

    def _defer(self, item: Item) -> None:
        with self._deferred_lock:
            self._deferred.append(item)

    def _flush(self) -> None:
        """Commit deferred writes (lightly) so that reads see them."""
        if self._deferred:
            self._transact((), durable=False)

    # -- writes -----------------------------------------------------------------

    def record_decision(self, record: CallRecord) -> None:
        if record.state is CallState.ADMITTED:
            self._defer((DECIDE, record))
        else:
            self._transact(((DECIDE, record),), durable=False)

    def begin_attempt(self, start: AttemptStart) -> Claim:
        if not start.side_effecting:
            self._defer((BEGIN, start))
            return _RUN
        result: Claim = self._transact(((BEGIN, start),), durable=True)[0]
        return result

    def finish_attempt(self, finish: AttemptFinish) -> bool:
        result: bool = self._transact(((FINISH, finish),), durable=finish.side_effecting)[0]
        return result

    def record_event(
        self, kind: str, *, run_id: str, call_id: str | None, data: Mapping[str, Any]
    ) -> None:
        self._transact(((EVENT, (kind, run_id, call_id, dict(data))),), durable=False)

    # -- group commit -------------------------------------------------------------

    async def abegin_attempt(self, start: AttemptStart) -> Claim:
        if not start.side_effecting:
            return self.begin_attempt(start)
        result: Claim = await self._grouped((BEGIN, start), durable=True)
        return result

    async def afinish_attempt(self, finish: AttemptFinish) -> bool:
        result: bool = await self._grouped((FINISH, finish), durable=finish.side_effecting)
        return result

    async def _grouped(self, item: Item, *, durable: bool) -> Any:
        """Apply ``item`` in the next shared transaction of this event loop; its result.

        The first caller leads: it yields once so that concurrent callers can
        queue, then commits everything queued, in a worker thread, again and
        again until the queue is empty. Callers arriving during a commit join
        the next one. Waiting is shielded from cancellation: the item is in a
        transaction already, so its caller must learn the result.
        """
        ident = threading.get_ident()
        group = self._groups.get(ident)
        if group is None:
            group = self._groups.setdefault(ident, _Group())
        waiter = _Waiter(item, durable)
        group.queue.append(waiter)
        with anyio.CancelScope(shield=True):
            if group.leading:
                if group.done is None:
                    group.done = anyio.Event()
                await group.done.wait()
            else:
                group.leading = True
                try:
                    await anyio.sleep(0)
                    while group.queue:
                        batch, group.queue = group.queue, []
                        done, group.done = group.done, None
                        await anyio.to_thread.run_sync(self._commit_group, batch)
                        if done is not None:
                            done.set()
                finally:
                    group.leading = False
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    def _commit_group(self, batch: list[_Waiter]) -> None:
        """One transaction for the whole batch; if it fails, each item alone, to isolate it."""
        durable = any(w.durable for w in batch)
        try:
            results = self._transact([w.item for w in batch], durable=durable)
        except Exception:
            for w in batch:
                try:
                    w.result = self._transact([w.item], durable=w.durable)[0]
                except Exception as exc:
                    w.error = exc
            return
        for w, result in zip(batch, results, strict=True):
            w.result = result

    # -- reads ------------------------------------------------------------------

    def get_call(self, run_id: str, call_id: str) -> CallRecord | None:
        self._flush()
        rows = self._query(
            f"SELECT {_CALL_COLUMNS} FROM calls WHERE run_id = ? AND call_id = ?",
            (run_id, call_id),
        )
        return _call_from(rows[0]) if rows else None

    def calls(
        self,
        *,
        run_id: str | None = None,
        state: CallState | None = None,
        call_id: str | None = None,
    ) -> Sequence[CallRecord]:
        self._flush()
        where, params = [], []
        if state is not None:  # a literal, so that the partial index on open states applies
            where.append(f"state = '{CallState(state).value}'")
        for column, value in (("run_id", run_id), ("call_id", call_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        clause = " WHERE " + " AND ".join(where) if where else ""
        rows = self._query(
            f"SELECT {_CALL_COLUMNS} FROM calls{clause} ORDER BY created_at, run_id, call_id",
            params,
        )
        return [_call_from(r) for r in rows]

    def attempts(self, run_id: str, call_id: str) -> Sequence[AttemptRecord]:
        self._flush()
        rows = self._query(
            "SELECT run_id, call_id, attempt, tool_version, idempotency_key, request_hash, "
            "started_at, worker, status, content, error, stage, finished_at, reconciled, "
            "transaction_id FROM attempts WHERE run_id = ? AND call_id = ? ORDER BY attempt",
            (run_id, call_id),
        )
        return [
            AttemptRecord(
                run_id=r[0],
                call_id=r[1],
                attempt=r[2],
                tool_version=r[3],
                idempotency_key=r[4],
                request_hash=r[5],
                started_at=r[6],
                worker=r[7],
                outcome=_outcome_from(r[8:]),
            )
            for r in rows
        ]

    def audit(self) -> Sequence[AuditRecord]:
        self._flush()
        rows = self._query(
            "SELECT seq, at, kind, run_id, call_id, data, prev_hash, hash FROM audit "
            f"WHERE seq < {HEAD_SEQ} ORDER BY seq"
        )
        return [
            AuditRecord(
                seq=r[0],
                at=r[1],
                kind=r[2],
                run_id=r[3],
                call_id=r[4],
                data=_loads(r[5]),
                prev_hash=r[6],
                hash=r[7],
                data_json=r[5],
            )
            for r in rows
        ]

    def audit_head(self) -> tuple[int, str] | None:
        self._flush()
        rows = self._query(HEAD_QUERY)
        return (int(rows[0][0]), rows[0][1]) if rows else None

    def verify(self) -> AuditCheck:
        """Verify the chain; a missing or unreadable head row is tampering too.

        The head row is written with the first audit record and never removed,
        so deleting the end of the trail together with the head must not pass.
        """
        records = self.audit()
        try:
            head = self.audit_head()
        except (TypeError, ValueError):
            return _head_problem(records, "the ledger's head row is unreadable (altered)")
        if head is None:
            called = self._query("SELECT COUNT(*) FROM calls")[0][0]
            if records or called:
                return _head_problem(
                    records,
                    "the ledger's head row is missing: the end of the audit trail (or all "
                    "of it) was deleted",
                )
        return verify_chain(records, head)

    # -- approvals --------------------------------------------------------------

    def approvals(self) -> Approvals:
        """Approval requests in this database: they survive a restart and are shared by
        every process that opens it (`callgate.ledger.approvals_sql`)."""
        from callgate.ledger.approvals_sql import SqlApprovals

        return SqlApprovals(self)


def _loads(text: str) -> Mapping[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {"unreadable": text}
    return value if isinstance(value, dict) else {"value": value}


def _call_from(r: Sequence[Any]) -> CallRecord:
    return CallRecord(
        run_id=r[0],
        call_id=r[1],
        tool=r[2],
        tool_version=r[3],
        principal=r[4],
        arguments=r[5],
        state=CallState(r[6]),
        stage=r[7],
        request_hash=r[8],
        idempotency_key=r[9],
        decided_by=r[10],
        message=r[11],
        effects=tuple(json.loads(r[12])),
        approval_id=r[13],
        attempts=r[14],
        reconciled=bool(r[15]),
        created_at=r[16],
        updated_at=r[17],
    )


def apply_migrations(cur: Cursor, sql: Callable[[str], str], types: Mapping[str, str]) -> int:
    """Bring the schema to `SCHEMA_VERSION` inside the caller's transaction; the old version.

    ``types`` fills the dialect's column types (``real``, ``bigint``, ``without_rowid``)
    into the DDL.
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
            cur.execute(statement.format(**types))
        cur.execute(
            sql("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)"),
            (version, time.time()),
        )
    return current

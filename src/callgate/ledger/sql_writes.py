"""The SQL ledgers' writes: each takes every item of its kind in one transaction.

`run_items` applies a transaction's items (decisions, attempt starts, outcomes,
events and ``APPLY`` functions) over an open `_Tx`, then chains their audit
records. The statements they run are in `callgate.ledger.sql_statements`.
"""

from __future__ import annotations

import itertools
import operator
import time
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from typing import Any

import pydantic_core

from callgate.ledger.base import (
    AttemptFinish,
    AttemptStart,
    CallRecord,
    CallState,
    Claim,
    ClaimKind,
    Outcome,
    audit_hash,
    claim_for_key,
    finish_data,
    settled_state,
)
from callgate.ledger.sql_schema import Cursor
from callgate.ledger.sql_statements import (
    _CALL_EXISTS,
    _CALL_STAMP,
    _CHUNK,
    _DECIDE_FINISHED,
    _FINISH_ATTEMPT,
    _FINISH_CALL,
    _INSERT_AUDIT,
    _INSERT_FINISHED_ATTEMPT,
    _KEY,
    _SET_HEAD,
    _SETTLE,
    _TO_RUNNING,
    _claim_sql,
    _decide_sql,
    _insert_attempts_sql,
)

__all__ = ["APPLY", "BEGIN", "DECIDE", "EVENT", "FINISH", "Item", "run_items"]


def _dumps(data: Any) -> str:
    return pydantic_core.to_json(data, fallback=str).decode()


def _written(cur: Cursor, rows: Sequence[Any], key: Callable[[Any], Any]) -> Iterable[Any]:
    """The keys of the rows a conditional upsert wrote (``key``: a row's, as returned)."""
    if len(rows) == 1:
        return (key(rows[0]),) if cur.rowcount == 1 else ()
    return [tuple(row) for row in cur.fetchall()]


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
            [_attempt_row(s, worker) for s in chunk],
        )
    for s in running:
        _started_event(tx, s, worker)
    return claims


def _attempt_row(s: AttemptStart, worker: str) -> tuple[Any, ...]:
    """An attempt's start as the ``attempts`` row's first columns (`_ATTEMPT_START_COLUMNS`)."""
    return (
        s.run_id,
        s.call_id,
        s.attempt,
        s.tool_version,
        s.idempotency_key,
        s.request_hash,
        s.started_at,
        worker,
    )


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
            *_attempt_row(s, worker),
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

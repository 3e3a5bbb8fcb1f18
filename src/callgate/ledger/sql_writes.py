"""The SQL ledgers' writer: every change is a journal record, and the rows follow from it.

`run_items` applies a transaction's items in order over an open `Transaction`. Each
item reads the rows it decides by (the call, the key, the approval), appends
the records that say what happened, and `callgate.ledger.journal.apply` turns
each record into the rows it changes; at the end of the transaction the new
records and the changed rows are written, one multi-row statement per table,
and the journal's head moves.

The transaction starts by reading (on PostgreSQL: locking) the journal's head,
so writers take turns and each decides on the rows the previous one left.
A process keeps the rows it read or wrote since its last transaction
(`RowCache`): while the head is the one its last transaction left, nobody
else wrote, and the rows are read from memory, not the database.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pydantic_core

from callgate.approvals import (
    ApprovalRequest,
    ApprovalStatus,
    decided_data,
    requested_data,
    undecidable,
    used_data,
)
from callgate.errors import LedgerError
from callgate.ledger.base import (
    AttemptFinish,
    AttemptStart,
    AuditRecord,
    CallRecord,
    CallState,
    Claim,
    ClaimKind,
    Outcome,
    audit_hash,
    claim_for_key,
    may_finish,
    settled_state,
)
from callgate.ledger.budgets import BudgetCharge
from callgate.ledger.journal import (
    MIGRATED,
    KeyRow,
    apply,
    decision_data,
    finished_data,
    outcome_from_record,
    started_data,
)
from callgate.ledger.sql_schema import Cursor
from callgate.ledger.sql_statements import (
    CHUNK,
    JOURNAL_COLUMNS,
    RESET_INDEXES,
    SELECT_APPROVAL,
    SELECT_CALL,
    SELECT_KEY,
    SELECT_RECORD,
    SET_HEAD,
    UPDATE_CALL_STATUS,
    insert_journal,
    insert_orphans,
    upsert_approvals,
    upsert_calls,
    upsert_keys,
)
from callgate.ledger.truth import JournalTruth

__all__ = [
    "BEGIN",
    "CONSUME",
    "DECIDE",
    "DECIDE_APPROVAL",
    "EVENT",
    "FINISH",
    "RELEASE",
    "REQUEST",
    "RUN",
    "RUN_OPEN",
    "RUN_READ",
    "Consume",
    "Item",
    "RowCache",
    "Transaction",
    "approval_from_row",
    "call_from_row",
    "key_from_row",
    "record_from_row",
    "run_items",
]

DECIDE, BEGIN, FINISH, EVENT, REQUEST, DECIDE_APPROVAL, CONSUME, RELEASE, RUN_OPEN, RUN_READ = (
    range(10)
)
Item = tuple[int, Any]
"""One write: its kind and its payload (plain data, so that `storable` can rewrite it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Consume:
    """The payload of a ``CONSUME`` item: the effect an approval must be bound to."""

    principal: str
    tool: str
    arguments_hash: str
    resource_version: str | None
    run_id: str
    now: float
    used_by: str | None


def _dumps(data: Any) -> str:
    return pydantic_core.to_json(data, fallback=str).decode()


# -- rows ---------------------------------------------------------------------------------


def call_from_row(r: Sequence[Any]) -> CallRecord:
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
        effects=tuple(pydantic_core.from_json(r[12])),
        approval_id=r[13],
        attempts=r[14],
        reconciled=bool(r[15]),
        created_at=r[16],
        updated_at=r[17],
        records=seqs_from(r[18]) if len(r) > 18 else (),
    )


def call_row(c: CallRecord) -> tuple[Any, ...]:
    return (
        c.run_id,
        c.call_id,
        c.tool,
        c.tool_version,
        c.principal,
        c.arguments,
        c.state.value,
        c.stage,
        c.request_hash,
        c.idempotency_key,
        c.decided_by,
        c.message,
        _dumps(list(c.effects)),
        c.approval_id,
        c.attempts,
        int(c.reconciled),
        c.created_at,
        c.updated_at,
        seqs_text(c.records),
    )


def seqs_text(seqs: tuple[int, ...]) -> str:
    """A call's record numbers as stored: ``1,2,5``."""
    return ",".join(map(str, seqs))


def seqs_from(text: str | None) -> tuple[int, ...]:
    """A call's record numbers from their stored text; a malformed entry is skipped (an edit
    `verify` reports)."""
    if not text:
        return ()
    return tuple(int(x) for x in text.split(",") if x.isdigit())


def key_from_row(r: Sequence[Any]) -> KeyRow:
    return KeyRow(
        key=r[0],
        request_hash=r[1],
        run_id=r[2],
        call_id=r[3],
        attempt=r[4],
        expires_at=r[5],
        status=r[6],
        outcome_seq=r[7],
    )


def key_row(k: KeyRow) -> tuple[Any, ...]:
    return (
        k.key,
        k.request_hash,
        k.run_id,
        k.call_id,
        k.attempt,
        k.expires_at,
        k.status,
        k.outcome_seq,
    )


def approval_from_row(r: Sequence[Any]) -> ApprovalRequest:
    return ApprovalRequest(
        id=r[0],
        run_id=r[1],
        call_id=r[2],
        principal=r[3],
        tool=r[4],
        arguments_json=r[5],
        arguments_hash=r[6],
        resource_version=r[7],
        effects=tuple(pydantic_core.from_json(r[8])),
        preview=r[9],
        policy_version=r[10],
        created_at=r[11],
        expires_at=r[12],
        status=ApprovalStatus(r[13]),
        decided_by=r[14],
        decided_at=r[15],
        reason=r[16],
        used_at=r[17],
        used_by=r[18],
        resumable=bool(r[19]),
        decision_seq=r[20],
    )


def approval_row(a: ApprovalRequest) -> tuple[Any, ...]:
    return (
        a.id,
        a.run_id,
        a.call_id,
        a.principal,
        a.tool,
        a.arguments_json,
        a.arguments_hash,
        a.resource_version,
        _dumps(list(a.effects)),
        a.preview,
        a.policy_version,
        a.created_at,
        a.expires_at,
        a.status.value,
        a.decided_by,
        a.decided_at,
        a.reason,
        a.used_at,
        a.used_by,
        int(a.resumable),
        a.decision_seq,
    )


def record_from_row(r: Sequence[Any]) -> AuditRecord:
    """A journal row (`JOURNAL_COLUMNS`) as a record; data that is not a JSON object is
    kept as ``{"unreadable": text}`` (an edited record: its hash says so)."""
    text = r[5]
    try:
        data = pydantic_core.from_json(text)
    except ValueError:
        data = {"unreadable": text}
    if not isinstance(data, dict):
        data = {"value": data}
    return AuditRecord(
        seq=r[0],
        at=r[1],
        kind=r[2],
        run_id=r[3],
        call_id=r[4],
        data=data,
        prev_hash=r[6],
        hash=r[7],
        data_json=text,
    )


def _unparsed(r: Sequence[Any]) -> AuditRecord:
    """A journal row whose data the truth's fold does not read: its text, for the hash."""
    return AuditRecord(
        seq=r[0],
        at=r[1],
        kind=r[2],
        run_id=r[3],
        call_id=r[4],
        prev_hash=r[6],
        hash=r[7],
        data_json=r[5],
    )


_MISSING: Any = object()
CACHE_ROWS = 20_000
"""Rows a process keeps between transactions before it starts over."""


class RowCache:
    """The rows as this process's last transaction left them, valid while the journal's
    head is the one it left (`Transaction`)."""

    __slots__ = ("approvals", "calls", "head", "keys")

    def __init__(self) -> None:
        self.head: tuple[Any, Any] | None = None
        self.calls: dict[tuple[str, str], CallRecord | None] = {}
        self.keys: dict[str, KeyRow | None] = {}
        self.approvals: dict[str, ApprovalRequest | None] = {}

    def clear(self) -> None:
        self.head = None
        self.calls.clear()
        self.keys.clear()
        self.approvals.clear()


class Transaction:
    """One open transaction: the rows it read and changed, and the records it appends."""

    __slots__ = (
        "_appended",
        "_approvals",
        "_cache",
        "_calls",
        "_dirty_approvals",
        "_dirty_calls",
        "_dirty_keys",
        "_head",
        "_keys",
        "_orphans",
        "_records",
        "_status_calls",
        "chain_key",
        "cur",
        "prev",
        "seq",
        "sql",
        "truth",
        "worker",
        "written",
    )

    def __init__(
        self,
        cur: Cursor,
        sql: Callable[[str], str],
        worker: str,
        head_sql: str,
        cache: RowCache | None,
        truth: JournalTruth | None = None,
    ) -> None:
        self.cur = cur
        self.truth = truth
        """The journal's own keys and approvals (`callgate.ledger.truth`): None only for a
        migration, which decides nothing."""
        self.chain_key = truth.chain_key if truth is not None else None
        self.sql = sql
        self.worker = worker
        cur.execute(sql(head_sql))
        row = cur.fetchone()
        if row is None:
            raise LedgerError(
                "the journal's head row is missing, so no record can be chained to it: the "
                "ledger was altered; run 'callgate ledger verify' and restore it from a backup"
            )
        self._head = (row[0], row[1])
        self.seq = int(row[0])
        self.written = self.seq
        self.prev: str = row[1]
        if cache is not None and cache.head != self._head:
            cache.clear()
        self._cache = cache
        self._calls: dict[tuple[str, str], CallRecord | None] = {}
        self._keys: dict[str, KeyRow | None] = {}
        self._approvals: dict[str, ApprovalRequest | None] = {}
        self._dirty_calls: dict[tuple[str, str], CallRecord] = {}
        self._status_calls: dict[tuple[str, str], CallRecord] = {}
        self._dirty_keys: dict[str, KeyRow] = {}
        self._dirty_approvals: dict[str, ApprovalRequest] = {}
        self._records: list[tuple[Any, ...]] = []
        self._appended: list[AuditRecord] = []
        self._orphans: list[tuple[str, str, int]] = []

    def x(self, statement: str, params: Sequence[Any] = ()) -> Cursor:
        """Execute one statement (written with ``?`` placeholders)."""
        self.cur.execute(self.sql(statement), params)
        return self.cur

    # -- the rows (`callgate.ledger.journal.IndexState`) ----------------------------------

    def call(self, run_id: str, call_id: str) -> CallRecord | None:
        ident = (run_id, call_id)
        cache = self._cache
        found: CallRecord | None = self._row(
            self._calls, cache.calls if cache else None, ident, SELECT_CALL, call_from_row
        )
        return found

    def put_call(self, row: CallRecord, *, status_only: bool = False) -> None:
        ident = (row.run_id, row.call_id)
        self._calls[ident] = row
        if status_only and ident not in self._dirty_calls:
            self._status_calls[ident] = row
        else:
            self._dirty_calls[ident] = row
            self._status_calls.pop(ident, None)

    def key(self, key: str) -> KeyRow | None:
        cache = self._cache
        found: KeyRow | None = self._row(
            self._keys, cache.keys if cache else None, key, SELECT_KEY, key_from_row
        )
        return found

    def put_key(self, row: KeyRow) -> None:
        self._keys[row.key] = row
        self._dirty_keys[row.key] = row

    def approval(self, approval_id: str) -> ApprovalRequest | None:
        cache = self._cache
        found: ApprovalRequest | None = self._row(
            self._approvals,
            cache.approvals if cache else None,
            approval_id,
            SELECT_APPROVAL,
            approval_from_row,
        )
        return found

    def _row(
        self,
        mine: dict[Any, Any],
        kept: dict[Any, Any] | None,
        ident: Any,
        statement: str,
        convert: Callable[[Any], Any],
    ) -> Any:
        """A row as this transaction sees it: changed or read here, else kept from the last
        transaction (`RowCache`), else read from the database (None: there is none)."""
        found = mine.get(ident, _MISSING)
        if found is _MISSING:
            found = kept.get(ident, _MISSING) if kept is not None else _MISSING
            if found is _MISSING:
                params = ident if isinstance(ident, tuple) else (ident,)
                row = self.x(statement, params).fetchone()
                found = convert(row) if row is not None else None
            mine[ident] = found
        return found

    def put_approval(self, row: ApprovalRequest) -> None:
        self._approvals[row.id] = row
        self._dirty_approvals[row.id] = row

    def add_orphan(self, run_id: str, call_id: str, seq: int) -> None:
        self._orphans.append((run_id, call_id, seq))

    def reset(self) -> None:
        """Forget every row: a migrated journal's rows follow (`MIGRATED`)."""
        for statement in RESET_INDEXES:
            self.x(statement)
        for rows in (self._calls, self._keys, self._approvals):
            rows.clear()
        self._orphans.clear()
        for dirty in (
            self._dirty_calls,
            self._status_calls,
            self._dirty_keys,
            self._dirty_approvals,
        ):
            dirty.clear()
        if self._cache is not None:
            self._cache.clear()
            self._cache = None

    def true_key(self, name: str) -> KeyRow | None:
        """The idempotency key as the journal makes it, its row compared with it; a
        different row is recorded (``idempotency.forged``) and restored. A key this
        transaction changed is its own; without a truth (a migration) the row."""
        row = self.key(name)
        if self.truth is None or name in self._dirty_keys:
            return row
        self.catch_up()
        truth = self.truth.key(name)
        if truth == row:
            return row
        assert row is not None or truth is not None
        holder = truth if truth is not None else row
        assert holder is not None
        self.append(
            "idempotency.forged",
            holder.run_id,
            holder.call_id,
            {
                "actor": self.worker,
                "idempotency_key": name,
                "problem": _key_problem(row, truth),
            },
        )
        if truth is not None:
            self.put_key(truth)
            return truth
        # A row the journal never made: hold the key rather than run twice.
        return KeyRow(
            key=row.key if row is not None else name,
            request_hash=holder.request_hash,
            run_id=holder.run_id,
            call_id=holder.call_id,
            attempt=holder.attempt,
            expires_at=holder.expires_at,
            status="unknown",
            outcome_seq=None,
        )

    def true_approval(self, approval_id: str) -> ApprovalRequest | None:
        """The approval as the journal makes it; one this transaction changed is its own;
        without a truth (a migration) the row."""
        if self.truth is None or approval_id in self._dirty_approvals:
            return self.approval(approval_id)
        self.catch_up()
        return self.truth.state.approvals.get(approval_id)

    def catch_up(self) -> None:
        """Fold the journal's records written before this transaction into the truth."""
        if self.truth is None:
            return
        written = self.written

        truth = self.truth

        def read(after: int, upto: int) -> list[AuditRecord]:
            rows = self.x(
                f"SELECT {JOURNAL_COLUMNS} FROM journal WHERE seq > ? AND seq <= ? ORDER BY seq",
                (after, upto),
            ).fetchall()
            # The hash covers the stored text; only records the fold reads are parsed.
            return [record_from_row(r) if truth.reads(r[2], r[3]) else _unparsed(r) for r in rows]

        truth.catch_up((written, str(self._head[1])), read)

    def record(self, seq: int) -> AuditRecord | None:
        """A journal record already written (before this transaction)."""
        row = self.x(SELECT_RECORD, (seq,)).fetchone()
        return record_from_row(row) if row is not None else None

    # -- appending ---------------------------------------------------------------------

    def append(
        self, kind: str, run_id: str, call_id: str | None, data: Mapping[str, Any]
    ) -> AuditRecord:
        """Chain one record to the journal and apply it to the rows."""
        if self.truth is not None and not self.truth.keyed_as_head:
            self.truth.check_key(self.record(self.written) if self.written else None)
        self.seq += 1
        at = time.time()
        text = _dumps(data)
        h = audit_hash(self.prev, self.seq, at, kind, run_id, call_id, text, self.chain_key)
        rec = AuditRecord(
            seq=self.seq,
            at=at,
            kind=kind,
            run_id=run_id,
            call_id=call_id,
            data=data,
            prev_hash=self.prev,
            hash=h,
            data_json=text,
        )
        self._records.append((self.seq, at, kind, run_id, call_id, text, self.prev, h))
        self._appended.append(rec)
        self.prev = h
        apply(self, rec)
        return rec

    def write(self) -> None:
        """Write the records and the changed rows, and move the head."""
        records = self._records
        if not records:
            return
        for chunk in _chunks(records):
            self._rows(insert_journal(len(chunk)), chunk)
        if self._dirty_calls:
            self._upsert(upsert_calls, [call_row(r) for r in self._dirty_calls.values()])
        if self._status_calls:
            rows = [
                (
                    c.state.value,
                    c.stage,
                    c.attempts,
                    int(c.reconciled),
                    c.updated_at,
                    seqs_text(c.records),
                    c.run_id,
                    c.call_id,
                )
                for c in self._status_calls.values()
            ]
            if len(rows) == 1:
                self.x(UPDATE_CALL_STATUS, rows[0])
            else:
                self.cur.executemany(self.sql(UPDATE_CALL_STATUS), rows)
        if self._orphans:
            self._upsert(insert_orphans, self._orphans)
        if self._dirty_keys:
            self._upsert(upsert_keys, [key_row(r) for r in self._dirty_keys.values()])
        if self._dirty_approvals:
            self._upsert(
                upsert_approvals, [approval_row(r) for r in self._dirty_approvals.values()]
            )
        self.x(SET_HEAD, (str(self.seq), self.prev))

    def _upsert(self, statement: Callable[[int], str], rows: list[tuple[Any, ...]]) -> None:
        for chunk in _chunks(rows):
            self._rows(statement(len(chunk)), chunk)

    def _rows(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        params: Sequence[Any] = rows[0] if len(rows) == 1 else [v for r in rows for v in r]
        self.cur.execute(self.sql(statement), params)

    def committed(self) -> None:
        """The transaction committed: keep its rows for the next one (`RowCache`), and
        fold its records into the journal's truth if that had read up to where it began."""
        truth = self.truth
        if (
            truth is not None
            and self._appended
            and (truth.seq, truth.hash) == (int(self._head[0]), self._head[1])
        ):
            for rec in self._appended:
                truth.trusted(rec)
        cache = self._cache
        if cache is None:
            return
        if len(cache.calls) + len(self._calls) > CACHE_ROWS:
            cache.clear()
        cache.calls.update(self._calls)
        cache.keys.update(self._keys)
        cache.approvals.update(self._approvals)
        cache.head = (str(self.seq), self.prev) if self._records else self._head


def _chunks(rows: Sequence[Any]) -> list[Sequence[Any]]:
    if len(rows) <= CHUNK:
        return [rows]
    return [rows[i : i + CHUNK] for i in range(0, len(rows), CHUNK)]


# -- the items ------------------------------------------------------------------------------


def _key_problem(row: KeyRow | None, truth: KeyRow | None) -> str:
    if row is None:
        return f"its row is missing; the journal says {truth.status if truth else None}"
    if truth is None:
        return f"its row says {row.status or 'running'}, but no journal record took the key"
    changed = [
        name
        for name in ("status", "run_id", "call_id", "request_hash", "expires_at", "attempt")
        if getattr(row, name) != getattr(truth, name)
    ] or ["outcome_seq"]
    return (
        f"its row differs from the journal ({', '.join(changed)}): the row says "
        f"{row.status or 'running'}, the journal {truth.status or 'running'}"
    )


RUN = Claim(kind=ClaimKind.RUN)
"""The claim of an attempt that may run."""


def _decide(tx: Transaction, r: CallRecord) -> None:
    tx.append(f"call.{r.state.value}", r.run_id, r.call_id, decision_data(r, time.time()))


def _begin(tx: Transaction, s: AttemptStart) -> Claim:
    """Take the key and start the attempt, or say why it may not run (the call settles)."""
    if not s.side_effecting:
        tx.append("attempt.started", s.run_id, s.call_id, started_data(s, tx.worker))
        return RUN
    current = tx.call(s.run_id, s.call_id)
    key = tx.true_key(s.idempotency_key)  # never the row alone (`callgate.ledger.truth`)
    claim: Claim | None = None
    if key is not None:
        known = None if key.status is None else Outcome(status=key.status, content="")
        claim = claim_for_key(
            s,
            request_hash=key.request_hash,
            holder=(key.run_id, key.call_id),
            expires_at=key.expires_at,
            outcome=known,
        )
        if claim is not None and claim.kind is ClaimKind.REPLAY:
            claim = Claim(kind=ClaimKind.REPLAY, outcome=_key_outcome(tx, key), holder=claim.holder)
    if claim is None and current is not None and current.state is not CallState.ADMITTED:
        # The call id came back after its call ran: never a second execution.
        claim = Claim(kind=ClaimKind.IN_PROGRESS, holder=(s.run_id, s.call_id))
    if claim is None and s.budgets and tx.truth is not None:
        # Spent by the journal, and by attempts started earlier in this transaction.
        extra: dict[str, float] = {}
        for rec in tx._appended:
            for key, amount in (
                rec.data.get("budgets") or () if rec.kind == "attempt.started" else ()
            ):
                extra[key] = extra.get(key, 0.0) + amount
        why = tx.truth.state.budgets.refusal([BudgetCharge(*b) for b in s.budgets], extra)
        if why is not None:
            claim = Claim(kind=ClaimKind.OVER_BUDGET, holder=(s.run_id, s.call_id), reason=why)
    if claim is None:
        tx.append("attempt.started", s.run_id, s.call_id, started_data(s, tx.worker))
        return RUN
    data: dict[str, Any] = {
        "actor": tx.worker,
        "holder": list(claim.holder) if claim.holder else None,
    }
    if current is not None and current.state is CallState.ADMITTED:
        state, stage = settled_state(claim)
        data.update(settled=state.value, stage=stage, started_at=s.started_at)
    tx.append(f"idempotency.{claim.kind.value}", s.run_id, s.call_id, data)
    return claim


def _key_outcome(tx: Transaction, key: KeyRow) -> Outcome:
    """The outcome a key replays, read from the record that holds it."""
    if key.outcome_seq is not None:
        rec = tx.record(key.outcome_seq)
        if rec is not None:
            found = outcome_from_record(rec.data, key.attempt)
            if found is not None and found.status == key.status:
                return found
    return Outcome(status=str(key.status), content="")


def _finish(tx: Transaction, f: AttemptFinish) -> bool:
    current = tx.call(f.run_id, f.call_id)
    if not may_finish(current.state if current is not None else None, f.outcome):
        return False
    tx.append(f"attempt.{f.outcome.status}", f.run_id, f.call_id, finished_data(f, tx.worker))
    return True


# -- approvals --------------------------------------------------------------------------------

_OPEN = "('pending', 'approved', 'denied')"


def _effect(resource_version: str | None) -> str:
    """The condition binding a row to one effect in one run (``?``: principal, tool, hash,
    run id[, version]); see `ApprovalRequest.binds`."""
    version = "resource_version IS NULL" if resource_version is None else "resource_version = ?"
    return f"principal = ? AND tool = ? AND arguments_hash = ? AND run_id = ? AND {version}"


def _effect_params(
    principal: str, tool: str, arguments_hash: str, run_id: str, resource_version: str | None
) -> list[Any]:
    params: list[Any] = [principal, tool, arguments_hash, run_id]
    if resource_version is not None:
        params.append(resource_version)
    return params


def _request(tx: Transaction, request: ApprovalRequest) -> ApprovalRequest:
    """Store a request, or return the open one already bound to the same effect."""
    params = _effect_params(
        request.principal,
        request.tool,
        request.arguments_hash,
        request.run_id,
        request.resource_version,
    )
    rows = tx.x(
        f"SELECT id FROM approvals WHERE {_effect(request.resource_version)} "
        f"AND status IN {_OPEN} AND expires_at > ? ORDER BY created_at, id",
        [*params, request.created_at],
    ).fetchall()
    for (approval_id,) in rows:
        found = tx.approval(approval_id)
        if (
            found is not None
            and found.status
            in (ApprovalStatus.PENDING, ApprovalStatus.APPROVED, ApprovalStatus.DENIED)
            and found.expires_at > request.created_at
            and found.binds(
                principal=request.principal,
                tool=request.tool,
                arguments_hash=request.arguments_hash,
                resource_version=request.resource_version,
                run_id=request.run_id,
            )
        ):
            return found
    tx.append("approval.requested", request.run_id, request.call_id, requested_data(request))
    stored = tx.approval(request.id)
    assert stored is not None
    return stored


def _decide_approval(
    tx: Transaction, payload: tuple[str, bool, str, str | None, float]
) -> ApprovalRequest | str:
    approval_id, approve, by, reason, now = payload
    current = tx.approval(approval_id)
    if current is not None:
        current = _checked(tx, current) or tx.approval(approval_id)
    if current is None or current.status is not ApprovalStatus.PENDING or current.expires_at <= now:
        return undecidable(current, approval_id, now)
    status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED
    decided = replace(current, status=status, decided_by=by, decided_at=now, reason=reason)
    tx.append(f"approval.{status.value}", current.run_id, current.call_id, decided_data(decided))
    stored = tx.approval(approval_id)
    assert stored is not None
    return stored


def _consume(tx: Transaction, c: Consume) -> ApprovalRequest | None:
    """Use the oldest approval bound to the effect whose decision is in the journal."""
    rows = tx.x(
        f"SELECT id FROM approvals WHERE {_effect(c.resource_version)} "
        "AND status = 'approved' AND expires_at > ? ORDER BY created_at, id",
        [
            *_effect_params(c.principal, c.tool, c.arguments_hash, c.run_id, c.resource_version),
            c.now,
        ],
    ).fetchall()
    for (approval_id,) in rows:
        row = tx.approval(approval_id)
        if row is None:
            continue
        row = _checked(tx, row)
        if (
            row is None
            or row.status is not ApprovalStatus.APPROVED
            or row.expires_at <= c.now
            or not row.binds(
                principal=c.principal,
                tool=c.tool,
                arguments_hash=c.arguments_hash,
                resource_version=c.resource_version,
                run_id=c.run_id,
            )
        ):
            continue
        used = replace(row, status=ApprovalStatus.USED, used_at=c.now, used_by=c.used_by)
        tx.append("approval.used", row.run_id, row.call_id, used_data(used))
        return tx.approval(approval_id)
    return None


def _checked(tx: Transaction, row: ApprovalRequest) -> ApprovalRequest | None:
    """The approval as the journal makes it; a row that differs is restored from the journal,
    and the difference recorded (``approval.forged``), so a forged row is never spent and a
    person can still decide the real request."""
    truth = tx.true_approval(row.id)
    problem = None
    if truth is None:
        problem = "no approval.requested record has its id"
    elif truth != row:
        problem = _differs(truth, row)
    elif truth.status is ApprovalStatus.APPROVED:
        problem = decision_problem(tx, truth)
    if problem is None:
        return truth
    tx.append(
        "approval.forged",
        row.run_id,
        row.call_id,
        {"actor": tx.worker, "approval_id": row.id, "problem": problem},
    )
    if truth is not None and truth != row:
        tx.put_approval(truth)
        return truth if truth.status is not ApprovalStatus.APPROVED else None
    return None


def _differs(truth: ApprovalRequest, row: ApprovalRequest) -> str:
    changed = [
        name
        for name in ("status", "decided_by", "decision_seq", "arguments_hash", "expires_at")
        if getattr(truth, name) != getattr(row, name)
    ] or ["a field"]
    return (
        f"its row differs from its records ({', '.join(changed)}): the row says "
        f"{row.status.value}, the journal {truth.status.value}"
    )


def decision_problem(tx: Transaction, row: ApprovalRequest) -> str | None:
    """Why the journal does not show ``row`` approved (None: it does).

    The decision record must be an approval of exactly this request (its id, run,
    principal, tool, arguments, resource version and expiry), hash to its content,
    and link to the record before it.
    """
    seq = row.decision_seq
    if seq is None:
        return "no decision record: its approved status was not written by a decision"
    rec = tx.record(seq)
    if rec is None:
        return f"its decision record {seq} is missing"
    d: Mapping[str, Any] = rec.data
    if rec.kind == "migrated.approval":
        d = rec.data.get("row") or {}
        expected = {"approved", "used"}
        if d.get("status") not in expected:
            return f"record {seq} does not approve it"
    elif rec.kind != "approval.approved":
        return f"record {seq} is {rec.kind}, not its approval"
    fields = {
        "approval_id" if rec.kind == "approval.approved" else "id": row.id,
        "tool": row.tool,
        "arguments_hash": row.arguments_hash,
        "resource_version": row.resource_version,
        "principal": row.principal,
        "expires_at": row.expires_at,
    }
    for name, value in fields.items():
        if d.get(name) != value:
            return f"its {name.replace('_', ' ')} differs from its decision record {seq}"
    if rec.run_id != row.run_id:
        return f"its run differs from its decision record {seq}"
    if audit_hash(
        rec.prev_hash,
        rec.seq,
        rec.at,
        rec.kind,
        rec.run_id,
        rec.call_id,
        rec.data_json,
        tx.chain_key,
    ) != (rec.hash):
        return f"its decision record {seq} was edited"
    before = tx.record(seq - 1) if seq > 1 else None
    if seq > 1 and (before is None or before.hash != rec.prev_hash):
        return f"its decision record {seq} does not link to the record before it"
    return None


def _run_open(
    tx: Transaction, payload: tuple[str, str, Sequence[tuple[str, Mapping[str, Any]]]]
) -> str | None:
    """Claim a run id and append its facts (`callgate.ledger.base.Ledger.record_run`), the
    owner read from the journal itself; the other owner, if another holds it."""
    run_id, owner, facts = payload
    found = _owner(tx, run_id)
    if found is not None and found != owner:
        return found
    if found is None:
        tx.append("run.opened", run_id, None, {"actor": owner})
    for kind, data in facts:
        tx.append(kind, run_id, None, {**data, "actor": owner})
    return None


def _owner(tx: Transaction, run_id: str) -> str | None:
    """Who owns ``run_id`` by the journal (this transaction's own records included)."""
    for rec in reversed(tx._appended):
        if rec.run_id == run_id and rec.kind == "run.opened":
            return str(rec.data.get("actor"))
    tx.catch_up()
    assert tx.truth is not None
    found = tx.truth.state.owners.get(run_id)
    if found is None:
        row = tx.x("SELECT principal FROM calls WHERE run_id = ? LIMIT 1", (run_id,)).fetchone()
        found = None if row is None else str(row[0])  # a row the journal does not explain
    return found


def _run_read(tx: Transaction, run_id: str) -> list[AuditRecord]:
    """A run's ``run.*`` records, from the journal (`callgate.ledger.truth`)."""
    tx.catch_up()
    assert tx.truth is not None
    return list(tx.truth.state.facts.get(run_id, ()))


def _release(tx: Transaction, payload: tuple[str, str]) -> bool:
    approval_id, used_by = payload
    row = tx.approval(approval_id)
    if row is None or row.status is not ApprovalStatus.USED or row.used_by != used_by:
        return False
    tx.append(
        "approval.released", row.run_id, row.call_id, {"approval_id": approval_id, "by": used_by}
    )
    return True


# -- a transaction ------------------------------------------------------------------------------


def run_items(tx: Transaction, items: Sequence[Item]) -> list[Any]:
    """Apply every item in order, then write what they appended and changed."""
    results: list[Any] = []
    for kind, payload in items:
        if kind == DECIDE:
            _decide(tx, payload)
            results.append(None)
        elif kind == BEGIN:
            results.append(_begin(tx, payload))
        elif kind == FINISH:
            results.append(_finish(tx, payload))
        elif kind == EVENT:
            event_kind, run_id, call_id, data = payload
            tx.append(event_kind, run_id, call_id, data)
            results.append(None)
        elif kind == REQUEST:
            results.append(_request(tx, payload))
        elif kind == DECIDE_APPROVAL:
            results.append(_decide_approval(tx, payload))
        elif kind == CONSUME:
            results.append(_consume(tx, payload))
        elif kind == RELEASE:
            results.append(_release(tx, payload))
        elif kind == RUN_OPEN:
            results.append(_run_open(tx, payload))
        elif kind == RUN_READ:
            results.append(_run_read(tx, payload))
        else:  # pragma: no cover - a programming error
            raise ValueError(f"unknown ledger item kind {kind}")
    tx.write()
    return results


def migrated_marker(tx: Transaction, data: Mapping[str, Any]) -> None:
    """Open a migrated journal's state (`callgate.ledger.journal.MIGRATED`)."""
    tx.append(MIGRATED, "", None, data)

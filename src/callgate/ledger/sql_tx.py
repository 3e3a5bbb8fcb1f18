"""One write transaction of a SQL ledger: the rows it reads and changes, the records it
appends to the chains of the runs it writes (`callgate.ledger.chains`), and the locks it
holds.

A transaction first locks what it will change (`Transaction.acquire`: the head rows of
its runs' chains, and, on PostgreSQL, an advisory lock per idempotency key and budget;
`callgate.ledger.sql_dialects`), then draws record numbers. Each item reads the rows
it decides by, appends records, and `callgate.ledger.journal.apply` turns each record
into the rows it changes; at the end the new records, the changed rows and the moved
chain heads are written, one multi-row statement per table.

A process keeps the rows of each run it wrote (`RowCache`), valid while that run's
chain head is the one it left: nobody else wrote the run since.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from callgate.approvals import ApprovalRequest
from callgate.errors import LedgerError
from callgate.ledger.base import GENESIS, AuditRecord, CallRecord, audit_hash
from callgate.ledger.chains import ANCHOR, LEGACY_CHAIN, anchored, run_chain
from callgate.ledger.journal import KeyRow, apply
from callgate.ledger.sql_codecs import (
    approval_from_row,
    approval_row,
    call_from_row,
    call_row,
    dumps,
    key_from_row,
    key_row,
    record_from_row,
    seqs_text,
    unparsed,
)
from callgate.ledger.sql_dialects import Dialect
from callgate.ledger.sql_schema import Cursor
from callgate.ledger.sql_statements import (
    CHAIN_HEADS,
    CHUNK,
    HEAD,
    NEWEST_RECORD,
    RESET_INDEXES,
    SELECT_APPROVAL,
    SELECT_CALL,
    SELECT_KEY,
    SELECT_LEGACY_RECORD,
    SELECT_RECORD,
    SET_HEAD,
    UPDATE_CALL_STATUS,
    insert_journal,
    insert_legacy_journal,
    insert_orphans,
    json_rows,
    upsert_approvals,
    upsert_calls,
    upsert_chains,
    upsert_keys,
    with_statements,
)
from callgate.ledger.truth import JournalTruth

__all__ = ["CACHE_RUNS", "RowCache", "RunRows", "Transaction"]

_MISSING: Any = object()
CACHE_RUNS = 2_000
"""Runs whose rows a process keeps between transactions before it starts over."""


class RunRows:
    """The rows of one run as this process's last transaction on it left them."""

    __slots__ = ("approvals", "calls", "head")

    def __init__(self, head: tuple[int, str]) -> None:
        self.head = head
        self.calls: dict[str, CallRecord | None] = {}
        self.approvals: dict[str, ApprovalRequest] = {}


class RowCache:
    """Each run's rows, valid while its chain's head is the one this process left."""

    __slots__ = ("runs",)

    def __init__(self) -> None:
        self.runs: dict[str, RunRows] = {}

    def clear(self) -> None:
        self.runs.clear()


class Transaction:
    """One open transaction: the rows it read and changed, and the records it appends."""

    __slots__ = (
        "_anchor",
        "_appended",
        "_approvals",
        "_batches",
        "_cache",
        "_calls",
        "_caught_up",
        "_dirty_approvals",
        "_dirty_calls",
        "_dirty_keys",
        "_heads",
        "_json",
        "_keys",
        "_last_number",
        "_legacy",
        "_locked",
        "_locked_names",
        "_numbers",
        "_orphans",
        "_pending",
        "_plan",
        "_records",
        "_rooted",
        "_since",
        "_status_calls",
        "_valid",
        "_writes",
        "chain_key",
        "cur",
        "sql",
        "truth",
        "worker",
    )

    def __init__(
        self,
        cur: Cursor,
        sql: Dialect,
        worker: str,
        cache: RowCache | None,
        truth: JournalTruth | None = None,
        *,
        legacy: bool = False,
        prelude: Sequence[str] = (),
    ) -> None:
        self.cur = cur
        self._pending: list[tuple[str, Sequence[Any]]] = []
        """Statements to send with the next one (a dialect that batches: PostgreSQL)."""
        self._batches = sql.batches and hasattr(cur, "mogrify")
        """Whether statements are sent as one text per round trip (client-side binding)."""
        self._json = self._batches
        """Whether a table's rows go as one JSON parameter (`json_rows`)."""
        self._writes: list[tuple[str, Sequence[Any]]] | None = None
        """The statements of `write` while it runs, sent as one (`with_statements`)."""
        self.truth = truth
        """The journal's own keys and approvals (`callgate.ledger.truth`): None only for a
        migration, which decides nothing."""
        self.chain_key = truth.chain_key if truth is not None else None
        self.sql = sql
        self.worker = worker
        for text in prelude:  # sent with the first statement that waits
            self.emit(text)
        self._legacy = legacy
        """The data step of migration 3: one chain, its head in the journal's head row."""
        self._cache = cache
        self._heads: dict[str, tuple[int, str]] = {}
        """Each locked chain's head as this transaction moves it."""
        self._locked: dict[str, tuple[int, str]] = {}
        """Each locked chain's head row as it was locked."""
        self._locked_names: set[str] = set()
        self._valid: dict[str, RunRows] = {}
        self._numbers: list[int] = []
        self._plan = 4
        """Record numbers drawn at once (`plan`)."""
        self._last_number: int | None = None
        self._anchor: tuple[int, str] | None = None
        """The root chain's head as read with this transaction's first locks: what its
        records anchor to (`callgate.ledger.chains.ANCHOR`)."""
        self._rooted = False
        self._caught_up = False
        self._since: tuple[int | None, tuple[list[Any], int | None], list[Any] | None] | None = None
        """The journal read with the locks (`acquire`): the mark it read from, its rows and
        next mark, and the head rows read before it (a first read)."""
        self._calls: dict[tuple[str, str], CallRecord | None] = {}
        self._keys: dict[str, KeyRow | None] = {}
        self._approvals: dict[str, ApprovalRequest | None] = {}
        self._dirty_calls: dict[tuple[str, str], CallRecord] = {}
        self._status_calls: dict[tuple[str, str], CallRecord] = {}
        self._dirty_keys: dict[str, KeyRow] = {}
        self._dirty_approvals: dict[str, ApprovalRequest] = {}
        self._records: list[AuditRecord] = []
        self._appended: list[AuditRecord] = []
        self._orphans: list[tuple[str, str, int]] = []
        if legacy:
            cur.execute(sql(HEAD))
            row = cur.fetchone()
            if row is None:
                raise LedgerError(
                    "the journal's head row is missing, so no record can be chained to it: "
                    "the ledger was altered; run 'callgate ledger verify' and restore it "
                    "from a backup"
                )
            head = (int(row[0]), str(row[1]))
            self._heads[LEGACY_CHAIN] = self._locked[LEGACY_CHAIN] = head
            self._last_number = head[0]

    def x(self, statement: str, params: Sequence[Any] = ()) -> Cursor:
        """Execute one statement (written with ``?`` placeholders), after any batched ones;
        the cursor is left on its result."""
        if not self._pending:
            self.cur.execute(self.sql(statement), params)
            return self.cur
        count = len(self._pending)
        self._pending.append((self.sql(statement), params))
        self.cur.execute(self._text())
        for _ in range(count):
            self.cur.nextset()  # type: ignore[attr-defined]
        return self.cur

    def emit(self, statement: str, params: Sequence[Any] = ()) -> None:
        """A statement whose result is not read: batched with the next one where the dialect
        batches (one round trip for a transaction's writes and its commit)."""
        if self._writes is not None:
            self._writes.append((self.sql(statement), params))
        elif self._batches:
            self._pending.append((self.sql(statement), params))
        else:
            self.cur.execute(self.sql(statement), params)

    def flush(self) -> None:
        """Send the batched statements now (before a dialect's own statement)."""
        if self._pending:
            self.cur.execute(self._text())

    def finish(self, last: str) -> None:
        """Send the batched statements and ``last`` (``COMMIT``) in one round trip."""
        if not self._batches:
            self.emit(last)
            return
        self._pending.append((last, ()))
        self.cur.execute(self._text())

    def _text(self) -> str:
        """The batched statements as one text, their parameters bound in one pass."""
        pending, self._pending = self._pending, []
        return batch_text(self.cur, pending)

    # -- locks and numbers -------------------------------------------------------------

    def acquire(
        self,
        runs: Iterable[str],
        names: Iterable[str] = (),
        *,
        calls: Sequence[tuple[str, str]] = (),
        keys: Sequence[str] = (),
        truth: bool = False,
    ) -> None:
        """Lock the chains of ``runs`` and the keys and budgets ``names`` (those not locked
        yet), before any record number is drawn after them. ``calls``, ``keys`` and
        ``truth`` (the journal read since the truth's last read) are what the transaction
        will read: a dialect that can (PostgreSQL) reads them in the same round trip as
        the locks (`callgate.ledger.sql_dialects.Dialect.open`)."""
        if self._legacy:
            return
        new_names = sorted(set(names) - self._locked_names)
        chains = sorted({run_chain(r) for r in runs} - set(self._locked))
        if not new_names and not chains:
            return
        if self._numbers or self._records:
            # Numbers drawn before this lock could be lower than those of a writer that
            # held it first: draw again after it.
            self._numbers.clear()
        mark = self.truth.mark if truth and self.truth is not None and not self._caught_up else -1
        prelude, self._pending = self._pending, []  # sent with the locks
        opened = self.sql.open(
            self.cur,
            prelude,
            new_names,
            chains,
            numbers=self._plan if not self._records else 0,
            calls=[c for c in calls if c not in self._calls],
            keys=[k for k in keys if k not in self._keys],
            since=mark,
            root=not self._rooted and self.truth is not None,
        )
        if not self._rooted and self.truth is not None:
            self._rooted = True
            self._anchor = opened.root
        self._locked_names.update(new_names)
        if opened.numbers:
            self._numbers = list(opened.numbers)
        if opened.prefetched:
            for row in opened.calls:
                self._calls[(row[0], row[1])] = call_from_row(row)
            for ident in calls:
                self._calls.setdefault(ident, None)
            for row in opened.keys:
                self._keys[row[0]] = key_from_row(row)
            for name in keys:
                self._keys.setdefault(name, None)
        if opened.since is not None:
            self._since = (mark, opened.since, opened.chain_rows)
        cache = self._cache
        for chain in chains:
            head = opened.heads.get(chain, (0, GENESIS))
            self._locked[chain] = head
            self._heads[chain] = head
            if cache is not None:
                run = chain[2:]
                kept = cache.runs.get(run)
                if kept is not None and kept.head == head:
                    self._valid[run] = kept
                elif kept is not None:
                    del cache.runs[run]

    def plan(self, records: int) -> None:
        """How many records this transaction expects to append (numbers are drawn that
        many at a time; a number drawn and not used is a gap, which is allowed)."""
        self._plan = max(1, min(records, 256))

    def _number(self) -> int:
        if not self._numbers:
            if self._legacy:
                assert self._last_number is not None
                self._numbers = [self._last_number + 1]
            else:
                self.flush()
                self._numbers = self.sql.numbers(self.cur, self._plan, self._last_number)
        n = self._numbers.pop(0)
        self._last_number = n
        return n

    # -- the rows (`callgate.ledger.journal.IndexState`) ----------------------------------

    def call(self, run_id: str, call_id: str) -> CallRecord | None:
        ident = (run_id, call_id)
        found = self._calls.get(ident, _MISSING)
        if found is _MISSING:
            kept = self._valid.get(run_id)
            found = kept.calls.get(call_id, _MISSING) if kept is not None else _MISSING
            if found is _MISSING:
                row = self.x(SELECT_CALL, ident).fetchone()
                found = call_from_row(row) if row is not None else None
            self._calls[ident] = found
        return found  # type: ignore[no-any-return]

    def put_call(self, row: CallRecord, *, status_only: bool = False) -> None:
        ident = (row.run_id, row.call_id)
        self._calls[ident] = row
        if status_only and ident not in self._dirty_calls:
            self._status_calls[ident] = row
        else:
            self._dirty_calls[ident] = row
            self._status_calls.pop(ident, None)

    def key(self, key: str) -> KeyRow | None:
        found = self._keys.get(key, _MISSING)
        if found is _MISSING:
            row = self.x(SELECT_KEY, (key,)).fetchone()
            found = key_from_row(row) if row is not None else None
            self._keys[key] = found
        return found  # type: ignore[no-any-return]

    def put_key(self, row: KeyRow) -> None:
        self._keys[row.key] = row
        self._dirty_keys[row.key] = row

    def approval(self, approval_id: str) -> ApprovalRequest | None:
        found = self._approvals.get(approval_id, _MISSING)
        if found is _MISSING:
            for kept in self._valid.values():
                found = kept.approvals.get(approval_id, _MISSING)
                if found is not _MISSING:
                    break
            if found is _MISSING:
                row = self.x(SELECT_APPROVAL, (approval_id,)).fetchone()
                found = approval_from_row(row) if row is not None else None
            self._approvals[approval_id] = found
        return found  # type: ignore[no-any-return]

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
        self._valid.clear()
        if self._cache is not None:
            self._cache.clear()
            self._cache = None

    # -- the journal ------------------------------------------------------------------

    def catch_up(self) -> None:
        """Fold the journal's records committed before this transaction into the truth,
        and check that the chains it locked end where their head rows say."""
        truth = self.truth
        if truth is None or self._caught_up:
            return

        kept = self._since

        def read(mark: int | None) -> tuple[list[AuditRecord], int | None]:
            if kept is not None and kept[0] == mark:
                rows, after = kept[1]
            else:
                self.flush()
                rows, after = self.sql.since(self.cur, mark)
            rows = [r for r in rows if not truth.folded(r[0], r[8], r[3])]
            # The hash covers the stored text; only records the fold reads are parsed.
            return [
                record_from_row(r) if truth.reads(r[2], r[3]) else unparsed(r) for r in rows
            ], after

        def chain_rows() -> list[tuple[str, int, str]]:
            found = kept[2] if kept is not None and kept[2] is not None else None
            if found is None:
                found = self.x(CHAIN_HEADS).fetchall()
            return [(str(c), int(s), str(h)) for c, s, h in found]

        truth.catch_up(read, chain_rows)
        for chain, row in self._locked.items():
            truth.check_head(chain, row)
        truth.check_anchor(self._anchor)
        self._caught_up = True

    def record(self, seq: int) -> AuditRecord | None:
        """A journal record already written (before this transaction)."""
        row = self.x(SELECT_LEGACY_RECORD if self._legacy else SELECT_RECORD, (seq,)).fetchone()
        return record_from_row(row) if row is not None else None

    def append(
        self, kind: str, run_id: str, call_id: str | None, data: Mapping[str, Any]
    ) -> AuditRecord:
        """Chain one record to its run's chain and apply it to the rows."""
        kind = str(kind)  # a `RecordKind` is stored as its text
        truth = self.truth
        if truth is not None and not truth.keyed_as_head:
            row = self.x(NEWEST_RECORD).fetchone()
            truth.check_key(record_from_row(row) if row is not None else None)
        if self._legacy:
            chain, stored = LEGACY_CHAIN, None
        else:
            chain, stored = run_chain(run_id), None
            if chain not in self._locked:
                self._late_lock(run_id)
        seq = self._number()
        at = time.time()
        if ANCHOR in data:
            raise LedgerError(
                f"a {kind} record's data may not have a field {ANCHOR!r}: the ledger writes it "
                "(the root chain's head the record anchors to); rename that field"
            )
        text = dumps(data)
        if self._anchor is not None:
            text = anchored(text, self._anchor)
        prev = self._heads[chain][1]
        h = audit_hash(prev, seq, at, kind, run_id, call_id, text, self.chain_key)
        rec = AuditRecord(
            seq=seq,
            at=at,
            kind=kind,
            run_id=run_id,
            call_id=call_id,
            data=data,
            prev_hash=prev,
            hash=h,
            data_json=text,
            chain=stored,
        )
        self._records.append(rec)
        self._appended.append(rec)
        self._heads[chain] = (seq, h)
        apply(self, rec)
        return rec

    def _late_lock(self, run_id: str) -> None:
        """Lock a run's chain the transaction did not plan to write (an ``*.forged`` record
        on the run a row names). Another writer may have committed records on that chain
        since this transaction read the journal, before it held the lock: if it read the
        journal already, it reads it again now, under the lock, so that the truth has
        those records before this one links to them (and before anything more is decided
        by it)."""
        late = self._caught_up and self.truth is not None
        if late:
            self._caught_up = False
            self._since = None
        self.acquire((run_id,), truth=late)
        if late:
            self.catch_up()

    @property
    def appended(self) -> Sequence[AuditRecord]:
        """The records this transaction appended so far."""
        return self._appended

    def write(self) -> None:
        """Write the records and the changed rows, and move the chains' heads (on a
        batches: as one statement, each table's write a data-modifying ``WITH`` part)."""
        if not self._records:
            return
        if not self._batches or self._legacy:
            self._write()
            return
        self._writes = []
        try:
            self._write()
            writes = self._writes
        finally:
            self._writes = None
        if writes:
            text = with_statements(tuple(t for t, _ in writes))
            self.emit(text, [v for _, params in writes for v in params])

    def _write(self) -> None:
        records = self._records
        if self._legacy:
            for chunk in _chunks([r[:8] for r in map(_journal_row, records)]):
                self._rows(insert_legacy_journal(len(chunk)), chunk)
        else:
            for chunk in _chunks([_journal_row(r) for r in records]):
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
            if self._json:  # one row each: an index probe, not a join over a JSON set
                for row in rows:
                    self.emit(UPDATE_CALL_STATUS, row)
            elif len(rows) == 1:
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
        if self._legacy:
            seq, h = self._heads[LEGACY_CHAIN]
            self.emit(SET_HEAD, (str(seq), h))
            return
        moved = [
            (chain, head[0], head[1], 0)
            for chain, head in self._heads.items()
            if head != self._locked.get(chain)
        ]
        if moved:
            self._upsert(upsert_chains, moved)

    def _upsert(self, statement: Callable[[int], str], rows: list[tuple[Any, ...]]) -> None:
        for chunk in _chunks(rows):
            self._rows(statement(len(chunk)), chunk)

    def _rows(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        if self._json:  # one JSON parameter, not one per value; one text whatever the rows
            text, names = json_rows(statement)
            self.emit(text, (_json(names, rows),))
            return
        params: Sequence[Any] = rows[0] if len(rows) == 1 else [v for r in rows for v in r]
        self.emit(statement, params)

    def committed(self) -> int:
        """The transaction committed: keep its runs' rows for the next one (`RowCache`), and
        fold its records into the truth if the truth read up to where it began (within this
        transaction, under its locks). Returns how many records it wrote."""
        truth = self.truth
        if truth is not None and self._caught_up:
            for rec in self._appended:
                if not truth.trusted(rec):
                    break  # not what the truth has last of its chain: read, not assumed
        cache = self._cache
        if cache is not None:
            if len(cache.runs) > CACHE_RUNS:
                cache.clear()
            for chain, head in self._heads.items():
                run = chain[2:]
                kept = self._valid.get(run) or cache.runs.get(run)
                fresh = RunRows(head)
                if kept is not None and kept.head == self._locked.get(chain):
                    fresh.calls.update(kept.calls)
                    fresh.approvals.update(kept.approvals)
                cache.runs[run] = fresh
            for (run, call_id), row in self._calls.items():
                entry = cache.runs.get(run)
                if entry is not None:
                    entry.calls[call_id] = row
            for approval in self._approvals.values():
                if approval is not None:
                    entry = cache.runs.get(approval.run_id)
                    if entry is not None:
                        entry.approvals[approval.id] = approval
        return len(self._records)


def _json(names: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Rows as a JSON array of objects keyed by column name (`json_rows`)."""
    return dumps([dict(zip(names, row, strict=True)) for row in rows])


def batch_text(cur: Cursor, statements: Sequence[tuple[str, Sequence[Any]]]) -> str:
    """``statements`` as one text, their parameters bound client-side in one pass (a
    client-side binding cursor: `psycopg.ClientCursor`)."""
    batch = getattr(cur, "batch", None)  # prepared statements of the session (PostgreSQL)
    if batch is not None:
        text: str = batch(statements)
        return text
    template = "; ".join(text for text, _ in statements)
    params = [value for _, values in statements for value in values]
    if not params:
        return template
    bound: str = cur.mogrify(template, params)  # type: ignore[attr-defined]
    return bound


def _journal_row(r: AuditRecord) -> tuple[Any, ...]:
    return (r.seq, r.at, r.kind, r.run_id, r.call_id, r.data_json, r.prev_hash, r.hash, r.chain)


def _chunks(rows: Sequence[Any]) -> list[Sequence[Any]]:
    if len(rows) <= CHUNK:
        return [rows]
    return [rows[i : i + CHUNK] for i in range(0, len(rows), CHUNK)]

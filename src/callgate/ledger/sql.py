"""What SQLite and PostgreSQL ledgers share: `SqlLedger`, its deferral, group commit and reads.

The rest of what they share is split by job: the schema and its migrations
(`callgate.ledger.sql_schema`), every statement (`callgate.ledger.sql_statements`)
and every rule, the writes (`callgate.ledger.sql_writes`). ``MIGRATIONS``,
``SCHEMA_VERSION`` and `apply_migrations` are importable from here too.

A backend supplies a connection, a transaction runner and its dialect (the
placeholder, the column types, how to lock the audit head and how to commit
without waiting for the disk); the writes are written once, each over every
item of its kind in a transaction (`run_items`; a lone call's items take a
shorter way to the same rows), and so is the group commit here that lets
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
import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from callgate.approvals import Approvals
from callgate.ledger.approvals_sql import SqlApprovals
from callgate.ledger.base import (
    AttemptFinish,
    AttemptRecord,
    AttemptStart,
    AuditCheck,
    AuditRecord,
    CallRecord,
    CallState,
    Claim,
    Ledger,
    LedgerError,
    default_worker,
)
from callgate.ledger.chains import ANCHOR, CHECKPOINT_RECORDS, verify_chains
from callgate.ledger.idle_loop import loop_idle
from callgate.ledger.journal import attempts_from, changes_state
from callgate.ledger.sql_schema import (
    HEAD_SEQ,
    MIGRATIONS,
    SCHEMA_VERSION,
    apply_migrations,
    pending_migrations,
)
from callgate.ledger.sql_statements import (
    APPROVAL_COLUMNS,
    CALL_COLUMNS,
    CHAIN_HEADS,
    JOURNAL_COLUMNS,
    KEY_COLUMNS,
)
from callgate.ledger.sql_writes import (
    BEGIN,
    CHECKPOINT_ITEM,
    DECIDE,
    EVENT,
    FINISH,
    RUN,
    RUN_OPEN,
    RUN_READ,
    Item,
    RowCache,
    approval_from_row,
    call_from_row,
    key_from_row,
    record_from_row,
    seqs_from,
)
from callgate.ledger.storable import is_unstorable, storable_items
from callgate.ledger.truth import JournalTruth, resolve_chain_key
from callgate.ledger.verify import compare_rows

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SqlLedger", "apply_migrations", "pending_migrations"]

_FETCH = 500
"""Records fetched per statement by number."""


# -- the ledger -------------------------------------------------------------------


class _Waiter:
    """One async caller's item in a group commit, and its result."""

    __slots__ = ("durable", "error", "item", "result")

    def __init__(self, item: Item, durable: bool) -> None:
        self.item = item
        self.durable = durable
        self.result: Any = None
        self.error: BaseException | None = None


class _Once:
    """``fn(batch)`` made exactly once, by whichever thread comes first; the other one
    waits until it is made (a worker thread handed it, or the loop's thread taking it
    back when the worker never began it)."""

    __slots__ = ("batch", "fn", "lock", "made")

    def __init__(self, fn: Callable[[list[_Waiter]], None], batch: list[_Waiter]) -> None:
        self.fn, self.batch = fn, batch
        self.lock = threading.Lock()
        self.made = False

    def commit(self) -> None:
        with self.lock:
            if not self.made:
                self.made = True
                self.fn(self.batch)


class _Group:
    """The group commit of one event loop: the queue, whether a leader drains it, and
    the event set once the queue's commit is done (one per queue, made by the first
    caller that waits for it, not one per caller)."""

    __slots__ = ("done", "leading", "queue")

    def __init__(self) -> None:
        self.queue: list[_Waiter] = []
        self.done: anyio.Event | None = None
        self.leading = False


_Row = TypeVar("_Row")


def _readable(
    rows: Sequence[Any], convert: Callable[[Any], _Row], what: str, problems: list[str]
) -> list[_Row]:
    """Rows converted; one that cannot be read (a state no ledger writes, effects that are
    not a list) is a problem named by its key, not a damaged database."""
    found: list[_Row] = []
    for r in rows:
        try:
            found.append(convert(r))
        except (ValueError, TypeError, IndexError) as exc:
            problems.append(
                f"{what} {'/'.join(map(str, r[:2]))}: its row cannot be read ({exc}) (edited)"
            )
    return found


class SqlLedger(Ledger):
    """The writes, reads and group commit of a SQL ledger.

    A backend adds a connection and a transaction runner (`_transact`) and
    a read (`_query`). Writes that need not be durable on their own are
    *deferred*: kept in memory and applied first by the next transaction.
    """

    def __init__(self, *, worker: str | None, chain_key: bytes | str | None = None) -> None:
        self.worker = worker or default_worker()
        self.chain_key = resolve_chain_key(chain_key)
        self._truth = JournalTruth(self.chain_key)
        self._deferred: list[Item] = []
        self._deferred_lock = threading.Lock()
        self._snapshotting = threading.local()
        """Whether this thread is inside `_one_snapshot` (reads only)."""
        self._groups: dict[int, _Group] = {}
        self._rows = RowCache()
        self._unbound = 0
        """Records this process wrote since its last checkpoint (`checkpoint`)."""

    # -- what a backend provides --------------------------------------------------

    @abc.abstractmethod
    def _transact_once(self, items: Sequence[Item], *, durable: bool) -> list[Any]:
        """Apply the deferred items, then ``items``, in one transaction (`run_items`).

        ``durable``: return only once the commit is on disk. On failure the
        deferred items go back (`_restore_deferred`) unless the failure was
        caused by the data itself (a constraint) rather than a passing reason
        or text the database could not encode (`is_unstorable`).
        """

    @abc.abstractmethod
    def _query_once(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run one read statement (``?`` placeholders) and return its rows."""

    def _transact(self, items: Sequence[Item], *, durable: bool) -> list[Any]:
        """`_transact_once`, tried again with storable text if the first failed on text
        the database cannot encode: one such string never stops the ledger recording."""
        try:
            results = self._transact_once(items, durable=durable)
        except Exception as exc:
            if not is_unstorable(exc):
                raise
            with self._deferred_lock:
                self._deferred = storable_items(self._deferred)
            results = self._transact_once(storable_items(items), durable=durable)
        if self._unbound >= CHECKPOINT_RECORDS:
            self._unbound = 0
            self.checkpoint()
        return results

    def checkpoint(self) -> int:
        """Write a checkpoint binding every chain head that moved since the last one
        (`callgate.ledger.chains`); how many heads it bound (0: none had moved). Each
        process writes one after `CHECKPOINT_RECORDS` of its records, and at close."""
        found: int = self._transact_once(((CHECKPOINT_ITEM, self.worker),), durable=False)[0]
        return found

    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run one read statement; a parameter the database cannot encode is looked up
        as it was stored (`storable`)."""
        try:
            return self._query_once(statement, params)
        except Exception as exc:
            if not is_unstorable(exc):
                raise
        return self._query_once(statement, storable_items(params))

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
        """Commit deferred writes (lightly) so that reads see them (not inside this
        thread's read snapshot, which `verify` flushed before opening)."""
        if self._deferred and not getattr(self._snapshotting, "on", False):
            self._transact((), durable=False)

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[None]:
        """Reads inside see one committed state (a backend opens a read transaction)."""
        yield

    @contextlib.contextmanager
    def _one_snapshot(self) -> Iterator[None]:
        """`_snapshot`, marked for this thread so that no read inside tries to write."""
        self._flush()
        with self._snapshot():
            self._snapshotting.on = True
            try:
                yield
            finally:
                self._snapshotting.on = False

    # -- writes -----------------------------------------------------------------

    def record_decision(self, record: CallRecord) -> None:
        if record.state is CallState.ADMITTED:
            self._defer((DECIDE, record))
        else:
            self._transact(((DECIDE, record),), durable=False)

    def begin_attempt(self, start: AttemptStart) -> Claim:
        if not start.side_effecting:
            self._defer((BEGIN, start))
            return RUN
        result: Claim = self._transact(((BEGIN, start),), durable=True)[0]
        return result

    def finish_attempt(self, finish: AttemptFinish) -> bool:
        result: bool = self._transact(((FINISH, finish),), durable=finish.side_effecting)[0]
        return result

    def record_event(
        self, kind: str, *, run_id: str, call_id: str | None, data: Mapping[str, Any]
    ) -> None:
        if changes_state(kind):
            raise LedgerError(
                f"{kind!r} records change the ledger's state, so only the ledger writes them; "
                f"record the event under another kind (e.g. 'note.{kind}')"
            )
        if ANCHOR in data:
            raise LedgerError(
                f"a {kind!r} event's data has a field {ANCHOR!r}, which the ledger writes itself "
                "(the root chain's head each record anchors to); rename that field"
            )
        self._transact(((EVENT, (kind, run_id, call_id, dict(data))),), durable=False)

    def record_run(
        self,
        run_id: str,
        *,
        owner: str,
        facts: Sequence[tuple[str, Mapping[str, Any]]] = (),
    ) -> str | None:
        found: str | None = self._transact(
            ((RUN_OPEN, (run_id, owner, [(k, dict(d)) for k, d in facts])),), durable=False
        )[0]
        return found

    def run_facts(self, run_id: str) -> Sequence[AuditRecord]:
        found: list[AuditRecord] = self._transact(((RUN_READ, run_id),), durable=False)[0]
        return found

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

        On an idle loop (`loop_idle`: no other task, timer, callback or watched file)
        nobody can join, so the item commits at once on the caller's thread, exactly
        as the sync form does, with no await (so no cancellation point): ``asubmit``
        costs a lone commit no more than ``submit``. Otherwise the first caller leads:
        it yields once so that concurrent callers can queue, then commits everything
        queued, in a worker thread, again and again until the queue is empty; a caller
        that found nobody queued with it commits on its own thread (a hop would only
        add its cost). Callers arriving during a commit join the next one.

        Once queued, an item is committed before its caller goes on, whatever happens:
        anyio's shield stops anyio's cancellations, and a native one (``task.cancel()``,
        Ctrl-C under ``asyncio.run``; it passes the shield) is held until the item, and
        for a leader everything queued behind it, is committed, then raised. So the
        ledger keeps the truth (a finished handler's outcome is its outcome, not
        ``unknown``), no item stays queued for an unrelated later call to commit, and no
        follower waits for a leader that is gone (tests/core/test_lone_asubmit.py).
        """
        ident = threading.get_ident()
        group = self._groups.get(ident)
        if group is None:
            group = self._groups.setdefault(ident, _Group())
        if not group.leading and loop_idle():
            # Nothing else on this loop can queue with it, or be held up by it: commit in
            # place, as the sync form does (no yield, no thread hop, no second try).
            return self._transact((item,), durable=durable)[0]
        waiter = _Waiter(item, durable)
        group.queue.append(waiter)
        interrupted: BaseException | None = None
        with anyio.CancelScope(shield=True):
            if group.leading:
                if group.done is None:
                    group.done = anyio.Event()
                done = group.done  # the event of the batch this item is in
                while not done.is_set():
                    try:
                        await done.wait()
                    except asyncio.CancelledError as exc:  # native: held, the leader commits
                        interrupted = exc
            else:
                interrupted = await self._lead(group)
        if interrupted is not None:
            raise interrupted
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    async def _lead(self, group: _Group) -> BaseException | None:
        """Commit ``group``'s queue until it is empty; a native cancellation met on the
        way, held until then (any other interruption: the rest commits in place first)."""
        interrupted: BaseException | None = None
        group.leading = True
        try:
            try:
                await anyio.sleep(0)
            except asyncio.CancelledError as exc:
                interrupted = exc
            while group.queue:
                batch, group.queue = group.queue, []
                done, group.done = group.done, None
                try:
                    if len(batch) == 1 and done is None:
                        # A lone call commits here, as `submit` does: a thread hop
                        # would only add its cost, since nobody waits to join.
                        self._commit_group(batch)
                    else:
                        interrupted = await self._commit_off_loop(batch) or interrupted
                finally:
                    if done is not None:
                        done.set()
        except BaseException:
            while group.queue:  # nobody queued may wait for a leader that is gone
                batch, group.queue = group.queue, []
                done, group.done = group.done, None
                self._commit_group(batch)
                if done is not None:
                    done.set()
            raise
        finally:
            group.leading = False
        return interrupted

    async def _commit_off_loop(self, batch: list[_Waiter]) -> BaseException | None:
        """``_commit_group(batch)`` in a worker thread; on a native cancellation, the
        commit is still made (waited for, or made here if the worker never began it)
        and the cancellation returned to be raised once the queue is done."""
        once = _Once(self._commit_group, batch)
        try:
            await anyio.to_thread.run_sync(once.commit)
        except BaseException as exc:
            once.commit()
            if isinstance(exc, asyncio.CancelledError):
                return exc
            raise
        return None

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
            f"SELECT {CALL_COLUMNS} FROM calls WHERE run_id = ? AND call_id = ?",
            (run_id, call_id),
        )
        return call_from_row(rows[0]) if rows else None

    def calls(
        self,
        *,
        run_id: str | None = None,
        state: CallState | None = None,
        call_id: str | None = None,
        newest: int | None = None,
    ) -> Sequence[CallRecord]:
        self._flush()
        where, params = [], []
        if state is not None:  # a literal, so that the index on states applies
            where.append(f"state = '{CallState(state).value}'")
        for column, value in (("run_id", run_id), ("call_id", call_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        clause = " WHERE " + " AND ".join(where) if where else ""
        if newest is not None:  # the last N, read newest first, returned oldest first
            rows = self._query(
                f"SELECT {CALL_COLUMNS} FROM calls{clause} "
                f"ORDER BY created_at DESC, run_id DESC, call_id DESC LIMIT {int(newest)}",
                params,
            )
            return [call_from_row(r) for r in reversed(rows)]
        rows = self._query(
            f"SELECT {CALL_COLUMNS} FROM calls{clause} ORDER BY created_at, run_id, call_id",
            params,
        )
        return [call_from_row(r) for r in rows]

    def attempts(self, run_id: str, call_id: str) -> Sequence[AttemptRecord]:
        return attempts_from(self.records(run_id=run_id, call_id=call_id), self.worker)

    def records(
        self,
        *,
        run_id: str | None = None,
        call_id: str | None = None,
        since: float | None = None,
        until: float | None = None,
        after: int = 0,
        limit: int | None = None,
        key: str | None = None,
    ) -> Sequence[AuditRecord]:
        """Journal records, oldest first: those of one run or call, or of the calls that
        used idempotency ``key`` (listed in the calls' rows, so found without reading the
        journal), those whose time is in ``[since, until)``, after record ``after``, at
        most ``limit``. Without a run, call or key, a time range is a scan of the journal
        in the database."""
        self._flush()
        if key is not None:
            seqs = set()
            for r in self._query(
                "SELECT run_id, call_id FROM calls WHERE idempotency_key = ?", (key,)
            ):
                if (run_id is None or r[0] == run_id) and (call_id is None or r[1] == call_id):
                    seqs.update(self._record_seqs(r[0], r[1]))
            return self._fetch(seqs, None, None, since, until, after, limit)
        if run_id is None and call_id is None:
            where: list[str] = [f"seq > ? AND seq < {HEAD_SEQ}"]
            params: list[Any] = [after]
            if since is not None:
                where.append("at >= ?")
                params.append(since)
            if until is not None:
                where.append("at < ?")
                params.append(until)
            tail = f" LIMIT {int(limit)}" if limit is not None else ""
            rows = self._query(
                f"SELECT {JOURNAL_COLUMNS} FROM journal WHERE {' AND '.join(where)} "
                "ORDER BY seq" + tail,
                params,
            )
            return [record_from_row(r) for r in rows]
        return self._fetch(
            self._record_seqs(run_id, call_id), run_id, call_id, since, until, after, limit
        )

    def _fetch(
        self,
        numbers: set[int],
        run_id: str | None,
        call_id: str | None,
        since: float | None,
        until: float | None,
        after: int,
        limit: int | None,
    ) -> list[AuditRecord]:
        """The records numbered ``numbers`` that pass the filters, oldest first."""
        seqs = sorted(n for n in numbers if n > after)
        found: list[AuditRecord] = []
        for i in range(0, len(seqs), _FETCH):
            chunk = seqs[i : i + _FETCH]
            rows = self._query(
                f"SELECT {JOURNAL_COLUMNS} FROM journal WHERE seq IN "
                f"({', '.join('?' * len(chunk))}) ORDER BY seq",
                chunk,
            )
            for r in rows:
                rec = record_from_row(r)
                if (
                    (run_id is None or rec.run_id == run_id)
                    and (
                        call_id is None
                        or rec.call_id == call_id
                        or (rec.call_id is None and call_id == "")
                    )
                    and (since is None or rec.at >= since)
                    and (until is None or rec.at < until)
                ):
                    found.append(rec)
            if limit is not None and len(found) >= limit:
                break
        return found[:limit] if limit is not None else found

    def _record_seqs(self, run_id: str | None, call_id: str | None) -> set[int]:
        """The numbers of the records of a run or call: listed in the calls' rows, and
        among the orphans (records of no call, or written before their call's row)."""
        where, params = [], []
        for column, value in (("run_id", run_id), ("call_id", call_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        clause = " AND ".join(where)
        seqs: set[int] = set()
        for (text,) in self._query(f"SELECT records FROM calls WHERE {clause}", params):
            seqs.update(seqs_from(text))
        for (seq,) in self._query(f"SELECT seq FROM journal_orphans WHERE {clause}", params):
            seqs.add(int(seq))
        return seqs

    def audit(self) -> Sequence[AuditRecord]:
        return self.records()

    def audit_head(self) -> tuple[int, str] | None:
        """The newest record's number and hash (None: no record yet)."""
        self._flush()
        rows = self._query("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1")
        return (int(rows[0][0]), rows[0][1]) if rows else None

    def chain_heads(self) -> dict[str, tuple[int, str]]:
        """Each chain's head row: chain → (seq, hash) (`callgate.ledger.chains`)."""
        self._flush()
        return {str(c): (int(s), str(h)) for c, s, h in self._query(CHAIN_HEADS) if int(s) > 0}

    def verify(self) -> AuditCheck:
        """Verify every chain and the checkpoints that bind them, then recompute every row
        from the journal and compare.

        A chain must end at its head row, and every head a checkpoint bound must still be
        a record of its chain (a whole run removed is reported by the checkpoint that
        bound it). Any call, key or approval row that differs from what the journal says
        (edited, inserted or deleted) is reported, and so is a record that breaks a rule
        it was written under.
        """
        # One snapshot: a record committed between two of these reads would look like a
        # deleted tail or an edited row while anything else writes.
        with self._one_snapshot():
            return self._verify_read()

    def _verify_read(self) -> AuditCheck:
        records = self.audit()
        try:
            heads = self.chain_heads()
        except (TypeError, ValueError):
            heads = {}
        checked = verify_chains(records, heads, self.chain_key, dense=self._truth.dense)
        unreadable: list[str] = []
        problems = compare_rows(
            records,
            calls=_readable(
                self._query(f"SELECT {CALL_COLUMNS} FROM calls"), call_from_row, "call", unreadable
            ),
            keys=_readable(
                self._query(f"SELECT {KEY_COLUMNS} FROM idempotency_keys"),
                key_from_row,
                "idempotency key",
                unreadable,
            ),
            approvals=_readable(
                self._query(f"SELECT {APPROVAL_COLUMNS} FROM approvals"),
                approval_from_row,
                "approval",
                unreadable,
            ),
            orphans=[
                (str(r[0]), str(r[1]), int(r[2]))
                for r in self._query("SELECT run_id, call_id, seq FROM journal_orphans")
            ],
        )
        problems = unreadable + problems
        if not problems:
            return checked
        return AuditCheck(
            ok=False,
            records=checked.records,
            head=checked.head,
            problems=(*checked.problems, *problems),
            first_bad_seq=checked.first_bad_seq,
        )

    # -- approvals --------------------------------------------------------------

    def approvals(self) -> Approvals:
        """Approval requests in this database: they survive a restart and are shared by
        every process that opens it (`callgate.ledger.approvals_sql`)."""
        return SqlApprovals(self)

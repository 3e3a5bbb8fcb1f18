"""SQLite's write transaction, remembering what this connection's last one left.

SQLite has one writer at a time, so after a commit this connection knows the chain heads
it moved, the last record number and the records it wrote. It skips reading them again
while nobody else committed since: ``PRAGMA data_version`` changes whenever another
connection, of this process or another, committed, and the connection's own
``total_changes`` changes when it wrote outside the transactions this dialect saw.
Either change, a transaction that failed, or one that committed without reading
``data_version``, and everything is read from the file again, as the shared `Dialect`
does. ``data_version`` is read once per transaction, before anything remembered is used,
and under the write lock (``BEGIN IMMEDIATE``), so nobody else commits between that read
and the commit.

What is skipped, per transaction: the head rows of the chains it locks, the root
chain's head, ``max(seq)`` (the last record number), and the journal read since the
truth's mark when the records past it are all this connection's own. The rows of the
calls and keys a transaction will read are read up front in one statement, together
with ``data_version`` (``pragma_data_version()``), when that replaces reads of its own
(a call the row cache lacks, a key; a batch's are one statement, not one each), as
PostgreSQL's dialect reads them with its locks.

A side-effecting call is then 15 statements (was 22): its first write transaction sends
``BEGIN``, that one read, one write per table and ``COMMIT`` (7); its second reads the
check and the key apart (8), as that costs less than one read of both and of the cached
call (``tests/ledger/test_sqlite_statements.py``).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from callgate.ledger.base import GENESIS, AuditRecord
from callgate.ledger.chains import ROOT_CHAIN, run_chain
from callgate.ledger.sql_dialects import _ROOT, Dialect, Opened, _root
from callgate.ledger.sql_schema import HEAD_SEQ, Cursor
from callgate.ledger.sql_statements import CALL_COLUMNS, KEY_COLUMNS

if TYPE_CHECKING:
    from callgate.ledger.sql_tx import RowCache

__all__ = ["KEPT_HEADS", "KEPT_RECORDS", "SqliteDialect"]

KEPT_RECORDS = 4096
"""Records of its own a connection keeps for the next journal read before it forgets them
(and reads the journal from the file instead)."""
KEPT_HEADS = 10_000
"""Chain heads a connection keeps (those of the runs it wrote last) before it forgets them."""
_PAIRS = 400
"""Calls (two parameters each) or keys read in one statement."""
_CALL_WIDTH = len(CALL_COLUMNS.split(","))
_KEY_WIDTH = len(KEY_COLUMNS.split(","))
_PAD = {n: ", NULL" * (max(_CALL_WIDTH, _KEY_WIDTH) - n) for n in (1, _CALL_WIDTH, _KEY_WIDTH)}
"""What pads each part of `SqliteDialect._read` to the widest (its columns after the tag)."""


class SqliteDialect(Dialect):
    """SQLite, with what this connection's last transaction left (one per connection).

    `begin` right after ``BEGIN IMMEDIATE``, `committed` right after ``COMMIT``, `forget`
    after any failure; the rest is `Dialect`'s interface."""

    def __init__(self, cache: RowCache | None = None) -> None:
        self._cache = cache
        """The ledger's rows (`RowCache`): which calls a transaction will find there, so
        reads them from neither (only to choose between one read and several)."""
        self._version: int | None = None
        """``PRAGMA data_version`` as read in this connection's last write transaction."""
        self._changes: int | None = None
        """The connection's ``total_changes`` right after its last commit."""
        self._heads: dict[str, tuple[int, str] | None] = {}
        """Head rows known (None: no row), as they are in the file now."""
        self._last: int | None = None
        """The journal's last record number (below the legacy head row), if known."""
        self._after: int | None = None
        """`_kept` holds every journal row numbered above this (None: nothing kept)."""
        self._kept: list[tuple[Any, ...]] = []
        self._pending = False
        """Whether this transaction has yet to read ``PRAGMA data_version``."""
        self.reads = 0
        """Transactions that found another writer had committed (and so read again)."""

    # -- the transaction's frame ------------------------------------------------------

    def begin(self, changes: int) -> None:
        """Right after ``BEGIN IMMEDIATE`` (``changes``: the connection's total_changes).
        Whether another connection committed since this one's last commit is read with the
        transaction's first read (`open`, `numbers`, `since`), before anything known is
        used: under the write lock nobody else commits, so any moment of the transaction
        tells."""
        if changes != self._changes:
            self.forget()
        self._pending = True

    def _check(self, version: int) -> None:
        """Keep what is known only if ``PRAGMA data_version`` is where this connection's
        last write transaction left it."""
        if version != self._version:
            self.forget()
            self.reads += 1
        self._version = version
        self._pending = False

    def _ensure(self, cur: Cursor) -> None:
        """Check `data_version` now, if this transaction has not yet."""
        if self._pending:
            cur.execute("PRAGMA data_version")
            self._check(int(cur.fetchone()[0]))

    def committed(self, records: Sequence[AuditRecord], changes: int) -> None:
        """Right after ``COMMIT``: the transaction appended ``records``; the connection's
        total_changes is now ``changes``."""
        if self._pending:  # never checked: nothing was used, and nothing is known
            self.forget()
            return
        self._changes = changes
        if not records:
            return
        if len(records) > 1 and any(a.seq >= b.seq for a, b in itertools.pairwise(records)):
            records = sorted(records, key=_seq)  # appended in number order: not expected
        heads = self._heads
        if len(heads) > KEPT_HEADS:
            heads.clear()  # read again when next locked
        for rec in records:
            heads[rec.chain or "r:" + rec.run_id] = (rec.seq, rec.hash)  # `chain_of`
        top = records[-1].seq
        if self._last is not None and top > self._last:
            self._last = top
        after = self._after
        if after is not None:
            kept = self._kept
            if (
                len(kept) + len(records) > KEPT_RECORDS
                or records[0].seq <= after
                or top >= HEAD_SEQ
            ):
                self._after, self._kept = None, []
            else:
                kept.extend(
                    [
                        (
                            r.seq,
                            r.at,
                            r.kind,
                            r.run_id,
                            r.call_id,
                            r.data_json,
                            r.prev_hash,
                            r.hash,
                            r.chain,
                        )
                        for r in records
                    ]
                )

    def forget(self) -> None:
        """Know nothing: the next transaction reads everything from the file."""
        self._version = self._changes = self._last = self._after = None
        self._heads = {}
        self._kept = []

    # -- `Dialect` ----------------------------------------------------------------------

    def open(
        self,
        cur: Cursor,
        prelude: Sequence[tuple[str, Sequence[Any]]],
        names: Sequence[str],
        chains: Sequence[str],
        *,
        numbers: int,
        calls: Sequence[tuple[str, str]],
        keys: Sequence[str],
        since: int | None,
        root: bool = False,
    ) -> Opened:
        for text, params in prelude:
            cur.execute(text, params)
        prefetch = self._worth(calls, keys)
        call_rows: list[Any] = []
        key_rows: list[Any] = []
        if prefetch and len(calls) <= _PAIRS and len(keys) <= _PAIRS:
            version, call_rows, key_rows = self._read(cur, calls, keys, version=self._pending)
            if version is not None:
                self._check(version)
        else:
            self._ensure(cur)
            if prefetch:
                call_rows = self._read_calls(cur, calls)
                key_rows = self._read_keys(cur, keys)
        known = self._heads
        unknown = [c for c in chains if c not in known]
        if unknown:
            read = self.lock_chains(cur, unknown)
            for chain in unknown:
                known[chain] = read.get(chain)
        heads = {c: h for c in chains if (h := known[c]) is not None}
        found = None
        if root:
            if ROOT_CHAIN not in known:
                cur.execute(self(_ROOT))
                rows = cur.fetchall()
                known[ROOT_CHAIN] = (int(rows[0][0]), str(rows[0][1])) if rows else None
            head = known[ROOT_CHAIN]
            found = _root([head]) if head is not None else None
        if not prefetch:
            return Opened(heads, root=found)
        return Opened(heads, True, calls=call_rows, keys=key_rows, root=found)

    def numbers(self, cur: Cursor, count: int, last: int | None) -> list[int]:
        self._ensure(cur)
        if last is None:
            if self._last is None:
                cur.execute(f"SELECT max(seq) FROM journal WHERE seq < {HEAD_SEQ}")
                row = cur.fetchone()
                self._last = int(row[0]) if row and row[0] is not None else 0
                if self._after is None:
                    self._after, self._kept = self._last, []
            last = self._last
        return list(range(last + 1, last + 1 + count))

    def since(self, cur: Cursor, mark: int | None) -> tuple[list[Any], int | None]:
        self._ensure(cur)
        if mark is not None and self._after is not None and mark >= self._after:
            rows = [r for r in self._kept if r[0] > mark]
            self._after, self._kept = mark, rows  # the reader's mark only moves on
            return list(rows), (int(rows[-1][0]) if rows else mark)
        rows, after = super().since(cur, mark)
        if rows:
            self._last = int(rows[-1][0])
            self._after, self._kept = self._last, []
        elif mark is not None:
            self._after, self._kept = mark, []
        return rows, after

    # -- a batch's rows in one read per table ----------------------------------------------

    def _worth(self, calls: Sequence[tuple[str, str]], keys: Sequence[str]) -> bool:
        """Whether to read the calls' and keys' rows now, in one statement (with the
        `data_version` check, if pending), rather than let the transaction read each that
        the row cache lacks: when that saves two statements or more. Measured (CPU): the
        one read with a call's and a key's rows costs about what three single reads do
        (the check, the call, the key), and more than two (the check and a key, the call
        being cached), since every call asked for is then read and decoded too."""
        lazy = len(keys)
        runs = self._cache.runs if self._cache is not None else {}
        heads = self._heads
        for run_id, call_id in calls:
            kept = runs.get(run_id)
            chain = run_chain(run_id)
            cached = (
                kept is not None
                and call_id in kept.calls
                and chain in heads
                and kept.head == (heads[chain] or (0, GENESIS))
            )
            lazy += not cached
        return lazy > (1 if self._pending else 2)

    def _read(
        self,
        cur: Cursor,
        calls: Sequence[tuple[str, str]],
        keys: Sequence[str],
        *,
        version: bool,
    ) -> tuple[int | None, list[Any], list[Any]]:
        """``data_version`` (if ``version``), the calls' rows and the keys' rows, in one
        statement (each part tagged by its first column, padded to the widest)."""
        params: list[Any] = [v for pair in calls for v in pair]
        params.extend(keys)
        cur.execute(_read_text(version, len(calls), len(keys)), params)
        found: int | None = None
        call_rows: list[Any] = []
        key_rows: list[Any] = []
        for row in cur.fetchall():
            tag = row[0]
            if tag == 0:
                found = int(row[1])
            elif tag == 1:
                call_rows.append(row[1 : 1 + _CALL_WIDTH])
            else:
                key_rows.append(row[1 : 1 + _KEY_WIDTH])
        if version and found is None:  # pragma: no cover - SQLite always answers
            raise RuntimeError("PRAGMA data_version gave no row")
        return found, call_rows, key_rows

    def _read_calls(self, cur: Cursor, calls: Sequence[tuple[str, str]]) -> list[Any]:
        found: list[Any] = []
        for i in range(0, len(calls), _PAIRS):
            part = calls[i : i + _PAIRS]
            cur.execute(
                f"SELECT {_CALLS_FROM.format(_values(len(part)))}",
                [v for pair in part for v in pair],
            )
            found.extend(r[:_CALL_WIDTH] for r in cur.fetchall())
        return found

    def _read_keys(self, cur: Cursor, keys: Sequence[str]) -> list[Any]:
        found: list[Any] = []
        for i in range(0, len(keys), _PAIRS):
            part = keys[i : i + _PAIRS]
            cur.execute(
                f"SELECT {KEY_COLUMNS} FROM idempotency_keys WHERE key IN "
                f"({', '.join('?' * len(part))})",
                list(part),
            )
            found.extend(cur.fetchall())
        return found


_CALLS_FROM = (
    ", ".join("c." + c.strip() for c in CALL_COLUMNS.split(","))
    + _PAD[_CALL_WIDTH]
    + " FROM (VALUES {}) AS v CROSS JOIN calls AS c"
    " ON c.run_id = v.column1 AND c.call_id = v.column2"
)
"""Calls' rows by (run, call) pairs: the pairs first (``CROSS JOIN`` keeps that order), each
found by the primary key (``(run_id, call_id) IN (VALUES ...)`` scans the table)."""


def _values(pairs: int) -> str:
    return ", ".join(["(?, ?)"] * pairs)


@functools.lru_cache(maxsize=256)
def _read_text(version: bool, calls: int, keys: int) -> str:
    """The text of `SqliteDialect._read`: its parts tagged 0 (``data_version``), 1 (a
    call's row) and 2 (a key's row) in their first column, padded to the widest."""
    parts: list[str] = []
    if version:
        parts.append(f"SELECT 0, data_version{_PAD[1]} FROM pragma_data_version()")
    if calls:
        parts.append(f"SELECT 1, {_CALLS_FROM.format(_values(calls))}")
    if keys:
        parts.append(
            f"SELECT 2, {KEY_COLUMNS}{_PAD[_KEY_WIDTH]} FROM idempotency_keys WHERE key IN "
            f"({', '.join('?' * keys)})"
        )
    return " UNION ALL ".join(parts)


def _seq(r: AuditRecord) -> int:
    return r.seq

"""SQLite's write transaction, remembering what this connection's last one left.

SQLite has one writer at a time, so after a commit this connection knows the chain heads
it moved, the last record number and the records it wrote. It skips reading them again
while nobody else committed since: ``PRAGMA data_version`` (read once per transaction,
under the write lock) changes whenever another connection, of this process or another,
committed, and the connection's own ``total_changes`` changes when it wrote outside the
transactions this dialect saw. Either change, a transaction that failed, or one this
dialect did not see commit, and everything is read from the file again, as the shared
`Dialect` does.

What is skipped, per transaction: the head rows of the chains it locks, the root
chain's head, ``max(seq)`` (the last record number), and the journal read since the
truth's mark when the records past it are all this connection's own. The rows of the
calls and keys a transaction will read are read in one statement per table when that
replaces several (a batch), as PostgreSQL's dialect does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from callgate.ledger.base import GENESIS, AuditRecord
from callgate.ledger.chains import ROOT_CHAIN, chain_of, run_chain
from callgate.ledger.sql_dialects import _ROOT, Dialect, Opened, _root
from callgate.ledger.sql_schema import HEAD_SEQ, Cursor
from callgate.ledger.sql_statements import CALL_COLUMNS, KEY_COLUMNS

if TYPE_CHECKING:
    from callgate.ledger.sql_tx import RowCache

__all__ = ["KEPT_RECORDS", "SqliteDialect"]

KEPT_RECORDS = 4096
"""Records of its own a connection keeps for the next journal read before it forgets them
(and reads the journal from the file instead)."""
_PAIRS = 400
"""Calls (two parameters each) or keys read in one statement."""


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
        self.reads = 0
        """Transactions that found another writer had committed (and so read again)."""

    # -- the transaction's frame ------------------------------------------------------

    def begin(self, cur: Cursor, changes: int) -> None:
        """Right after ``BEGIN IMMEDIATE``: keep what is known only if nobody else
        committed since this connection's last commit (``changes``: its total_changes)."""
        cur.execute("PRAGMA data_version")
        row = cur.fetchone()
        version = int(row[0])
        if version != self._version or changes != self._changes:
            self.forget()
            self.reads += 1
        self._version = version

    def committed(self, records: Sequence[AuditRecord], changes: int) -> None:
        """Right after ``COMMIT``: the transaction appended ``records``; the connection's
        total_changes is now ``changes``."""
        self._changes = changes
        if not records:
            return
        for rec in sorted(records, key=lambda r: r.seq):
            self._heads[chain_of(rec)] = (rec.seq, rec.hash)
        top = max(r.seq for r in records)
        if self._last is not None:
            self._last = max(self._last, top)
        if self._after is not None:
            if len(self._kept) + len(records) > KEPT_RECORDS or any(
                r.seq <= self._after or r.seq >= HEAD_SEQ for r in records
            ):
                self._after, self._kept = None, []
            else:
                self._kept.extend(_journal_row(r) for r in sorted(records, key=lambda r: r.seq))

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
        if not self._prefetch(heads, calls, keys):
            return Opened(heads, root=found)
        return Opened(
            heads,
            True,
            calls=self._read_calls(cur, calls),
            keys=self._read_keys(cur, keys),
            root=found,
        )

    def numbers(self, cur: Cursor, count: int, last: int | None) -> list[int]:
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

    def _prefetch(
        self,
        heads: dict[str, tuple[int, str]],
        calls: Sequence[tuple[str, str]],
        keys: Sequence[str],
    ) -> bool:
        """Whether reading the calls' and keys' rows now (one statement per table) costs
        fewer statements than the transaction reading each (those the row cache lacks)."""
        if len(calls) + len(keys) < 3:
            return False
        lazy = len(keys)
        runs = self._cache.runs if self._cache is not None else {}
        for run_id, call_id in calls:
            kept = runs.get(run_id)
            head = heads.get(run_chain(run_id), (0, GENESIS))
            if kept is None or kept.head != head or call_id not in kept.calls:
                lazy += 1
        return (1 if calls else 0) + (1 if keys else 0) < lazy

    def _read_calls(self, cur: Cursor, calls: Sequence[tuple[str, str]]) -> list[Any]:
        found: list[Any] = []
        for i in range(0, len(calls), _PAIRS):
            part = calls[i : i + _PAIRS]
            cur.execute(
                f"SELECT {CALL_COLUMNS} FROM calls WHERE (run_id, call_id) IN "
                f"(VALUES {', '.join(['(?, ?)'] * len(part))})",
                [v for pair in part for v in pair],
            )
            found.extend(cur.fetchall())
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


def _journal_row(r: AuditRecord) -> tuple[Any, ...]:
    """A record as a journal read returns it (``JOURNAL_COLUMNS``)."""
    return (r.seq, r.at, r.kind, r.run_id, r.call_id, r.data_json, r.prev_hash, r.hash, r.chain)

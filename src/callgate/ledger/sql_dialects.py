"""What differs between SQLite and PostgreSQL in a write transaction: placeholders, locks,
record numbers, and how a reader finds what committed since it last read.

SQLite has one writer at a time (``BEGIN IMMEDIATE``), so it needs no lock of its own:
records are numbered one after the last, and they commit in that order. PostgreSQL
runs writers side by side: a transaction locks the head rows of the chains it writes
(``SELECT … FOR UPDATE`` on ``chains``, one row per run) and takes a transaction
advisory lock per idempotency key and budget it may change, all in one sorted order
(no deadlock), and only then draws record numbers from a sequence. So writers of
different runs and keys never wait for each other, and the records of one chain, or
of one key, are numbered in the order they committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from callgate.ledger.sql_schema import Cursor
from callgate.ledger.sql_statements import JOURNAL_COLUMNS

__all__ = ["Dialect", "Opened"]

_HEADS = "SELECT chain, seq, hash FROM chains WHERE chain IN ({})"
_ROOT = "SELECT seq, hash FROM chains WHERE chain = 'r:'"
"""The root chain's head row (`callgate.ledger.chains.ROOT_CHAIN`), read without a lock."""


def _root(rows: Sequence[Any]) -> tuple[int, str] | None:
    """The root head from `_ROOT`'s rows (None: no row, or no record yet)."""
    if not rows or int(rows[0][0]) <= 0:
        return None
    return int(rows[0][0]), str(rows[0][1])


class Opened(NamedTuple):
    """What `Dialect.open` locked and read."""

    heads: dict[str, tuple[int, str]]
    """The locked chains' head rows (a chain with no record yet is absent)."""
    prefetched: bool = False
    """Whether the rows below were read (else the transaction reads them when it needs)."""
    numbers: Sequence[int] = ()
    calls: Sequence[Any] = ()
    keys: Sequence[Any] = ()
    since: tuple[list[Any], int | None] | None = None
    chain_rows: list[Any] | None = None
    root: tuple[int, str] | None = None
    """The root chain's head row, read after the locks (``root``): what the records of the
    transaction anchor to (`callgate.ledger.chains.ANCHOR`); None: not read, or no record."""


class Dialect:
    """SQLite's way, reading everything from the file (migrations use it as it is);
    `callgate.ledger.sqlite_dialect.SqliteDialect` adds what a connection's last write
    transaction left, and `PostgresDialect` overrides what PostgreSQL does."""

    name = "sqlite"
    concurrent = False
    """Whether writers run side by side (and so must lock what they change)."""
    batches = False
    """Whether statements whose results are not read are sent with the next one."""

    def __call__(self, statement: str) -> str:
        """The statement with this database's placeholders (the shared ones use ``?``)."""
        return statement

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
        """Run ``prelude`` (statements and their parameters, ready to send), lock ``names``
        and ``chains``; a dialect may also draw ``numbers`` record numbers and read the
        ``calls``' and ``keys``' rows and the journal since mark ``since`` (-1: not wanted;
        None: all of it, after the chains' head rows) in the same round trip, and, with
        ``root``, the root chain's head row. SQLite reads nothing else ahead: its reads cost
        no round trip."""
        for text, params in prelude:
            cur.execute(text, params)
        self.lock(cur, names)
        heads = self.lock_chains(cur, chains)
        found = None
        if root:
            cur.execute(self(_ROOT))
            found = _root(cur.fetchall())
        return Opened(heads, root=found)

    def lock(self, cur: Cursor, names: Sequence[str]) -> None:
        """Lock idempotency keys and budgets by name until the transaction ends."""

    def lock_chains(self, cur: Cursor, chains: Sequence[str]) -> dict[str, tuple[int, str]]:
        """Lock the head rows of ``chains`` (sorted) and return them; a chain without a row
        is absent from the answer (no record yet)."""
        found: dict[str, tuple[int, str]] = {}
        for i in range(0, len(chains), 64):
            part = chains[i : i + 64]
            cur.execute(self(_HEADS.format(", ".join("?" * len(part)))), list(part))
            for chain, seq, h in cur.fetchall():
                found[chain] = (int(seq), h)
        return found

    def numbers(self, cur: Cursor, count: int, last: int | None) -> list[int]:
        """``count`` new record numbers, each above ``last`` (None: none drawn yet)."""
        if last is None:
            cur.execute("SELECT max(seq) FROM journal WHERE seq < 4611686018427387904")
            row = cur.fetchone()
            last = int(row[0]) if row and row[0] is not None else 0
        return list(range(last + 1, last + 1 + count))

    def since(self, cur: Cursor, mark: int | None) -> tuple[list[Any], int | None]:
        """The journal rows committed since ``mark`` (None: every row), by number, and the
        mark to read from next time."""
        cur.execute(
            f"SELECT {JOURNAL_COLUMNS} FROM journal WHERE seq > ? AND seq < 4611686018427387904 "
            "ORDER BY seq",
            (mark or 0,),
        )
        rows = list(cur.fetchall())
        return rows, (int(rows[-1][0]) if rows else mark)

    def unbound(self, cur: Cursor, root: str) -> list[tuple[str, int, str]]:
        """The chain heads no checkpoint binds yet (locked on PostgreSQL: those a writer
        holds are left for the next checkpoint)."""
        cur.execute(
            self("SELECT chain, seq, hash FROM chains WHERE bound = 0 AND seq > 0 AND chain <> ?"),
            (root,),
        )
        return [(str(c), int(s), str(h)) for c, s, h in cur.fetchall()]

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

import hashlib
from collections.abc import Sequence
from typing import Any

from callgate.ledger.sql_schema import Cursor
from callgate.ledger.sql_statements import JOURNAL_COLUMNS

__all__ = ["Dialect", "PostgresDialect", "SqliteDialect", "dialect_for"]

_HEADS = "SELECT chain, seq, hash FROM chains WHERE chain IN ({})"


class Dialect:
    """SQLite's way (the default); `PostgresDialect` overrides what PostgreSQL does."""

    name = "sqlite"
    concurrent = False
    """Whether writers run side by side (and so must lock what they change)."""

    def __call__(self, statement: str) -> str:
        """The statement with this database's placeholders (the shared ones use ``?``)."""
        return statement

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


SqliteDialect = Dialect


class PostgresDialect(Dialect):
    """PostgreSQL: row locks on the chains written, advisory locks on keys, a sequence."""

    name = "postgres"
    concurrent = True

    def __call__(self, statement: str) -> str:
        return _pg(statement)

    def lock(self, cur: Cursor, names: Sequence[str]) -> None:
        if names:
            ids = sorted({_lock_id(n) for n in names})
            cur.execute(
                "SELECT pg_advisory_xact_lock(x) FROM unnest(%s::bigint[]) AS x",
                (ids,),
            )

    def lock_chains(self, cur: Cursor, chains: Sequence[str]) -> dict[str, tuple[int, str]]:
        if not chains:
            return {}
        statement = (
            "SELECT chain, seq, hash FROM chains WHERE chain = ANY(%s) ORDER BY chain FOR UPDATE"
        )
        cur.execute(statement, (list(chains),))
        rows = cur.fetchall()
        seen = {str(r[0]) for r in rows}
        missing = [c for c in chains if c not in seen]
        if missing:  # a run's first record: make its head row, so that it can be locked
            cur.execute(
                "INSERT INTO chains (chain, seq, hash, bound) "
                "SELECT c, 0, '', 1 FROM unnest(%s::text[]) AS c ON CONFLICT (chain) DO NOTHING",
                (missing,),
            )
            cur.execute(statement, (missing,))
            rows = [*rows, *cur.fetchall()]
        # A row at 0 is a chain opened by a writer that wrote nothing to it: no record yet.
        return {str(c): (int(s), str(h)) for c, s, h in rows if int(s) > 0}

    def numbers(self, cur: Cursor, count: int, last: int | None) -> list[int]:
        cur.execute("SELECT nextval('journal_seq') FROM generate_series(1, %s)", (count,))
        return sorted(int(r[0]) for r in cur.fetchall())

    def since(self, cur: Cursor, mark: int | None) -> tuple[list[Any], int | None]:
        # Every transaction older than the snapshot's xmin has ended: what it wrote is read
        # now or was read before; rows of younger ones are read again next time (and
        # skipped by number if folded already).
        cur.execute(
            f"SELECT {JOURNAL_COLUMNS}, pg_snapshot_xmin(pg_current_snapshot())::text::bigint "
            "FROM journal WHERE xid >= %s ORDER BY seq",
            (mark or 0,),
        )
        rows = list(cur.fetchall())
        if not rows:
            cur.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
            row = cur.fetchone()
            return [], int(row[0]) if row else mark
        return [r[:-1] for r in rows], int(rows[0][-1])

    def unbound(self, cur: Cursor, root: str) -> list[tuple[str, int, str]]:
        cur.execute(
            "SELECT chain, seq, hash FROM chains WHERE bound = 0 AND seq > 0 AND chain <> %s "
            "ORDER BY chain FOR UPDATE SKIP LOCKED",
            (root,),
        )
        return [(str(c), int(s), str(h)) for c, s, h in cur.fetchall()]


_PG: dict[str, str] = {}


def _pg(statement: str) -> str:
    found = _PG.get(statement)
    if found is None:
        found = statement.replace("?", "%s")
        if len(_PG) < 4096:
            _PG[statement] = found
    return found


def _lock_id(name: str) -> int:
    """A 64-bit advisory lock id for a key or budget name."""
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def dialect_for(sql: Any) -> Dialect:
    """The dialect ``sql`` is, or the one whose placeholders it writes (a migration hook
    is given either)."""
    if isinstance(sql, Dialect):
        return sql
    return PostgresDialect() if sql("?") == "%s" else Dialect()

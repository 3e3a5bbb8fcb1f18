"""Statements sent as one text per round trip, each run as a statement the session has
prepared (SQL ``PREPARE`` / ``EXECUTE``): the server parses and plans each once per
connection, the client binds the parameters into the text in one pass (psycopg's
``ClientCursor``) and sends it in one message.

A statement is prepared in the first text that runs it on a connection (``PREPARE … ;
EXECUTE …`` in the same round trip). `PreparedStatements` is what one connection has
prepared; after a failed transaction it is read again from ``pg_prepared_statements``
(a text that failed may have stopped before or after its ``PREPARE``).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import Any

__all__ = ["PREFIX", "PreparedStatements", "PreparingCursor", "prepared_form"]

PREFIX = "callgate_"
"""The names of the statements the ledger prepares."""
_PREPARABLE = ("SELECT ", "INSERT ", "UPDATE ", "DELETE ", "WITH ")
UNPREPARED: set[str] = set()
"""Statements never prepared: their best plan depends on their parameters' values (a plan
cached for any value would not know them). `callgate.ledger.pg_dialect` adds to it."""


@functools.lru_cache(maxsize=1024)
def prepared_form(statement: str, count: int) -> tuple[str, str, str] | None:
    """(name, ``PREPARE`` text, ``EXECUTE`` text with ``count`` placeholders) of a
    statement written with ``%s`` placeholders, or None: not a statement to prepare."""
    if not statement.startswith(_PREPARABLE) or statement in UNPREPARED:
        return None
    pieces = statement.split("%s")
    if len(pieces) - 1 != count or "%" in statement.replace("%s", ""):
        return None
    digest = hashlib.blake2b(statement.encode(), digest_size=10).hexdigest()
    name = PREFIX + digest
    numbered = pieces[0] + "".join(f"${i}{p}" for i, p in enumerate(pieces[1:], 1))
    execute = f"EXECUTE {name}" + (f"({', '.join(['%s'] * count)})" if count else "")
    return name, f"PREPARE {name} AS {numbered}", execute


class PreparedStatements:
    """The ledger's statements one connection has prepared."""

    __slots__ = ("names",)

    def __init__(self) -> None:
        self.names: set[str] = set()

    def reread(self, conn: Any) -> None:
        """Read the names again from the session (after a failure)."""
        self.names.clear()
        rows = conn.execute(
            "SELECT name FROM pg_prepared_statements WHERE starts_with(name, %s)", (PREFIX,)
        ).fetchall()
        self.names.update(str(r[0]) for r in rows)


class PreparingCursor:
    """A client-side binding cursor (``psycopg.ClientCursor``) whose batches of statements
    (`batch`) run prepared statements of the session."""

    __slots__ = ("_cur", "_prepared", "_skip")

    def __init__(self, cur: Any, prepared: PreparedStatements) -> None:
        self._cur = cur
        self._prepared = prepared
        self._skip = 0
        """The ``PREPARE`` results at the head of the text `batch` made last."""

    def batch(self, statements: Sequence[tuple[str, Sequence[Any] | None]]) -> str:
        """``statements`` as one text: each preparable one as ``EXECUTE`` (after its
        ``PREPARE`` the first time on this connection), parameters bound in one pass. The
        ``PREPARE`` statements go first (`execute` skips their results)."""
        names = self._prepared.names
        prepares: list[str] = []
        texts: list[str] = []
        values: list[Any] = []
        for text, params in statements:
            found = prepared_form(text, len(params or ()))
            if found is None:
                texts.append(text)
            else:
                name, prepare, execute = found
                if name not in names:
                    prepares.append(prepare)
                    names.add(name)
                texts.append(execute)
            values.extend(params or ())
        self._skip = len(prepares)
        template = "; ".join([*prepares, *texts])
        if not values:
            return template
        bound: str = self._cur.mogrify(template, values)
        return bound

    # -- the DB-API part (`callgate.ledger.sql_schema.Cursor`), the inner cursor's ----------

    def mogrify(self, statement: str, params: Any) -> str:
        text: str = self._cur.mogrify(statement, params)
        return text

    def execute(self, statement: Any, params: Any = None, /) -> Any:
        skip, self._skip = self._skip, 0
        self._cur.execute(statement, params)
        for _ in range(skip):
            self._cur.nextset()
        return self

    def executemany(self, statement: Any, params: Any, /) -> Any:
        self._cur.executemany(statement, params)
        return self

    def nextset(self) -> Any:
        return self._cur.nextset()

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        rows: list[Any] = self._cur.fetchall()
        return rows

    @property
    def rowcount(self) -> int:
        count: int = self._cur.rowcount
        return count

    @property
    def description(self) -> Any:
        return self._cur.description

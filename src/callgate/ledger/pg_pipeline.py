"""A psycopg connection in pipeline mode, as the cursor a PostgreSQL write transaction
runs on (`callgate.ledger.sql_tx.Transaction`).

Every statement is sent as soon as it is executed and bound on the server; a statement
whose result is read waits for it (one round trip for everything sent before it), one
whose result is not read (`PipelineCursor.queue`) does not wait at all. So a write
transaction is still two round trips: the locks and its reads, then its writes and the
``COMMIT`` (answered by the ``Sync`` that ends the pipeline). Statements are prepared
on their first use in each session (``prepare``), so the server parses and plans each
text once per connection, not once per transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

__all__ = ["PipelineCursor"]


class PipelineCursor:
    """The ledger's cursor on a connection in pipeline mode: each statement whose result
    is read runs on a psycopg cursor of its own (results of several statements in flight
    at once), the others on one shared cursor whose results are dropped."""

    pipelined = True
    """What `Transaction` checks to send writes without waiting (`queue`)."""

    __slots__ = ("_conn", "_last", "_prepare", "_sink")

    def __init__(self, conn: psycopg.Connection[Any], *, prepare: bool = True) -> None:
        self._conn = conn
        self._prepare = bool(prepare)
        self._sink = conn.cursor()
        self._last: psycopg.Cursor[Any] = self._sink

    def submit(
        self, statement: str, params: Any = None, *, prepare: bool = True
    ) -> psycopg.Cursor[Any]:
        """Send ``statement``; its result is read from the cursor returned, when needed.
        ``prepare=False``: planned anew each time (a statement whose best plan depends on
        its parameters' values, which a plan cached for any value would not know)."""
        cur = self._conn.cursor()
        cur.execute(statement, params, prepare=self._prepare and prepare)
        return cur

    def queue(self, statement: str, params: Any = None) -> None:
        """Send ``statement`` without ever reading its result (an error in it still fails
        the transaction: the pipeline reports it at its next read or at its end)."""
        self._sink.execute(statement, params, prepare=self._prepare)

    # -- the DB-API part (`callgate.ledger.sql_schema.Cursor`) ---------------------------

    def execute(self, statement: str, params: Any = None, /) -> PipelineCursor:
        self._last = self.submit(statement, params)
        return self

    def executemany(self, statement: str, params: Iterable[Any], /) -> PipelineCursor:
        cur = self._conn.cursor()
        cur.executemany(statement, params)
        self._last = cur
        return self

    def fetchone(self) -> Any:
        return self._last.fetchone()

    def fetchall(self) -> list[Any]:
        return self._last.fetchall()

    @property
    def rowcount(self) -> int:
        return self._last.rowcount

    @property
    def description(self) -> Any:
        return self._last.description

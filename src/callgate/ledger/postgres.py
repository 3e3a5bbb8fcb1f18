"""`PostgresLedger`: one ledger shared by many workers and hosts.

The statements and rules are the SQLite ledger's (`callgate.ledger.sql_statements`,
`callgate.ledger.sql_writes`); here they run on pooled psycopg 3 connections.
What PostgreSQL adds:

* atomic conditional updates (``UPDATE … WHERE state IN (…)``) and
  ``INSERT … ON CONFLICT`` claim calls and idempotency keys across workers:
  two workers submitting the same key at once wait on the key's row, and
  exactly one of them runs;
* the audit chain is extended under a row lock on its head, so records from
  every worker form one chain;
* writes that need not wait for the disk commit with
  ``synchronous_commit = off`` (still crash-safe for the database, visible to
  every worker at once);
* the schema is migrated on start, under an advisory lock so that workers
  starting together migrate once; ``schema_version`` records each version;
* ``read_only=True`` opens an existing ledger only to read it (``callgate ledger
  --dsn``): the schema is checked, never created or migrated, and every session
  runs with ``default_transaction_read_only = on``.

Requires the ``postgres`` extra: ``pip install 'callgate[postgres]'``.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from callgate.ledger.base import LedgerError
from callgate.ledger.migrate import MIGRATION_HOOKS
from callgate.ledger.pg_dialect import PostgresDialect
from callgate.ledger.pg_prepared import PreparedStatements, PreparingCursor
from callgate.ledger.sql import SqlLedger
from callgate.ledger.sql_schema import SCHEMA_VERSION, apply_migrations
from callgate.ledger.sql_writes import Item, Transaction, run_items
from callgate.ledger.storable import is_unstorable

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresLedger"]

_TYPES = {
    "real": "DOUBLE PRECISION",
    "bigint": "BIGINT",
    "without_rowid": "",
    "journal_xid": (
        "ALTER TABLE journal ADD COLUMN xid BIGINT NOT NULL "
        "DEFAULT (pg_current_xact_id()::text::bigint)"
    ),
    "journal_xid_index": "CREATE INDEX journal_xid ON journal (xid)",
    "journal_seq": "CREATE SEQUENCE journal_seq",
}
_DIALECT = PostgresDialect()
_DURABLE = ("BEGIN",)
_LIGHT = ("BEGIN", "SET LOCAL synchronous_commit TO OFF")
_MIGRATION_LOCK = 0x63616C6C67617465  # "callgate"
_TABLES = ("schema_version", "calls", "idempotency_keys", "journal", "approvals", "chains")
"""The tables of a callgate ledger."""
_EXPECTED = "a database written by callgate, with the tables " + ", ".join(_TABLES)
_MISSING_TABLES = "SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NULL"
"""Which of the ledger's tables the session's search path does not find."""
_USER_TABLES = (
    "SELECT table_schema || '.' || table_name FROM information_schema.tables "
    "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1 LIMIT 6"
)


_LOST_STATES = ("26000", "42P05")
"""invalid_sql_statement_name, duplicate_prepared_statement: the session's prepared
statements are not those the ledger prepared there."""
_CHANGED_PLAN = "cached plan must not change result type"
_LOST = (
    "the PostgreSQL session's prepared statements are not those the ledger prepared on it, "
    "twice in a row ({state}: {error}); the write was not committed (deferred records are "
    "kept for the next write). Behind a pooler that shares server sessions between "
    "clients (PgBouncer in transaction mode) pass PostgresLedger(dsn, prepare=False)"
)


def _sqlstate(exc: BaseException) -> str | None:
    state = getattr(exc, "sqlstate", None)
    return state if isinstance(state, str) else None


def _lost_statement(exc: BaseException) -> bool:
    """Whether ``exc`` says the session lost or changed a prepared statement (dropped by
    ``DEALLOCATE ALL`` or a pooler, prepared there by another client, or a plan whose
    result type a table's change altered): not the data's fault, and cured by preparing
    again."""
    state = _sqlstate(exc)
    return state in _LOST_STATES or (state == "0A000" and _CHANGED_PLAN in str(exc))


@functools.lru_cache(maxsize=1024)
def _pg(statement: str) -> str:
    """The statement with psycopg's placeholders (the shared statements use ``?``)."""
    return statement.replace("?", "%s")


class PostgresLedger(SqlLedger):
    """A ledger in a PostgreSQL database, on a pool of connections. Thread-safe.

    Args:
        dsn: a libpq connection string or URL, e.g.
            ``postgresql://callgate@db.internal/callgate``.
        worker: the id this process's attempts are recorded under (default
            ``host:pid``); give each worker a stable one so that, after a
            restart, it recovers only its own calls (`Gate.recover`).
        min_size, max_size: connections kept open, and the most opened.
        timeout: seconds to wait for the database (and for a pooled connection).
        read_only: open an existing ledger to read it, as ``callgate ledger --dsn``
            and ``callgate approvals --dsn`` do: nothing is created or migrated, and
            every session runs with ``default_transaction_read_only = on``, so no
            statement can write. A database that is not a callgate ledger of this
            schema version raises `LedgerError` naming it; one that cannot be
            reached or read raises `LedgerError` caused by the driver's error.
            Writes fail.
        chain_key: the key of a keyed journal, as for `SQLiteLedger`.
        prepare: prepare each statement of bounded size of a write transaction on its
            first use in a session (SQL ``PREPARE``: the server parses it once per
            connection, and keeps a plan; at most `pg_prepared.MAX_PREPARED` per
            session, least recently used dropped). Pass False behind a pooler that
            shares a server session between clients (PgBouncer in transaction mode): a
            session whose statements vanish or change twice in a row raises
            `LedgerError` saying so (once is cured: they are prepared again).
    """

    def __init__(
        self,
        dsn: str,
        *,
        worker: str | None = None,
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = 10.0,
        read_only: bool = False,
        chain_key: bytes | str | None = None,
        prepare: bool = True,
    ) -> None:
        super().__init__(worker=worker, chain_key=chain_key)
        self.read_only = read_only
        self._tx_lock = threading.Lock()
        self._reading = threading.local()
        """The connection of this thread's `_snapshot`, while one is open."""
        try:
            import psycopg
            import psycopg_pool
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise LedgerError(
                "PostgresLedger needs psycopg 3 and psycopg-pool: pip install 'callgate[postgres]'"
            ) from exc
        self._psycopg = psycopg
        self._prepare = prepare
        self._sessions: weakref.WeakKeyDictionary[Any, PreparedStatements] = (
            weakref.WeakKeyDictionary()
        )
        """What each pooled connection has prepared (`callgate.ledger.pg_prepared`)."""
        self._errors = (psycopg.Error, psycopg_pool.PoolTimeout)
        self._transient = (psycopg.OperationalError, psycopg_pool.PoolTimeout)
        self._pool = psycopg_pool.ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            # prepare=False: not even the reads run five times are prepared (psycopg's
            # prepare_threshold), as a pooler without prepared statements needs.
            kwargs={"autocommit": True, **({} if prepare else {"prepare_threshold": None})},
            configure=_read_only_session if read_only else None,
            open=False,
            name="callgate-ledger",
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
            if read_only:
                self._check_schema()
            else:
                self._migrate()
        except self._errors as exc:
            self._pool.close()
            may = "read the ledger's tables" if read_only else "create tables in the database"
            raise LedgerError(
                f"cannot open the PostgreSQL ledger: {exc}; check the DSN, that the server "
                f"is running and that the user may {may}"
            ) from exc
        except BaseException:
            self._pool.close()
            raise

    def _check_schema(self) -> None:
        """Refuse a database that is not a callgate ledger at this callgate's schema
        version (`read_only`); reads only, in a read-only session."""
        with self._pool.connection() as conn:
            database = conn.execute("SELECT current_database()").fetchone()
            name = f"the PostgreSQL database '{database[0] if database else '?'}'"
            missing = [str(r[0]) for r in conn.execute(_MISSING_TABLES, (list(_TABLES),))]
            if missing and not {"schema_version", "calls"} & set(missing):
                missing = []  # an older callgate's ledger: its version says so below
            if missing:
                tables = [str(r[0]) for r in conn.execute(_USER_TABLES)]
                if not tables:
                    found = "it has no tables"
                else:
                    shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
                    found = f"it has no {missing[0]} table (its tables: {shown})"
                raise LedgerError(
                    f"{name} is not a callgate ledger: {found} (expected {_EXPECTED}); "
                    "check that the DSN names the database of a callgate ledger"
                )
            row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        version = int(row[0]) if row and row[0] is not None else 0
        if version > SCHEMA_VERSION:
            raise LedgerError(
                f"the ledger in {name} has schema version {version}, newer than this "
                f"callgate knows ({SCHEMA_VERSION}); upgrade callgate to read it"
            )
        if version < SCHEMA_VERSION:
            raise LedgerError(
                f"the ledger in {name} has schema version {version}, older than this "
                f"callgate's ({SCHEMA_VERSION}), and reading never migrates it; migrate it "
                "with 'callgate ledger migrate --dsn DSN' (or open it for writing: "
                "PostgresLedger(dsn))"
            )

    def _migrate(self) -> None:
        with self._pool.connection() as conn, conn.transaction():
            cur = conn.cursor()
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            apply_migrations(cur, _DIALECT, _TYPES, MIGRATION_HOOKS)

    def _transact_once(self, items: Sequence[Item], *, durable: bool) -> list[Any]:
        # One transaction of this process at a time: a call's deferred decision must be
        # committed before another connection can start that call's attempt.
        with self._tx_lock:
            deferred = self._take_deferred()
            for again in (False, True):
                try:
                    results = self._run(deferred, items, durable=durable)
                    break
                except BaseException as exc:
                    self._rows.clear()  # rows changed in place by a transaction that failed
                    lost = _lost_statement(exc)
                    if lost and not again:
                        continue  # the session's statements were dropped: once more
                    # As in SQLiteLedger: retry deferred writes only after a passing failure.
                    if (
                        lost
                        or isinstance(exc, self._transient)
                        or not isinstance(exc, self._errors)
                        or is_unstorable(exc)
                    ):
                        self._restore_deferred(deferred)
                    if lost:
                        raise LedgerError(_LOST.format(state=_sqlstate(exc), error=exc)) from exc
                    raise
        return results[len(deferred) :]

    def _run(self, deferred: list[Item], items: Sequence[Item], *, durable: bool) -> list[Any]:
        """One write transaction of ``deferred`` and ``items`` on a pooled connection."""
        # One text of several statements per round trip (client-side binding): the locks
        # and the reads in one, the writes and the commit in the other; each statement of
        # bounded size one the session prepared (`callgate.ledger.pg_prepared`).
        with self._pool.connection() as conn:
            try:
                cur: Any = self._psycopg.ClientCursor(conn)
                if self._prepare:
                    prepared = self._sessions.get(conn)
                    if prepared is None:
                        prepared = self._sessions[conn] = PreparedStatements()
                    cur = PreparingCursor(cur, prepared)
                tx = Transaction(
                    cur,
                    _DIALECT,
                    self.worker,
                    self._rows,
                    self._truth,
                    prelude=_DURABLE if durable else _LIGHT,
                )
                results = run_items(tx, [*deferred, *items])
                tx.finish("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(Exception):
                    conn.rollback()
                    prepared = self._sessions.get(conn)
                    if prepared is not None:
                        # A plan whose result type changed: prepare every statement again.
                        prepared.reread(conn, keep=_sqlstate(exc) != "0A000")
                raise
        self._unbound += tx.committed()
        return results

    def _query_once(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        held = getattr(self._reading, "conn", None)
        if held is not None:  # inside `_snapshot`: this thread's one read transaction
            return list(held.execute(_pg(statement), params).fetchall())
        with self._pool.connection() as conn:
            return conn.execute(_pg(statement), params).fetchall()

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[None]:
        """One REPEATABLE READ transaction on one connection: every read of this thread
        inside sees the same committed state."""
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            self._reading.conn = conn
            try:
                yield
            finally:
                self._reading.conn = None

    def close(self) -> None:
        """Commit deferred writes, write a checkpoint, and close the pool."""
        if self._pool.closed:
            return
        try:
            if not self.read_only:
                if self._deferred:
                    self._transact((), durable=True)
                if self._unbound:
                    self._unbound = 0
                    self.checkpoint()
        finally:
            self._pool.close()

    def __repr__(self) -> str:
        mode = ", read_only=True" if self.read_only else ""
        return f"PostgresLedger(worker={self.worker!r}{mode})"


def _read_only_session(conn: psycopg.Connection[Any]) -> None:
    """Configure a new pooled connection of a `read_only` ledger: every transaction of
    the session is read-only (a write fails in the database, whatever the code asks)."""
    conn.execute("SET default_transaction_read_only = on")

"""`SQLiteLedger`: the embedded default ledger, one file in WAL mode.

Durability where it is promised: a side-effecting attempt commits with
``synchronous=FULL`` (the WAL is synced) before its handler runs, and its
outcome commits the same way; that is two syncs per side-effecting call.
Read-only calls and rejections commit with ``synchronous=NORMAL``: written
to the WAL, safe from a crash of the process, made durable by the next full
commit, and never waited onto the disk.

Concurrent async callers share commits (group commit, see `SqlLedger`): a
batch of N concurrent side-effecting calls costs about two syncs, not 2N.

Several processes may open the same file: SQLite serializes writers, and a
writer waits up to ``timeout`` seconds for another to finish. A reader never
waits for a writer (WAL); ``read_only=True`` opens a ledger only to read it.

Checkpoints (copying the WAL back into the database file) are SQLite's own:
a commit that leaves more than `CHECKPOINT_PAGES` pages in the WAL
(`LIGHT_CHECKPOINT_PAGES` for a commit that does not wait for the disk)
runs a passive checkpoint, whichever process makes it, so no checkpoint depends on a
process living long enough (or closing), and after one the WAL file is cut
back to `WAL_LIMIT_BYTES`. The WAL therefore stays under `WAL_BOUND_BYTES`
unless a reader keeps a snapshot open for a long time (a checkpoint cannot
move past a page a reader still needs): measured with processes that exit
without ``close()`` and processes killed with SIGKILL in
``tests/integration/test_wal_bound.py``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator, Sequence
from typing import Any

from callgate.ledger.base import LedgerError
from callgate.ledger.migrate import MIGRATION_HOOKS
from callgate.ledger.sql import SqlLedger
from callgate.ledger.sql_dialects import Dialect
from callgate.ledger.sql_schema import SCHEMA_VERSION, apply_migrations
from callgate.ledger.sql_writes import Item, Transaction, run_items
from callgate.ledger.sqlite_dialect import SqliteDialect
from callgate.ledger.storable import is_unstorable

__all__ = ["DEFAULT_PATH", "SQLiteLedger"]

DEFAULT_PATH = "callgate.db"
"""Where the default `Gate` keeps its ledger: ``./callgate.db``."""

CHECKPOINT_PAGES = 1000
"""WAL pages after which a commit runs a passive checkpoint (SQLite's ``wal_autocheckpoint``)."""
LIGHT_CHECKPOINT_PAGES = 3000
"""The same mark for a commit that does not wait for the disk: in a ledger that also has
durable commits, those checkpoint first, and reads never sync."""
WAL_LIMIT_BYTES = 4 * 1024 * 1024
"""What the WAL file is cut back to after a checkpoint (``journal_size_limit``)."""
WAL_BOUND_BYTES = 16 * 1024 * 1024
"""The WAL's stated bound: the higher checkpoint mark (about 12 MiB of 4 KiB pages) plus
the largest transaction, with room for writers that commit while a checkpoint runs."""

_TYPES = {
    "real": "REAL",
    "bigint": "INTEGER",
    "without_rowid": " WITHOUT ROWID",
    "journal_xid": "",
    "journal_xid_index": "",
    "journal_seq": "",
}
_DIALECT = Dialect()
"""The dialect of migrations (which read everything); transactions use the ledger's own
`SqliteDialect`, which remembers what its last one left."""


_TABLES = ("schema_version", "calls", "idempotency_keys", "journal", "approvals", "chains")
"""The tables of a callgate ledger."""
_EXPECTED = "a SQLite file written by callgate, with the tables " + ", ".join(_TABLES)


class SQLiteLedger(SqlLedger):
    """A ledger in one SQLite file (WAL mode). Thread-safe; one connection per ledger.

    Args:
        path: the database file; created, with its schema, if missing.
        worker: the id this process's attempts are recorded under (default
            ``host:pid``); give a stable one to recover only this worker's calls.
        timeout: seconds to wait for another process holding the write lock.
        read_only: open an existing ledger to read it, as ``callgate ledger`` and
            ``callgate approvals`` do: the file is opened read-only (``mode=ro``), never
            created, migrated or switched to WAL, and no read waits for a writer. A
            file that is not a callgate ledger of this schema version raises
            `LedgerError` naming it; an unreadable one raises `LedgerError` caused by
            the `sqlite3.Error`. Writes fail.
        chain_key: the key of a keyed journal (HMAC-SHA-256, docs/ledger.md); default:
            `callgate.ledger.chain_key` reads ``CALLGATE_CHAIN_KEY_FILE`` or
            ``CALLGATE_CHAIN_KEY``, else the journal is hashed with SHA-256 alone.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        worker: str | None = None,
        timeout: float = 10.0,
        read_only: bool = False,
        chain_key: bytes | str | None = None,
    ) -> None:
        super().__init__(worker=worker, chain_key=chain_key)
        self._truth.dense = True  # one writer at a time numbers records without gaps
        self._dialect = SqliteDialect(self._rows)
        self.path = os.fspath(path)
        self.read_only = read_only
        if read_only:
            self._open_read_only(timeout)
            return
        try:
            self._conn = sqlite3.connect(
                self.path,
                timeout=timeout,
                isolation_level=None,
                check_same_thread=False,
                cached_statements=512,
            )
            self._lock = threading.RLock()
            self._cur = self._conn.cursor()
            self._full = True
            self._open(timeout)
        except sqlite3.Error as exc:
            raise LedgerError(
                f"cannot open the SQLite ledger at {self.path!r}: {exc}; "
                "check that the path is a callgate ledger in a writable directory"
            ) from exc
        self._closed = False

    def _open_read_only(self, timeout: float) -> None:
        """Open an existing ledger to read it: never created, migrated, switched to WAL
        or locked for writing (`read_only`)."""
        uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
        try:
            self._conn = sqlite3.connect(
                uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot read the SQLite ledger at {self.path}: {exc}") from exc
        self._lock = threading.RLock()
        self._cur = self._conn.cursor()
        self._full = True
        self._closed = False
        try:
            self._cur.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            self._check_schema()
        except BaseException as exc:
            self.close()
            if isinstance(exc, sqlite3.Error | UnicodeDecodeError):  # damaged pages
                raise LedgerError(f"cannot read the SQLite ledger at {self.path}: {exc}") from exc
            raise

    def _check_schema(self) -> None:
        """Refuse a file that is not a callgate ledger at this callgate's schema version."""
        try:
            rows = self._cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            tables = sorted(str(r[0]) for r in rows.fetchall())
        except sqlite3.DatabaseError as exc:
            if getattr(exc, "sqlite_errorname", "") != "SQLITE_NOTADB":
                raise
            raise LedgerError(
                f"{self.path} is not a callgate ledger: it is not a SQLite database "
                f"(expected {_EXPECTED})"
            ) from None
        missing = [t for t in _TABLES if t not in tables]
        if missing and "schema_version" in tables and "calls" in tables:
            self._check_version()  # an older callgate's ledger: say so
        if missing:
            if not tables:
                found = "it is empty" if os.path.getsize(self.path) == 0 else "it has no tables"
            else:
                shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
                found = f"it has no {missing[0]} table (its tables: {shown})"
            raise LedgerError(
                f"{self.path} is not a callgate ledger: {found} (expected {_EXPECTED})"
            )
        self._check_version()

    def _check_version(self) -> None:
        row = self._cur.execute("SELECT max(version) FROM schema_version").fetchone()
        version = int(row[0]) if row and row[0] is not None else 0
        if version > SCHEMA_VERSION:
            raise LedgerError(
                f"the ledger at {self.path} has schema version {version}, newer than this "
                f"callgate knows ({SCHEMA_VERSION}); upgrade callgate to read it"
            )
        if version < SCHEMA_VERSION:
            raise LedgerError(
                f"the ledger at {self.path} has schema version {version}, older than this "
                f"callgate's ({SCHEMA_VERSION}), and reading never migrates it; migrate it "
                f"with 'callgate ledger migrate --db {self.path}' (or open it for writing: "
                "SQLiteLedger(path))"
            )

    def _open(self, timeout: float) -> None:
        cur = self._cur
        cur.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        mode = cur.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode.lower() != "wal" and self.path != ":memory:":
            raise LedgerError(
                f"the SQLite ledger at {self.path!r} could not switch to WAL mode "
                f"(got {mode!r}); put it on a local file system"
            )
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute(f"PRAGMA wal_autocheckpoint={CHECKPOINT_PAGES}")
        cur.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
        with self._lock:
            cur.execute("BEGIN IMMEDIATE")
            try:
                apply_migrations(cur, _DIALECT, _TYPES, MIGRATION_HOOKS)
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    # -- transactions -----------------------------------------------------------

    def _transact_once(self, items: Sequence[Item], *, durable: bool) -> list[Any]:
        with self._lock:
            deferred = self._take_deferred()
            if durable is not self._full:
                # A light commit (a read-only call, a rejection) checkpoints only past a
                # higher mark, so that where durable commits happen they do the copying
                # and a read never waits for a sync.
                self._cur.execute(
                    "PRAGMA synchronous=FULL" if durable else "PRAGMA synchronous=NORMAL"
                )
                self._cur.execute(
                    "PRAGMA wal_autocheckpoint="
                    + str(CHECKPOINT_PAGES if durable else LIGHT_CHECKPOINT_PAGES)
                )
                self._full = durable
            cur = self._cur
            try:
                cur.execute("BEGIN IMMEDIATE")
                self._dialect.begin(self._conn.total_changes)
                tx = Transaction(cur, self._dialect, self.worker, self._rows, self._truth)
                results = run_items(tx, [*deferred, *items])
                cur.execute("COMMIT")
                self._dialect.committed(tx.appended, self._conn.total_changes)
                self._unbound += tx.committed()
            except BaseException as exc:
                self._dialect.forget()
                self._rows.clear()  # rows changed in place by a transaction that failed
                if self._conn.in_transaction:
                    cur.execute("ROLLBACK")
                # Other calls' deferred decisions must not vanish with a transaction that
                # failed for a passing reason (locked, busy, cancelled); one the data itself
                # broke would fail again forever, so those are not retried.
                if (
                    isinstance(exc, sqlite3.OperationalError)
                    or not isinstance(exc, sqlite3.DatabaseError)
                    or is_unstorable(exc)
                ):
                    self._restore_deferred(deferred)
                raise
        return results[len(deferred) :]

    def _query_once(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            return self._cur.execute(statement, params).fetchall()

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[None]:
        """One read transaction: every read inside sees the same committed state (the
        connection's other users wait)."""
        with self._lock:
            self._cur.execute("BEGIN")
            try:
                yield
            finally:
                self._cur.execute("COMMIT")  # read only: nothing is kept or lost

    # -- lifecycle --------------------------------------------------------------

    def close(self) -> None:
        """Commit deferred writes, stop checkpointing and close the file."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if not self.read_only:
                    if self._deferred:
                        self._transact((), durable=True)
                    if self._unbound:
                        self._unbound = 0
                        self.checkpoint()
                    self._cur.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                # An unfinished statement would keep the connection (and its lock) alive.
                self._cur.close()
                self._conn.close()

    def __repr__(self) -> str:
        return f"SQLiteLedger({self.path!r})"

"""Statements sent as one text per round trip, each run as a statement the session has
prepared (SQL ``PREPARE`` / ``EXECUTE``) when it is one of bounded size: the client binds
the parameters into the text in one pass (psycopg's ``ClientCursor``) and sends it in one
message.

A statement is prepared in the first text that runs it on a connection (``PREPARE … ;
EXECUTE …`` in the same round trip), if its text is at most `MAX_TEXT` characters with at
most `MAX_PARAMS` parameters (a write of a large batch of calls, one part per call, is
parsed for each transaction: kept, each size would hold megabytes of plans). A session
keeps at most `MAX_PREPARED` of them: the least recently used one is dropped
(``DEALLOCATE``, in the text that prepares the new one). `PreparedStatements` is what one
connection has prepared; after a failed transaction it is read again from
``pg_prepared_statements`` (a text that failed may have stopped before or after its
``PREPARE``), keeping only the statements prepared with the text the ledger expects for
their name (any other of its names is dropped: it never runs a statement it did not
prepare).
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "MAX_PARAMS",
    "MAX_PREPARED",
    "MAX_TEXT",
    "PREFIX",
    "PreparedStatements",
    "PreparingCursor",
    "prepared_form",
]

PREFIX = "callgate_"
"""The names of the statements the ledger prepares."""
MAX_PREPARED = 48
"""The most statements one session keeps prepared (least recently used dropped first)."""
MAX_TEXT = 4096
"""The longest statement prepared (characters): the write of a call or two, not of a batch."""
MAX_PARAMS = 64
"""The most parameters of a statement prepared."""
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
    if len(statement) > MAX_TEXT or count > MAX_PARAMS:
        return None
    pieces = statement.split("%s")
    if len(pieces) - 1 != count or "%" in statement.replace("%s", ""):
        return None
    digest = hashlib.blake2b(statement.encode(), digest_size=10).hexdigest()
    name = PREFIX + digest
    numbered = pieces[0] + "".join(f"${i}{p}" for i, p in enumerate(pieces[1:], 1))
    execute = f"EXECUTE {name}" + (f"({', '.join(['%s'] * count)})" if count else "")
    prepare = f"PREPARE {name} AS {numbered}"
    with _texts_lock:
        _TEXTS[name] = prepare
        while len(_TEXTS) > _TEXTS_LIMIT:
            _TEXTS.popitem(last=False)
    return name, prepare, execute


_TEXTS: OrderedDict[str, str] = OrderedDict()
"""The ``PREPARE`` text of each name `prepared_form` made (the latest `_TEXTS_LIMIT`)."""
_TEXTS_LIMIT = 2048
_texts_lock = threading.Lock()


def _expected(name: str) -> str | None:
    """The ``PREPARE`` text this process would send for ``name``, if it made it lately."""
    with _texts_lock:
        return _TEXTS.get(name)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _deallocate(names: Iterable[str]) -> list[str]:
    return [f"DEALLOCATE {_quoted(name)}" for name in names]


def _prepared_by(statement: str, name: str, prepare: str) -> bool:
    """Whether ``statement`` (``pg_prepared_statements.statement``: the whole text the
    client sent) prepared ``name`` with exactly ``prepare``, as `PreparingCursor.batch`
    writes it: its first ``PREPARE name`` opens the text or follows a ``"; "``, and is the
    whole ``prepare`` statement."""
    at = statement.find(f"PREPARE {name} ")
    if at < 0 or (at and not statement[:at].endswith("; ")):
        return False
    after = at + len(prepare)
    return statement.startswith(prepare, at) and statement[after : after + 2] in ("", "; ")


class PreparedStatements:
    """The ledger's statements one connection has prepared: name → ``PREPARE`` text, least
    recently used first."""

    __slots__ = ("limit", "names")

    def __init__(self, limit: int | None = None) -> None:
        self.limit = MAX_PREPARED if limit is None else limit
        self.names: OrderedDict[str, str] = OrderedDict()

    def use(self, name: str, prepare: str) -> bool:
        """Mark ``name`` used now; whether it must be prepared first (new on the session)."""
        if name in self.names:
            self.names.move_to_end(name)
            return False
        self.names[name] = prepare
        return True

    def evict(self, keep: set[str]) -> list[str]:
        """Forget the least recently used names over `limit` (never one of ``keep``); the
        ``DEALLOCATE`` statements that drop them from the session."""
        gone: list[str] = []
        for name in list(self.names):
            if len(self.names) <= self.limit:
                break
            if name not in keep:
                del self.names[name]
                gone.append(name)
        return _deallocate(gone)

    def reread(self, conn: Any, *, keep: bool = True) -> None:
        """Read the names again from the session (after a failure): keep those prepared
        there with the text the ledger expects for the name (``keep=False``: none), the
        ones it knew first in their order; drop any other of its names from the session
        (``DEALLOCATE``): it never runs a statement it did not prepare."""
        rows = conn.execute(
            "SELECT name, statement FROM pg_prepared_statements WHERE starts_with(name, %s)",
            (PREFIX,),
        ).fetchall()
        found = {str(name): str(statement) for name, statement in rows}
        known, self.names = self.names, OrderedDict()
        if keep:
            for name, statement in sorted(found.items(), key=lambda kv: kv[0] not in known):
                prepare = known.get(name) or _expected(name)
                if prepare is not None and _prepared_by(statement, name, prepare):
                    self.names[name] = prepare
        stale = [name for name in found if name not in self.names]
        if stale:
            conn.execute("; ".join(_deallocate(stale)))


class PreparingCursor:
    """A client-side binding cursor (``psycopg.ClientCursor``) whose batches of statements
    (`batch`) run prepared statements of the session."""

    __slots__ = ("_cur", "_prepared", "_skip")

    def __init__(self, cur: Any, prepared: PreparedStatements) -> None:
        self._cur = cur
        self._prepared = prepared
        self._skip = 0
        """The ``DEALLOCATE``/``PREPARE`` results at the head of the text `batch` made last."""

    def batch(self, statements: Sequence[tuple[str, Sequence[Any] | None]]) -> str:
        """``statements`` as one text: each preparable one as ``EXECUTE`` (after its
        ``PREPARE`` the first time on this connection), parameters bound in one pass. The
        ``DEALLOCATE`` and ``PREPARE`` statements go first (`execute` skips their
        results)."""
        prepared = self._prepared
        prepares: list[str] = []
        texts: list[str] = []
        values: list[Any] = []
        used: set[str] = set()
        for text, params in statements:
            found = prepared_form(text, len(params or ()))
            if found is None:
                texts.append(text)
            else:
                name, prepare, execute = found
                used.add(name)
                if prepared.use(name, prepare):
                    prepares.append(prepare)
                texts.append(execute)
            values.extend(params or ())
        # The ones dropped to stay within the limit go first, in the same round trip.
        prepares[:0] = prepared.evict(used)
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

"""PostgreSQL's write transaction: row locks on the chains written, advisory locks on
keys and budgets, record numbers from a sequence, and the reads sent in the same round
trip as the locks (`callgate.ledger.sql_dialects` says what the dialects share).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from callgate.ledger.pg_prepared import UNPREPARED
from callgate.ledger.sql_dialects import _ROOT, Dialect, Opened, _root
from callgate.ledger.sql_schema import Cursor
from callgate.ledger.sql_statements import CALL_COLUMNS, CHAIN_HEADS, JOURNAL_COLUMNS, KEY_COLUMNS

__all__ = ["PostgresDialect", "dialect_for"]


class PostgresDialect(Dialect):
    """PostgreSQL: row locks on the chains written, advisory locks on keys, a sequence."""

    name = "postgres"
    concurrent = True
    batches = True

    def __call__(self, statement: str) -> str:
        return _pg(statement)

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
        # One text of several statements (client-side binding, `psycopg.ClientCursor`; each
        # a prepared statement of the session: `callgate.ledger.pg_prepared`): one round
        # trip. They run in order, so the numbers are drawn and the rows read after the
        # locks are granted.
        mogrify = getattr(cur, "mogrify", None)
        parts: list[tuple[str | None, str, Sequence[Any] | None]] = [
            (None, text, params) for text, params in prelude
        ]
        # One row asked for: a statement of one row (a plan cached once is as good as one
        # made for the value; one for a list of values is not, so it is planned each time).
        if names:
            ids = sorted({_lock_id(n) for n in names})
            parts.append((None, _LOCK_ONE, ids) if len(ids) == 1 else (None, _LOCK, (ids,)))
        if chains:
            one = len(chains) == 1
            parts.append(
                ("heads", _LOCK_HEAD, chains) if one else ("heads", _LOCK_HEADS, (list(chains),))
            )
        if numbers:
            parts.append(("numbers", _numbers(numbers), None))
        if calls:
            if len(calls) == 1:
                parts.append(("calls", _CALL, calls[0]))
            else:
                runs, named = _distinct(c[0] for c in calls), _distinct(c[1] for c in calls)
                parts.append(("calls", _CALLS, (runs, named)))
        if keys:
            parts.append(("keys", _KEY, keys) if len(keys) == 1 else ("keys", _KEYS, (list(keys),)))
        if since != -1:
            if since is None:
                parts.append(("chain_rows", CHAIN_HEADS, None))
            parts.append(("since", _SINCE, _since_params(since)))
        if root:
            parts.append(("root", _ROOT, None))
        got: dict[str, list[Any]] = {}
        if mogrify is None:  # a plain cursor (a migration): one statement at a time
            for label, text, params in parts:
                cur.execute(text, params)
                if label is not None:
                    got[label] = list(cur.fetchall())
        elif parts and hasattr(cur, "batch"):  # prepared statements of the session
            cur.execute(cur.batch([(text, params) for _, text, params in parts]))
            for i, (label, _, _) in enumerate(parts):
                if i:
                    cur.nextset()  # type: ignore[attr-defined]
                if label is not None:
                    got[label] = list(cur.fetchall())
        elif parts:
            template = "; ".join(text for _, text, _ in parts)
            values = [v for _, _, p in parts for v in (p or ())]
            cur.execute(mogrify(template, values) if values else template)
            for i, (label, _, _) in enumerate(parts):
                if i:
                    cur.nextset()  # type: ignore[attr-defined]
                if label is not None:
                    got[label] = list(cur.fetchall())
        rows = got.get("heads", [])
        drawn = sorted(int(r[0]) for r in got.get("numbers", []))
        read = _since_rows(got["since"], since) if "since" in got else None
        chain_rows = got.get("chain_rows")
        seen = {str(r[0]) for r in rows}
        if any(c not in seen for c in chains):
            heads = self._heads(cur, chains, rows)
            # A chain made just now: numbers drawn and a journal read before its lock
            # may miss a writer that made it first; draw and read again.
            if drawn:
                drawn = self.numbers(cur, len(drawn), None)
            read, chain_rows = None, None
        else:
            heads = {str(c): (int(s_), str(h)) for c, s_, h in rows if int(s_) > 0}
        prefetched = mogrify is not None
        wanted = set(calls)
        return Opened(
            heads,
            prefetched,
            drawn,
            [r for r in got.get("calls", []) if (r[0], r[1]) in wanted],
            got.get("keys", []),
            read if prefetched else None,
            chain_rows if prefetched else None,
            _root(got["root"]) if "root" in got else None,
        )

    def _heads(
        self, cur: Cursor, chains: Sequence[str], rows: Sequence[Any]
    ) -> dict[str, tuple[int, str]]:
        """The head rows ``rows`` of ``chains``, making (and locking) those missing."""
        seen = {str(r[0]) for r in rows}
        missing = [c for c in chains if c not in seen]
        if missing:  # a run's first record: make its head row, so that it can be locked
            cur.execute(
                "INSERT INTO chains (chain, seq, hash, bound) "
                "SELECT c, 0, '', 1 FROM unnest(%s::text[]) AS c ON CONFLICT (chain) DO NOTHING",
                (missing,),
            )
            cur.execute(_LOCK_HEADS, (missing,))
            rows = [*rows, *cur.fetchall()]
        # A row at 0 is a chain opened by a writer that wrote nothing to it: no record yet.
        return {str(c): (int(s_), str(h)) for c, s_, h in rows if int(s_) > 0}

    def lock(self, cur: Cursor, names: Sequence[str]) -> None:
        if names:
            cur.execute(_LOCK, (sorted({_lock_id(n) for n in names}),))

    def lock_chains(self, cur: Cursor, chains: Sequence[str]) -> dict[str, tuple[int, str]]:
        if not chains:
            return {}
        cur.execute(_LOCK_HEADS, (list(chains),))
        return self._heads(cur, chains, cur.fetchall())

    def numbers(self, cur: Cursor, count: int, last: int | None) -> list[int]:
        cur.execute(_numbers(count))
        return sorted(int(r[0]) for r in cur.fetchall())

    def since(self, cur: Cursor, mark: int | None) -> tuple[list[Any], int | None]:
        cur.execute(_SINCE, _since_params(mark))
        return _since_rows(cur.fetchall(), mark)

    def unbound(self, cur: Cursor, root: str) -> list[tuple[str, int, str]]:
        cur.execute(
            "SELECT chain, seq, hash FROM chains WHERE bound = 0 AND seq > 0 AND chain <> %s "
            "ORDER BY chain FOR UPDATE SKIP LOCKED",
            (root,),
        )
        return [(str(c), int(s), str(h)) for c, s, h in cur.fetchall()]


_LOCK = "SELECT pg_advisory_xact_lock(x) FROM unnest(%s::bigint[]) AS x"
_LOCK_HEADS = "SELECT chain, seq, hash FROM chains WHERE chain = ANY(%s) ORDER BY chain FOR UPDATE"
_LOCK_ONE = "SELECT pg_advisory_xact_lock(%s::bigint)"
_LOCK_HEAD = "SELECT chain, seq, hash FROM chains WHERE chain = %s FOR UPDATE"
_CALL = f"SELECT {CALL_COLUMNS} FROM calls WHERE run_id = %s AND call_id = %s"
_KEY = f"SELECT {KEY_COLUMNS} FROM idempotency_keys WHERE key = %s"


@functools.lru_cache(maxsize=256)
def _numbers(count: int) -> str:
    """Draw ``count`` record numbers (the count in the text: the plan knows how many)."""
    return f"SELECT nextval('journal_seq') FROM generate_series(1, {int(count)})"


_CALLS = f"SELECT {CALL_COLUMNS} FROM calls WHERE run_id = ANY(%s) AND call_id = ANY(%s)"
"""The rows of the calls asked for (and of any other pair of their run and call ids, which
`PostgresDialect.open` drops): a probe of the primary key, whatever the plan's estimate
of the number of pairs (a join against ``unnest`` of a parameter may scan the table)."""
_KEYS = f"SELECT {KEY_COLUMNS} FROM idempotency_keys WHERE key = ANY(%s)"
# What a read has not seen yet is exactly what its snapshot did not show: the rows of the
# transactions running when it was taken (its xip list, and this transaction's own id,
# whose later records the snapshot cannot show either) and of those that began after it
# (ids from its xmax on). The next read asks for those alone, so a session holding a
# transaction open elsewhere never makes a writer read again what it has read (as a read
# from the snapshot's xmin did, every time, until that session ended). The read's own
# snapshot comes in a last row of its own (seq NULL): its xmax, then the ids still open.
_SINCE = (
    f"SELECT {JOURNAL_COLUMNS} FROM journal WHERE xid >= %s OR xid = ANY(%s::bigint[]) "
    "UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, concat_ws(' ', "
    "pg_snapshot_xmax(pg_current_snapshot())::text, (SELECT string_agg(x::text, ' ') "
    "FROM pg_snapshot_xip(pg_current_snapshot()) AS x), "
    "pg_current_xact_id_if_assigned()::text)"
)
UNPREPARED.add(_SINCE)


def _distinct(values: Iterable[str]) -> list[str]:
    return sorted(set(values))


def _since_rows(rows: Sequence[Any], mark: int | None) -> tuple[list[Any], int | None]:
    found = [r for r in rows if r[0] is not None]
    found.sort(key=lambda r: r[0])
    after = [str(r[8]) for r in rows if r[0] is None]
    if not after:
        return found, mark
    xmax, *running = (int(x) for x in after[0].split())
    return found, _mark(xmax, running)


_PACKED = 1 << 64
"""Marks from here on are packed (`_mark`); one below is a plain lower bound of ids."""


def _mark(xmax: int, running: Iterable[int]) -> int:
    """The truth's mark (an int, opaque to it) after a read whose snapshot had ``xmax``
    and the transaction ids ``running`` still open: each id in 8 bytes after a 1 byte."""
    ids = [xmax, *sorted({x for x in running if x < xmax})]
    return int.from_bytes(b"\x01" + b"".join(x.to_bytes(8, "big") for x in ids), "big")


def _since_params(mark: int | None) -> tuple[int, list[int]]:
    """The read's parameters from the truth's mark: read ids from the first on, and the
    others listed (None or 0: the whole journal)."""
    if not mark or mark < _PACKED:
        return (mark or 0, [])
    packed = mark.to_bytes((mark.bit_length() + 7) // 8, "big")[1:]
    ids = [int.from_bytes(packed[i : i + 8], "big") for i in range(0, len(packed), 8)]
    return ids[0], ids[1:]


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

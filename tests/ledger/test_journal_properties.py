"""Properties of the journal (issue 14), over random sequences of ledger operations.

Every operation goes through the public API (`Ledger`, `Ledger.approvals`): decisions in
random states, side-effecting and read-only attempts on shared and own keys and request
hashes, outcomes (``ok``/``error``/``unknown``, reconciled or not), resolutions, approval
requests, decisions, uses and releases, events, and a clock that jumps past key and
approval expiries. On a `SQLiteLedger` (a fresh file per example):

* ``verify()`` is ok, and replaying the journal from nothing (`journal.derive`) gives
  exactly the call, key and approval rows in the tables, with no record breaking a rule;
* the same sequence on a `MemoryLedger` gives the same answers (claim kinds, holders and
  replayed outcomes, finish results, resolutions, approval results) and leaves every call
  in the same state.

Two `SQLiteLedger` objects on one file, interleaving their writes as two processes do,
must agree with one `MemoryLedger` (a stale row cache would claim a key twice), see each
other's committed changes, and never let two attempts hold one key.

Hypothesis runs derandomized (the same examples every run) with a fixed number of them.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from callgate import ApprovalError, ApprovalRequest
from callgate.ledger import (
    AttemptFinish,
    AttemptStart,
    CallRecord,
    CallState,
    Claim,
    ClaimKind,
    Ledger,
    LedgerError,
    MemoryLedger,
    Outcome,
    SQLiteLedger,
)
from callgate.ledger.journal import derive
from callgate.ledger.sql_statements import APPROVAL_COLUMNS, CALL_COLUMNS, KEY_COLUMNS
from callgate.ledger.sql_writes import approval_from_row, call_from_row, key_from_row

RUNS = ("r1", "r2")
CALLS = ("c1", "c2", "c3")
KEYS = ("own", "k1", "k2")
"""``own``: the call's own key (``run/call``); ``k1``, ``k2``: keys shared between calls."""
SHORT, LONG = 15.0, 1e6
"""Key retentions and approval lifetimes: one the clock jumps past, one it never reaches."""

PROPERTY_SETTINGS = settings(
    max_examples=250,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# -- operations -------------------------------------------------------------------------------

Op = tuple[Any, ...]

run_ids = st.sampled_from(("r1", "r1", "r1", "r2"))
call_ids = st.sampled_from(CALLS)
keys = st.sampled_from(("own", "k1", "k1", "k1", "k2"))
hashes = st.sampled_from(("h1", "h1", "h1", "h2"))
statuses = st.sampled_from(("ok", "error", "unknown"))
retentions = st.sampled_from((0.0, SHORT, LONG))  # 0: an ok key expires at once
approved_hashes = st.sampled_from(("a1", "a1", "a2"))

decide_ops = st.tuples(
    st.just("decide"),
    run_ids,
    call_ids,
    st.sampled_from(
        (CallState.PROPOSED, CallState.REJECTED, CallState.PENDING, CallState.ADMITTED)
    ),
    keys,
)
begin_ops = st.tuples(
    st.just("begin"),
    run_ids,
    call_ids,
    st.booleans(),  # side-effecting
    st.integers(1, 3),  # attempt
    keys,
    hashes,
    retentions,
)
finish_ops = st.tuples(
    st.just("finish"),
    run_ids,
    call_ids,
    st.integers(1, 3),
    keys,
    statuses,
    st.booleans(),  # reconciled
    st.booleans(),  # side-effecting
)
gate_ops = st.tuples(
    st.just("gate"),  # what the gate does: admit, start attempt 1, finish it if it may run
    run_ids,
    call_ids,
    st.booleans(),
    keys,
    hashes,
    statuses,
    retentions,
)
resolve_ops = st.tuples(st.just("resolve"), run_ids, call_ids, st.sampled_from(("ok", "error")))
tick_ops = st.tuples(st.just("tick"), st.sampled_from((0.0, 10.0, 20.0)))
request_ops = st.tuples(
    st.just("request"), run_ids, call_ids, approved_hashes, st.sampled_from((SHORT, LONG))
)
decide_approval_ops = st.tuples(st.just("approval"), st.integers(0, 1), st.booleans())
consume_ops = st.tuples(
    st.just("consume"),
    st.integers(0, 1),  # the effect of a recent request: its run and arguments hash
    st.booleans(),  # False: that effect in the other run (no approval binds it)
    call_ids,
)
release_ops = st.tuples(st.just("release"), st.integers(0, 1), st.booleans())
approval_flow_ops = st.tuples(
    st.just("approval_flow"),  # a request, a person's decision, and the call that uses it
    run_ids,
    call_ids,
    approved_hashes,
    st.sampled_from((SHORT, LONG)),
    st.booleans(),  # approve (or deny)
    st.booleans(),  # use it now
)
resolve_unknown_ops = st.tuples(
    st.just("resolve_unknown"), st.integers(0, 3), st.sampled_from(("ok", "error"))
)
event_ops = st.tuples(st.just("event"), run_ids, st.one_of(st.none(), call_ids))

WEIGHTED: list[tuple[st.SearchStrategy[Op], int]] = [
    (decide_ops, 1),
    (begin_ops, 2),
    (finish_ops, 1),
    (gate_ops, 4),
    (resolve_ops, 1),
    (resolve_unknown_ops, 1),
    (tick_ops, 2),
    (request_ops, 1),
    (approval_flow_ops, 2),
    (decide_approval_ops, 1),
    (consume_ops, 1),
    (release_ops, 1),
    (event_ops, 1),
]
"""How often each kind of operation comes (`st.one_of` would draw each kind equally)."""
ledger_ops: st.SearchStrategy[Op] = st.sampled_from(
    [strategy for strategy, weight in WEIGHTED for _ in range(weight)]
).flatmap(lambda strategy: strategy)


def key_name(key: str, run_id: str, call_id: str) -> str:
    return f"{run_id}/{call_id}" if key == "own" else key


def claim_view(claim: Claim) -> tuple[Any, ...]:
    """What a claim says, comparable across backends (a durable backend keeps no
    ``retryable``: `Outcome.retryable`)."""
    outcome = claim.outcome
    replayed = (
        None
        if outcome is None
        else (outcome.status, outcome.content, outcome.error, outcome.stage, outcome.reconciled)
    )
    return (claim.kind.value, claim.holder, replayed)


@dataclass
class Player:
    """Plays operations on ledgers: a logical clock, and the approval ids requested so far."""

    base: float
    elapsed: float = 0.0
    requested: int = 0
    effects: list[tuple[str, str]] = field(default_factory=list)
    """The run and arguments hash of every approval requested, in order."""

    @property
    def now(self) -> float:
        return self.base + self.elapsed

    def play(self, ledger: Ledger, op: Op) -> Any:
        """Apply ``op`` to ``ledger``; what it answered, comparable across backends."""
        kind = op[0]
        now = self.now
        if kind == "tick":
            self.elapsed += op[1]
            return None
        if kind == "decide":
            _, run_id, call_id, state, key = op
            ledger.record_decision(
                CallRecord(
                    run_id=run_id,
                    call_id=call_id,
                    tool="charge",
                    tool_version="v1",
                    principal="alice",
                    arguments='{"amount":5}',
                    state=state,
                    stage="policy",
                    request_hash="h1",
                    idempotency_key=key_name(key, run_id, call_id),
                    decided_by="rule",
                    created_at=now,
                    updated_at=now,
                )
            )
            return None
        if kind == "begin":
            _, run_id, call_id, side, attempt, key, request_hash, retention = op
            claim = ledger.begin_attempt(
                AttemptStart(
                    run_id=run_id,
                    call_id=call_id,
                    tool="charge",
                    tool_version="v1",
                    attempt=attempt,
                    idempotency_key=key_name(key, run_id, call_id),
                    request_hash=request_hash,
                    started_at=now,
                    key_expires_at=now + retention,
                    side_effecting=side,
                )
            )
            return claim_view(claim)
        if kind == "gate":
            _, run_id, call_id, side, key, request_hash, status, retention = op
            self.play(ledger, ("decide", run_id, call_id, CallState.ADMITTED, key))
            claim = self.play(
                ledger, ("begin", run_id, call_id, side, 1, key, request_hash, retention)
            )
            if claim[0] != ClaimKind.RUN.value:
                return (claim, None)
            done = self.play(ledger, ("finish", run_id, call_id, 1, key, status, False, side))
            return (claim, done)
        if kind == "finish":
            _, run_id, call_id, attempt, key, status, reconciled, side = op
            return ledger.finish_attempt(
                AttemptFinish(
                    run_id=run_id,
                    call_id=call_id,
                    attempt=attempt,
                    idempotency_key=key_name(key, run_id, call_id),
                    outcome=Outcome(
                        status=status,
                        content=f"{status} of {run_id}/{call_id} #{attempt}",
                        error=None if status == "ok" else f"{status}!",
                        finished_at=now,
                        reconciled=reconciled,
                    ),
                    side_effecting=side,
                )
            )
        if kind == "approval_flow":
            _, run_id, call_id, arguments_hash, ttl, approve, use = op
            requested = self.play(ledger, ("request", run_id, call_id, arguments_hash, ttl))
            decided = self.play(ledger, ("approval", 0, approve))
            used = self.play(ledger, ("consume", 0, True, call_id)) if use else None
            return (requested, decided, used)
        if kind == "resolve_unknown":
            _, index, status = op
            unknown = sorted((c.run_id, c.call_id) for c in ledger.calls(state=CallState.UNKNOWN))
            if not unknown:
                return None
            run_id, call_id = unknown[index % len(unknown)]
            return (run_id, call_id, self.play(ledger, ("resolve", run_id, call_id, status)))
        if kind == "resolve":
            _, run_id, call_id, status = op
            try:
                settled = ledger.resolve(run_id, call_id, status=status, by="dana", note="seen")
            except LedgerError:
                return "refused"
            return (settled.state.value, settled.reconciled)
        if kind == "request":
            _, run_id, call_id, arguments_hash, ttl = op
            approval_id = f"apr_{self.requested:04d}"
            self.requested += 1
            self.effects.append((run_id, arguments_hash))
            found = ledger.approvals().request(
                ApprovalRequest(
                    id=approval_id,
                    run_id=run_id,
                    call_id=call_id,
                    principal="alice",
                    tool="refund",
                    arguments_json="{}",
                    arguments_hash=arguments_hash,
                    effects=("spend:USD=5",),
                    preview="refund",
                    created_at=now,
                    expires_at=now + ttl,
                )
            )
            return found.id
        if kind == "approval":
            _, index, approve = op
            if not self.requested:
                return None
            approval_id = f"apr_{max(self.requested - 1 - index, 0):04d}"  # a recent one
            try:
                decided = ledger.approvals().decide(approval_id, approve=approve, by="maria")
            except ApprovalError as exc:
                return ("refused", str(exc).split(":")[0])
            return decided.status.value
        if kind == "consume":
            _, index, same_run, call_id = op
            run_id, arguments_hash = ("r1", "a1")
            if self.effects:
                run_id, arguments_hash = self.effects[max(len(self.effects) - 1 - index, 0)]
            if not same_run:
                run_id = "r2" if run_id == "r1" else "r1"
            used = ledger.approvals().consume(
                principal="alice",
                tool="refund",
                arguments_hash=arguments_hash,
                resource_version=None,
                run_id=run_id,
                now=now,
                used_by=f"{run_id}/{call_id}",
            )
            return None if used is None else used.id
        if kind == "release":
            _, index, by_its_user = op
            if not self.requested:
                return None
            approval_id = f"apr_{max(self.requested - 1 - index, 0):04d}"
            holder = ledger.approvals().get(approval_id)
            used_by = holder.used_by if holder is not None and by_its_user else None
            return ledger.approvals().release(approval_id, used_by=used_by or "r1/c1")
        if kind == "event":
            _, run_id, call_id = op
            ledger.record_event("note", run_id=run_id, call_id=call_id, data={"at": now})
            return None
        raise AssertionError(f"unknown operation {op!r}")


def call_states(ledger: Ledger) -> dict[tuple[str, str], tuple[Any, ...]]:
    return {
        (c.run_id, c.call_id): (c.state.value, c.stage, c.attempts, c.reconciled)
        for c in ledger.calls()
    }


def approval_states(ledger: Ledger, player: Player) -> dict[str, tuple[Any, ...]]:
    found = {}
    for n in range(player.requested):
        approval = ledger.approvals().get(f"apr_{n:04d}")
        if approval is not None:
            found[approval.id] = (approval.status.value, approval.used_by)
    return found


def table_rows(path: Path) -> dict[str, dict[Any, Any]]:
    """The call, key and approval rows as stored (read beside the ledger, not through it)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        calls = [call_from_row(r) for r in conn.execute(f"SELECT {CALL_COLUMNS} FROM calls")]
        keys = [
            key_from_row(r) for r in conn.execute(f"SELECT {KEY_COLUMNS} FROM idempotency_keys")
        ]
        approvals = [
            approval_from_row(r) for r in conn.execute(f"SELECT {APPROVAL_COLUMNS} FROM approvals")
        ]
    finally:
        conn.close()
    return {
        "calls": {(c.run_id, c.call_id): c for c in calls},
        "keys": {k.key: k for k in keys},
        "approvals": {a.id: a for a in approvals},
    }


def assert_rows_follow_from_the_journal(ledger: SQLiteLedger) -> None:
    check = ledger.verify()
    assert check.ok, check.problems
    derived, problems = derive(ledger.audit())
    assert problems == []
    stored = table_rows(Path(ledger.path))
    assert stored["calls"] == derived.calls
    assert stored["keys"] == derived.keys
    assert stored["approvals"] == derived.approvals


# -- one ledger against the memory ledger -----------------------------------------------------


@PROPERTY_SETTINGS
@given(ops=st.lists(ledger_ops, min_size=8, max_size=40))
def test_sqlite_rows_follow_from_its_journal_and_it_answers_like_memory(ops: list[Op]) -> None:
    """Any sequence of ledger operations: SQLite's rows equal the fold of its journal, it
    verifies, and it answers as MemoryLedger does."""
    base = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "callgate.db"
        sqlite = SQLiteLedger(path, worker="w")
        try:
            played = Player(base)
            answers = [played.play(sqlite, op) for op in ops]
            assert_rows_follow_from_the_journal(sqlite)
            states = call_states(sqlite)
            approvals = approval_states(sqlite, played)
        finally:
            sqlite.close()

    memory = MemoryLedger(worker="w")
    model = Player(base)
    expected = [model.play(memory, op) for op in ops]
    for n, (op, got, want) in enumerate(zip(ops, answers, expected, strict=True)):
        assert got == want, f"operation {n} {op!r}: SQLite {got!r}, memory {want!r}"
    assert states == call_states(memory)
    assert approvals == approval_states(memory, model)


# -- two ledgers on one file ------------------------------------------------------------------

OWNER = {"c1": 0, "c2": 1, "c3": 0}
"""Which of the two ledgers (processes) handles each call: its decisions, attempts, outcomes
and resolutions. Approvals and events come from either."""

_owned_ops = ledger_ops.filter(lambda op: op[0] != "resolve_unknown")
"""A person resolving whichever call is unknown could race the owner's deferred retry of a
read-only call (a documented trade of deferral); ``resolve`` goes to the call's owner."""
shared_ops = st.tuples(st.integers(0, 1), _owned_ops)


def _who(pick: int, op: Op) -> int:
    if op[0] in ("decide", "begin", "finish", "resolve", "gate"):
        return OWNER[op[2]]
    return pick


@dataclass
class KeyWatch:
    """Every key's holder and how its attempt ended, from the answers the ledgers gave:
    a second attempt may take a key only after an ``error`` or an expired ``ok``."""

    model: Ledger
    """Where a resolution finds the key its call names (its decision's key)."""
    held: dict[str, tuple[tuple[str, str], str | None, float]] = field(default_factory=dict)

    def saw(self, op: Op, answer: Any, now: float) -> None:
        if op[0] == "begin":
            self.begun(op, answer, now)
        elif op[0] == "finish":
            self.finished(op, answer)
        elif op[0] == "resolve" and isinstance(answer, tuple):
            _, run_id, call_id, status = op
            call = self.model.get_call(run_id, call_id)
            if call is not None and call.idempotency_key:
                self.finished(
                    ("finish", run_id, call_id, 1, call.idempotency_key, status, True, True), True
                )
        elif op[0] == "gate":
            _, run_id, call_id, side, key, request_hash, status, retention = op
            claim, done = answer
            self.begun(
                ("begin", run_id, call_id, side, 1, key, request_hash, retention), claim, now
            )
            if done is not None:
                self.finished(("finish", run_id, call_id, 1, key, status, False, side), done)

    def begun(self, op: Op, answer: Any, now: float) -> None:
        _, run_id, call_id, side, _, key, _, retention = op
        if not side or answer[0] != ClaimKind.RUN.value:
            return
        name = key_name(key, run_id, call_id)
        if name in self.held:
            _, status, expires = self.held[name]
            assert status == "error" or (status == "ok" and expires <= now), (
                f"key {name!r} claimed twice: held by {self.held[name]}"
            )
        self.held[name] = ((run_id, call_id), None, now + retention)

    def finished(self, op: Op, answer: Any) -> None:
        _, run_id, call_id, _, key, status, _, _ = op
        name = key if key not in KEYS else key_name(key, run_id, call_id)
        if answer and name in self.held and self.held[name][0] == (run_id, call_id):
            self.held[name] = (self.held[name][0], status, self.held[name][2])


@PROPERTY_SETTINGS
@given(ops=st.lists(shared_ops, min_size=8, max_size=40))
def test_two_ledgers_on_one_file_see_each_other_and_never_claim_a_key_twice(
    ops: list[tuple[int, Op]],
) -> None:
    """Two SQLiteLedgers writing one file in turns see each other's changes and never hand one
    key to two attempts."""
    base = time.time()
    memory = MemoryLedger(worker="w")
    model = Player(base)
    watch = KeyWatch(memory)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "callgate.db"
        pair = (SQLiteLedger(path, worker="w"), SQLiteLedger(path, worker="w"))
        try:
            played = Player(base)
            for n, (pick, op) in enumerate(ops):
                who = _who(pick, op)
                now = played.now
                got = played.play(pair[who], op)
                want = model.play(memory, op)
                assert got == want, f"operation {n} {op!r} on ledger {who}: {got!r} != {want!r}"
                watch.saw(op, got, now)
                if op[0] in ("finish", "resolve", "gate") or (op[0] == "begin" and op[3]):
                    _assert_the_other_sees_it(pair[1 - who], memory, op)
            for ledger in pair:  # each commits what it deferred (its own admitted calls)
                ledger.calls()
            for ledger in pair:
                assert call_states(ledger) == call_states(memory)
                assert approval_states(ledger, played) == approval_states(memory, model)
                assert_rows_follow_from_the_journal(ledger)
        finally:
            for ledger in pair:
                ledger.close()


def _assert_the_other_sees_it(other: Ledger, memory: Ledger, op: Op) -> None:
    """A committed change (an outcome, a resolution, a side-effecting start, and every
    deferred write of its ledger before it) is visible to the other ledger at once."""
    run_id, call_id = op[1], op[2]
    seen, expected = other.get_call(run_id, call_id), memory.get_call(run_id, call_id)
    view: Callable[[CallRecord | None], Any] = lambda c: (  # noqa: E731
        None if c is None else (c.state.value, c.attempts, c.reconciled)
    )
    assert view(seen) == view(expected), f"after {op!r} the other ledger sees {view(seen)}"


def test_two_ledgers_take_turns_on_one_key() -> None:
    """The plain story: A runs key k and ends unknown; B is refused; a person settles it
    as error through B; A may run it again; B then sees A's running attempt."""
    now = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "callgate.db"
        a, b = SQLiteLedger(path, worker="a"), SQLiteLedger(path, worker="b")
        try:
            player = Player(now)
            assert player.play(a, ("decide", "r1", "c1", CallState.ADMITTED, "k1")) is None
            first = player.play(a, ("begin", "r1", "c1", True, 1, "k1", "h1", LONG))
            assert first[0] == "run"
            assert player.play(a, ("finish", "r1", "c1", 1, "k1", "unknown", False, True))
            player.play(b, ("decide", "r1", "c2", CallState.ADMITTED, "k1"))
            refused = player.play(b, ("begin", "r1", "c2", True, 1, "k1", "h1", LONG))
            assert refused[:2] == ("replay", ("r1", "c1"))
            assert player.play(b, ("resolve", "r1", "c1", "error")) == ("error", True)
            player.play(a, ("decide", "r1", "c3", CallState.ADMITTED, "k1"))
            again = player.play(a, ("begin", "r1", "c3", True, 1, "k1", "h1", LONG))
            assert again[0] == "run"
            player.play(b, ("decide", "r1", "c4", CallState.ADMITTED, "k1"))
            busy = player.play(b, ("begin", "r1", "c4", True, 1, "k1", "h1", LONG))
            assert busy[:2] == ("in_progress", ("r1", "c3"))
            for ledger in (a, b):
                assert_rows_follow_from_the_journal(ledger)
        finally:
            a.close()
            b.close()


# -- a whole run removed ------------------------------------------------------------------------

_RUN_TABLES = ("calls", "idempotency_keys", "approvals", "journal_orphans")
"""The row tables that name a run: an attacker removing a run removes its rows too."""


def _remove_run(execute: Callable[[str], None], run_id: str, tables: set[str]) -> None:
    """Delete every record and row of ``run_id`` (and its chain's head row, where there is one)."""
    execute(f"DELETE FROM journal WHERE run_id = '{run_id}'")
    for table in _RUN_TABLES:
        execute(f"DELETE FROM {table} WHERE run_id = '{run_id}'")
    if "chains" in tables:
        execute(f"DELETE FROM chains WHERE chain = 'r:{run_id}'")


def _sqlite_tables(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()


INDEPENDENT_RUNS: list[Op] = [
    ("gate", "r1", "c1", True, "own", "h1", "ok", LONG),
    ("gate", "r2", "c1", True, "own", "h1", "ok", LONG),
    ("event", "r2", None),
    ("gate", "r2", "c2", False, "own", "h1", "ok", LONG),
    ("event", "r1", None),
]
"""Two runs that share nothing (own keys, no approvals): nothing in one run's records or
rows points at the other, so only a checkpoint can tell that the other was there."""


@settings(PROPERTY_SETTINGS, max_examples=60)
@given(ops=st.lists(ledger_ops, min_size=4, max_size=25), victim=st.sampled_from(RUNS))
@example(ops=INDEPENDENT_RUNS, victim="r2")
@example(ops=INDEPENDENT_RUNS, victim="r1")
def test_a_whole_run_removed_from_sqlite_is_reported(ops: list[Op], victim: str) -> None:
    """Any ledger whose run has records: deleting all of that run's records and rows (the
    journal's, the calls', keys', approvals' and orphans' rows) is reported by verify."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "callgate.db"
        ledger = SQLiteLedger(path, worker="w")
        try:
            player = Player(time.time())
            for op in ops:
                player.play(ledger, op)
            had = [r for r in ledger.audit() if r.run_id == victim]
        finally:
            ledger.close()
        if not had:
            return
        tables = _sqlite_tables(path)
        conn = sqlite3.connect(path)
        try:
            _remove_run(conn.execute, victim, tables)  # type: ignore[arg-type]
            conn.commit()
        finally:
            conn.close()
        with SQLiteLedger(path, read_only=True) as reader:
            check = reader.verify()
        assert not check.ok, f"run {victim} removed ({len(had)} records) and verify passed"


@settings(PROPERTY_SETTINGS, max_examples=15)
@given(ops=st.lists(ledger_ops, min_size=4, max_size=20), victim=st.sampled_from(RUNS))
@example(ops=INDEPENDENT_RUNS, victim="r2")
def test_a_whole_run_removed_from_postgres_is_reported(
    pg_cluster: Any, ops: list[Op], victim: str
) -> None:
    """The same on PostgreSQL: a run's records and rows all deleted, verify fails."""
    from callgate.ledger import PostgresLedger

    dsn = pg_cluster.create_database()
    try:
        ledger = PostgresLedger(dsn, worker="w")
        try:
            player = Player(time.time())
            for op in ops:
                player.play(ledger, op)
            had = [r for r in ledger.audit() if r.run_id == victim]
        finally:
            ledger.close()
        if not had:
            return
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            tables = {
                str(r[0])
                for r in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                )
            }
            _remove_run(lambda s: conn.execute(s), victim, tables)  # type: ignore[arg-type,return-value]
        reader = PostgresLedger(dsn, read_only=True)
        try:
            check = reader.verify()
        finally:
            reader.close()
        assert not check.ok, f"run {victim} removed ({len(had)} records) and verify passed"
    finally:
        pg_cluster.drop_database(dsn)


def _remove_run_and_checkpoints(conn: sqlite3.Connection, run_id: str) -> tuple[int, int]:
    """`_remove_run`, plus every checkpoint written after the run's first record, with the
    root chain's head row moved back to the checkpoint before (or deleted); the lowest
    number deleted and the highest kept."""
    first = conn.execute("SELECT min(seq) FROM journal WHERE run_id = ?", (run_id,)).fetchone()[0]
    _remove_run(conn.execute, run_id, _RUN_TABLES_AND_CHAINS)  # type: ignore[arg-type]
    conn.execute("DELETE FROM journal WHERE kind = 'journal.checkpoint' AND seq > ?", (int(first),))
    conn.execute(
        "DELETE FROM journal_orphans WHERE run_id = '' AND seq NOT IN (SELECT seq FROM journal)"
    )
    root = conn.execute(
        "SELECT seq, hash FROM journal WHERE run_id = '' ORDER BY seq DESC LIMIT 1"
    ).fetchone()
    if root is None:
        conn.execute("DELETE FROM chains WHERE chain = 'r:'")
    else:
        conn.execute("UPDATE chains SET seq = ?, hash = ? WHERE chain = 'r:'", tuple(root))
    kept = conn.execute("SELECT max(seq) FROM journal").fetchone()[0]
    return int(first), int(kept or 0)


_RUN_TABLES_AND_CHAINS = {"chains"}


@settings(PROPERTY_SETTINGS, max_examples=40)
@given(ops=st.lists(ledger_ops, min_size=4, max_size=25), victim=st.sampled_from(RUNS))
@example(ops=INDEPENDENT_RUNS, victim="r2")
@example(ops=INDEPENDENT_RUNS, victim="r1")
def test_a_run_removed_with_the_checkpoints_after_it_from_sqlite_is_reported(
    ops: list[Op], victim: str
) -> None:
    """A run's records, rows and head row deleted with every later checkpoint (root head
    moved back): reported by verify, unless everything after some record was deleted (a
    pure tail, found only by --expect-head)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "callgate.db"
        ledger = SQLiteLedger(path, worker="w")
        try:
            player = Player(time.time())
            for i, op in enumerate(ops):
                player.play(ledger, op)
                if i % 3 == 2:
                    ledger.checkpoint()
            had = [r.seq for r in ledger.audit() if r.run_id == victim]
        finally:
            ledger.close()
        if not had:
            return
        conn = sqlite3.connect(path)
        try:
            lowest, kept = _remove_run_and_checkpoints(conn, victim)
            conn.commit()
        finally:
            conn.close()
        with SQLiteLedger(path, read_only=True) as reader:
            check = reader.verify()
        if kept < lowest:
            return  # a pure tail deletion
        assert not check.ok, f"run {victim} and later checkpoints removed and verify passed"

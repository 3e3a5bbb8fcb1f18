"""Rows never decide alone (issue 28, item 3): no edit of one or two rows of a ledger's
database runs an effect twice or spends an approval.

An attacker with write access to the database edits or deletes key rows, call rows,
approval rows and journal records (without the chain key, so a journal record it
rewrites keeps a hash it cannot recompute under a keyed chain; under the plain chain it
may recompute the record's own SHA-256, which still breaks the next record's link).
Then a new process resumes the run and the model sends every call again. Each handler
counts its executions on the back end: every count stays where process A left it. A
refusal may be an observation or a `LedgerError` (the journal does not verify); what
may never happen is a second charge, payment or refund.

Played on SQLite and PostgreSQL, with hypothesis choosing one or two edits out of every
row and record of the ledger, and always playing the attacks the issue reported.
Against the code before the check (a copy of the tree at the commit before it, on
``PYTHONPATH``), the issue's attacks charge twice: the property can fail.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from callgate import Authority, Gate, Policy, Registry, Status, ToolCall, allow, ask
from callgate.ledger import Ledger, LedgerError, PostgresLedger, SQLiteLedger

ALICE = Authority(principal="alice", grants=["spend:USD<=1000"])
POLICY = Policy([allow("charge"), allow("pay"), ask("refund", name="refunds need a person")])
RUN = "run-forgery"


@dataclass
class Backend:
    """Where the tested database lives, and how the attacker writes it directly."""

    name: str
    make_target: Callable[[], str]
    drop: Callable[[str], None]

    def open(self, target: str) -> Ledger:
        if self.name == "postgres":
            return PostgresLedger(target, max_size=2)
        return SQLiteLedger(target)

    def execute(self, target: str, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
        if self.name == "postgres":
            import psycopg

            with psycopg.connect(target, autocommit=True) as conn:
                for sql, params in statements:
                    conn.execute(sql.replace("?", "%s"), params)
        else:
            lite = sqlite3.connect(target)
            try:
                for sql, params in statements:
                    lite.execute(sql, params)
                lite.commit()
            finally:
                lite.close()

    def query(self, target: str, sql: str) -> list[tuple[Any, ...]]:
        if self.name == "postgres":
            import psycopg

            with psycopg.connect(target, autocommit=True) as conn:
                return [tuple(r) for r in conn.execute(sql).fetchall()]
        lite = sqlite3.connect(target)
        try:
            return [tuple(r) for r in lite.execute(sql).fetchall()]
        finally:
            lite.close()


@dataclass
class Shop:
    """Three side effects, each counted where it happens."""

    done: dict[str, int] = field(default_factory=lambda: {"charge": 0, "pay": 0, "refund": 0})

    def gate(self, ledger: Ledger) -> Gate:
        registry = Registry()

        @registry.tool(effects="spend:USD={amount}")
        def charge(order_id: str, amount: int) -> dict[str, Any]:
            """Charge an order (the default key: run and call id)."""
            self.done["charge"] += 1
            return {"charged": amount}

        @registry.tool(effects="spend:USD={amount}", idempotency_key="{invoice}")
        def pay(invoice: str, amount: int) -> dict[str, Any]:
            """Pay an invoice (a business key)."""
            self.done["pay"] += 1
            return {"paid": amount}

        @registry.tool(effects="spend:USD={amount}")
        def refund(order_id: str, amount: int) -> dict[str, Any]:
            """Refund an order (asks a person)."""
            self.done["refund"] += 1
            return {"refunded": amount}

        return Gate(registry, policy=POLICY, ledger=ledger)


CHARGE = ToolCall(id="call_0", name="charge", arguments={"order_id": "o1", "amount": 10})
PAY = ToolCall(id="call_1", name="pay", arguments={"invoice": "inv-7", "amount": 70})
REFUND = ToolCall(id="call_2", name="refund", arguments={"order_id": "o1", "amount": 20})
WAITING = ToolCall(id="call_3", name="refund", arguments={"order_id": "o2", "amount": 30})


def process_a(backend: Backend, target: str, shop: Shop) -> dict[str, str]:
    """Charge, pay, refund once (approved and spent), and leave a second refund waiting;
    the two approval ids."""
    ledger = backend.open(target)
    gate = shop.gate(ledger)
    run = gate.run(authority=ALICE, run_id=RUN)
    assert [o.status for o in run.submit([CHARGE])] == [Status.OK]
    assert [o.status for o in run.submit([PAY])] == [Status.OK]
    [asked] = run.submit([REFUND])
    assert asked.status is Status.PENDING
    assert asked.approval_id is not None
    gate.approvals.approve(asked.approval_id, by="maria")
    assert [o.status for o in run.resume()] == [Status.OK]
    [waiting] = run.submit([WAITING])
    assert waiting.status is Status.PENDING
    assert waiting.approval_id is not None
    gate.close()
    ledger.close()
    assert shop.done == {"charge": 1, "pay": 1, "refund": 1}
    return {"spent": asked.approval_id, "waiting": waiting.approval_id}


def process_b(backend: Backend, target: str, shop: Shop) -> None:
    """A new process resumes the run and the model sends everything again; a refusal of
    the whole ledger (`LedgerError`) is a refusal too."""
    ledger = backend.open(target)
    try:
        gate = shop.gate(ledger)
        steps: list[Callable[[], object]] = []
        run = None
        with contextlib.suppress(LedgerError):
            run = gate.resume_run(RUN, authority=ALICE)
        if run is not None:
            steps = [
                run.resume,
                lambda: run.submit([CHARGE]),
                lambda: run.submit([PAY]),
                lambda: run.submit([ToolCall(id="call_9", name="pay", arguments=PAY.arguments)]),
                lambda: run.submit([REFUND]),
                lambda: run.submit([WAITING]),
                run.resume,
            ]
        for step in steps:
            with contextlib.suppress(LedgerError):
                step()
        gate.close()
    finally:
        ledger.close()


# -- the attacker's edits ----------------------------------------------------------------------

Edit = tuple[str, int, int]
"""(what, which row or record by position, how): resolved against the populated database."""

KEY_EDITS = [
    "DELETE FROM idempotency_keys WHERE key = ?",
    "UPDATE idempotency_keys SET status = 'error' WHERE key = ?",
    "UPDATE idempotency_keys SET expires_at = 0 WHERE key = ?",
    "UPDATE idempotency_keys SET run_id = 'elsewhere' WHERE key = ?",
]
CALL_EDITS = [
    "DELETE FROM calls WHERE run_id = ? AND call_id = ?",
    "UPDATE calls SET state = 'rejected' WHERE run_id = ? AND call_id = ?",
    "UPDATE calls SET state = 'admitted' WHERE run_id = ? AND call_id = ?",
    "UPDATE calls SET idempotency_key = 'forged' WHERE run_id = ? AND call_id = ?",
    "UPDATE calls SET records = '' WHERE run_id = ? AND call_id = ?",
]
APPROVAL_EDITS = [
    "UPDATE approvals SET status = 'approved', decided_by = 'maria', used_at = NULL, "
    "used_by = NULL WHERE id = ?",
    "DELETE FROM approvals WHERE id = ?",
    "UPDATE approvals SET status = 'approved', decided_by = 'maria', decision_seq = "
    "(SELECT decision_seq FROM approvals WHERE status = 'used') WHERE id = ?",
    "UPDATE approvals SET status = 'approved', decided_by = 'maria', decided_at = expires_at - 1, "
    "decision_seq = (SELECT max(seq) FROM journal WHERE kind = 'approval.approved' "
    "AND call_id = 'call_3') WHERE id = ?",
]
RECORD_EDITS = ["delete", "status", "rewrite", "decide"]
"""A journal record: deleted; its statuses flipped (hash left); the same edit with its own
SHA-256 recomputed; or rewritten into the approval of the waiting refund (hash recomputed)."""

edits = st.one_of(
    st.tuples(st.just("key"), st.integers(0, 9), st.integers(0, len(KEY_EDITS) - 1)),
    st.tuples(st.just("call"), st.integers(0, 9), st.integers(0, len(CALL_EDITS) - 1)),
    st.tuples(st.just("approval"), st.integers(0, 9), st.integers(0, len(APPROVAL_EDITS) - 1)),
    st.tuples(st.just("record"), st.integers(0, 99), st.integers(0, len(RECORD_EDITS) - 1)),
)


def _sha(
    prev: str, seq: int, at: float, kind: str, run_id: str, call_id: str | None, data: str
) -> str:
    """SHA-256 of a record as the plain chain computes it (written out here, as an
    attacker would, not imported from callgate)."""
    cid = "-" if call_id is None else f"{len(call_id)}:{call_id}"
    blob = f"{prev}|{seq}|{at!r}|{len(kind)}:{kind}|{len(run_id)}:{run_id}|{cid}|{data}"
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def statements(
    backend: Backend, target: str, edit: Edit, approvals: dict[str, str]
) -> list[tuple[str, tuple[Any, ...]]]:
    """The SQL of one edit against this database."""
    what, index, how = edit
    if what == "key":
        keys = sorted(r[0] for r in backend.query(target, "SELECT key FROM idempotency_keys"))
        return [(KEY_EDITS[how], (keys[index % len(keys)],))]
    if what == "call":
        calls = sorted(backend.query(target, "SELECT run_id, call_id FROM calls"))
        return [(CALL_EDITS[how], calls[index % len(calls)])]
    if what == "approval":
        ids = [approvals["spent"], approvals["waiting"]]
        return [(APPROVAL_EDITS[how], (ids[index % len(ids)],))]
    records = backend.query(
        target,
        "SELECT seq, at, kind, run_id, call_id, data, prev_hash, hash FROM journal "
        f"WHERE seq < {2**62} ORDER BY seq",
    )
    seq, at, kind, run_id, call_id, data, prev, _ = records[index % len(records)]
    if RECORD_EDITS[how] == "delete":
        return [("DELETE FROM journal WHERE seq = ?", (seq,))]
    if RECORD_EDITS[how] == "decide":  # the waiting approval's decision, as callgate writes one
        [(principal, expires_at, tool, arguments_hash, version, policy)] = backend.query(
            target,
            "SELECT principal, expires_at, tool, arguments_hash, resource_version, "
            f"policy_version FROM approvals WHERE id = '{approvals['waiting']}'",
        )
        kind = "approval.approved"
        data = json.dumps(
            {
                "actor": "maria",
                "approval_id": approvals["waiting"],
                "principal": principal,
                "expires_at": expires_at,
                "tool": tool,
                "arguments_hash": arguments_hash,
                "resource_version": version,
                "policy_version": policy,
                "reason": None,
                "decided_at": expires_at - 1,
            },
            separators=(",", ":"),
        )
        call_id = WAITING.id
    else:
        flipped = {"ok": "error", "error": "ok", "pending": "approved", "used": "approved"}
        for old, new in flipped.items():
            if kind.endswith("." + old):
                kind = kind[: -len(old)] + new
                break
        data = data.replace('"status":"ok"', '"status":"error"')
    new_hash = _sha(prev, seq, at, kind, run_id, call_id, data)
    if RECORD_EDITS[how] == "status":
        return [("UPDATE journal SET kind = ?, data = ? WHERE seq = ?", (kind, data, seq))]
    return [
        (
            "UPDATE journal SET kind = ?, call_id = ?, data = ?, hash = ? WHERE seq = ?",
            (kind, call_id, data, new_hash, seq),
        )
    ]


def attack(backend: Backend, chosen: list[Edit]) -> None:
    """Process A, one or two edits, process B: nothing ran a second time."""
    target = backend.make_target()
    try:
        shop = Shop()
        approvals = process_a(backend, target, shop)
        for edit in chosen:
            backend.execute(target, statements(backend, target, edit, approvals))
        process_b(backend, target, shop)
        assert shop.done == {"charge": 1, "pay": 1, "refund": 1}, chosen
    finally:
        backend.drop(target)


# -- the backends -------------------------------------------------------------------------------


@pytest.fixture
def sqlite_backend(tmp_path_factory: pytest.TempPathFactory) -> Backend:
    made = iter(range(10**6))

    def make() -> str:
        return str(tmp_path_factory.mktemp("forgery") / f"ledger-{next(made)}.db")

    return Backend("sqlite", make, lambda target: None)


@pytest.fixture
def pg_backend(pg_cluster: Any) -> Backend:
    return Backend("postgres", pg_cluster.create_database, pg_cluster.drop_database)


# The issue's attacks, always played: the key row deleted with the holder call's key edited,
# its records list emptied, or its row deleted; the call set back to rejected (default key);
# the waiting approval's row approved with a journal record rewritten into its decision.
# Keys sort as the pay key (cg_...), then the charge key (run-.../call_0); calls as call_0..3;
# approvals as the spent one, then the waiting one.
ISSUE_ATTACKS: list[list[Edit]] = [
    [("key", 1, 0), ("call", 0, 3)],
    [("key", 0, 0), ("call", 1, 3)],
    [("key", 1, 0), ("call", 0, 4)],
    [("key", 0, 0), ("call", 1, 0)],
    [("key", 1, 0), ("call", 0, 1)],
    [("record", 14, 3), ("approval", 1, 3)],
    [("record", 13, 3), ("approval", 1, 3)],
    [("approval", 0, 0)],
    [("approval", 1, 2)],
]

FORGERY = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _with_examples(test: Any) -> Any:
    for chosen in ISSUE_ATTACKS:
        test = example(chosen=chosen)(test)
    return test


@FORGERY
@_with_examples
@given(chosen=st.lists(edits, min_size=1, max_size=2))
def test_no_one_or_two_row_edit_runs_an_effect_twice_on_sqlite(
    sqlite_backend: Backend, chosen: list[Edit]
) -> None:
    """SQLite: every forgery is refused before its effect runs (each count stays at 1)."""
    attack(sqlite_backend, chosen)


@settings(FORGERY, max_examples=3)  # a database per example: the issue's attacks, and a few more
@_with_examples
@given(chosen=st.lists(edits, min_size=1, max_size=2))
def test_no_one_or_two_row_edit_runs_an_effect_twice_on_postgres(
    pg_backend: Backend, chosen: list[Edit]
) -> None:
    """PostgreSQL: the same property."""
    attack(pg_backend, chosen)


def test_an_untouched_ledger_runs_nothing_twice_and_still_works(sqlite_backend: Backend) -> None:
    """The control: with no edit, process B replays what ran, refunds nothing, and a new
    charge still runs (the check refuses forgeries, not work)."""
    target = sqlite_backend.make_target()
    shop = Shop()
    process_a(sqlite_backend, target, shop)
    process_b(sqlite_backend, target, shop)
    assert shop.done == {"charge": 1, "pay": 1, "refund": 1}
    with sqlite_backend.open(target) as ledger:
        gate = shop.gate(ledger)
        run = gate.resume_run(RUN, authority=ALICE)
        fresh = ToolCall(id="call_5", name="charge", arguments={"order_id": "o5", "amount": 5})
        assert [o.status for o in run.submit([fresh])] == [Status.OK]
        assert ledger.verify().ok
    assert shop.done["charge"] == 2

"""A chain a write transaction locks after it read the journal (an ``idempotency.forged``
record on the run a forged key row names): the records another writer committed on that
chain in between are read, not skipped, so a budget they spent stays spent."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import psycopg
import pytest

from callgate.ledger import AttemptStart, CallRecord, CallState
from callgate.ledger.base import GENESIS, AuditRecord, audit_hash
from callgate.ledger.postgres import PostgresLedger
from callgate.ledger.sql_tx import Transaction
from callgate.ledger.truth import JournalTruth

BUDGET = "g|run|alice|victim-budget"


def _decide(ledger: PostgresLedger, run: str, call: str, key: str) -> None:
    now = time.time()
    ledger.record_decision(
        CallRecord(
            run_id=run,
            call_id=call,
            tool="t",
            tool_version="v",
            principal="alice",
            arguments="{}",
            state=CallState.ADMITTED,
            stage="policy",
            request_hash="h",
            idempotency_key=key,
            created_at=now,
            updated_at=now,
        )
    )


def _begin(ledger: PostgresLedger, run: str, call: str, key: str, spend: bool = False) -> str:
    now = time.time()
    claim = ledger.begin_attempt(
        AttemptStart(
            run_id=run,
            call_id=call,
            tool="t",
            tool_version="v",
            attempt=1,
            idempotency_key=key,
            request_hash="h",
            started_at=now,
            key_expires_at=now + 600,
            side_effecting=True,
            budgets=((BUDGET, 1.0, 1.0),) if spend else (),
        )
    )
    return str(claim.kind.value)


@pytest.fixture
def two(pg_dsn: str) -> Iterator[tuple[PostgresLedger, PostgresLedger, str]]:
    """Two writers (two processes' ledgers) on one fresh database."""
    a = PostgresLedger(pg_dsn, worker="A", min_size=1, max_size=1)
    b = PostgresLedger(pg_dsn, worker="B", min_size=1, max_size=1)
    try:
        yield a, b, pg_dsn
    finally:
        a.close()
        b.close()


def test_a_chain_locked_after_the_read_is_read_again(
    two: tuple[PostgresLedger, PostgresLedger, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """B spends a budget on run victim while A, having read the journal, records a forged
    key on victim: A's next spend of that budget is over budget, as a fresh ledger says."""
    a, b, dsn = two
    _decide(b, "victim", "v0", "KV0")
    assert _begin(b, "victim", "v0", "KV0") == "run"
    _decide(a, "ra", "a0", "KA0")
    assert _begin(a, "ra", "a0", "KA0") == "run"
    with psycopg.connect(dsn, autocommit=True) as other:  # a key row no record made
        other.execute(
            "INSERT INTO idempotency_keys (key, request_hash, run_id, call_id, attempt, "
            "expires_at, status, outcome_seq) VALUES ('KF', 'h', 'victim', 'v0', 1, %s, "
            "NULL, NULL)",
            (time.time() + 600,),
        )
    original = Transaction.append
    go_b, b_done = threading.Event(), threading.Event()

    def append(
        self: Transaction, kind: str, run_id: str, call_id: str | None, data: Mapping[str, Any]
    ) -> AuditRecord:
        mine = threading.current_thread().name == "A"
        if mine and kind == "idempotency.forged" and not go_b.is_set():
            go_b.set()  # A has read the journal: B commits on run victim now
            b_done.wait(30)
        return original(self, kind, run_id, call_id, data)

    monkeypatch.setattr(Transaction, "append", append)
    spent: list[str] = []

    def b_side() -> None:
        go_b.wait(30)
        try:
            _decide(b, "victim", "v1", "KV1")
            spent.append(_begin(b, "victim", "v1", "KV1", spend=True))
        finally:
            b_done.set()

    forged: list[str] = []
    tb = threading.Thread(target=b_side)
    ta = threading.Thread(target=lambda: forged.append(_begin(a, "ra", "a1", "KF")), name="A")
    tb.start()
    ta.start()
    ta.join(60)
    tb.join(60)
    monkeypatch.setattr(Transaction, "append", original)
    assert go_b.is_set()
    assert spent == ["run"]
    assert len(forged) == 1
    assert forged[0] != "run"  # the forged key row holds the call
    _decide(a, "rc", "c1", "KC1")
    assert _begin(a, "rc", "c1", "KC1", spend=True) == "over_budget"
    fresh = PostgresLedger(dsn, worker="C", min_size=1, max_size=1)
    try:
        _decide(fresh, "rd", "d1", "KD1")
        assert _begin(fresh, "rd", "d1", "KD1", spend=True) == "over_budget"
        check = fresh.verify()
        assert check.first_bad_seq is None, check.problems  # every record links and hashes
        assert any("'KF'" in p for p in check.problems)  # the forged row is still named
    finally:
        fresh.close()


def _record(seq: int, prev: str, run: str = "x") -> AuditRecord:
    at = 1.0
    text = "{}"
    h = audit_hash(prev, seq, at, "call.note", run, "c", text, None)
    return AuditRecord(
        seq=seq,
        at=at,
        kind="call.note",
        run_id=run,
        call_id="c",
        data={},
        prev_hash=prev,
        hash=h,
        data_json=text,
    )


def test_trusted_refuses_a_record_that_skips_the_head() -> None:
    """A record of this process that does not link to the fold's head of its chain is not
    folded: the head stays, and the next read starts from the whole journal."""
    truth = JournalTruth()
    truth.mark = 7
    first = _record(1, GENESIS)
    truth.trusted(first)
    skipped = _record(2, first.hash)  # another writer's, never folded here
    mine = _record(3, skipped.hash)
    assert not truth.trusted(mine)
    assert truth.heads.get("r:x") is None
    assert truth.mark is None
    assert truth.trusted(first)

"""Every kind of record a ledger writes keeps its stored data byte for byte.

The expected texts below were written by hand from the stored format (SQL ledgers: compact
JSON in the order the fields are written; the memory ledger: compact JSON, keys sorted), not
computed by the code under test: a typed record whose encoder drifts (a field renamed,
reordered, dropped or added) changes what existing ledgers' hashes cover, and fails here.
"""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path

import pytest

from callgate.approvals import ApprovalRequest
from callgate.ledger import (
    AttemptFinish,
    AttemptStart,
    CallRecord,
    CallState,
    Ledger,
    MemoryLedger,
    Outcome,
)
from callgate.ledger.sqlite import SQLiteLedger

T = 1700000000.0
"""The frozen clock of every scenario."""
FAR = 5000000000.0
B1 = "usd|run|alice|r1"
_ANCHOR = re.compile(r'^\{"@root":\[\d+,"[0-9a-f]{64}"\],?')


def _decide(ledger: Ledger, call_id: str, key: str, request_hash: str, at: float) -> None:
    ledger.record_decision(
        CallRecord(
            run_id="r1",
            call_id=call_id,
            tool="charge",
            tool_version="v1",
            principal="alice",
            arguments='{"amount":1}',
            state=CallState.ADMITTED,
            stage="policy",
            request_hash=request_hash,
            idempotency_key=key,
            decided_by="granted",
            effects=("spend:USD",),
            created_at=at,
            updated_at=at + 1.0 if call_id == "c1" else at,
        )
    )


def _begin(
    ledger: Ledger,
    call_id: str,
    key: str,
    request_hash: str,
    at: float,
    *,
    side: bool = True,
    budgets: tuple[tuple[str, float, float], ...] = (),
) -> None:
    ledger.begin_attempt(
        AttemptStart(
            run_id="r1",
            call_id=call_id,
            tool="charge",
            tool_version="v1",
            attempt=1,
            idempotency_key=key,
            request_hash=request_hash,
            started_at=at,
            key_expires_at=FAR,
            side_effecting=side,
            budgets=budgets,
        )
    )


def _finish(ledger: Ledger, call_id: str, key: str, outcome: Outcome) -> None:
    ledger.finish_attempt(
        AttemptFinish(run_id="r1", call_id=call_id, attempt=1, idempotency_key=key, outcome=outcome)
    )


def _scenario(ledger: Ledger) -> None:
    """One of each record a ledger writes (but checkpoints and forgeries: SQL only)."""
    ledger.record_run("r1", owner="alice", facts=[("run.intent", {"goal": "pay"})])
    _decide(ledger, "c1", "k1", "h1", 10.0)
    _begin(ledger, "c1", "k1", "h1", 12.0, budgets=((B1, 5.0, 50.0),))
    _finish(
        ledger,
        "c1",
        "k1",
        Outcome(status="ok", content="paid", finished_at=13.0, transaction_id="tx1"),
    )
    _decide(ledger, "c2", "k1", "h1", 14.0)
    _begin(ledger, "c2", "k1", "h1", 15.0)  # replay
    _decide(ledger, "c3", "k1", "h2", 16.0)
    _begin(ledger, "c3", "k1", "h2", 16.0)  # conflict
    _decide(ledger, "c4", "k4", "h1", 17.0)
    _begin(ledger, "c4", "k4", "h1", 17.0)
    _decide(ledger, "c5", "k4", "h1", 18.0)
    _begin(ledger, "c5", "k4", "h1", 18.0)  # in progress
    _decide(ledger, "c6", "k6", "h1", 19.0)
    _begin(ledger, "c6", "k6", "h1", 19.0, budgets=((B1, 100.0, 50.0),))  # over budget
    _finish(
        ledger,
        "c4",
        "k4",
        Outcome(status="error", content="boom", error="ValueError: boom", finished_at=20.0),
    )
    _decide(ledger, "c7", "k7", "h1", 21.0)
    _begin(ledger, "c7", "k7", "h1", 21.0, side=False)
    _finish(ledger, "c7", "k7", Outcome(status="unknown", content="", finished_at=22.0))
    ledger.resolve("r1", "c7", status="ok", by="bob", note="checked")
    ledger.record_event("note.x", run_id="r1", call_id="c1", data={"b": 2, "a": 1})
    store = ledger.approvals()
    for approval_id, arguments_hash in (("a1", "ah"), ("a2", "ah2")):
        store.request(
            ApprovalRequest(
                id=approval_id,
                run_id="r1",
                call_id="c9",
                principal="alice",
                tool="charge",
                arguments_json='{"amount":1}',
                arguments_hash=arguments_hash,
                effects=("spend:USD",),
                preview="charge 1",
                created_at=T,
                expires_at=1800000000.0,
                policy_version="p1",
                resumable=True,
            )
        )
    store.approve("a1", by="carol")
    used = store.consume(
        principal="alice",
        tool="charge",
        arguments_hash="ah",
        resource_version=None,
        run_id="r1",
        used_by="r1/c9",
    )
    assert used is not None
    assert store.release("a1", used_by="r1/c9")
    store.deny("a2", by="carol", reason="no")


DECISION = (
    '{"actor":"alice","tool":"charge","tool_version":"v1","arguments":"{\\"amount\\":1}",'
    '"stage":"policy","decided_by":"granted","effects":["spend:USD"],"approval_id":null,'
    '"message":"","request_hash":"%s","idempotency_key":"%s","created_at":%s,"updated_at":%s}'
)


def _started(key: str, at: str, side: str = "true", budgets: str = "") -> str:
    return (
        f'{{"actor":"w1","attempt":1,"idempotency_key":"{key}","request_hash":"h1",'
        f'"tool_version":"v1","started_at":{at},"key_expires_at":5000000000.0,'
        f'"side_effecting":{side}{budgets}}}'
    )


def _settled(holder: str, settled: str, at: str) -> str:
    return (
        f'{{"actor":"w1","holder":["r1","{holder}"],"settled":"{settled}",'
        f'"stage":"execute","started_at":{at}}}'
    )


SQL_EXPECTED: list[tuple[str, str]] = [
    ("run.opened", '{"actor":"alice"}'),
    ("run.intent", '{"goal":"pay","actor":"alice"}'),
    ("call.admitted", DECISION % ("h1", "k1", "10.0", "11.0")),
    ("attempt.started", _started("k1", "12.0", budgets=',"budgets":[["usd|run|alice|r1",5.0]]')),
    (
        "attempt.ok",
        '{"actor":"w1","attempt":1,"status":"ok","stage":"execute","error":null,'
        '"reconciled":false,"transaction_id":"tx1","evidence_id":"c1","content":"paid",'
        '"finished_at":13.0,"idempotency_key":"k1"}',
    ),
    ("call.admitted", DECISION % ("h1", "k1", "14.0", "14.0")),
    ("idempotency.replay", _settled("c1", "ok", "15.0")),
    ("call.admitted", DECISION % ("h2", "k1", "16.0", "16.0")),
    ("idempotency.conflict", _settled("c1", "rejected", "16.0")),
    ("call.admitted", DECISION % ("h1", "k4", "17.0", "17.0")),
    ("attempt.started", _started("k4", "17.0")),
    ("call.admitted", DECISION % ("h1", "k4", "18.0", "18.0")),
    ("idempotency.in_progress", _settled("c4", "rejected", "18.0")),
    ("call.admitted", DECISION % ("h1", "k6", "19.0", "19.0")),
    ("idempotency.over_budget", _settled("c6", "rejected", "19.0")),
    (
        "attempt.error",
        '{"actor":"w1","attempt":1,"status":"error","stage":"execute",'
        '"error":"ValueError: boom","reconciled":false,"transaction_id":null,'
        '"evidence_id":null,"content":"boom","finished_at":20.0,"idempotency_key":"k4"}',
    ),
    ("call.admitted", DECISION % ("h1", "k7", "21.0", "21.0")),
    ("attempt.started", _started("k7", "21.0", side="false")),
    (
        "attempt.unknown",
        '{"actor":"w1","attempt":1,"status":"unknown","stage":"execute","error":null,'
        '"reconciled":false,"transaction_id":null,"evidence_id":null,"content":"",'
        '"finished_at":22.0,"idempotency_key":"k7"}',
    ),
    (
        "attempt.ok",
        '{"actor":"bob","attempt":1,"status":"ok","stage":"execute","error":null,'
        '"reconciled":true,"transaction_id":null,"evidence_id":"c7","note":"checked",'
        '"content":"resolved by bob: the effect happened. checked",'
        '"finished_at":1700000000.0,"idempotency_key":"k7"}',
    ),
    ("note.x", '{"b":2,"a":1}'),
    *(
        (
            "approval.requested",
            f'{{"actor":"alice","approval_id":"{a}","tool":"charge",'
            '"arguments":"{\\"amount\\":1}",'
            f'"arguments_hash":"{h}","resource_version":null,"effects":["spend:USD"],'
            '"preview":"charge 1","policy_version":"p1","expires_at":1800000000.0,'
            '"created_at":1700000000.0,"resumable":true}',
        )
        for a, h in (("a1", "ah"), ("a2", "ah2"))
    ),
    (
        "approval.approved",
        '{"actor":"carol","approval_id":"a1","principal":"alice","expires_at":1800000000.0,'
        '"tool":"charge","arguments_hash":"ah","resource_version":null,"policy_version":"p1",'
        '"reason":null,"decided_at":1700000000.0}',
    ),
    (
        "approval.used",
        '{"actor":"alice","approval_id":"a1","decided_by":"carol","used_at":1700000000.0,'
        '"used_by":"r1/c9"}',
    ),
    ("approval.released", '{"approval_id":"a1","by":"r1/c9"}'),
    (
        "approval.denied",
        '{"actor":"carol","approval_id":"a2","principal":"alice","expires_at":1800000000.0,'
        '"tool":"charge","arguments_hash":"ah2","resource_version":null,"policy_version":"p1",'
        '"reason":"no","decided_at":1700000000.0}',
    ),
    ("call.admitted", DECISION % ("h1", "k1", "23.0", "23.0")),
    (
        "idempotency.forged",
        '{"actor":"w1","idempotency_key":"k1","problem":"its row differs from the journal '
        '(status): the row says error, the journal ok"}',
    ),
    ("idempotency.replay", _settled("c1", "ok", "23.0")),
]


def _memory_decision(key: str, request_hash: str, at: str, updated: str) -> str:
    return (
        '{"actor":"alice","approval_id":null,"arguments":"{\\"amount\\":1}",'
        f'"created_at":{at},"decided_by":"granted","effects":["spend:USD"],'
        f'"idempotency_key":"{key}","message":"","request_hash":"{request_hash}",'
        f'"stage":"policy","tool":"charge","tool_version":"v1","updated_at":{updated}}}'
    )


def _memory_started(key: str, at: str, side: str = "true") -> str:
    return (
        f'{{"actor":"w1","attempt":1,"idempotency_key":"{key}","key_expires_at":5000000000.0,'
        f'"request_hash":"h1","side_effecting":{side},"started_at":{at},"tool_version":"v1"}}'
    )


def _memory_settled(holder: str, settled: str, at: str) -> str:
    return (
        f'{{"actor":"w1","holder":["r1","{holder}"],"settled":"{settled}",'
        f'"stage":"execute","started_at":{at}}}'
    )


MEMORY_EXPECTED = [
    ("run.opened", '{"actor":"alice"}'),
    ("run.intent", '{"actor":"alice","goal":"pay"}'),
    ("call.admitted", _memory_decision("k1", "h1", "10.0", "11.0")),
    ("attempt.started", _memory_started("k1", "12.0")),  # the memory ledger keeps no budgets
    (
        "attempt.ok",
        '{"actor":"w1","attempt":1,"content":"paid","error":null,"evidence_id":"c1",'
        '"finished_at":13.0,"idempotency_key":"k1","reconciled":false,"stage":"execute",'
        '"status":"ok","transaction_id":"tx1"}',
    ),
    ("call.admitted", _memory_decision("k1", "h1", "14.0", "14.0")),
    ("idempotency.replay", _memory_settled("c1", "ok", "15.0")),
    ("call.admitted", _memory_decision("k1", "h2", "16.0", "16.0")),
    ("idempotency.conflict", _memory_settled("c1", "rejected", "16.0")),
    ("call.admitted", _memory_decision("k4", "h1", "17.0", "17.0")),
    ("attempt.started", _memory_started("k4", "17.0")),
    ("call.admitted", _memory_decision("k4", "h1", "18.0", "18.0")),
    ("idempotency.in_progress", _memory_settled("c4", "rejected", "18.0")),
    ("call.admitted", _memory_decision("k6", "h1", "19.0", "19.0")),
    ("idempotency.over_budget", _memory_settled("c6", "rejected", "19.0")),
    (
        "attempt.error",
        '{"actor":"w1","attempt":1,"content":"boom","error":"ValueError: boom",'
        '"evidence_id":null,"finished_at":20.0,"idempotency_key":"k4","reconciled":false,'
        '"stage":"execute","status":"error","transaction_id":null}',
    ),
    ("call.admitted", _memory_decision("k7", "h1", "21.0", "21.0")),
    ("attempt.started", _memory_started("k7", "21.0", side="false")),
    (
        "attempt.unknown",
        '{"actor":"w1","attempt":1,"content":"","error":null,"evidence_id":null,'
        '"finished_at":22.0,"idempotency_key":"k7","reconciled":false,"stage":"execute",'
        '"status":"unknown","transaction_id":null}',
    ),
    (
        "attempt.ok",
        '{"actor":"bob","attempt":1,"content":"resolved by bob: the effect happened. checked",'
        '"error":null,"evidence_id":"c7","finished_at":1700000000.0,"idempotency_key":"k7",'
        '"note":"checked","reconciled":true,"stage":"execute","status":"ok",'
        '"transaction_id":null}',
    ),
    ("note.x", '{"a":1,"b":2}'),
    *(
        (
            "approval.requested",
            f'{{"actor":"alice","approval_id":"{a}","arguments":"{{\\"amount\\":1}}",'
            f'"arguments_hash":"{h}","created_at":1700000000.0,"effects":["spend:USD"],'
            '"expires_at":1800000000.0,"policy_version":"p1","preview":"charge 1",'
            '"resource_version":null,"resumable":true,"tool":"charge"}',
        )
        for a, h in (("a1", "ah"), ("a2", "ah2"))
    ),
    (
        "approval.approved",
        '{"actor":"carol","approval_id":"a1","arguments_hash":"ah","decided_at":1700000000.0,'
        '"expires_at":1800000000.0,"policy_version":"p1","principal":"alice",'
        '"reason":null,"resource_version":null,"tool":"charge"}',
    ),
    (
        "approval.used",
        '{"actor":"alice","approval_id":"a1","decided_by":"carol","used_at":1700000000.0,'
        '"used_by":"r1/c9"}',
    ),
    ("approval.released", '{"approval_id":"a1","by":"r1/c9"}'),
    (
        "approval.denied",
        '{"actor":"carol","approval_id":"a2","arguments_hash":"ah2",'
        '"decided_at":1700000000.0,"expires_at":1800000000.0,"policy_version":"p1",'
        '"principal":"alice","reason":"no","resource_version":null,"tool":"charge"}',
    ),
]


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every clock the ledgers read says `T`."""
    monkeypatch.setattr(time, "time", lambda: T)


def _stored(ledger: Ledger) -> list[tuple[str, str]]:
    return [(r.kind, _ANCHOR.sub("{", r.data_json)) for r in ledger.audit()]


def test_sql_records_keep_their_stored_data(frozen: None, tmp_path: Path) -> None:
    """Each kind's data, as a SQLite ledger stores and hashes it, is the text written here."""
    path = tmp_path / "l.db"
    ledger = SQLiteLedger(path, worker="w1")
    _scenario(ledger)
    edit = sqlite3.connect(path)
    edit.execute("UPDATE idempotency_keys SET status = 'error' WHERE key = 'k1'")
    edit.commit()
    edit.close()
    _decide(ledger, "c8", "k1", "h1", 23.0)
    _begin(ledger, "c8", "k1", "h1", 23.0)  # the row lies; the journal answers (a replay)
    assert ledger.checkpoint() == 1
    stored = _stored(ledger)
    ledger.close()
    assert stored[:-1] == SQL_EXPECTED
    kind, text = stored[-1]
    assert kind == "journal.checkpoint"
    assert re.fullmatch(r'\{"actor":"w1","heads":\[\["r:r1",\d+,"[0-9a-f]{64}"\]\]\}', text)


def test_memory_records_keep_their_stored_data(frozen: None) -> None:
    """Each kind's data, as the memory ledger hashes it (keys sorted), is the text written
    here."""
    ledger = MemoryLedger(worker="w1")
    _scenario(ledger)
    assert _stored(ledger) == MEMORY_EXPECTED
    assert ledger.verify().ok

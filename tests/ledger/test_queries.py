"""What readers ask a ledger (`LedgerQueries`): the newest calls, a call's and a key's records,
the same answers from every backend."""

from __future__ import annotations

from callgate.ledger import CallRecord, CallState, Ledger


def decide(ledger: Ledger, call_id: str, at: float, key: str | None = None) -> None:
    ledger.record_decision(
        CallRecord(
            run_id="r1",
            call_id=call_id,
            tool="charge",
            tool_version="v1",
            principal="alice",
            arguments="{}",
            state=CallState.REJECTED,
            stage="policy",
            idempotency_key=key,
            created_at=at,
            updated_at=at,
        )
    )


def test_newest_calls_are_the_last_n_oldest_first(ledger: Ledger) -> None:
    """``calls(newest=N)`` is the last N calls by creation, oldest first, with filters."""
    for n in range(6):
        decide(ledger, f"c{n}", 1000.0 + n)
    assert [c.call_id for c in ledger.calls(newest=2)] == ["c4", "c5"]
    assert [c.call_id for c in ledger.calls(newest=10)] == [f"c{n}" for n in range(6)]
    assert [c.call_id for c in ledger.calls(run_id="r1", newest=1)] == ["c5"]
    assert ledger.calls(run_id="other", newest=3) == []


def test_records_of_a_call_and_of_a_key(ledger: Ledger) -> None:
    """A call's records, and the records of the calls that used a key, are exactly theirs."""
    decide(ledger, "a", 1.0, key="K")
    decide(ledger, "b", 2.0, key="K")
    decide(ledger, "c", 3.0, key="other")
    ledger.record_event("note.checked", run_id="r1", call_id="a", data={"by": "dana"})
    assert [(r.call_id, r.kind) for r in ledger.records(run_id="r1", call_id="a")] == [
        ("a", "call.rejected"),
        ("a", "note.checked"),
    ]
    assert {r.call_id for r in ledger.records(key="K")} == {"a", "b"}
    assert [r.kind for r in ledger.records(run_id="r1", limit=2)] == [
        "call.rejected",
        "call.rejected",
    ]

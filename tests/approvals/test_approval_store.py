"""The approval store of every ledger: memory, SQLite and PostgreSQL apply the same rules.

A request is bound to one effect; it is decided once, only while pending and
unexpired, by someone named; an approved request is used at most once, even
by racing processes; requests and decisions are audit records; in a SQL
ledger they survive a restart (a new ledger object on the same database).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from callgate import ApprovalError, ApprovalRequest, ApprovalStatus, Gate, Registry
from callgate.approvals import MemoryApprovals, new_approval_id
from callgate.ledger import Ledger, SQLiteLedger
from callgate.ledger.sql import MIGRATIONS, SCHEMA_VERSION

EFFECT = {
    "principal": "alice",
    "tool": "refund",
    "arguments_hash": "h20",
    "resource_version": "r1",
    "run_id": "run-1",
}


def request(**changes: object) -> ApprovalRequest:
    now = time.time()
    base = ApprovalRequest(
        id=new_approval_id(),
        run_id="run-1",
        call_id="c1",
        principal="alice",
        tool="refund",
        arguments_json='{"amount":20.0,"currency":"USD","order_id":"o1"}',
        arguments_hash="h20",
        effects=("spend:USD=20",),
        preview="refund 20.00 USD to o1",
        created_at=now,
        expires_at=now + 3600,
        resource_version="r1",
        policy_version="p1",
        resumable=True,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def durable(make_ledger: Callable[..., Ledger]) -> None:
    if make_ledger.backend == "memory":  # type: ignore[attr-defined]
        pytest.skip("a memory ledger does not outlive its process")


def test_a_request_keeps_every_field(ledger: Ledger) -> None:
    """What the gate stores is what a person (and another process) reads back."""
    store = ledger.approvals()
    stored = store.request(request())

    got = store.get(stored.id)

    assert got == stored
    assert got is not None
    assert got.effects == ("spend:USD=20",)
    assert got.resumable is True


def test_the_ledger_hands_out_its_store_and_the_gate_uses_it(ledger: Ledger) -> None:
    """``Gate(approvals=None)`` keeps approvals where its ledger keeps calls."""
    gate = Gate(Registry(), ledger=ledger)
    made = gate.approvals.request(request())
    assert ledger.approvals().get(made.id) == made


def test_the_same_effect_reuses_the_open_request(ledger: Ledger) -> None:
    """Pending, approved or denied: one request per effect until it is used or expires."""
    store = ledger.approvals()
    first = store.request(request())
    assert store.request(request(call_id="c2")).id == first.id
    store.deny(first.id, by="manager", reason="no")
    assert store.request(request(call_id="c3")).id == first.id


@pytest.mark.parametrize(
    "change",
    [
        {"principal": "mallory"},
        {"arguments_hash": "h200"},
        {"resource_version": "r2"},
        {"resource_version": None},
        {"tool": "pay"},
    ],
)
def test_another_effect_gets_its_own_request(ledger: Ledger, change: dict[str, object]) -> None:
    """A request differing in principal, arguments, version or tool gets an id of its own."""
    store = ledger.approvals()
    first = store.request(request())
    assert store.request(request(**change)).id != first.id


def test_approve_records_who_and_when_and_is_audited(ledger: Ledger) -> None:
    """approve records decider and time, audits requested then approved; the ledger verifies."""
    store = ledger.approvals()
    made = store.request(request())

    decided = store.approve(made.id, by="maria")

    assert decided.status is ApprovalStatus.APPROVED
    assert decided.decided_by == "maria"
    assert decided.decided_at is not None
    assert store.get(made.id) == decided
    kinds = [(r.kind, r.data.get("actor")) for r in ledger.audit() if r.kind.startswith("appr")]
    assert kinds == [("approval.requested", "alice"), ("approval.approved", "maria")]
    assert ledger.verify().ok


def test_deny_records_the_reason(ledger: Ledger) -> None:
    """deny sets the status and reason, and the approval.denied record holds the reason."""
    store = ledger.approvals()
    made = store.request(request())
    denied = store.deny(made.id, by="maria", reason="not eligible")
    assert (denied.status, denied.reason) == (ApprovalStatus.DENIED, "not eligible")
    [event] = [r for r in ledger.audit() if r.kind == "approval.denied"]
    assert event.data["reason"] == "not eligible"


def test_consume_is_single_use(ledger: Ledger) -> None:
    """An approved request is consumed once (marked used by its call); a second consume is None."""
    store = ledger.approvals()
    made = store.request(request())
    store.approve(made.id, by="maria")

    used = store.consume(**EFFECT, used_by="run-1/c1")  # type: ignore[arg-type]
    again = store.consume(**EFFECT, used_by="run-1/c1")  # type: ignore[arg-type]

    assert used is not None
    assert (used.id, used.status, used.used_by) == (made.id, ApprovalStatus.USED, "run-1/c1")
    assert again is None
    assert store.get(made.id).status is ApprovalStatus.USED  # type: ignore[union-attr]


def test_a_pending_request_cannot_be_consumed(ledger: Ledger) -> None:
    """consume of a request still pending returns None."""
    store = ledger.approvals()
    store.request(request())
    assert store.consume(**EFFECT) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "change",
    [
        {"principal": "mallory"},
        {"arguments_hash": "h200"},
        {"resource_version": "r2"},
        {"resource_version": None},
    ],
)
def test_consume_needs_the_exact_effect(ledger: Ledger, change: dict[str, object]) -> None:
    """Approved 20 USD (hash h20) does not release 200 USD, another principal or version."""
    store = ledger.approvals()
    made = store.request(request())
    store.approve(made.id, by="maria")
    assert store.consume(**{**EFFECT, **change}) is None  # type: ignore[arg-type]
    assert store.get(made.id).status is ApprovalStatus.APPROVED  # type: ignore[union-attr]


def test_a_request_without_resource_version_binds_to_none(ledger: Ledger) -> None:
    """A request with no resource version is consumed only by a call with none."""
    store = ledger.approvals()
    made = store.request(request(resource_version=None))
    store.approve(made.id, by="maria")
    assert store.consume(**{**EFFECT, "resource_version": "r1"}) is None  # type: ignore[arg-type]
    used = store.consume(**{**EFFECT, "resource_version": None})  # type: ignore[arg-type]
    assert used is not None
    assert used.id == made.id


def test_an_approved_request_past_its_expiry_is_not_consumed(ledger: Ledger) -> None:
    """An approved request past expires_at is not consumed and stays approved."""
    store = ledger.approvals()
    made = store.request(request())
    store.approve(made.id, by="maria")
    assert store.consume(**EFFECT, now=made.expires_at + 1) is None  # type: ignore[arg-type]
    assert store.list(ApprovalStatus.APPROVED) == [store.get(made.id)]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "no approval request"),
        ("approved", "already approved by maria"),
        ("denied", "already denied by maria"),
        ("used", "already used"),
        ("expired", "expired"),
    ],
)
@pytest.mark.parametrize("approve", [True, False])
def test_a_request_that_cannot_be_decided_is_an_error_and_nothing_changes(
    ledger: Ledger, setup: str, message: str, approve: bool
) -> None:
    """Deciding a missing, decided, used or expired request: ApprovalError, nothing changed."""
    store = ledger.approvals()
    made = store.request(request(expires_at=time.time() + (0.05 if setup == "expired" else 3600)))
    approval_id = "apr_missing" if setup == "missing" else made.id
    if setup in ("approved", "used"):
        store.approve(made.id, by="maria")
    if setup == "used":
        store.consume(**EFFECT)  # type: ignore[arg-type]
    if setup == "denied":
        store.deny(made.id, by="maria", reason="no")
    if setup == "expired":
        time.sleep(0.1)
    before = store.get(made.id)
    audit = len(ledger.audit())

    with pytest.raises(ApprovalError, match=message):
        store.decide(approval_id, approve=approve, by="bob", reason="late")

    assert store.get(made.id) == before
    assert len(ledger.audit()) == audit


def test_a_decision_names_who_decides(ledger: Ledger) -> None:
    """approve(by="  ") raises ApprovalError asking who decides; the request stays pending."""
    store = ledger.approvals()
    made = store.request(request())
    with pytest.raises(ApprovalError, match="who decides"):
        store.approve(made.id, by="  ")
    assert store.get(made.id).status is ApprovalStatus.PENDING  # type: ignore[union-attr]


def test_list_filters_by_state_including_expired(ledger: Ledger) -> None:
    """list(status) gives each state's requests (expired too); list() all, oldest first."""
    store = ledger.approvals()
    now = time.time()
    pending = store.request(request(arguments_hash="a", created_at=now - 3))
    approved = store.approve(
        store.request(request(arguments_hash="b", created_at=now - 2)).id, by="m"
    )
    denied = store.deny(
        store.request(request(arguments_hash="c", created_at=now - 1)).id, by="m", reason="no"
    )
    expired = store.request(request(arguments_hash="d", created_at=now, expires_at=now + 0.05))
    time.sleep(0.1)

    ids = {s: [r.id for r in store.list(s)] for s in ApprovalStatus}

    assert ids == {
        ApprovalStatus.PENDING: [pending.id],
        ApprovalStatus.APPROVED: [approved.id],
        ApprovalStatus.DENIED: [denied.id],
        ApprovalStatus.USED: [],
        ApprovalStatus.EXPIRED: [expired.id],
    }
    assert [r.id for r in store.list()] == [pending.id, approved.id, denied.id, expired.id]
    assert store.get(expired.id).state() is ApprovalStatus.EXPIRED  # type: ignore[union-attr]


def test_requests_and_decisions_survive_a_restart(make_ledger: Callable[..., Ledger]) -> None:
    """A request and its approval survive reopening the ledger, and can be consumed there."""
    durable(make_ledger)
    first = make_ledger()
    made = first.approvals().request(request())
    first.approvals().approve(made.id, by="maria")
    first.close()

    reopened = make_ledger()

    got = reopened.approvals().get(made.id)
    assert got is not None
    assert (got.status, got.decided_by) == (ApprovalStatus.APPROVED, "maria")
    assert reopened.approvals().consume(**EFFECT) is not None  # type: ignore[arg-type]


def test_racing_consumers_use_an_approval_once(make_ledger: Callable[..., Ledger]) -> None:
    """Eight threads (each on its own connection to the same database) race for one approval."""
    durable(make_ledger)
    made = make_ledger().approvals().request(request())
    make_ledger().approvals().approve(made.id, by="maria")
    stores = [
        make_ledger(max_size=1) if make_ledger.backend == "postgres" else make_ledger()  # type: ignore[attr-defined]
        for _ in range(8)
    ]
    barrier = threading.Barrier(len(stores))
    won: list[object] = []

    def race(ledger: Ledger) -> None:
        barrier.wait()
        won.append(ledger.approvals().consume(**EFFECT))  # type: ignore[arg-type]

    threads = [threading.Thread(target=race, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert len([w for w in won if w is not None]) == 1


def test_a_ledger_at_schema_version_1_gains_the_approvals_table(tmp_path: Path) -> None:
    """Migration 2 is applied to an existing ledger on open; its calls are kept."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at REAL)")
    for statement in MIGRATIONS[0]:
        conn.execute(statement.format(real="REAL", bigint="INTEGER", without_rowid=""))
    conn.execute("INSERT INTO schema_version VALUES (1, 0)")
    conn.commit()
    conn.close()

    ledger = SQLiteLedger(path)
    try:
        made = ledger.approvals().request(request())
        assert ledger.approvals().get(made.id) == made
    finally:
        ledger.close()
    conn = sqlite3.connect(path)
    versions = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
    conn.close()
    assert versions == [(v,) for v in range(1, SCHEMA_VERSION + 1)]


def test_a_standalone_memory_store_still_works_without_a_ledger() -> None:
    """MemoryApprovals with no ledger requests, approves and consumes."""
    store = MemoryApprovals()
    made = store.request(request())
    store.approve(made.id, by="maria")
    assert store.consume(**EFFECT) is not None  # type: ignore[arg-type]


def test_a_used_approval_is_given_back_only_to_the_call_that_took_it(ledger: Ledger) -> None:
    """`release` undoes a use whose call never ran, for that call only; the approval is
    then single-use again."""
    store = ledger.approvals()
    made = store.request(request())
    store.approve(made.id, by="dana")
    assert store.consume(**EFFECT, used_by="run-1/c1") is not None  # type: ignore[arg-type]
    assert not store.release(made.id, used_by="run-1/other")
    assert store.release(made.id, used_by="run-1/c1")
    assert not store.release(made.id, used_by="run-1/c1")
    back = store.get(made.id)
    assert back is not None
    assert back.status is ApprovalStatus.APPROVED
    assert store.consume(**EFFECT, used_by="run-1/c2") is not None  # type: ignore[arg-type]
    assert store.consume(**EFFECT, used_by="run-1/c3") is None  # type: ignore[arg-type]

"""Crash recovery on every backend: a call left ``running`` is settled, never guessed.

A "crash" here is a worker thread stuck inside a handler while a second gate
opens the same ledger, as a restarted process would, and recovers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from callgate import Authority, CallContext, Gate, OutcomeUnknown, Registry, ToolCall, ToolFailure
from callgate.ledger import CallState, Ledger

AUTHORITY = Authority(principal="alice", grants=["spend:USD", "read:orders"])


@dataclass
class Bank:
    """The authoritative record of charges, keyed by idempotency key."""

    charges: dict[str, dict[str, Any]] = field(default_factory=dict)
    reconcile: str = "lookup"
    """``lookup`` (find the charge), ``unsure`` (cannot tell), ``none`` (no hook)."""
    inside: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    block: bool = False
    worker: threading.Thread | None = None
    """The "dead" worker's thread, stuck in the handler until ``release``."""


def registry(bank: Bank) -> Registry:
    reg = Registry()

    def find(args: Any, ctx: CallContext) -> dict[str, Any]:
        if bank.reconcile == "unsure":
            raise OutcomeUnknown("the bank is unreachable")
        found = bank.charges.get(ctx.idempotency_key)
        if found is None:
            raise ToolFailure("no charge was made under this key")
        return found

    @reg.tool(
        effects="spend:USD",
        writes="charge:{operation_id}",
        idempotency_key="{operation_id}",
        reconcile=None if bank.reconcile == "none" else find,
    )
    def charge(operation_id: str, amount: int, ctx: CallContext) -> dict[str, Any]:
        """Charge once per operation id."""
        bank.charges[ctx.idempotency_key] = {"charge": f"ch_{operation_id}", "amount": amount}
        bank.inside.set()
        if bank.block:
            bank.release.wait(10)
        return bank.charges[ctx.idempotency_key]

    @reg.tool(effects="read:orders")
    def lookup(order_id: str) -> str:
        """Read an order."""
        bank.inside.set()
        if bank.block:
            bank.release.wait(10)
        return "shipped"

    return reg


@pytest.fixture
def crash(make_ledger: Callable[..., Ledger]) -> Iterator[Callable[..., Gate]]:
    """``crash(bank, call)``: a worker dies inside the handler; returns the restarted gate."""
    stuck: list[tuple[Bank, threading.Thread]] = []

    def go(bank: Bank, call: ToolCall, *, worker: str = "w1") -> Gate:
        bank.block = True
        dead = Gate(registry(bank), ledger=make_ledger(worker=_w(make_ledger, worker)))
        run = dead.run(authority=AUTHORITY, run_id="run-dead")
        thread = threading.Thread(target=run.submit, args=([call],), daemon=True)
        thread.start()
        assert bank.inside.wait(10)
        stuck.append((bank, thread))
        bank.worker = thread
        bank.block = False
        return Gate(registry(bank), ledger=make_ledger(worker=_w(make_ledger, "restarted")))

    yield go
    for bank, thread in stuck:
        bank.release.set()
        thread.join(10)


def _w(make_ledger: Callable[..., Ledger], worker: str) -> Any:
    return None if make_ledger.backend == "memory" else worker  # type: ignore[attr-defined]


def _charge(call_id: str = "c1", operation_id: str = "op-1") -> ToolCall:
    return ToolCall(
        id=call_id, name="charge", arguments={"operation_id": operation_id, "amount": 5}
    )


def test_a_reconcile_hook_that_finds_the_charge_settles_the_call_ok(
    crash: Callable[..., Gate],
) -> None:
    """A hook that finds the charge settles the running call ok, reconciled; its key replays."""
    bank = Bank()
    gate = crash(bank, _charge())
    assert gate.ledger.get_call("run-dead", "c1").state is CallState.RUNNING  # type: ignore[union-attr]
    report = gate.recover()
    assert [(c.call_id, c.status, c.how) for c in report.calls] == [("c1", "ok", "reconcile hook")]
    call = gate.ledger.get_call("run-dead", "c1")
    assert call is not None
    assert call.state is CallState.OK
    assert call.reconciled
    again = gate.run(authority=AUTHORITY).submit([_charge("c2")])[0]
    assert again.status == "ok"
    assert "already ran" in again.content
    assert len(bank.charges) == 1


def test_a_reconcile_hook_that_finds_nothing_settles_the_call_error(
    crash: Callable[..., Gate],
) -> None:
    """A hook that finds no charge settles the running call error, by the reconcile hook."""
    bank = Bank()
    gate = crash(bank, _charge())
    bank.charges.clear()  # the bank never received it
    [recovered] = gate.recover().calls
    assert (recovered.status, recovered.how) == ("error", "reconcile hook")


def test_without_a_hook_the_call_waits_for_a_person_and_is_never_rerun(
    crash: Callable[..., Gate],
) -> None:
    """With no hook the call needs a person, its key replays unknown, and resolve settles it."""
    bank = Bank(reconcile="none")
    gate = crash(bank, _charge())
    report = gate.recover()
    assert [c.call_id for c in report.needs_person] == ["c1"]
    retry = gate.run(authority=AUTHORITY).submit([_charge("c2")])[0]
    assert retry.status == "unknown"
    assert "already ran" in retry.content
    resolved = gate.ledger.resolve("run-dead", "c1", status="ok", by="dana", note="in the bank")
    assert resolved.state is CallState.OK
    assert gate.ledger.verify().ok


def test_a_hook_that_cannot_tell_leaves_the_call_unknown(crash: Callable[..., Gate]) -> None:
    """A hook that cannot tell leaves the call unknown ("hook could not tell")."""
    gate = crash(Bank(reconcile="unsure"), _charge())
    [recovered] = gate.recover().calls
    assert (recovered.status, recovered.how) == ("unknown", "hook could not tell")


def test_an_interrupted_read_only_call_had_no_effect(crash: Callable[..., Gate]) -> None:
    """An interrupted read-only call is settled error ("read-only"), or was never running."""
    read = ToolCall(id="r1", name="lookup", arguments={"order_id": "o-1"})
    gate = crash(Bank(), read)
    gate.ledger.record_event("tick", run_id="x", call_id=None, data={})  # flush deferred writes
    report = gate.recover()
    if not report.calls:  # the read's start may not have reached the disk: nothing to settle
        assert gate.ledger.calls(state=CallState.RUNNING) == []
        return
    assert [(c.status, c.how) for c in report.calls] == [("error", "read-only")]


def test_recovery_limited_to_a_worker_leaves_other_workers_calls(
    crash: Callable[..., Gate], make_ledger: Callable[..., Ledger]
) -> None:
    """recover(worker="w2") leaves w1's running call; recover(worker="w1") settles it."""
    if make_ledger.backend == "memory":  # type: ignore[attr-defined]
        pytest.skip("a memory ledger belongs to one process")
    gate = crash(Bank(), _charge(), worker="w1")
    assert gate.recover(worker="w2").calls == ()
    assert [c.call_id for c in gate.recover(worker="w1").calls] == ["c1"]


def test_a_late_outcome_from_the_crashed_worker_cannot_overwrite_recovery(
    crash: Callable[..., Gate],
) -> None:
    """The crashed worker's late ok does not overwrite the unknown that recovery recorded."""
    bank = Bank(reconcile="unsure")
    gate = crash(bank, _charge())
    gate.recover()
    bank.release.set()  # the "dead" worker wakes up and tries to record ok
    assert bank.worker is not None
    bank.worker.join(10)
    assert not bank.worker.is_alive()
    call = gate.ledger.get_call("run-dead", "c1")
    assert call is not None
    assert call.state is CallState.UNKNOWN


def test_recovery_settles_each_call_once(crash: Callable[..., Gate]) -> None:
    """A second recover settles nothing; the call has one attempt.ok record."""
    gate = crash(Bank(), _charge())
    assert len(gate.recover().calls) == 1
    assert gate.recover().calls == ()
    kinds = [r.kind for r in gate.ledger.audit() if r.call_id == "c1"]
    assert kinds.count("attempt.ok") == 1

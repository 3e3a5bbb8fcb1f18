"""`callgate.gate.recovery` through `Gate.recover`: calls left ``running`` are settled, not guessed.

A "crash" here is a first gate's worker thread stuck inside a handler (its call
is ``running`` in the ledger) while a second gate over the same ledger, as a
restarted process, recovers. tests/ledger/test_recovery.py holds the outcomes of
a reconcile hook on every backend; here: what recovery hands the hook (the call's
arguments rebuilt from the ledger, its key, the trusted context), what it
stores (redacted), and a tool that is no longer registered.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from callgate import (
    Authority,
    CallContext,
    Gate,
    OutcomeUnknown,
    Registry,
    ToolCall,
    ToolFailure,
)
from callgate.gate.recovery import Recovered, RecoveryReport
from callgate.ledger import CallState, Ledger

AUTHORITY = Authority(principal="alice", grants=["spend:USD", "write:cards"])
TOKEN = "ctx-token-5f1e2d3c4b5a6978"
KEY = "sk-" + "Zq8wE2rT6yU1iO9pA3sD"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test here runs on the memory and the SQLite ledger (conftest's make_ledger)."""
    if "make_ledger" in metafunc.fixturenames:
        metafunc.parametrize("make_ledger", ["memory", "sqlite"], indirect=True)


@dataclass
class Bank:
    """The payment provider: what it holds, what the reconcile hook saw, and the stuck worker."""

    answer: str = "found"
    """``found``, ``missing`` (ToolFailure), ``unsure`` (OutcomeUnknown), ``crash`` (a bug),
    ``echo`` (the context's token in its answer)."""
    seen: list[tuple[Any, CallContext]] = field(default_factory=list)
    inside: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


def registry(bank: Bank, *, with_charge: bool = True) -> Registry:
    reg = Registry()

    def find(args: Any, ctx: CallContext) -> str:
        bank.seen.append((args, ctx))
        if bank.answer == "missing":
            raise ToolFailure("no charge under this key")
        if bank.answer == "unsure":
            raise OutcomeUnknown("the bank is unreachable")
        if bank.answer == "crash":
            raise RuntimeError("a bug in the hook")
        if bank.answer == "echo":
            return f"charged for tenant token {ctx.context.get('token')}"
        return f"charge ch_1 for {args.amount}; api_key=abc123secretvalue"

    def stuck() -> str:
        bank.inside.set()
        bank.release.wait(30)
        return "done"

    if with_charge:

        @reg.tool(effects="spend:USD", idempotency_key="{operation_id}", reconcile=find)
        def charge(operation_id: str, amount: int) -> str:
            """Charge once per operation."""
            return stuck()

    @reg.tool(effects="write:cards", secret_fields=["cvv"], reconcile=find)
    def save_card(number: str, cvv: int, amount: int = 0) -> str:
        """Save a card; its cvv is secret and never stored."""
        return stuck()

    @reg.tool(effects="spend:USD")
    def transfer(amount: int) -> str:
        """A transfer with no reconcile hook."""
        return stuck()

    return reg


@pytest.fixture
def crash(make_ledger: Callable[..., Ledger]) -> Iterator[Callable[..., Gate]]:
    """``crash(bank, call)``: the first gate's worker stops inside the handler; the restarted
    gate (same ledger, the registry given by ``options``) is returned."""
    stuck: list[tuple[Bank, threading.Thread]] = []

    def go(bank: Bank, call: ToolCall, **options: Any) -> Gate:
        dead = Gate(registry(bank), ledger=make_ledger())
        run = dead.run(authority=AUTHORITY, run_id="run-dead")
        worker = threading.Thread(target=run.submit, args=([call],), daemon=True)
        worker.start()
        assert bank.inside.wait(10)
        stuck.append((bank, worker))
        return Gate(registry(bank, **options), ledger=make_ledger())

    yield go
    for bank, worker in stuck:
        bank.release.set()
        worker.join(10)


def charge(call_id: str = "c1", operation_id: str = "op-1", amount: int = 5) -> ToolCall:
    return ToolCall(
        id=call_id, name="charge", arguments={"operation_id": operation_id, "amount": amount}
    )


def test_the_hook_gets_the_calls_arguments_key_principal_and_context(
    crash: Callable[..., Gate],
) -> None:
    """The reconcile hook sees the stored arguments, the call's key and the context given."""
    bank = Bank()
    gate = crash(bank, charge(amount=7))
    report = gate.recover(context={"tenant": "acme"})
    assert report == RecoveryReport(
        calls=(
            Recovered(
                run_id="run-dead", call_id="c1", tool="charge", status="ok", how="reconcile hook"
            ),
        )
    )
    [(args, ctx)] = bank.seen
    assert (args.operation_id, args.amount) == ("op-1", 7)
    assert (ctx.run_id, ctx.call_id, ctx.tool, ctx.attempt) == ("run-dead", "c1", "charge", 1)
    assert ctx.principal == "alice"
    assert dict(ctx.context) == {"tenant": "acme"}
    record = gate.ledger.get_call("run-dead", "c1")
    assert record is not None
    assert ctx.idempotency_key == record.idempotency_key
    assert (record.state, record.reconciled) == (CallState.OK, True)


def test_a_credential_in_the_hooks_answer_is_redacted_in_the_ledger(
    crash: Callable[..., Gate],
) -> None:
    """What the hook returns is stored with credential-shaped text redacted."""
    gate = crash(Bank(), charge())
    gate.recover()
    [attempt] = gate.ledger.attempts("run-dead", "c1")
    assert attempt.outcome is not None
    assert attempt.outcome.content == "charge ch_1 for 5; api_key=[redacted]"
    assert "abc123secretvalue" not in str(gate.ledger.audit())


def test_recovery_is_recorded_as_the_recovery_actor(crash: Callable[..., Gate]) -> None:
    """The settling record names 'recovery' as its actor, and the chain still verifies."""
    gate = crash(Bank(answer="unsure"), charge())
    gate.recover()
    [settled] = [
        r for r in gate.ledger.audit() if r.call_id == "c1" and r.kind == "attempt.unknown"
    ]
    assert settled.data["actor"] == "recovery"
    assert gate.ledger.verify().ok


def test_a_call_with_a_secret_field_is_reconciled_on_what_the_ledger_kept(
    crash: Callable[..., Gate],
) -> None:
    """The hook gets the stored arguments, the secret field as [redacted], never its value."""
    bank = Bank()
    call = ToolCall(id="s1", name="save_card", arguments={"number": "4111", "cvv": 123})
    gate = crash(bank, call)
    [recovered] = gate.recover().calls
    assert (recovered.status, recovered.how) == ("ok", "reconcile hook")
    [(args, _)] = bank.seen
    assert args.number == "4111"
    assert args.cvv == "[redacted]"  # not an int: rebuilt without validation, never the value


@pytest.mark.parametrize(
    ("answer", "status", "how"),
    [
        ("missing", "error", "reconcile hook"),
        ("unsure", "unknown", "hook could not tell"),
        ("crash", "unknown", "hook could not tell"),
    ],
)
def test_what_the_hook_answers_decides_the_outcome(
    crash: Callable[..., Gate], answer: str, status: str, how: str
) -> None:
    """Not found: error; cannot tell, or the hook itself fails: unknown, for a person."""
    gate = crash(Bank(answer=answer), charge())
    report = gate.recover()
    [recovered] = report.calls
    assert (recovered.status, recovered.how) == (status, how)
    assert [c.call_id for c in report.needs_person] == (["c1"] if status == "unknown" else [])
    record = gate.ledger.get_call("run-dead", "c1")
    assert record is not None
    assert record.state.value == status


def test_a_tool_no_longer_registered_is_left_for_a_person(crash: Callable[..., Gate]) -> None:
    """A running call of a tool the restarted registry lacks ends unknown, naming why."""
    gate = crash(Bank(), charge(), with_charge=False)
    report = gate.recover()
    assert [(c.tool, c.status, c.how) for c in report.calls] == [
        ("charge", "unknown", "tool not registered")
    ]
    assert report.needs_person == report.calls
    [attempt] = gate.ledger.attempts("run-dead", "c1")
    assert attempt.outcome is not None
    assert "is no longer registered" in attempt.outcome.content


def test_without_a_hook_the_outcome_says_not_to_repeat_it(crash: Callable[..., Gate]) -> None:
    """No hook: unknown, and the stored outcome says the effect may have happened."""
    gate = crash(Bank(), ToolCall(id="t1", name="transfer", arguments={"amount": 3}))
    [recovered] = gate.recover().calls
    assert (recovered.tool, recovered.status, recovered.how) == (
        "transfer",
        "unknown",
        "no reconcile hook",
    )
    [attempt] = gate.ledger.attempts("run-dead", "t1")
    assert attempt.outcome is not None
    assert "the effect may have happened. Do not repeat it" in attempt.outcome.content


def test_a_ledger_with_nothing_running_has_nothing_to_recover(
    make_ledger: Callable[..., Ledger],
) -> None:
    """recover() on a ledger whose calls all finished settles nothing and changes nothing."""
    bank = Bank()
    bank.release.set()  # handlers return at once
    gate = Gate(registry(bank), ledger=make_ledger())
    gate.run(authority=AUTHORITY).submit([charge()])
    before = len(gate.ledger.audit())
    report = gate.recover()
    assert report == RecoveryReport()
    assert report.needs_person == ()
    assert len(gate.ledger.audit()) == before
    assert bank.seen == []


def test_a_context_value_in_the_hooks_answer_is_not_stored(crash: Callable[..., Gate]) -> None:
    """A trusted context value the hook echoes never reaches the ledger."""
    gate = crash(Bank(answer="echo"), charge())
    [recovered] = gate.recover(context={"token": TOKEN}).calls
    assert recovered.status == "ok"
    assert TOKEN not in str(gate.ledger.audit())

"""`callgate.gate.resume` through `Gate.resume_run`: a run rebuilt from the ledger in a new gate.

A second `Gate` over the same ledger stands for another process: for SQLite it
opens the file again, for memory it shares the ledger object. The rebuilt run
must wait for the same approvals, run each approved call once with the exact
arguments it was approved for, know the call ids already used, and hold the
evidence of its ``ok`` calls (decoded from the ledger) for preconditions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from callgate import (
    Authority,
    Evidence,
    Gate,
    Policy,
    Registry,
    Stage,
    Status,
    ToolCall,
    allow,
    ask,
)
from callgate.ledger import CallState, Ledger, LedgerError

AUTHORITY = Authority(
    principal="alice",
    grants=["read:orders", "write:notes", "spend:USD", "write:vault"],
    context={"tenant": "acme"},
)
KEY = "sk-" + "Zq8wE2rT6yU1iO9pA3sD"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test here runs on the memory and the SQLite ledger (conftest's make_ledger)."""
    if "make_ledger" in metafunc.fixturenames:
        metafunc.parametrize("make_ledger", ["memory", "sqlite"], indirect=True)


class Profile(BaseModel):
    """A result that is a Pydantic model in the first process."""

    name: str
    tier: int


@dataclass
class Shop:
    """What the tools did, across both gates."""

    refunds: list[tuple[str, float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stored: list[str] = field(default_factory=list)


def registry(shop: Shop, *, with_note: bool = True) -> Registry:
    reg = Registry()

    @reg.tool(effects="read:orders")
    def get_order(order_id: str) -> dict[str, Any]:
        """Read an order."""
        return {"id": order_id, "status": "delivered", "total": 80.0}

    @reg.tool(effects="read:orders")
    def get_status(order_id: str) -> str:
        """Read an order's status as text."""
        return f"{order_id} was delivered"

    @reg.tool(effects="read:orders")
    def get_code(order_id: str) -> str:
        """Read an order's discount code: text that happens to read as JSON."""
        return "42"

    @reg.tool(effects="read:orders")
    def get_profile(order_id: str) -> Profile:
        """Read the customer of an order."""
        return Profile(name="ana", tier=2)

    if with_note:

        @reg.tool(effects="write:notes")
        def note(order_id: str, text: str) -> str:
            """Add a note to an order."""
            shop.notes.append(text)
            return "noted"

    def read_first(args: Any, evidence: Evidence) -> str | None:
        if evidence.has("get_order", order_id=args.order_id):
            return None
        return f"read order {args.order_id} with get_order first"

    @reg.tool(effects="spend:USD", precondition=read_first)
    def refund(order_id: str, amount: float, memo: str = "") -> str:
        """Refund an order."""
        shop.refunds.append((order_id, amount))
        return f"refunded {amount}"

    @reg.tool(effects="write:vault", secret_fields=["password"])
    def store(user: str, password: str) -> str:
        """Store a credential."""
        shop.stored.append(user)
        return "stored"

    return reg


POLICY = Policy([ask("refund"), ask("store"), allow("*")])


def gate(make_ledger: Callable[..., Ledger], shop: Shop, **options: Any) -> Gate:
    """A gate over the ledger under test: for SQLite, the file opened again."""
    return Gate(registry(shop, **options), ledger=make_ledger(), policy=POLICY)


def call(call_id: str, tool: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=tool, arguments=arguments)


def first_process(make_ledger: Callable[..., Ledger], shop: Shop) -> tuple[str, str]:
    """Reads, a note and a refund that waits for approval: the run id and approval id."""
    run = gate(make_ledger, shop).run(authority=AUTHORITY)
    observations = run.submit(
        [
            call("c1", "get_order", order_id="o-1"),
            call("c2", "get_status", order_id="o-1"),
            call("c3", "get_profile", order_id="o-1"),
            call("c4", "note", order_id="o-1", text="first"),
        ]
    )
    assert [o.status for o in observations] == [Status.OK] * 4
    [pending] = run.submit([call("c5", "refund", order_id="o-1", amount=80.0, memo="late")])
    assert pending.status is Status.PENDING
    assert pending.approval_id is not None
    return run.id, pending.approval_id


def test_a_rebuilt_run_waits_for_the_same_approval_and_runs_nothing_early(
    make_ledger: Callable[..., Ledger],
) -> None:
    """The rebuilt run lists the pending approval; resume before a decision runs nothing."""
    shop = Shop()
    run_id, approval_id = first_process(make_ledger, shop)
    rebuilt = gate(make_ledger, shop).resume_run(run_id, authority=AUTHORITY)
    assert rebuilt.pending_approvals == [approval_id]
    assert rebuilt.resume() == []
    assert rebuilt.pending_approvals == [approval_id]
    assert shop.refunds == []


def test_an_approved_call_runs_once_with_the_arguments_it_was_approved_for(
    make_ledger: Callable[..., Ledger],
) -> None:
    """After approval the rebuilt run runs the call under its own id, with its arguments, once."""
    shop = Shop()
    run_id, approval_id = first_process(make_ledger, shop)
    second = gate(make_ledger, shop)
    second.approvals.approve(approval_id, by="maria")
    rebuilt = second.resume_run(run_id, authority=AUTHORITY)
    [done] = rebuilt.resume()
    assert (done.status, done.call_id, done.tool) == (Status.OK, "c5", "refund")
    assert shop.refunds == [("o-1", 80.0)]
    assert rebuilt.resume() == []
    again = gate(make_ledger, shop).resume_run(run_id, authority=AUTHORITY)
    assert again.pending_approvals == []
    assert shop.refunds == [("o-1", 80.0)]
    record = second.ledger.get_call(run_id, "c5")
    assert record is not None
    assert record.state is CallState.OK


def test_the_rebuilt_evidence_holds_each_ok_result_decoded(
    make_ledger: Callable[..., Ledger],
) -> None:
    """Evidence comes back in order: dict results as dicts, text as text, models as dicts."""
    shop = Shop()
    run_id, _ = first_process(make_ledger, shop)
    rebuilt = gate(make_ledger, shop).resume_run(run_id, authority=AUTHORITY)
    assert [(i.call_id, i.tool) for i in rebuilt.evidence] == [
        ("c1", "get_order"),
        ("c2", "get_status"),
        ("c3", "get_profile"),
        ("c4", "note"),
    ]
    order = rebuilt.evidence.latest("get_order", order_id="o-1")
    assert order is not None
    assert order.result == {"id": "o-1", "status": "delivered", "total": 80.0}
    assert order.arguments == {"order_id": "o-1"}
    status = rebuilt.evidence.latest("get_status")
    assert status is not None
    assert status.result == "o-1 was delivered"
    profile = rebuilt.evidence.latest("get_profile")
    assert profile is not None
    assert profile.result == {"name": "ana", "tier": 2}


def test_a_text_result_that_reads_as_json_comes_back_as_text(
    make_ledger: Callable[..., Ledger],
) -> None:
    """A tool's str result "42" is the str "42" in the rebuilt evidence, as it was before."""
    shop = Shop()
    run = gate(make_ledger, shop).run(authority=AUTHORITY)
    [obs] = run.submit([call("c1", "get_code", order_id="o-1")])
    assert (obs.status, obs.result) == (Status.OK, "42")
    rebuilt = gate(make_ledger, shop).resume_run(run.id, authority=AUTHORITY)
    item = rebuilt.evidence.latest("get_code")
    assert item is not None
    assert item.result == "42"


def test_a_precondition_reads_the_rebuilt_evidence(
    make_ledger: Callable[..., Ledger],
) -> None:
    """The resumed refund is checked again; its precondition passes on the evidence rebuilt."""
    shop = Shop()
    run_id, approval_id = first_process(make_ledger, shop)
    second = gate(make_ledger, shop)
    second.approvals.approve(approval_id, by="maria")
    [done] = second.resume_run(run_id, authority=AUTHORITY).resume()
    assert done.status is Status.OK, done.content
    fresh = second.run(authority=AUTHORITY)  # a run with no evidence is refused the same call
    [refused] = fresh.submit([call("x1", "refund", order_id="o-1", amount=1.0)])
    assert (refused.status, refused.stage) == (Status.REJECTED, Stage.AUTHORIZE)
    assert "precondition: read order o-1 with get_order first" in refused.content


def test_a_call_id_used_in_the_first_process_is_known_to_the_rebuilt_run(
    make_ledger: Callable[..., Ledger],
) -> None:
    """A new call under a used id runs as a new call; the same call again replays."""
    shop = Shop()
    run_id, _ = first_process(make_ledger, shop)
    rebuilt = gate(make_ledger, shop).resume_run(run_id, authority=AUTHORITY)
    [other] = rebuilt.submit([call("c4", "note", order_id="o-1", text="second")])
    assert (other.status, other.call_id) == (Status.OK, "c4")
    assert shop.notes == ["first", "second"]
    [same] = rebuilt.submit([call("c4", "note", order_id="o-1", text="second")])
    assert same.status is Status.OK
    assert shop.notes == ["first", "second"]


def test_a_call_with_secret_arguments_comes_back_without_them(
    make_ledger: Callable[..., Ledger],
) -> None:
    """An approved call with secret fields cannot be resumed: the model is told to resend it."""
    shop = Shop()
    first = gate(make_ledger, shop).run(authority=AUTHORITY)
    [pending] = first.submit([call("s1", "store", user="ana", password="hunter2-secret")])
    assert pending.approval_id is not None
    second = gate(make_ledger, shop)
    second.approvals.approve(pending.approval_id, by="maria")
    rebuilt = second.resume_run(first.id, authority=AUTHORITY)
    assert rebuilt.pending_approvals == [pending.approval_id]
    [withheld] = rebuilt.resume()
    assert (withheld.status, withheld.stage) == (Status.REJECTED, Stage.APPROVE)
    assert withheld.details[0]["rule"] == "approval_arguments_withheld"
    assert withheld.retryable
    assert "Send exactly the same call again" in withheld.content
    assert shop.stored == []


def test_an_argument_that_was_redacted_is_not_resumed_as_redacted(
    make_ledger: Callable[..., Ledger],
) -> None:
    """A call whose stored arguments were redacted (a credential in memo) never runs on them."""
    shop = Shop()
    first = gate(make_ledger, shop).run(authority=AUTHORITY)
    first.submit([call("c1", "get_order", order_id="o-1")])
    [pending] = first.submit([call("c2", "refund", order_id="o-1", amount=5.0, memo=KEY)])
    assert pending.approval_id is not None
    second = gate(make_ledger, shop)
    second.approvals.approve(pending.approval_id, by="maria")
    [answer] = second.resume_run(first.id, authority=AUTHORITY).resume()
    assert answer.status is Status.REJECTED
    assert answer.details[0]["rule"] == "approval_arguments_withheld"
    assert shop.refunds == []


def test_a_tool_no_longer_registered_leaves_its_evidence_out(
    make_ledger: Callable[..., Ledger],
) -> None:
    """An ok call of a tool the new registry lacks is left out of the evidence, no error."""
    shop = Shop()
    run_id, approval_id = first_process(make_ledger, shop)
    rebuilt = gate(make_ledger, shop, with_note=False).resume_run(run_id, authority=AUTHORITY)
    assert [i.tool for i in rebuilt.evidence] == ["get_order", "get_status", "get_profile"]
    assert rebuilt.pending_approvals == [approval_id]


def test_a_secret_tools_result_is_left_out_of_the_evidence(
    make_ledger: Callable[..., Ledger],
) -> None:
    """An ok call of a tool with secret fields is not in the rebuilt evidence."""
    shop = Shop()
    first_gate = gate(make_ledger, shop)
    first = first_gate.run(authority=AUTHORITY)
    [pending] = first.submit([call("s1", "store", user="ana", password="hunter2-secret")])
    assert pending.approval_id is not None
    first_gate.approvals.approve(pending.approval_id, by="maria")
    [stored] = first.resume()
    assert stored.status is Status.OK
    first.submit([call("c1", "get_order", order_id="o-1")])
    rebuilt = gate(make_ledger, shop).resume_run(first.id, authority=AUTHORITY)
    assert [i.tool for i in rebuilt.evidence] == ["get_order"]


def test_a_run_resumes_only_under_the_principal_and_scope_it_ran_with(
    make_ledger: Callable[..., Ledger],
) -> None:
    """Another principal, or the same one in another tenant's scope, is a LedgerError."""
    shop = Shop()
    run_id, _ = first_process(make_ledger, shop)
    second = gate(make_ledger, shop)
    other_tenant = Authority(
        principal="alice", grants=AUTHORITY.grants, context={"tenant": "globex"}
    )
    mallory = Authority(principal="mallory", grants=AUTHORITY.grants, context={"tenant": "acme"})
    for authority in (other_tenant, mallory):
        with pytest.raises(LedgerError, match="resume it under the authority it ran with"):
            second.resume_run(run_id, authority=authority)
    assert shop.refunds == []


def test_a_run_the_ledger_does_not_hold_cannot_be_resumed(
    make_ledger: Callable[..., Ledger],
) -> None:
    """resume_run of an unknown run id raises LedgerError saying there is nothing to resume."""
    with pytest.raises(LedgerError, match="no calls of run 'run_nope'"):
        gate(make_ledger, Shop()).resume_run("run_nope", authority=AUTHORITY)

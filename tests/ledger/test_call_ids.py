"""What a call id the model sends again in the same run means (every backend).

Text-format models and Gemini derive ids from content, and some models count
from ``call_1`` every turn, so ids come back. The rule (docs/design-notes.md):

* after a *rejection* the id is free: nothing ran and no key was taken;
* after the id's call was *admitted*, the same side-effecting call (same
  tool, same arguments) gets that call's recorded answer and never runs
  twice (an application re-submitting a batch after a crash doubles
  nothing); any other call — a different one, or a read — is a new call: the
  run records it under a name of its own (``c1#2``) and the model is answered
  under the id it sent (models that number calls per turn send ``call_0``
  every turn).
"""

from __future__ import annotations

from collections.abc import Callable

from callgate import (
    Authority,
    Gate,
    Policy,
    Registry,
    Stage,
    Status,
    ToolCall,
    ToolFailure,
    allow,
    ask,
)
from callgate.ledger import Ledger
from callgate.ledger.base import CallState

AUTHORITY = Authority(principal="shopper", grants=["write:cart", "read:cart"])


def _gate(ledger: Ledger, ran: list[tuple[str, str]]) -> Gate:
    registry = Registry()

    @registry.tool(effects="write:orders")
    def place_order(sku: str) -> str:
        """Place an order (not granted in these runs)."""
        ran.append(("place_order", sku))
        return "placed"

    @registry.tool(effects="write:cart")
    def add_to_cart(sku: str) -> str:
        """Add an item to the cart."""
        ran.append(("add_to_cart", sku))
        return f"added {sku}"

    @registry.tool(effects="read:cart", risk="read")
    def view_cart(page: int = 1) -> str:
        """Show the cart."""
        ran.append(("view_cart", str(page)))
        return f"page {page}"

    return Gate(registry, ledger=ledger)


def _call(name: str, arguments: str, call_id: str = "c1") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def test_an_id_rejected_at_policy_is_free_for_the_next_call(
    make_ledger: Callable[..., Ledger],
) -> None:
    """A call id rejected at policy is reused by the next call, which runs and owns the row."""
    ledger = make_ledger()
    ran: list[tuple[str, str]] = []
    run = _gate(ledger, ran).run(authority=AUTHORITY)
    [first] = run.submit([_call("place_order", '{"sku": "milk"}')])
    assert first.status is Status.REJECTED
    assert first.stage is Stage.AUTHORIZE
    [second] = run.submit([_call("add_to_cart", '{"sku": "milk"}')])
    assert second.status is Status.OK, second.content
    assert ran == [("add_to_cart", "milk")]
    record = ledger.get_call(run.id, "c1")
    assert record is not None
    assert (record.tool, record.state) == ("add_to_cart", CallState.OK)


def test_an_id_rejected_at_schema_is_free_for_the_corrected_call(
    make_ledger: Callable[..., Ledger],
) -> None:
    """The usual correction: the model fixes its arguments and sends the same id."""
    ledger = make_ledger()
    ran: list[tuple[str, str]] = []
    run = _gate(ledger, ran).run(authority=AUTHORITY)
    [first] = run.submit([_call("add_to_cart", '{"sku": 5}')])
    assert first.stage is Stage.VALIDATE
    [second] = run.submit([_call("add_to_cart", '{"sku": "milk"}')])
    assert second.status is Status.OK, second.content
    assert ran == [("add_to_cart", "milk")]


def test_the_same_call_under_the_same_id_is_answered_not_run_again(
    make_ledger: Callable[..., Ledger],
) -> None:
    """An application re-submitting a batch (after a crash, a retry) doubles nothing."""
    ledger = make_ledger()
    ran: list[tuple[str, str]] = []
    run = _gate(ledger, ran).run(authority=AUTHORITY)
    [first] = run.submit([_call("add_to_cart", '{"sku": "milk"}')])
    [again] = run.submit([_call("add_to_cart", '{"sku": "milk"}')])
    assert first.status is again.status is Status.OK
    assert "added milk" in again.content
    assert ran == [("add_to_cart", "milk")]


def test_a_different_call_under_an_admitted_id_is_a_new_call(
    make_ledger: Callable[..., Ledger],
) -> None:
    """Another call under a used id runs as a new call (c1#2), audited as call.renamed."""
    ledger = make_ledger()
    ran: list[tuple[str, str]] = []
    run = _gate(ledger, ran).run(authority=AUTHORITY)
    run.submit([_call("view_cart", "{}", call_id="c2")])
    run.submit([_call("add_to_cart", '{"sku": "milk"}')])
    [other_args] = run.submit([_call("add_to_cart", '{"sku": "eggs"}')])
    [after_a_read] = run.submit([_call("add_to_cart", '{"sku": "tea"}', call_id="c2")])
    assert (other_args.status, other_args.call_id) == (Status.OK, "c1")
    assert (after_a_read.status, after_a_read.call_id) == (Status.OK, "c2")
    assert ran == [
        ("view_cart", "1"),
        ("add_to_cart", "milk"),
        ("add_to_cart", "eggs"),
        ("add_to_cart", "tea"),
    ]
    recorded = {(r.call_id, r.tool, r.state) for r in ledger.calls(run_id=run.id)}
    assert recorded == {
        ("c2", "view_cart", CallState.OK),
        ("c1", "add_to_cart", CallState.OK),
        ("c1#2", "add_to_cart", CallState.OK),
        ("c2#2", "add_to_cart", CallState.OK),
    }
    renamed = [r for r in ledger.audit() if r.kind == "call.renamed"]
    assert [(r.call_id, r.data["model_id"]) for r in renamed] == [("c1#2", "c1"), ("c2#2", "c2")]


def test_a_read_may_reuse_any_id_and_runs_each_time(make_ledger: Callable[..., Ledger]) -> None:
    """``call_0`` every turn: each read runs and is recorded as a call of its own."""
    ledger = make_ledger()
    ran: list[tuple[str, str]] = []
    run = _gate(ledger, ran).run(authority=AUTHORITY)
    run.submit([_call("add_to_cart", '{"sku": "milk"}', call_id="call_0")])
    observations = [
        run.submit([_call("view_cart", '{"page": 1}', call_id="call_0")])[0] for _ in range(3)
    ]
    assert [(o.status, o.call_id) for o in observations] == [(Status.OK, "call_0")] * 3
    assert ran == [("add_to_cart", "milk")] + [("view_cart", "1")] * 3
    names = sorted(r.call_id for r in ledger.calls(run_id=run.id))
    assert names == ["call_0", "call_0#2", "call_0#3", "call_0#4"]


def test_dependencies_follow_a_renamed_call(make_ledger: Callable[..., Ledger]) -> None:
    """``after=("c1",)`` in a batch means this batch's c1, even when it is recorded as c1#2."""
    ledger = make_ledger()
    ran: list[tuple[str, str]] = []
    run = _gate(ledger, ran).run(authority=AUTHORITY)
    run.submit([_call("add_to_cart", '{"sku": "milk"}')])
    observations = run.submit(
        [
            ToolCall(id="c2", name="view_cart", arguments="{}", after=("c1",)),
            ToolCall(id="c1", name="add_to_cart", arguments='{"sku": "eggs"}'),
        ]
    )
    assert [(o.call_id, o.status) for o in observations] == [
        ("c2", Status.OK),
        ("c1", Status.OK),
    ]
    assert ran == [("add_to_cart", "milk"), ("add_to_cart", "eggs"), ("view_cart", "1")]


def test_a_call_depending_on_a_failed_renamed_call_is_answered_under_model_ids(
    make_ledger: Callable[..., Ledger],
) -> None:
    """A renamed call's failure rejects its dependant at schedule; both answered by model ids."""
    ledger = make_ledger()
    ran: list[tuple[str, str]] = []
    run = _gate(ledger, ran).run(authority=AUTHORITY)
    run.submit([_call("add_to_cart", '{"sku": "milk"}')])
    observations = run.submit(
        [
            ToolCall(id="c1", name="add_to_cart", arguments='{"sku": 5}'),  # schema
            ToolCall(id="c2", name="add_to_cart", arguments='{"sku": "y"}', after=("c1",)),
        ]
    )
    assert [(o.call_id, o.status, o.stage) for o in observations] == [
        ("c1", Status.REJECTED, Stage.VALIDATE),
        ("c2", Status.REJECTED, Stage.SCHEDULE),
    ]
    assert ran == [("add_to_cart", "milk")]


def test_a_resumed_run_knows_the_ids_its_calls_were_admitted_with(
    make_ledger: Callable[..., Ledger],
) -> None:
    """The rule holds for a run rebuilt from the ledger (another process, a restart)."""
    ledger = make_ledger()
    ran: list[tuple[str, str]] = []
    gate = _gate(ledger, ran)
    run = gate.run(authority=AUTHORITY)
    run.submit([_call("add_to_cart", '{"sku": "milk"}')])
    again = gate.resume_run(run.id, authority=AUTHORITY)
    [same] = again.submit([_call("add_to_cart", '{"sku": "milk"}')])
    [other] = again.submit([_call("add_to_cart", '{"sku": "eggs"}')])
    assert (same.status, other.status) == (Status.OK, Status.OK)
    assert ran == [("add_to_cart", "milk"), ("add_to_cart", "eggs")]
    assert ledger.get_call(run.id, "c1#2") is not None


def _charges_gate(
    ledger: Ledger, charges: list[int], policy: Policy | None = None, fail_first: bool = False
) -> Gate:
    registry = Registry()
    failures = [fail_first]

    @registry.tool(effects="write:cart")
    def add_to_cart(sku: str) -> str:
        """Add an item to the cart."""
        return f"added {sku}"

    @registry.tool(effects="spend:USD")
    def charge(amount: int) -> str:
        """Charge the card (default key: run and call)."""
        if failures[0]:
            failures[0] = False
            raise ToolFailure("card declined")
        charges.append(amount)
        return f"charged {amount}"

    @registry.tool(effects="read:cart", risk="read")
    def audit_cart(page: int = 1) -> str:
        """A read that needs a person's approval in these runs."""
        return f"page {page}"

    return Gate(registry, ledger=ledger, policy=policy)


GRANTS = Authority(principal="shopper", grants=["write:cart", "spend:USD", "read:cart"])


def test_a_renamed_charge_submitted_again_is_answered_not_run_again(
    make_ledger: Callable[..., Ledger],
) -> None:
    """``call_0`` every turn: turn 2's charge is recorded as call_0#2; the application
    submitting turn 2 again (a retry, or after a crash in a rebuilt run) charges nothing."""
    ledger = make_ledger()
    charges: list[int] = []
    gate = _charges_gate(ledger, charges)
    run = gate.run(authority=GRANTS)
    run.submit([_call("add_to_cart", '{"sku": "x"}', call_id="call_0")])
    turn2 = [_call("charge", '{"amount": 100}', call_id="call_0")]
    first = run.submit(turn2)[0]
    again = run.submit(turn2)[0]
    rebuilt = gate.resume_run(run.id, authority=GRANTS).submit(turn2)[0]
    assert charges == [100]
    assert [o.status for o in (first, again, rebuilt)] == [Status.OK] * 3
    assert [o.call_id for o in (first, again, rebuilt)] == ["call_0"] * 3
    assert again.details[0]["rule"] == "idempotent_replay"


def test_after_an_error_the_retry_runs_once_and_its_resends_replay(
    make_ledger: Callable[..., Ledger],
) -> None:
    """After an error, a resend runs once and later resends replay ok: one charge in all."""
    ledger = make_ledger()
    charges: list[int] = []
    run = _charges_gate(ledger, charges, fail_first=True).run(authority=GRANTS)
    call = [_call("charge", '{"amount": 7}')]
    statuses = [run.submit(call)[0].status for _ in range(4)]
    assert statuses == [Status.ERROR, Status.OK, Status.OK, Status.OK]
    assert charges == [7]


def test_a_renamed_call_waiting_for_a_person_is_answered_under_the_models_id(
    make_ledger: Callable[..., Ledger],
) -> None:
    """A renamed call that waits for approval is answered under the model's id, pending and ok."""
    ledger = make_ledger()
    charges: list[int] = []
    gate = _charges_gate(ledger, charges, policy=Policy([ask("charge"), allow("*")]))
    run = gate.run(authority=GRANTS)
    run.submit([_call("add_to_cart", '{"sku": "x"}', call_id="call_0")])
    [pending] = run.submit([_call("charge", '{"amount": 9}', call_id="call_0")])
    assert (pending.status, pending.call_id) == (Status.PENDING, "call_0")
    assert pending.approval_id is not None
    gate.approvals.approve(pending.approval_id, by="manager")
    [done] = run.resume()
    assert (done.status, done.call_id) == (Status.OK, "call_0")
    assert charges == [9]


def test_a_read_that_waited_for_a_person_completes_its_own_record(
    make_ledger: Callable[..., Ledger],
) -> None:
    """An approved read completes its own ledger row as ok, not left pending."""
    ledger = make_ledger()
    gate = _charges_gate(ledger, [], policy=Policy([ask("audit_cart"), allow("*")]))
    run = gate.run(authority=GRANTS)
    [pending] = run.submit([_call("audit_cart", "{}", call_id="r1")])
    assert pending.approval_id is not None
    gate.approvals.approve(pending.approval_id, by="manager")
    [done] = run.resume()
    assert (done.status, done.call_id) == (Status.OK, "r1")
    record = ledger.get_call(run.id, "r1")
    assert record is not None
    assert record.state is CallState.OK  # not left pending under another name

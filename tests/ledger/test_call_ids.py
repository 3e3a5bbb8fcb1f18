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

from callgate import Authority, Gate, Registry, Stage, Status, ToolCall
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
    ledger = make_ledger()
    ran: list[tuple[str, str]] = []
    run = _gate(ledger, ran).run(authority=AUTHORITY)
    [first] = run.submit([_call("place_order", '{"sku": "milk"}')])
    assert first.status is Status.REJECTED
    assert first.stage is Stage.POLICY
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
    assert first.stage is Stage.SCHEMA
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
        ("c1", Status.REJECTED, Stage.SCHEMA),
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

"""`Gate` and `Run`: one observation per call, in order, with trusted context and a full record."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from callgate import (
    Authority,
    CallContext,
    Gate,
    Observation,
    Policy,
    Registry,
    Stage,
    Status,
    ToolCall,
    ToolFailure,
    allow,
    ask,
    tool,
)
from callgate.ledger import CallState

from .domains import ALLOW_ALL, GroceryStore, OrderDatabase, grocery_tools, order_tools

# -- CallContext -----------------------------------------------------------------------


def tenant_tool(seen: list[CallContext]) -> Any:
    """A tool that reports the trusted context it was given."""

    @tool(effects="read:notes")
    def list_notes(folder: str, ctx: CallContext) -> dict:
        """List the notes in a folder of the caller's tenant."""
        seen.append(ctx)
        return {"tenant": ctx.context["tenant"], "principal": ctx.principal, "folder": folder}

    return list_notes


TENANT_AUTHORITY = Authority(
    principal="alice", grants=["read:*"], context={"tenant": "acme", "user_id": 42}
)


def test_handler_receives_principal_and_tenant_from_the_authority() -> None:
    """The `CallContext` parameter carries the authority's principal and trusted context."""
    seen: list[CallContext] = []
    run = Gate(Registry([tenant_tool(seen)])).run(authority=TENANT_AUTHORITY)
    [obs] = run.submit([ToolCall(id="c1", name="list_notes", arguments={"folder": "inbox"})])
    assert obs.status is Status.OK
    assert obs.result == {"tenant": "acme", "principal": "alice", "folder": "inbox"}
    [ctx] = seen
    assert ctx.context["user_id"] == 42
    assert ctx.run_id == run.id
    assert ctx.call_id == "c1"
    assert ctx.tool == "list_notes"
    assert ctx.idempotency_key


def test_tenant_sent_by_the_model_is_rejected_as_an_extra_field() -> None:
    """The model cannot choose the tenant: a ``tenant`` argument is an unknown field."""
    seen: list[CallContext] = []
    run = Gate(Registry([tenant_tool(seen)])).run(authority=TENANT_AUTHORITY)
    arguments = {"folder": "inbox", "tenant": "globex"}
    [obs] = run.submit([ToolCall(id="c1", name="list_notes", arguments=arguments)])
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.VALIDATE
    assert "'tenant'" in obs.content
    assert seen == []


@pytest.mark.parametrize("name", ["ctx", "context"])
def test_model_cannot_supply_the_context_parameter_itself(name: str) -> None:
    """Sending the injected parameter's name (or ``context``) as an argument is rejected."""
    seen: list[CallContext] = []
    run = Gate(Registry([tenant_tool(seen)])).run(authority=TENANT_AUTHORITY)
    arguments = {"folder": "inbox", name: {"tenant": "globex", "principal": "root"}}
    [obs] = run.submit([ToolCall(id="c1", name="list_notes", arguments=arguments)])
    assert obs.stage is Stage.VALIDATE
    assert seen == []


def test_context_parameter_is_absent_from_the_schema() -> None:
    """The schema the model sees has ``folder`` only."""
    spec = tenant_tool([])
    assert set(spec.input_schema["properties"]) == {"folder"}
    assert "ctx" not in str(spec.input_schema)
    assert "tenant" not in str(spec.input_schema)


def test_trusted_context_never_appears_in_the_observation_unless_the_tool_returns_it() -> None:
    """The gate itself does not echo the context (a user id here) into what the model sees."""

    @tool(effects="read:notes")
    def count_notes(folder: str, ctx: CallContext) -> int:
        """Count notes."""
        return 3

    authority = Authority(principal="alice", grants=["read:*"], context={"api_token": "tok-991"})
    run = Gate(Registry([count_notes])).run(authority=authority)
    [obs] = run.submit([ToolCall(id="c1", name="count_notes", arguments={"folder": "x"})])
    assert obs.content == "3"
    assert "tok-991" not in repr(run.gate.ledger.audit())


# -- order and ids ------------------------------------------------------------------------


def sleeper_tool(finished: list[str]) -> Any:
    """An async read tool that sleeps for ``delay`` seconds and echoes its tag."""

    @tool(effects="read:clock")
    async def wait_and_echo(tag: str, delay: float) -> str:
        """Wait, then echo the tag."""
        await anyio.sleep(delay)
        finished.append(tag)
        return f"echo:{tag}"

    return wait_and_echo


def test_results_completing_out_of_order_come_back_attached_to_their_ids_in_proposal_order() -> (
    None
):
    """The slow first call finishes last, yet observations follow the proposal order and ids."""
    finished: list[str] = []
    run = Gate(Registry([sleeper_tool(finished)])).run(authority=ALLOW_ALL)
    calls = [
        ToolCall(id="slow", name="wait_and_echo", arguments={"tag": "slow", "delay": 0.3}),
        ToolCall(id="fast", name="wait_and_echo", arguments={"tag": "fast", "delay": 0.01}),
        ToolCall(id="mid", name="wait_and_echo", arguments={"tag": "mid", "delay": 0.1}),
    ]

    async def main() -> list[Observation]:
        return await run.asubmit(calls)

    observations = anyio.run(main)
    # Finishing in order of delay (not of proposal) shows they ran concurrently.
    assert finished == ["fast", "mid", "slow"]
    assert [o.call_id for o in observations] == ["slow", "fast", "mid"]
    assert [o.content for o in observations] == ["echo:slow", "echo:fast", "echo:mid"]


def test_every_call_gets_one_observation_in_the_same_order_whatever_its_fate() -> None:
    """A batch mixing ok, schema, parse, policy and error outcomes keeps order and ids."""
    store = GroceryStore()
    gate = Gate(Registry(grocery_tools(store)))
    run = gate.run(authority=Authority(principal="p", grants=["read:*", "write:cart"]))
    calls = [
        ToolCall(id="a", name="search_products", arguments={"query": "eggs"}),
        ToolCall(id="b", name="search_products", arguments={"query": 1}),
        ToolCall(id="c", name="search_products", arguments="{oops"),
        ToolCall(
            id="d", name="place_order", arguments={"cart_id": "x", "total": 1, "currency": "USD"}
        ),
        ToolCall(
            id="e", name="create_grocery_cart", arguments={"store_id": "north", "skus": ["nope"]}
        ),
        ToolCall(id="f", name="no_such_tool", arguments={}),
    ]
    observations = run.submit(calls)
    assert [o.call_id for o in observations] == ["a", "b", "c", "d", "e", "f"]
    assert [(o.status, o.stage) for o in observations] == [
        (Status.OK, Stage.EXECUTE),
        (Status.REJECTED, Stage.VALIDATE),
        (Status.REJECTED, Stage.PARSE),
        (Status.REJECTED, Stage.AUTHORIZE),
        (Status.ERROR, Stage.EXECUTE),
        (Status.REJECTED, Stage.VALIDATE),
    ]
    assert [o.tool for o in observations] == [c.name for c in calls]


def test_duplicate_call_ids_in_one_batch_are_rejected_not_run() -> None:
    """Two calls with the same id cannot both be answered unambiguously: neither runs."""
    store = GroceryStore()
    run = Gate(Registry(grocery_tools(store))).run(authority=ALLOW_ALL)
    calls = [
        ToolCall(id="same", name="search_products", arguments={"query": "milk"}),
        ToolCall(id="same", name="search_products", arguments={"query": "eggs"}),
    ]
    observations = run.submit(calls)
    assert len(observations) == 2
    assert all(o.status is Status.REJECTED for o in observations)
    assert store.calls["search_products"] == 0


def test_empty_batch_gives_no_observations() -> None:
    """Nothing proposed, nothing answered."""
    run = Gate(Registry(grocery_tools(GroceryStore()))).run(authority=ALLOW_ALL)
    assert run.submit([]) == []


# -- the ledger records everything ---------------------------------------------------------------

STATE_OF = {
    Status.OK: CallState.OK,
    Status.ERROR: CallState.ERROR,
    Status.UNKNOWN: CallState.UNKNOWN,
    Status.REJECTED: CallState.REJECTED,
    Status.PENDING: CallState.PENDING,
}


def test_ledger_states_match_the_observations() -> None:
    """Every call of the run is in the ledger, in the state its observation reports."""
    store = GroceryStore()
    policy = Policy([allow("*"), ask("place_order")])

    @tool(effects="write:x")
    def crash(n: int) -> None:
        """Crash."""
        raise RuntimeError("boom")

    gate = Gate(Registry([*grocery_tools(store), crash]), policy=policy)
    run = gate.run(authority=ALLOW_ALL)
    observations = run.submit(
        [
            ToolCall(id="ok", name="search_products", arguments={"query": "oats"}),
            ToolCall(id="schema", name="search_products", arguments={}),
            ToolCall(id="parse", name="search_products", arguments="nope"),
            ToolCall(id="unknown-tool", name="serch", arguments={}),
            ToolCall(
                id="error",
                name="create_grocery_cart",
                arguments={"store_id": "north", "skus": ["zz"]},
            ),
            ToolCall(
                id="pending",
                name="place_order",
                arguments={"cart_id": "c", "total": 3, "currency": "EUR"},
            ),
            ToolCall(id="unknown", name="crash", arguments={"n": 1}),
        ]
    )
    observed = {o.call_id: STATE_OF[o.status] for o in observations}
    recorded = {r.call_id: r.state for r in gate.ledger.calls(run_id=run.id)}
    assert recorded == observed
    assert set(observed.values()) == set(CallState) - {
        CallState.PROPOSED,
        CallState.ADMITTED,
        CallState.RUNNING,
    }


def test_ledger_records_who_decided_and_which_effects() -> None:
    """A decision record names the principal, the effects and, for a rejection, the reason."""
    store = GroceryStore()
    gate = Gate(Registry(grocery_tools(store)))
    run = gate.run(authority=Authority(principal="alice", grants=["write:cart"]))
    run.submit(
        [
            ToolCall(
                id="o",
                name="place_order",
                arguments={"cart_id": "c", "total": 9, "currency": "USD"},
            )
        ]
    )
    record = gate.ledger.get_call(run.id, "o")
    assert record is not None
    assert record.principal == "alice"
    assert record.state is CallState.REJECTED
    assert record.stage == "authorize"
    assert record.effects == ("spend:USD=9",)
    assert "spend:USD" in record.message


def test_records_of_one_run_are_not_mixed_with_another() -> None:
    """`Ledger.calls(run_id=...)` returns that run's calls only."""
    gate = Gate(Registry(grocery_tools(GroceryStore())))
    first, second = gate.run(authority=ALLOW_ALL), gate.run(authority=ALLOW_ALL)
    first.submit([ToolCall(id="x", name="search_products", arguments={"query": "a"})])
    second.submit([ToolCall(id="y", name="search_products", arguments={"query": "b"})])
    assert [r.call_id for r in gate.ledger.calls(run_id=first.id)] == ["x"]
    assert [r.call_id for r in gate.ledger.calls(run_id=second.id)] == ["y"]


def test_attempt_is_recorded_before_the_handler_runs() -> None:
    """Inside the handler, the ledger already shows the call running with an open attempt."""
    seen: dict[str, Any] = {}
    gate_box: list[Gate] = []

    @tool(effects="write:x", idempotency_key="{ref}")
    def transfer(ref: str, ctx: CallContext) -> str:
        """Move money."""
        ledger = gate_box[0].ledger
        record = ledger.get_call(ctx.run_id, ctx.call_id)
        seen["state"] = record.state if record else None
        seen["attempts"] = list(ledger.attempts(ctx.run_id, ctx.call_id))
        return "moved"

    gate = Gate(Registry([transfer]))
    gate_box.append(gate)
    run = gate.run(authority=ALLOW_ALL)
    [obs] = run.submit([ToolCall(id="t1", name="transfer", arguments={"ref": "r-1"})])
    assert obs.status is Status.OK
    assert seen["state"] is CallState.RUNNING
    [attempt] = seen["attempts"]
    assert attempt.attempt == 1
    assert attempt.outcome is None
    assert attempt.idempotency_key
    assert attempt.request_hash
    [after] = gate.ledger.attempts(run.id, "t1")
    assert after.outcome is not None
    assert after.outcome.status == "ok"


def test_attempt_is_recorded_before_an_async_handler_runs() -> None:
    """The same holds on the async path."""
    seen: dict[str, Any] = {}
    gate_box: list[Gate] = []

    @tool(effects="write:x")
    async def transfer(ref: str, ctx: CallContext) -> str:
        """Move money."""
        record = gate_box[0].ledger.get_call(ctx.run_id, ctx.call_id)
        seen["state"] = record.state if record else None
        return "moved"

    gate = Gate(Registry([transfer]))
    gate_box.append(gate)
    run = gate.run(authority=ALLOW_ALL)

    async def main() -> list[Observation]:
        return await run.asubmit([ToolCall(id="t1", name="transfer", arguments={"ref": "r"})])

    [obs] = anyio.run(main)
    assert obs.status is Status.OK
    assert seen["state"] is CallState.RUNNING


def test_failed_attempt_outcome_is_recorded_with_a_developer_detail() -> None:
    """The ledger keeps the exception type for developers, even though the model never sees it."""

    @tool(effects="write:x")
    def crash(n: int) -> None:
        """Crash."""
        raise ValueError("internal detail 123")

    gate = Gate(Registry([crash]))
    run = gate.run(authority=ALLOW_ALL)
    [obs] = run.submit([ToolCall(id="c", name="crash", arguments={"n": 1})])
    assert "internal detail 123" not in obs.content
    [attempt] = gate.ledger.attempts(run.id, "c")
    assert attempt.outcome is not None
    assert attempt.outcome.status == "unknown"
    assert attempt.outcome.error is not None
    assert "ValueError" in attempt.outcome.error


def test_orders_flow_is_recorded_end_to_end() -> None:
    """Read, stale cancel, good cancel: three records, states ok, error, ok."""
    db = OrderDatabase()
    gate = Gate(Registry(order_tools(db)))
    run = gate.run(authority=ALLOW_ALL)
    run.submit([ToolCall(id="r", name="get_order_status", arguments={"order_id": "A-100"})])
    stale = {"order_id": "A-100", "expected_revision": 1, "operation_id": "op-a"}
    good = {"order_id": "A-100", "expected_revision": 3, "operation_id": "op-b"}
    run.submit([ToolCall(id="s", name="cancel_order", arguments=stale)])
    run.submit([ToolCall(id="g", name="cancel_order", arguments=good)])
    states = [(r.call_id, r.state) for r in gate.ledger.calls(run_id=run.id)]
    assert states == [("r", CallState.OK), ("s", CallState.ERROR), ("g", CallState.OK)]


def test_tool_failure_is_not_raised_out_of_submit() -> None:
    """Handler failures become observations; `submit` returns normally."""

    @tool(effects="write:x")
    def refuse(n: int) -> None:
        """Refuse."""
        raise ToolFailure("no")

    run = Gate(Registry([refuse])).run(authority=ALLOW_ALL)
    [obs] = run.submit([ToolCall(id="c", name="refuse", arguments={"n": 1})])
    assert obs.status is Status.ERROR


def test_a_hook_that_raises_on_the_models_values_rejects_the_call_and_never_raises() -> None:
    """resource_version, precondition, a rule predicate and a semantic check are trusted
    code run on values the model chose; when one raises, the call is rejected at its
    stage, nothing executes, the exception's text stays out of the model's message, and
    the rest of the batch goes on."""
    from callgate import Gate, Policy, Registry, ToolCall, allow, ask, tool

    db = {"o-1": "rev-1"}
    ran: list[str] = []

    def version(args: Any) -> str:
        return db[args.order]  # KeyError for an order that does not exist

    def check(args: Any) -> None:
        raise FileNotFoundError(f"/secret/path/{args.order}")

    @tool(effects="write:orders", resource_version=version)
    def cancel(order: str) -> str:
        ran.append(order)
        return "cancelled"

    @tool(effects="write:orders", checks=[check])
    def archive(order: str) -> str:
        ran.append(order)
        return "archived"

    @tool(effects="read:orders")
    def peek(order: str) -> str:
        return "fine"

    policy = Policy(
        [ask("cancel"), allow("archive"), allow("peek", when=lambda a: a["order"][5] == "x")]
    )
    run = Gate(Registry([cancel, archive, peek]), policy=policy).run(authority=ALLOW_ALL)
    observations = run.submit(
        [
            ToolCall(id="a", name="cancel", arguments={"order": "nope"}),
            ToolCall(id="b", name="archive", arguments={"order": "o-1"}),
            ToolCall(id="c", name="peek", arguments={"order": "o"}),
        ]
    )
    assert [o.status for o in observations] == [Status.REJECTED] * 3
    assert [o.stage for o in observations] == [Stage.APPROVE, Stage.VALIDATE, Stage.AUTHORIZE]
    assert ran == []
    assert "/secret/path" not in observations[1].content
    assert "FileNotFoundError" in observations[1].content

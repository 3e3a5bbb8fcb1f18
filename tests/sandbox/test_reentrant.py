"""The gate's re-entrant entry: a running handler submits calls through its own run."""

from __future__ import annotations

import anyio
import pytest

from callgate import Authority, CallContext, Gate, MemoryLedger, Registry, Status, ToolCall, tool
from callgate.gate import running_run


@tool(effects="read:orders")
def lookup(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}: shipped"


@tool(effects="write:orders")
def cancel(order_id: str) -> str:
    """Cancel an order."""
    return f"cancelled {order_id}"


@tool(effects="exec:compose")
async def compose(order_id: str, ctx: CallContext) -> str:
    """Call lookup and cancel through the run executing this handler."""
    run = running_run(ctx)
    first = await run.asubmit(
        [ToolCall(id=ctx.call_id + ".1", name="lookup", arguments={"order_id": order_id})]
    )
    second = await run.asubmit(
        [ToolCall(id=ctx.call_id + ".2", name="cancel", arguments={"order_id": order_id})]
    )
    return f"{first[0].status.value}:{first[0].content} | {second[0].status.value}"


def _gate() -> tuple[Gate, MemoryLedger]:
    ledger = MemoryLedger()
    return Gate(Registry([lookup, cancel, compose]), ledger=ledger), ledger


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_nested_calls_go_through_the_same_run(driver: str) -> None:
    """A handler's nested calls are authorized by the run's grants and recorded under its id."""
    gate, ledger = _gate()
    run = gate.run(authority=Authority(principal="p", grants=["exec:compose", "read:orders"]))
    call = ToolCall(id="c1", name="compose", arguments={"order_id": "A1"})
    obs = run.submit([call]) if driver == "sync" else anyio.run(run.asubmit, [call])
    assert obs[0].status is Status.OK
    # the read is granted, the write is not: the nested cancel is rejected at stage authorize
    assert obs[0].content == "ok:order A1: shipped | rejected"
    recorded = {c.call_id: c.state.value for c in ledger.calls(run_id=run.id)}
    assert set(recorded) == {"c1", "c1.1", "c1.2"}
    assert recorded["c1.2"] == "rejected"


def test_running_run_outside_a_handler_raises_lookup_error() -> None:
    """Asking for the run of a call that is not executing names the rule instead of guessing."""
    ctx = CallContext(
        principal="p", context={}, run_id="r", call_id="c", tool="t", idempotency_key="k"
    )
    with pytest.raises(LookupError, match="works only inside a handler"):
        running_run(ctx)


def test_the_run_is_forgotten_once_its_call_ends() -> None:
    """After the batch, the handler's context no longer reaches the run (no lingering authority)."""
    gate, _ = _gate()
    seen: list[CallContext] = []

    @tool(effects="read:x")
    def keep(ctx: CallContext) -> str:
        """Keep the context."""
        seen.append(ctx)
        return running_run(ctx).id

    gate.registry.add(keep)
    run = gate.run(authority=Authority(principal="p", grants=["read:x"]))
    assert run.submit([ToolCall(id="k", name="keep", arguments={})])[0].content == run.id
    with pytest.raises(LookupError):
        running_run(seen[0])


@tool(effects="exec:compose")
def compose_sync(order_id: str, ctx: CallContext) -> str:
    """A sync handler (run in a worker thread within a batch) calling through its run."""
    run = running_run(ctx)
    nested = ToolCall(id=ctx.call_id + ".1", name="lookup", arguments={"order_id": order_id})
    return run.submit([nested])[0].content


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_sync_handler_in_a_batch_submits_through_its_run(driver: str) -> None:
    """Within a concurrent batch, each composing handler finds its own run and call."""
    ledger = MemoryLedger()
    gate = Gate(Registry([lookup, compose_sync]), ledger=ledger)
    run = gate.run(authority=Authority(principal="p", grants=["exec:compose", "read:orders"]))
    calls = [
        ToolCall(id="a", name="compose_sync", arguments={"order_id": "A1"}),
        ToolCall(id="b", name="compose_sync", arguments={"order_id": "B2"}),
    ]
    obs = run.submit(calls) if driver == "sync" else anyio.run(run.asubmit, calls)
    assert [o.content for o in obs] == ["order A1: shipped", "order B2: shipped"]
    assert {c.call_id for c in ledger.calls(run_id=run.id)} == {"a", "b", "a.1", "b.1"}

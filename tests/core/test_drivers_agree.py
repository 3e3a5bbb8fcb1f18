"""`Run.submit` and `Run.asubmit` are one decision path: for any batch, the same observations
and the same ledger records, whichever driver carries them out.

Both drivers share admission, planning and settlement (`Run._prepare`, `Run._conclude`)
and differ only in how they wait for handlers; this test holds them to it on generated
batches of sync and async, read-only and side-effecting tools, failures, crashes, approvals,
unknown tools, bad arguments, duplicate ids and dependencies (cycles included), over two
batches of one run so keys and approvals carry across.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate import (
    Authority,
    Gate,
    Observation,
    Policy,
    Registry,
    ToolCall,
    ToolFailure,
    allow,
    ask,
)
from callgate.ledger import MemoryLedger

AUTHORITY = Authority(principal="alice", grants=["spend:USD", "read:*", "refund:USD"])
POLICY = Policy([ask("refund"), allow("*")])


def registry() -> Registry:
    """Fresh tools (their side effects are counted per scenario run)."""
    reg = Registry()

    @reg.tool(effects="read:orders")
    def lookup(key: str) -> dict[str, Any]:
        """Read an order."""
        return {"key": key}

    @reg.tool(effects="read:orders")
    async def alookup(key: str) -> dict[str, Any]:
        """Read an order, asynchronously."""
        return {"key": key}

    @reg.tool(effects="spend:USD", writes="charge:{op}", idempotency_key="{op}")
    def charge(op: str, amount: int) -> dict[str, Any]:
        """Charge a card; more than 100 is refused before anything happens."""
        if amount > 100:
            raise ToolFailure(f"amount {amount} is over the limit", retryable=False)
        return {"op": op, "amount": amount}

    @reg.tool(effects="spend:USD", writes="charge:{op}", idempotency_key="{op}")
    async def acharge(op: str, amount: int) -> dict[str, Any]:
        """Charge a card, asynchronously."""
        return {"op": op, "amount": amount}

    @reg.tool(effects="refund:USD", writes="refund:{op}")
    def refund(op: str, amount: int) -> dict[str, Any]:
        """Refund a charge (the policy asks a person)."""
        return {"op": op, "amount": amount}

    @reg.tool(effects="spend:USD", writes="crash:{op}")
    def explode(op: str) -> dict[str, Any]:
        """A side effect that crashes after it may have happened."""
        raise RuntimeError("connection reset after the request was sent")

    return reg


NAMES = ["lookup", "alookup", "charge", "acharge", "refund", "explode", "nope"]
IDS = ["c1", "c2", "c3", "c4", "c5"]


@st.composite
def calls(draw: st.DrawFn) -> list[ToolCall]:
    out = []
    for _ in range(draw(st.integers(1, 5))):
        name = draw(st.sampled_from(NAMES))
        op = draw(st.sampled_from(["op1", "op2"]))
        amount: Any = draw(st.sampled_from([5, 50, 500, "x"]))
        arguments: dict[str, Any] = {
            "lookup": {"key": op},
            "alookup": {"key": op},
            "explode": {"op": op},
            "nope": {},
        }.get(name, {"op": op, "amount": amount})
        after = tuple(draw(st.lists(st.sampled_from(IDS), max_size=1)))
        out.append(
            ToolCall(id=draw(st.sampled_from(IDS)), name=name, arguments=arguments, after=after)
        )
    return out


_IDS = re.compile(r"apr_[0-9a-f]+|run_[0-9a-f]+")


def _norm(text: str) -> str:
    return _IDS.sub("<id>", text)


def observed(obs: Observation) -> tuple[Any, ...]:
    return (
        obs.call_id,
        obs.tool,
        obs.status,
        obs.stage,
        _norm(obs.content),
        obs.retryable,
        obs.attempts,
        obs.approval_id is None,
    )


def play(batches: list[list[ToolCall]], driver: str) -> tuple[Any, ...]:
    """Run the batches through one driver; what the model saw and what the ledger holds."""
    ledger = MemoryLedger()
    run = Gate(registry(), policy=POLICY, ledger=ledger).run(authority=AUTHORITY, run_id="r")
    seen = []
    for batch in batches:
        result = run.submit(batch) if driver == "sync" else anyio.run(run.asubmit, batch)
        seen.append([observed(o) for o in result])
    rows = sorted(
        (c.call_id, c.tool, c.state, c.stage, c.attempts, c.reconciled, c.decided_by, c.message)
        for c in ledger.calls(run_id="r")
    )
    records = Counter((r.kind, r.call_id) for r in ledger.audit())
    return seen, rows, records


@settings(
    max_examples=120,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(first=calls(), second=calls())
def test_submit_and_asubmit_give_the_same_observations_and_records(
    first: list[ToolCall], second: list[ToolCall]
) -> None:
    """Any two batches: the same observations, call rows and audit records either way."""
    assert play([first, second], "sync") == play([first, second], "async")


def test_a_rejected_call_beside_an_admitted_one_runs_the_same_way() -> None:
    """The case the drivers once split on (`len(admitted)` against `len(staged)`): one
    call rejected, one admitted, in one batch."""
    batch = [
        ToolCall(id="c1", name="nope", arguments={}),
        ToolCall(id="c2", name="charge", arguments={"op": "op1", "amount": 5}),
    ]
    sync, async_ = play([batch], "sync"), play([batch], "async")
    assert sync == async_
    assert [o[2].value for o in sync[0][0]] == ["rejected", "ok"]

"""Execution asks the ledger for its writes through the ledger's own methods: the async
driver awaits ``abegin_attempt`` and ``afinish_attempt`` of whatever ledger it is given,
without guessing from the ledger's class whether they differ from the sync ones."""

from __future__ import annotations

import asyncio
from typing import Any

from callgate import Authority, Gate, MemoryLedger, Registry, ToolCall


def _registry() -> Registry:
    registry = Registry()

    @registry.tool(effects=["read:stock"])
    def stock(sku: str) -> int:
        """How many of ``sku`` are in stock."""
        return len(sku)

    return registry


def test_the_async_driver_awaits_the_ledger_instances_async_writes() -> None:
    """A ledger whose async writes are its own (set on the instance, as a wrapper or a test
    double does) has them awaited for each attempt of an ``asubmit``, batch or lone call."""
    ledger = MemoryLedger()
    awaited: list[str] = []
    begin, finish = ledger.abegin_attempt, ledger.afinish_attempt

    async def abegin(start: Any) -> Any:
        awaited.append(f"begin {start.call_id}")
        return await begin(start)

    async def afinish(done: Any) -> Any:
        awaited.append(f"finish {done.call_id}")
        return await finish(done)

    ledger.abegin_attempt = abegin  # type: ignore[method-assign]
    ledger.afinish_attempt = afinish  # type: ignore[method-assign]
    authority = Authority(principal="p", grants=["read:stock"])
    run = Gate(_registry(), ledger=ledger).run(authority=authority)
    calls = [ToolCall(id=f"c{i}", name="stock", arguments={"sku": "ab"}) for i in range(2)]
    observations = asyncio.run(run.asubmit(calls))
    assert [o.status.value for o in observations] == ["ok", "ok"]
    assert sorted(awaited) == ["begin c0", "begin c1", "finish c0", "finish c1"]
    lone = asyncio.run(run.asubmit([ToolCall(id="c2", name="stock", arguments={"sku": "a"})]))
    assert lone[0].status.value == "ok"
    assert awaited[-2:] == ["begin c2", "finish c2"]

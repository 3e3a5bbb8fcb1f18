"""Per-call overhead of callgate's admitted path against a bare reference.

Reference: ``json.loads`` + Pydantic ``model_validate`` + a direct call of the
tool (awaited, for the async tool). callgate: ``run.submit`` / ``run.asubmit``
of one call with the in-memory ledger: parse, validate, authorize, ledger
attempt, execute, observation. Each call's `ToolCall` is built inside the timed
loop, as a caller builds it from a model's response (the reference likewise
starts from the text): building them all first would leave tens of thousands
of objects alive for the garbage collector to walk, a cost of the benchmark,
not of the gate. Prints µs per call (median of 7 repeats after a
warm-up) and the ratio. Run: ``.venv/bin/python benchmarks/overhead.py``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from callgate import Authority, Gate, MemoryLedger, Registry, ToolCall

N = 20_000
REPEATS = 7
ARGS = '{"cart_id": "c-123", "sku": "SKU-0042", "quantity": 3}'


class AddItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cart_id: str
    sku: str
    quantity: int


def add_item_sync(cart_id: str, sku: str, quantity: int) -> dict[str, object]:
    return {"cart_id": cart_id, "sku": sku, "quantity": quantity}


async def add_item_async(cart_id: str, sku: str, quantity: int) -> dict[str, object]:
    return {"cart_id": cart_id, "sku": sku, "quantity": quantity}


def median_us(fn: Callable[[int], float]) -> float:
    fn(N // 10)  # warm-up
    return statistics.median(fn(N) for _ in range(REPEATS))


def main() -> None:
    registry = Registry()
    registry.tool(name="add_item", effects="write:cart:{cart_id}")(add_item_sync)
    registry.tool(name="add_item_async", effects="write:cart:{cart_id}")(add_item_async)
    authority = Authority(principal="bench", grants=["write:cart:*"])

    def ref_sync(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            m = AddItem.model_validate(json.loads(ARGS))
            add_item_sync(m.cart_id, m.sku, m.quantity)
        return (time.perf_counter() - t0) / n * 1e6

    def gate_sync(n: int) -> float:
        run = Gate(registry, ledger=MemoryLedger()).run(authority=authority)
        ids = [f"c{i}" for i in range(n)]
        t0 = time.perf_counter()
        for call_id in ids:
            run.submit([ToolCall(id=call_id, name="add_item", arguments=ARGS)])
        return (time.perf_counter() - t0) / n * 1e6

    async def ref_async_loop(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            m = AddItem.model_validate(json.loads(ARGS))
            await add_item_async(m.cart_id, m.sku, m.quantity)
        return (time.perf_counter() - t0) / n * 1e6

    async def gate_async_loop(n: int) -> float:
        run = Gate(registry, ledger=MemoryLedger()).run(authority=authority)
        ids = [f"c{i}" for i in range(n)]
        t0 = time.perf_counter()
        for call_id in ids:
            await run.asubmit([ToolCall(id=call_id, name="add_item_async", arguments=ARGS)])
        return (time.perf_counter() - t0) / n * 1e6

    def in_loop(coro_fn: Callable[[int], object]) -> Callable[[int], float]:
        return lambda n: asyncio.run(coro_fn(n))  # type: ignore[arg-type]

    rows = [
        ("sync tool", median_us(ref_sync), median_us(gate_sync)),
        ("async tool", median_us(in_loop(ref_async_loop)), median_us(in_loop(gate_async_loop))),
    ]
    print(f"{'path':<12} {'reference µs':>13} {'callgate µs':>12} {'ratio':>7}")
    for name, ref, ours in rows:
        print(f"{name:<12} {ref:>13.2f} {ours:>12.2f} {ours / ref:>6.2f}x")
    print("target: ratio <= 5x for both (median of 7 repeats)")


if __name__ == "__main__":
    main()

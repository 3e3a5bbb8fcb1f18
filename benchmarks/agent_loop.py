"""The agent loop's own cost per tool-call step: everything but the model.

A model that proposes one tool call per step (pre-built chat-completion
payloads, so the "model" is a list lookup, and its time is measured and
subtracted anyway), an in-memory ledger, a three-field tool. Per step the
loop: builds the request, extracts the call, submits it through the run
(parse, validate, authorize, ledger attempt, execute), bounds the result,
triages it, renders it back and records two transcript events.

Reported (median of 7 repeats after a warm-up, µs):

* ``step``: per tool-call step, in a run of 200 steps then an answer;
* ``run``: one whole run (one tool call, then an answer), ``await agent.arun``;
* ``run (sync)``: the same through ``agent.run`` (adds ``anyio.run``);
* ``gate only``: ``run.asubmit`` of the same call, the part the gate takes.

Target: ``step`` <= 300 µs. Run: ``.venv/bin/python benchmarks/agent_loop.py``.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from callgate import Agent, Authority, Budgets, Gate, MemoryLedger, Registry, ToolCall
from callgate.llms import Model, ModelRequest, ModelResponse
from callgate.llms.scripted import answer, calls, render_turn

STEPS = 200
RUNS = 300
REPEATS = 7
ARGS = {"cart_id": "c-123", "sku": "SKU-0042", "quantity": 3}


class Replay(Model):
    """Returns pre-built payloads; keeps the time spent inside ``complete``."""

    format = "openai_chat"
    name = "replay"

    def __init__(self, payloads: list[Any]) -> None:
        self.payloads = payloads
        self.next = 0
        self.spent = 0.0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        t0 = time.perf_counter()
        payload = self.payloads[self.next]
        self.next += 1
        response = ModelResponse(raw=payload)
        self.spent += time.perf_counter() - t0
        return response


def add_item(cart_id: str, sku: str, quantity: int) -> dict[str, object]:
    return {"cart_id": cart_id, "sku": sku, "quantity": quantity}


def script(steps: int) -> list[Any]:
    turns = [calls(("add_item", ARGS)) for _ in range(steps)]
    return [render_turn(t, "openai_chat", i + 1) for i, t in enumerate(turns)] + [
        render_turn(answer("done"), "openai_chat", steps + 1)
    ]


def setup() -> tuple[Gate, Authority]:
    registry = Registry()
    registry.tool(name="add_item", effects="write:cart:{cart_id}")(add_item)
    gate = Gate(registry, ledger=MemoryLedger())
    return gate, Authority(principal="bench", grants=["write:cart:*"])


def median(measure: Callable[[], Awaitable[float]]) -> float:
    async def all_repeats() -> list[float]:
        await measure()  # warm-up
        return [await measure() for _ in range(REPEATS)]

    return statistics.median(asyncio.run(all_repeats()))


def main() -> None:
    gate, authority = setup()
    long_script = script(STEPS)
    short_script = script(1)

    async def per_step() -> float:
        model = Replay(long_script)
        agent = Agent(model, gate, budgets=Budgets(steps=STEPS + 1, tool_calls=STEPS))
        t0 = time.perf_counter()
        result = await agent.arun("go", authority=authority)
        total = time.perf_counter() - t0
        assert result.answered, result.detail
        assert result.tool_calls == STEPS
        return (total - model.spent) / STEPS * 1e6

    async def per_run() -> float:
        total = spent = 0.0
        for _ in range(RUNS):
            model = Replay(short_script)
            agent = Agent(model, gate)
            t0 = time.perf_counter()
            await agent.arun("go", authority=authority)
            total += time.perf_counter() - t0
            spent += model.spent
        return (total - spent) / RUNS * 1e6

    def per_sync_run() -> float:
        times = []
        for _ in range(REPEATS + 1):
            total = 0.0
            for _ in range(RUNS // 3):
                agent = Agent(Replay(short_script), gate)
                t0 = time.perf_counter()
                agent.run("go", authority=authority)
                total += time.perf_counter() - t0
            times.append(total / (RUNS // 3) * 1e6)
        return statistics.median(times[1:])

    async def gate_only() -> float:
        run = gate.run(authority=authority)
        n = 2000
        t0 = time.perf_counter()
        for i in range(n):
            await run.asubmit([ToolCall(id=f"c{i}", name="add_item", arguments=ARGS)])
        return (time.perf_counter() - t0) / n * 1e6

    step = median(per_step)
    run = median(per_run)
    sync = per_sync_run()
    only = median(gate_only)
    print(f"step         {step:8.1f} µs per tool-call step (target <= 300)")
    print(f"run          {run:8.1f} µs per run (1 tool call, then an answer)")
    print(f"run (sync)   {sync:8.1f} µs per run through agent.run")
    print(f"gate only    {only:8.1f} µs per call (run.asubmit), included in step")
    print(f"loop's share {step - only:8.1f} µs per step beyond the gate")


if __name__ == "__main__":
    main()

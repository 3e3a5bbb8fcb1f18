"""callgate's per-call cost side by side with its peers, in one process and one run.

Every row calls the same three-field tool (``overhead.py``'s ``add_item``) and
starts from the same JSON text of its arguments; the dict-taking APIs (MCP,
LangChain, smolagents) get ``json.loads`` of it inside the timed loop, as their
transport or agent does. Per call:

* reference: ``json.loads`` + Pydantic ``model_validate`` + a direct call
  (awaited, for the async tool);
* OpenAI Agents SDK: ``FunctionTool.on_invoke_tool`` with a ``ToolContext``
  built per call (the SDK builds one per call; it carries the call's id);
* PydanticAI: ``ToolManager.validate_tool_call`` + ``execute_tool_call`` of a
  ``ToolCallPart`` (the manager prepared once per sample, as per run step);
* MCP SDK: ``MCPServer.call_tool`` in process (no transport; it returns the
  ``CallToolResult`` a client would receive);
* LangChain: ``StructuredTool.invoke`` (``ainvoke`` for the async tool);
* smolagents: ``ToolCallingAgent.execute_tool_call`` (it has no async tools);
* callgate: ``run.submit`` / ``run.asubmit`` of one ``ToolCall`` (built in the
  timed loop, as in ``overhead.py``) on ``MemoryLedger`` and on a
  ``SQLiteLedger`` in a temporary file (the default ledger's kind).

A whole agent turn (the model proposes one call, the tool runs, the model
answers), the model's own time measured and subtracted: OpenAI Agents
``Runner.run`` with a stub ``Model`` (tracing off), PydanticAI ``Agent.run``
with ``FunctionModel``, callgate ``Agent.arun`` with ``agent_loop.py``'s replayed
model on ``MemoryLedger``; all three with the async tool. The stubs hand over
pre-built typed responses; callgate's replayed model hands over chat-completion
payloads that the loop still has to extract.

Each row is calibrated to about ``SAMPLE_SECONDS`` per sample; the rows are then
sampled ``REPEATS`` times, interleaved (a shuffled order per round), and the
median is reported in µs per call (per turn), with its ratio to the reference
and to the fastest peer's bare async invoke (the fastest peer's turn, for
turns). A peer that is not installed is skipped with a line saying so: ``pip
install -e '.[bench]'`` installs them. Progress goes to stderr. Nothing is
written into the working tree. Run: ``.venv/bin/python benchmarks/peers.py``.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.metadata
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from callgate import Agent, Authority, Gate, MemoryLedger, Registry, SQLiteLedger, ToolCall

# The two sibling scripts imported below must not leave benchmarks/__pycache__ behind.
sys.dont_write_bytecode = True

from agent_loop import Replay, script  # noqa: E402
from overhead import ARGS, AddItem, add_item_async, add_item_sync  # noqa: E402

REPEATS = 9
SAMPLE_SECONDS = 0.25
MAX_CALLS = 40_000
EXPECTED = json.loads(ARGS)

SYNC, ASYNC, TURN = "sync tool", "async tool", "turn"


@dataclass(frozen=True, kw_only=True)
class Row:
    """One measured path: ``sample(n)`` (or ``await asample(n)``) does ``n`` calls (turns)
    and returns the seconds they took, setup and the model's own time excluded."""

    section: str
    name: str
    role: str  # "reference", "peer" or "callgate"
    sample: Callable[[int], float] | None = None
    asample: Callable[[int], Coroutine[Any, Any, float]] | None = None
    warmup: int = 200


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def check(row: str, got: object, expected: object) -> None:
    """A row whose last call did not return what the tool returns measured nothing."""
    if got != expected:
        raise RuntimeError(f"{row}: the last call returned {got!r}, expected {expected!r}")


# -- the reference and callgate -------------------------------------------------------


def reference_rows() -> list[Row]:
    def ref_sync(n: int) -> float:
        result: object = None
        t0 = time.perf_counter()
        for _ in range(n):
            m = AddItem.model_validate(json.loads(ARGS))
            result = add_item_sync(m.cart_id, m.sku, m.quantity)
        elapsed = time.perf_counter() - t0
        check("reference (sync)", result, EXPECTED)
        return elapsed

    async def ref_async(n: int) -> float:
        result: object = None
        t0 = time.perf_counter()
        for _ in range(n):
            m = AddItem.model_validate(json.loads(ARGS))
            result = await add_item_async(m.cart_id, m.sku, m.quantity)
        elapsed = time.perf_counter() - t0
        check("reference (async)", result, EXPECTED)
        return elapsed

    name = "json.loads + model_validate + call"
    return [
        Row(section=SYNC, name=name, role="reference", sample=ref_sync),
        Row(section=ASYNC, name=name, role="reference", asample=ref_async),
    ]


def callgate_rows(tmp: str) -> list[Row]:
    registry = Registry()
    registry.tool(name="add_item", effects="write:cart:{cart_id}")(add_item_sync)
    registry.tool(name="add_item_async", effects="write:cart:{cart_id}")(add_item_async)
    turn_registry = Registry()
    turn_registry.tool(name="add_item", effects="write:cart:{cart_id}")(add_item_async)
    authority = Authority(principal="bench", grants=["write:cart:*"])
    files = iter(range(1_000_000))

    def sqlite() -> SQLiteLedger:
        return SQLiteLedger(os.path.join(tmp, f"callgate-{next(files)}.db"))

    def submit(make: Callable[[], Any]) -> Callable[[int], float]:
        def sample(n: int) -> float:
            ledger = make()
            run = Gate(registry, ledger=ledger).run(authority=authority)
            ids = [f"c{i}" for i in range(n)]
            t0 = time.perf_counter()
            for call_id in ids:
                observations = run.submit([ToolCall(id=call_id, name="add_item", arguments=ARGS)])
            elapsed = time.perf_counter() - t0
            ledger.close()
            check("callgate run.submit", observations[0].result, EXPECTED)
            return elapsed

        return sample

    def asubmit(make: Callable[[], Any]) -> Callable[[int], Coroutine[Any, Any, float]]:
        async def sample(n: int) -> float:
            ledger = make()
            run = Gate(registry, ledger=ledger).run(authority=authority)
            ids = [f"c{i}" for i in range(n)]
            t0 = time.perf_counter()
            for call_id in ids:
                observations = await run.asubmit(
                    [ToolCall(id=call_id, name="add_item_async", arguments=ARGS)]
                )
            elapsed = time.perf_counter() - t0
            ledger.close()
            check("callgate run.asubmit", observations[0].result, EXPECTED)
            return elapsed

        return sample

    one_call = script(1)

    async def turn(n: int) -> float:
        # One agent for all the turns, as the peers' rows keep theirs; the model's
        # script starts over each turn.
        gate = Gate(turn_registry, ledger=MemoryLedger())
        model = Replay(one_call)
        agent = Agent(model, gate)
        total = 0.0
        for _ in range(n):
            model.next, model.spent = 0, 0.0
            t0 = time.perf_counter()
            result = await agent.arun("go", authority=authority)
            total += time.perf_counter() - t0 - model.spent
        if not (result.answered and result.tool_calls == 1):
            raise RuntimeError(f"callgate Agent.arun: {result.detail}")
        return total

    return [
        Row(
            section=SYNC,
            name="callgate run.submit, memory",
            role="callgate",
            sample=submit(MemoryLedger),
        ),
        Row(
            section=SYNC, name="callgate run.submit, SQLite", role="callgate", sample=submit(sqlite)
        ),
        Row(
            section=ASYNC,
            name="callgate run.asubmit, memory",
            role="callgate",
            asample=asubmit(MemoryLedger),
        ),
        Row(
            section=ASYNC,
            name="callgate run.asubmit, SQLite",
            role="callgate",
            asample=asubmit(sqlite),
        ),
        Row(
            section=TURN,
            name="callgate Agent.arun (memory)",
            role="callgate",
            asample=turn,
            warmup=10,
        ),
    ]


# -- the peers --------------------------------------------------------------------------


def openai_agents_rows() -> list[Row]:
    from agents import Agent as OAAgent
    from agents import ModelResponse, RunConfig, Runner, Usage, function_tool
    from agents.models.interface import Model as OAModel
    from agents.tool_context import ToolContext
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    tools = {SYNC: function_tool(add_item_sync), ASYNC: function_tool(add_item_async)}

    def invoke(section: str) -> Callable[[int], Coroutine[Any, Any, float]]:
        tool = tools[section]

        async def sample(n: int) -> float:
            ids = [f"c{i}" for i in range(n)]
            result: object = None
            t0 = time.perf_counter()
            for call_id in ids:
                ctx = ToolContext(
                    None, tool_name=tool.name, tool_call_id=call_id, tool_arguments=ARGS
                )
                result = await tool.on_invoke_tool(ctx, ARGS)
            elapsed = time.perf_counter() - t0
            check(f"OpenAI Agents on_invoke_tool ({section})", result, EXPECTED)
            return elapsed

        return sample

    call = ResponseFunctionToolCall(
        type="function_call", call_id="call_1", name="add_item", arguments=ARGS, status="completed"
    )
    text = ResponseOutputText(type="output_text", text="done", annotations=[])
    reply = ResponseOutputMessage(
        type="message", id="msg_1", role="assistant", status="completed", content=[text]
    )

    class Stub(OAModel):
        """Proposes the call, then answers once the call's output is in the input."""

        def __init__(self) -> None:
            self.spent = 0.0

        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
        ) -> ModelResponse:
            t0 = time.perf_counter()
            done = not isinstance(input, str) and any(
                item.get("type") == "function_call_output" for item in input
            )
            response = ModelResponse(
                output=[reply if done else call], usage=Usage(), response_id=None
            )
            self.spent += time.perf_counter() - t0
            return response

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark does not stream")

    config = RunConfig(tracing_disabled=True)
    turn_tool = function_tool(add_item_async, name_override="add_item")

    async def turn(n: int) -> float:
        model = Stub()
        agent = OAAgent(name="bench", model=model, tools=[turn_tool])
        t0 = time.perf_counter()
        for _ in range(n):
            result = await Runner.run(agent, "go", run_config=config)
        elapsed = time.perf_counter() - t0 - model.spent
        outputs = [item.output for item in result.new_items if item.type == "tool_call_output_item"]
        check("OpenAI Agents Runner.run", (outputs, result.final_output), ([EXPECTED], "done"))
        return elapsed

    name = "OpenAI Agents on_invoke_tool"
    return [
        Row(section=SYNC, name=name, role="peer", asample=invoke(SYNC)),
        Row(section=ASYNC, name=name, role="peer", asample=invoke(ASYNC)),
        Row(section=TURN, name="OpenAI Agents Runner.run", role="peer", asample=turn, warmup=10),
    ]


def pydantic_ai_rows() -> list[Row]:
    from pydantic_ai import Agent as PAAgent
    from pydantic_ai import FunctionToolset, RunContext
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tool_manager import ToolManager
    from pydantic_ai.usage import RunUsage

    toolset = FunctionToolset([add_item_sync, add_item_async])
    names = {SYNC: "add_item_sync", ASYNC: "add_item_async"}

    def invoke(section: str) -> Callable[[int], Coroutine[Any, Any, float]]:
        async def sample(n: int) -> float:
            ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
            manager = await ToolManager(toolset).for_run_step(ctx)
            ids = [f"c{i}" for i in range(n)]
            result: object = None
            t0 = time.perf_counter()
            for call_id in ids:
                part = ToolCallPart(tool_name=names[section], args=ARGS, tool_call_id=call_id)
                validated = await manager.validate_tool_call(part)
                result = await manager.execute_tool_call(validated)
            elapsed = time.perf_counter() - t0
            check(f"PydanticAI ToolManager ({section})", result, EXPECTED)
            return elapsed

        return sample

    spent = [0.0]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        t0 = time.perf_counter()
        if len(messages) == 1:
            call = ToolCallPart(tool_name="add_item", args=ARGS, tool_call_id="call_1")
            response = ModelResponse(parts=[call])
        else:
            response = ModelResponse(parts=[TextPart("done")])
        spent[0] += time.perf_counter() - t0
        return response

    agent = PAAgent(FunctionModel(respond))
    agent.tool_plain(name="add_item")(add_item_async)

    async def turn(n: int) -> float:
        spent[0] = 0.0
        t0 = time.perf_counter()
        for _ in range(n):
            result = await agent.run("go")
        elapsed = time.perf_counter() - t0 - spent[0]
        returns = [
            part.content
            for message in result.all_messages()
            for part in message.parts
            if part.part_kind == "tool-return"
        ]
        check("PydanticAI Agent.run", (returns, result.output), ([EXPECTED], "done"))
        return elapsed

    name = "PydanticAI validate + execute_tool_call"
    return [
        Row(section=SYNC, name=name, role="peer", asample=invoke(SYNC)),
        Row(section=ASYNC, name=name, role="peer", asample=invoke(ASYNC)),
        Row(
            section=TURN,
            name="PydanticAI Agent.run (FunctionModel)",
            role="peer",
            asample=turn,
            warmup=10,
        ),
    ]


def mcp_rows() -> list[Row]:
    from mcp.server import MCPServer

    server = MCPServer("bench")
    server.tool()(add_item_sync)
    server.tool()(add_item_async)
    names = {SYNC: "add_item_sync", ASYNC: "add_item_async"}

    def invoke(section: str) -> Callable[[int], Coroutine[Any, Any, float]]:
        async def sample(n: int) -> float:
            result: Any = None
            t0 = time.perf_counter()
            for _ in range(n):
                result = await server.call_tool(names[section], json.loads(ARGS))
            elapsed = time.perf_counter() - t0
            check(f"MCP call_tool ({section})", result.structured_content, EXPECTED)
            return elapsed

        return sample

    name = "MCP MCPServer.call_tool"
    return [
        Row(section=SYNC, name=name, role="peer", asample=invoke(SYNC)),
        Row(section=ASYNC, name=name, role="peer", asample=invoke(ASYNC)),
    ]


def langchain_rows() -> list[Row]:
    from langchain_core.tools import StructuredTool

    sync_tool = StructuredTool.from_function(add_item_sync, description="Add an item.")
    async_tool = StructuredTool.from_function(coroutine=add_item_async, description="Add an item.")

    def invoke(n: int) -> float:
        result: object = None
        t0 = time.perf_counter()
        for _ in range(n):
            result = sync_tool.invoke(json.loads(ARGS))
        elapsed = time.perf_counter() - t0
        check("LangChain StructuredTool.invoke", result, EXPECTED)
        return elapsed

    async def ainvoke(n: int) -> float:
        result: object = None
        t0 = time.perf_counter()
        for _ in range(n):
            result = await async_tool.ainvoke(json.loads(ARGS))
        elapsed = time.perf_counter() - t0
        check("LangChain StructuredTool.ainvoke", result, EXPECTED)
        return elapsed

    return [
        Row(section=SYNC, name="LangChain StructuredTool.invoke", role="peer", sample=invoke),
        Row(section=ASYNC, name="LangChain StructuredTool.ainvoke", role="peer", asample=ainvoke),
    ]


def smolagents_rows() -> list[Row]:
    from smolagents import (  # type: ignore[import-untyped]
        Model as SmolModel,
    )
    from smolagents import ToolCallingAgent, tool

    def add_item(cart_id: str, sku: str, quantity: int) -> dict:  # type: ignore[type-arg]
        """Add an item to a cart.

        Args:
            cart_id: the cart's id.
            sku: the item's SKU.
            quantity: how many.
        """
        return add_item_sync(cart_id, sku, quantity)

    class Unused(SmolModel):  # type: ignore[misc]
        def generate(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("execute_tool_call never asks the model")

    agent = ToolCallingAgent(tools=[tool(add_item)], model=Unused(), verbosity_level=0)

    def invoke(n: int) -> float:
        result: object = None
        t0 = time.perf_counter()
        for _ in range(n):
            result = agent.execute_tool_call("add_item", json.loads(ARGS))
        elapsed = time.perf_counter() - t0
        check("smolagents execute_tool_call", result, EXPECTED)
        return elapsed

    return [
        Row(section=SYNC, name="smolagents execute_tool_call", role="peer", sample=invoke),
    ]


PEERS: list[tuple[str, str, Callable[[], list[Row]]]] = [
    ("OpenAI Agents SDK", "openai-agents", openai_agents_rows),
    ("PydanticAI", "pydantic-ai-slim", pydantic_ai_rows),
    ("MCP SDK", "mcp", mcp_rows),
    ("LangChain", "langchain-core", langchain_rows),
    ("smolagents", "smolagents", smolagents_rows),
]


# -- measuring and reporting ---------------------------------------------------------------


def measure(runner: asyncio.Runner, row: Row, n: int) -> float:
    """µs per call of one sample of ``n`` calls."""
    gc.collect()
    if row.asample is not None:
        elapsed = runner.run(row.asample(n))
    elif row.sample is not None:
        elapsed = row.sample(n)
    else:
        raise ValueError(f"row {row.name!r} has neither sample nor asample: give it one")
    return elapsed / n * 1e6


def fastest(medians: dict[Row, float], section: str) -> Row | None:
    peers = [row for row in medians if row.role == "peer" and row.section == section]
    return min(peers, key=medians.__getitem__, default=None)


def main() -> None:
    rows = reference_rows()
    versions = []
    for label, dist, build in PEERS:
        try:
            rows += build()
        except ImportError as error:
            print(f"skipped {label}: not installed ({error}); pip install -e '.[bench]'")
            continue
        versions.append(f"{label} {importlib.metadata.version(dist)}")
    versions.append(f"pydantic {importlib.metadata.version('pydantic')}")
    versions.append(f"Python {sys.version.split()[0]}")

    with tempfile.TemporaryDirectory(prefix="callgate-peers-") as tmp, asyncio.Runner() as runner:
        rows += callgate_rows(tmp)
        sizes: dict[Row, int] = {}
        for row in rows:
            measure(runner, row, row.warmup)
            per_call = measure(runner, row, row.warmup)
            sizes[row] = max(10, min(MAX_CALLS, int(SAMPLE_SECONDS / (per_call / 1e6))))
            progress(f"calibrated {row.section:<10} {row.name:<40} {per_call:9.1f} µs")
        samples: dict[Row, list[float]] = {row: [] for row in rows}
        order = list(rows)
        shuffle = random.Random(15)
        for repeat in range(REPEATS):
            shuffle.shuffle(order)
            progress(f"round {repeat + 1}/{REPEATS}")
            for row in order:
                samples[row].append(measure(runner, row, sizes[row]))

    medians = {row: statistics.median(values) for row, values in samples.items()}
    reference = {row.section: medians[row] for row in rows if row.role == "reference"}
    named = {(row.section, row.name): medians[row] for row in rows}
    peer_async = fastest(medians, ASYNC)
    peer_turn = fastest(medians, TURN)

    def ratio(value: float, base: Row | float | None) -> str:
        if isinstance(base, Row):
            base = medians[base]
        return "-" if base is None else f"{value / base:.2f}x"

    print("versions: " + ", ".join(versions))
    print(f"medians of {REPEATS} interleaved samples of ~{SAMPLE_SECONDS}s each, µs per call")
    print(f"{'row':<46} {'µs':>9} {'× ref':>8} {'× fastest peer':>15}")
    for section, title in (
        (SYNC, "per call, sync tool (last column: × the fastest peer's bare async invoke)"),
        (ASYNC, "per call, async tool (last column: × the fastest peer's bare async invoke)"),
        (TURN, "whole turn, one tool call then an answer (last column: × the fastest peer's turn)"),
    ):
        print(f"-- {title}")
        base = peer_turn if section == TURN else peer_async
        for row in rows:
            if row.section == section:
                value = medians[row]
                print(
                    f"{row.name:<46} {value:>9.1f} {ratio(value, reference.get(section)):>8}"
                    f" {ratio(value, base):>15}"
                )

    print("targets (issue 15):")
    if peer_async is None:
        print("  no peer's async invoke measured: install the bench extra to check the targets")
    else:
        bar = medians[peer_async]
        for section, name in ((SYNC, "run.submit"), (ASYNC, "run.asubmit")):
            ours = named[section, f"callgate {name}, memory"]
            verdict = "met" if ours <= bar else "NOT met"
            print(
                f"  callgate {name} on memory ({section}) {ours:.1f} µs <= fastest peer's "
                f"bare async invoke ({peer_async.name}) {bar:.1f} µs: {verdict}"
            )
    if peer_turn is not None:
        theirs = medians[peer_turn]
        ours = named[TURN, "callgate Agent.arun (memory)"]
        verdict = "met" if theirs / ours >= 10 else "NOT met"
        print(
            f"  whole turn: fastest peer's ({peer_turn.name}) {theirs:,.0f} µs / callgate's "
            f"{ours:,.0f} µs = {theirs / ours:.1f}x >= 10x: {verdict}"
        )


if __name__ == "__main__":
    main()

"""What the framework adapters and the OpenTelemetry spans add per call, measured in one run.

Every row calls the same three-field async tool (``overhead.py``'s ``add_item``)
from the same JSON text of its arguments.

Adapters, per call, each against its framework alone (the same framework path
without callgate):

* OpenAI Agents SDK: ``FunctionTool.on_invoke_tool`` of the tool, against the
  same of ``openai_agents.gate_tool(tool, run)``;
* PydanticAI: ``ToolManager.validate_tool_call`` + ``execute_tool_call`` over a
  ``FunctionToolset``, against the same over ``GatedToolset(toolset, run=run)``;
* LangChain: ``StructuredTool.ainvoke`` of a tool call, against
  ``GatedTool.ainvoke`` of the same tool call;

and a whole turn (the model proposes one call, the tool runs, the model answers;
the model's own time measured and subtracted): OpenAI Agents ``Runner.run`` with
a stub ``Model`` (tracing off), PydanticAI ``Agent.run`` with ``FunctionModel``,
a LangGraph graph (model node with LangChain's fake chat model, ``ToolNode``),
each with and without the gate. The gated rows use a `MemoryLedger` (the cost of
the gate itself); the per-call rows are also measured on the default durable
ledger, a `SQLiteLedger` (WAL) in a temporary directory ("gated, SQLite": the
gate plus its commits).

Telemetry, per call, ``run.asubmit`` on a `MemoryLedger`: no `Telemetry` (the
default), ``Telemetry()`` with OpenTelemetry's API but no SDK (non-recording
spans), and with the SDK's ``TracerProvider`` exporting to an in-memory
exporter through a ``SimpleSpanProcessor``, without and with captured content.

Times are CPU time of the process (`time.process_time`), not wall time: on a
shared machine wall time also counts other processes. Each row is calibrated to
about ``SAMPLE_SECONDS`` per sample; then, ``REPEATS`` rounds, each measuring
every group's rows back to back (groups and rows in a shuffled order), so that
each round gives a paired difference and ratio against the group's baseline.
Reported: the median µs per call (turn), and the medians of the rounds' added
cost (gated − alone) and ratio (gated / alone). Nothing is written into the
working tree. Run: ``.venv/bin/python benchmarks/integrations.py``.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.metadata
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from callgate import Authority, Gate, MemoryLedger, Registry, SQLiteLedger, ToolCall
from callgate.telemetry import Telemetry

sys.dont_write_bytecode = True  # the sibling script below leaves no __pycache__

from overhead import ARGS, add_item_async  # noqa: E402

REPEATS = 9
SAMPLE_SECONDS = 0.25
clock = time.process_time
"""CPU seconds of this process: on a shared machine, wall time also counts the time other
processes held the CPU. The tools are async and run on this thread; what a framework runs in
worker threads is CPU of this process too."""
MAX_CALLS = 20_000
EXPECTED = json.loads(ARGS)
AUTHORITY = Authority(principal="bench", grants=["write:cart:*"])
CONTRACTS = {"add_item": {"effects": "write:cart:{cart_id}"}}

Sample = Callable[[int], Coroutine[Any, Any, float]]

_TMP = tempfile.TemporaryDirectory(prefix="callgate-bench-integrations-")
"""Where the SQLite ledgers live (removed when the script ends; never the working tree)."""


def sqlite_ledger(name: str) -> SQLiteLedger:
    """The default durable ledger (SQLite, WAL) in a file of the temporary directory."""
    return SQLiteLedger(str(Path(_TMP.name) / f"{name}.db"))


@dataclass(frozen=True, kw_only=True)
class Row:
    """One measured path: ``await sample(n)`` makes ``n`` calls (turns) and returns the
    seconds they took, setup and the model's own time excluded."""

    group: str
    name: str
    baseline: bool
    sample: Sample
    warmup: int = 200


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def check(row: str, got: object) -> None:
    """A row whose last call did not return the tool's result measured nothing."""
    if got != EXPECTED and got != json.dumps(EXPECTED, separators=(",", ":")):
        raise RuntimeError(f"{row}: the last call returned {got!r}, expected {EXPECTED!r}")


def as_result(text: Any) -> Any:
    """The tool's result from a gated answer (callgate's observation text is JSON)."""
    return json.loads(text) if isinstance(text, str) else text


async def add_item(cart_id: str, sku: str, quantity: int) -> dict[str, object]:
    """Add an item to a cart.

    Args:
        cart_id: the cart.
        sku: the item.
        quantity: how many.
    """
    return await add_item_async(cart_id, sku, quantity)


# -- OpenAI Agents SDK ------------------------------------------------------------------------


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

    from callgate.integrations import openai_agents

    tool = function_tool(add_item, failure_error_function=None)
    gate = Gate(openai_agents.registry([tool], CONTRACTS), ledger=MemoryLedger())
    durable = Gate(openai_agents.registry([tool], CONTRACTS), ledger=sqlite_ledger("oa"))

    def invoke(gated: bool, through: Gate = gate) -> Sample:
        async def sample(n: int) -> float:
            target = (
                openai_agents.gate_tool(tool, through.run(authority=AUTHORITY)) if gated else tool
            )
            ids = [f"c{i}" for i in range(n)]
            result: object = None
            t0 = clock()
            for call_id in ids:
                ctx = ToolContext(
                    None, tool_name=tool.name, tool_call_id=call_id, tool_arguments=ARGS
                )
                result = await target.on_invoke_tool(ctx, ARGS)
            elapsed = clock() - t0
            check("OpenAI Agents on_invoke_tool", as_result(result))
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
            t0 = clock()
            done = not isinstance(input, str) and any(
                item.get("type") == "function_call_output" for item in input
            )
            response = ModelResponse(
                output=[reply if done else call], usage=Usage(), response_id=None
            )
            self.spent += clock() - t0
            return response

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark does not stream")

    config = RunConfig(tracing_disabled=True)

    def turn(gated: bool) -> Sample:
        async def sample(n: int) -> float:
            model = Stub()
            agent = OAAgent(name="bench", model=model, tools=[tool])
            elapsed = 0.0
            for _ in range(n):
                target = (
                    openai_agents.gate_agent(agent, gate.run(authority=AUTHORITY))
                    if gated
                    else agent
                )
                t0 = clock()
                result = await Runner.run(target, "go", run_config=config)
                elapsed += clock() - t0
            outputs = [i.output for i in result.new_items if i.type == "tool_call_output_item"]
            check("OpenAI Agents Runner.run", as_result(outputs[0]))
            return elapsed - model.spent

        return sample

    group = "OpenAI Agents SDK"
    return [
        Row(group=group, name="on_invoke_tool", baseline=True, sample=invoke(False)),
        Row(group=group, name="on_invoke_tool, gated", baseline=False, sample=invoke(True)),
        Row(
            group=group,
            name="on_invoke_tool, gated, SQLite",
            baseline=False,
            sample=invoke(True, durable),
        ),
        Row(group=group + " turn", name="Runner.run", baseline=True, sample=turn(False), warmup=10),
        Row(
            group=group + " turn",
            name="Runner.run, gated",
            baseline=False,
            sample=turn(True),
            warmup=10,
        ),
    ]


# -- PydanticAI ------------------------------------------------------------------------------


def pydantic_ai_rows() -> list[Row]:
    from pydantic_ai import Agent as PAAgent
    from pydantic_ai import FunctionToolset, RunContext
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tool_manager import ToolManager
    from pydantic_ai.usage import RunUsage

    from callgate.integrations.pydantic_ai import GatedToolset, registry

    toolset = FunctionToolset([add_item])
    gate = Gate(registry(toolset, CONTRACTS), ledger=MemoryLedger())
    durable = Gate(registry(toolset, CONTRACTS), ledger=sqlite_ledger("pai"))

    def invoke(gated: bool, through: Gate = gate) -> Sample:
        async def sample(n: int) -> float:
            used = GatedToolset(toolset, run=through.run(authority=AUTHORITY)) if gated else toolset
            ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
            manager = await ToolManager(used).for_run_step(ctx)
            ids = [f"c{i}" for i in range(n)]
            result: object = None
            t0 = clock()
            for call_id in ids:
                part = ToolCallPart(tool_name="add_item", args=ARGS, tool_call_id=call_id)
                validated = await manager.validate_tool_call(part)
                result = await manager.execute_tool_call(validated)
            elapsed = clock() - t0
            check("PydanticAI ToolManager", as_result(result))
            return elapsed

        return sample

    spent = [0.0]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        t0 = clock()
        if len(messages) == 1:
            part = ToolCallPart(tool_name="add_item", args=ARGS, tool_call_id="call_1")
            response = ModelResponse(parts=[part])
        else:
            response = ModelResponse(parts=[TextPart("done")])
        spent[0] += clock() - t0
        return response

    def turn(gated: bool) -> Sample:
        async def sample(n: int) -> float:
            spent[0] = 0.0
            elapsed = 0.0
            for _ in range(n):
                used = (
                    GatedToolset(toolset, run=gate.run(authority=AUTHORITY)) if gated else toolset
                )
                agent = PAAgent(FunctionModel(respond), toolsets=[used])
                t0 = clock()
                result = await agent.run("go")
                elapsed += clock() - t0
            returns = [
                part.content
                for message in result.all_messages()
                for part in message.parts
                if part.part_kind == "tool-return"
            ]
            check("PydanticAI Agent.run", as_result(returns[0]))
            return elapsed - spent[0]

        return sample

    group = "PydanticAI"
    return [
        Row(group=group, name="validate + execute_tool_call", baseline=True, sample=invoke(False)),
        Row(
            group=group,
            name="validate + execute_tool_call, gated",
            baseline=False,
            sample=invoke(True),
        ),
        Row(
            group=group,
            name="validate + execute_tool_call, gated, SQLite",
            baseline=False,
            sample=invoke(True, durable),
        ),
        Row(group=group + " turn", name="Agent.run", baseline=True, sample=turn(False), warmup=10),
        Row(
            group=group + " turn",
            name="Agent.run, gated",
            baseline=False,
            sample=turn(True),
            warmup=10,
        ),
    ]


# -- LangChain / LangGraph ---------------------------------------------------------------------


def langchain_rows() -> list[Row]:
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.tools import StructuredTool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from callgate.integrations.langchain import gate_tools, registry

    tool = StructuredTool.from_function(coroutine=add_item, name="add_item")
    gate = Gate(registry([tool], CONTRACTS), ledger=MemoryLedger())
    durable = Gate(registry([tool], CONTRACTS), ledger=sqlite_ledger("lc"))
    arguments = json.loads(ARGS)

    def invoke(gated: bool, through: Gate = gate) -> Sample:
        async def sample(n: int) -> float:
            target = gate_tools([tool], through.run(authority=AUTHORITY))[0] if gated else tool
            calls = [
                {"name": "add_item", "args": arguments, "id": f"c{i}", "type": "tool_call"}
                for i in range(n)
            ]
            result: Any = None
            t0 = clock()
            for call in calls:
                result = await target.ainvoke(call)
            elapsed = clock() - t0
            content = result.content if isinstance(result, ToolMessage) else result
            check("LangChain ainvoke", as_result(content))
            return elapsed

        return sample

    proposal = AIMessage(
        content="", tool_calls=[{"name": "add_item", "args": arguments, "id": "call_1"}]
    )

    def graph(gated: bool) -> Any:
        tools = gate_tools([tool], gate.run(authority=AUTHORITY)) if gated else [tool]
        model = FakeMessagesListChatModel(responses=[proposal, AIMessage(content="done")])
        spent = [0.0]

        def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
            t0 = clock()
            message = model.invoke(state["messages"])
            spent[0] += clock() - t0
            return {"messages": [message]}

        builder = StateGraph(MessagesState)
        builder.add_node("agent", agent)
        builder.add_node("tools", ToolNode(tools))
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
        return builder.compile(), spent

    def turn(gated: bool) -> Sample:
        async def sample(n: int) -> float:
            elapsed = 0.0
            spent_total = 0.0
            for _ in range(n):
                app, spent = graph(gated)  # a new graph and run per turn, as per conversation
                t0 = clock()
                result = await app.ainvoke({"messages": [HumanMessage("go")]})
                elapsed += clock() - t0
                spent_total += spent[0]
            [message] = [m for m in result["messages"] if isinstance(m, ToolMessage)]
            check("LangGraph graph", as_result(message.content))
            return elapsed - spent_total

        return sample

    group = "LangChain"
    return [
        Row(group=group, name="StructuredTool.ainvoke", baseline=True, sample=invoke(False)),
        Row(group=group, name="GatedTool.ainvoke", baseline=False, sample=invoke(True)),
        Row(
            group=group,
            name="GatedTool.ainvoke, SQLite",
            baseline=False,
            sample=invoke(True, durable),
        ),
        Row(
            group="LangGraph turn",
            name="graph.ainvoke (ToolNode)",
            baseline=True,
            sample=turn(False),
            warmup=10,
        ),
        Row(
            group="LangGraph turn",
            name="graph.ainvoke (ToolNode), gated",
            baseline=False,
            sample=turn(True),
            warmup=10,
        ),
    ]


# -- telemetry ---------------------------------------------------------------------------------


def telemetry_rows() -> list[Row]:
    registry = Registry()
    registry.tool(name="add_item", effects="write:cart:{cart_id}")(add_item_async)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    api_only = otel_trace.ProxyTracerProvider()  # what the API gives with no SDK installed

    def submit(telemetry: Telemetry | None) -> Sample:
        async def sample(n: int) -> float:
            gate = Gate(registry, ledger=MemoryLedger(), telemetry=telemetry)
            run = gate.run(authority=AUTHORITY)
            exporter.clear()
            ids = [f"c{i}" for i in range(n)]
            t0 = clock()
            for call_id in ids:
                [obs] = await run.asubmit([ToolCall(id=call_id, name="add_item", arguments=ARGS)])
            elapsed = clock() - t0
            check("run.asubmit", obs.result)
            exporter.clear()
            return elapsed

        return sample

    group = "telemetry (run.asubmit)"
    return [
        Row(group=group, name="no Telemetry (default)", baseline=True, sample=submit(None)),
        Row(
            group=group,
            name="Telemetry, API without SDK",
            baseline=False,
            sample=submit(Telemetry(api_only)),
        ),
        Row(
            group=group,
            name="Telemetry, SDK + in-memory exporter",
            baseline=False,
            sample=submit(Telemetry(provider)),
        ),
        Row(
            group=group,
            name="Telemetry, SDK, capture_content",
            baseline=False,
            sample=submit(Telemetry(provider, capture_content=True)),
        ),
    ]


# -- measuring and reporting ---------------------------------------------------------------------

BUILDERS: list[tuple[str, str, Callable[[], list[Row]]]] = [
    ("OpenAI Agents SDK", "openai-agents", openai_agents_rows),
    ("PydanticAI", "pydantic-ai-slim", pydantic_ai_rows),
    ("LangChain", "langchain-core", langchain_rows),
    ("LangGraph", "langgraph", lambda: []),
    ("OpenTelemetry SDK", "opentelemetry-sdk", telemetry_rows),
]


def measure(runner: asyncio.Runner, row: Row, n: int) -> float:
    """µs per call (turn) of one sample of ``n``."""
    gc.collect()
    return runner.run(row.sample(n)) / n * 1e6


def main() -> None:
    rows: list[Row] = []
    versions = []
    for label, dist, build in BUILDERS:
        try:
            rows += build()
        except ImportError as error:
            print(f"skipped {label}: not installed ({error}); pip install -e '.[integrations]'")
            continue
        versions.append(f"{label} {importlib.metadata.version(dist)}")
    versions.append(f"Python {sys.version.split()[0]}")
    groups = list(dict.fromkeys(row.group for row in rows))
    members = {g: [row for row in rows if row.group == g] for g in groups}
    with asyncio.Runner() as runner:
        sizes: dict[Row, int] = {}
        for row in rows:
            measure(runner, row, row.warmup)
            per_call = measure(runner, row, row.warmup)
            sizes[row] = max(10, min(MAX_CALLS, int(SAMPLE_SECONDS / (per_call / 1e6))))
            progress(f"calibrated {row.group:<24} {row.name:<40} {per_call:9.1f} µs")
        samples: dict[Row, list[float]] = {row: [] for row in rows}
        ratios: dict[Row, list[float]] = {row: [] for row in rows}
        added: dict[Row, list[float]] = {row: [] for row in rows}
        shuffle = random.Random(21)
        for repeat in range(REPEATS):
            progress(f"round {repeat + 1}/{REPEATS}")
            order = list(groups)
            shuffle.shuffle(order)
            for group in order:  # a group's rows back to back: paired within the round
                batch = list(members[group])
                shuffle.shuffle(batch)
                got = {row: measure(runner, row, sizes[row]) for row in batch}
                base = next(row for row in batch if row.baseline)
                for row, value in got.items():
                    samples[row].append(value)
                    ratios[row].append(value / got[base])
                    added[row].append(value - got[base])

    print("versions: " + ", ".join(versions))
    print(
        f"medians of {REPEATS} rounds, each row one sample of ~{SAMPLE_SECONDS}s of CPU time; "
        "'added' and 'x alone' are medians of each round's paired difference and ratio"
    )
    print(f"{'row':<46} {'µs':>9} {'added µs':>9} {'× alone':>8}")
    for group in groups:
        print(f"-- {group}")
        for row in members[group]:
            value = statistics.median(samples[row])
            if row.baseline:
                print(f"{row.name:<46} {value:>9.1f} {'':>9} {'1.00x':>8}")
            else:
                plus = statistics.median(added[row])
                times = statistics.median(ratios[row])
                print(f"{row.name:<46} {value:>9.1f} {plus:>+9.1f} {times:>7.2f}x")


if __name__ == "__main__":
    main()

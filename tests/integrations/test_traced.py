"""A gate with a `Telemetry` traces the calls an adapter submits like any other: one
``execute_tool`` span per call, under the framework's own span of the call."""

from __future__ import annotations

import anyio
from langchain_core.tools import StructuredTool
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from callgate import Gate, MemoryLedger
from callgate.integrations.langchain import gate_tools, registry
from callgate.telemetry import Telemetry

from .support import AUTHORITY, CONTRACTS, POLICY, Shop


def test_an_adapted_call_is_one_execute_tool_span_under_the_callers_span() -> None:
    """A LangChain tool call through a traced gate makes one execute_tool span with the
    model's call id, a child of the span the caller (the framework) had open."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    shop = Shop()
    tools = [StructuredTool.from_function(f) for f in shop.functions().values()]
    gate = Gate(
        registry(tools, CONTRACTS),
        policy=POLICY,
        ledger=MemoryLedger(),
        telemetry=Telemetry(provider),
    )
    [get_order] = gate_tools(tools[:1], gate.run(authority=AUTHORITY))
    framework = provider.get_tracer("framework")

    async def go() -> None:
        with framework.start_as_current_span("tools node"):
            call = {
                "name": "get_order",
                "args": {"order_id": "o-1"},
                "id": "t1",
                "type": "tool_call",
            }
            await get_order.ainvoke(call)

    anyio.run(go)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    tool_span = spans["execute_tool get_order"]
    assert (tool_span.attributes or {})["gen_ai.tool.call.id"] == "t1"
    assert (tool_span.attributes or {})["callgate.status"] == "ok"
    assert tool_span.parent is not None
    assert tool_span.parent.span_id == spans["tools node"].context.span_id
    provider.shutdown()

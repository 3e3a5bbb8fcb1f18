"""Every span callgate makes carries the GenAI semantic conventions' required attributes,
names the provider and agent that really ran, and a framework that traces its own tool
executions (PydanticAI's instrumentation) gets one ``execute_tool`` span per execution,
enriched by callgate, never two nested ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from agents import Agent as SdkAgent
from agents import ModelResponse, RunConfig, Runner, Usage, function_tool
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from opentelemetry.sdk.trace import ReadableSpan
from pydantic_ai import Agent as PaiAgent
from pydantic_ai import FunctionToolset
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.messages import TextPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from callgate import Agent, Authority, Gate, MemoryLedger, Policy, allow
from callgate.integrations import openai_agents
from callgate.integrations.pydantic_ai import GatedToolset, registry
from callgate.llms.scripted import ScriptedModel, answer, calls
from callgate.telemetry import Telemetry

from .conftest import Spans
from .test_agent_spans import registry as shop_registry

REQUIRED: dict[str, frozenset[str]] = {
    # OpenTelemetry GenAI semantic conventions (gen-ai-spans.md, gen-ai-agent-spans.md):
    # attributes a span of each operation must carry ("Required", and the conditionally
    # required ones whose condition callgate always meets: it knows the model and agent).
    "invoke_agent": frozenset(
        {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.agent.name"}
    ),
    "chat": frozenset({"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model"}),
    "execute_tool": frozenset({"gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.agent.name"}),
}


def _missing(span: ReadableSpan) -> set[str]:
    attributes = dict(span.attributes or {})
    operation = attributes.get("gen_ai.operation.name")
    assert operation in REQUIRED, f"{span.name}: gen_ai.operation.name is {operation!r}"
    return set(REQUIRED[str(operation)] - set(attributes))


def test_a_callgate_agent_runs_spans_carry_the_required_attributes(spans: Spans) -> None:
    """invoke_agent, chat and execute_tool spans of a run of callgate's own agent each carry
    their operation's required attributes; the scripted model is not reported as openai."""
    ran: list[str] = []
    model = ScriptedModel([calls(("lookup", {"order_id": "o-1"})), answer("shipped")])
    gate = Gate(
        shop_registry(ran),
        policy=Policy([allow("lookup")]),
        ledger=MemoryLedger(),
        telemetry=Telemetry(spans.provider),
    )
    Agent(model, gate).run(
        "where is o-1?", authority=Authority(principal="p", grants=["read:orders"])
    )
    finished = spans.finished()
    assert {s.name.split(" ")[0] for s in finished} == {"invoke_agent", "chat", "execute_tool"}
    assert {s.name: _missing(s) for s in finished} == {s.name: set() for s in finished}
    providers = {dict(s.attributes or {}).get("gen_ai.provider.name") for s in finished}
    assert "openai" not in providers
    assert providers - {None} == {"callgate.scripted"}


def test_an_agents_sdk_tool_span_names_the_sdk_agent(spans: Spans, tmp_path: Path) -> None:
    """A call the Agents SDK's agent 'support' makes through the gate: its execute_tool span
    carries gen_ai.agent.name 'support' and the required attributes."""

    def get_order(order_id: str) -> str:
        """Look up an order."""
        return f"order {order_id}"

    tool = function_tool(get_order, failure_error_function=None)
    gate = Gate(
        openai_agents.registry([tool], {"get_order": {"effects": "read:orders"}}),
        policy=Policy([allow("get_order")]),
        telemetry=Telemetry(spans.provider),
    )
    run = gate.run(authority=Authority(principal="p", grants=["read:orders"]))
    agent = SdkAgent(name="support", model=_SdkModel(), tools=[tool])
    anyio.run(_sdk_run, openai_agents.gate_agent(agent, run))
    span = spans.one("execute_tool get_order")
    assert _missing(span) == set()
    assert dict(span.attributes or {})["gen_ai.agent.name"] == "support"


class _SdkModel(Model):
    """The Agents SDK's model interface: one call of get_order, then an answer."""

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> Any:
        if isinstance(input, list) and any(i.get("type") == "function_call_output" for i in input):
            text = ResponseOutputText(type="output_text", text="ok", annotations=[])
            item: Any = ResponseOutputMessage(
                type="message", id="m", role="assistant", status="completed", content=[text]
            )
        else:
            item = ResponseFunctionToolCall(
                type="function_call",
                call_id="c1",
                name="get_order",
                arguments='{"order_id": "o-1"}',
                status="completed",
            )
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("not streamed here")


async def _sdk_run(agent: Any) -> Any:
    return await Runner.run(agent, "x", run_config=RunConfig(tracing_disabled=True))


def _pydantic_agent(spans: Spans, arguments: str) -> tuple[PaiAgent[None, Any], list[str]]:
    ran: list[str] = []

    def lookup(order_id: str) -> str:
        """Look up an order."""
        ran.append(order_id)
        return f"order {order_id}: shipped"

    def script(messages: Any, info: Any) -> Any:
        from pydantic_ai.messages import ModelResponse, ToolCallPart, ToolReturnPart

        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("lookup", arguments, tool_call_id="c1")])

    tools = FunctionToolset([lookup])
    gate = Gate(
        registry(tools, {"lookup": {"effects": "read:orders", "risk": "read"}}),
        policy=Policy([allow("lookup")]),
        telemetry=Telemetry(spans.provider),
    )
    run = gate.run(authority=Authority(principal="p", grants=["read:orders"]))
    instrumented = Instrumentation(settings=InstrumentationSettings(tracer_provider=spans.provider))
    agent: PaiAgent[None, Any] = PaiAgent(
        FunctionModel(script),
        name="support",
        toolsets=[GatedToolset(tools, run=run)],
        capabilities=[instrumented],
    )
    return agent, ran


def test_under_pydantic_ais_instrumentation_one_call_is_one_execute_tool_span(
    spans: Spans,
) -> None:
    """PydanticAI traces each tool execution itself: callgate enriches that span (status,
    stage, decision, run) instead of nesting a second execute_tool span under it."""
    agent, ran = _pydantic_agent(spans, '{"order_id": "o-1"}')
    anyio.run(agent.run, "where is o-1?")
    assert ran == ["o-1"]
    [span] = [s for s in spans.finished() if s.name.startswith("execute_tool")]
    attributes = dict(span.attributes or {})
    assert attributes["callgate.status"] == "ok"
    assert attributes["callgate.decision"] == "admit"
    assert attributes["gen_ai.agent.name"] == "support"
    assert _missing(span) == set()


def test_a_refused_call_under_pydantic_ais_instrumentation_is_one_span_too(
    spans: Spans,
) -> None:
    """A call refused at the validate stage inside PydanticAI's execute_tool span: still one
    span, carrying callgate's rejection."""
    agent, ran = _pydantic_agent(spans, '{"order_id": 5}')
    anyio.run(agent.run, "where is o-1?")
    tool_spans = [s for s in spans.finished() if s.name.startswith("execute_tool")]
    assert ran == []
    assert len(tool_spans) >= 1
    assert all(
        not (s.parent and s.parent.span_id in {t.context.span_id for t in tool_spans})
        for s in tool_spans
    )


def test_a_named_callgate_agent_names_its_spans(spans: Spans) -> None:
    """``Agent(..., name="support")``: the invoke_agent span is ``invoke_agent support`` and
    its tool spans carry gen_ai.agent.name 'support' (it was always 'callgate')."""
    ran: list[str] = []
    model = ScriptedModel([calls(("lookup", {"order_id": "o-1"})), answer("shipped")])
    gate = Gate(
        shop_registry(ran),
        policy=Policy([allow("lookup")]),
        ledger=MemoryLedger(),
        telemetry=Telemetry(spans.provider),
    )
    Agent(model, gate, name="support").run(
        "where is o-1?", authority=Authority(principal="p", grants=["read:orders"])
    )
    agent_span = spans.one("invoke_agent support")
    assert dict(agent_span.attributes or {})["gen_ai.agent.name"] == "support"
    tool_span = spans.one("execute_tool lookup")
    assert dict(tool_span.attributes or {})["gen_ai.agent.name"] == "support"

"""The agent loop's spans: ``invoke_agent callgate`` around a run, a ``chat {model}`` span
per model call, and the run's ``execute_tool`` spans beside them, all in one trace."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
from opentelemetry.trace import SpanKind, StatusCode

from callgate import (
    Agent,
    Authority,
    Budgets,
    Gate,
    MemoryLedger,
    Policy,
    Registry,
    allow,
    ask,
)
from callgate.llms.base import Model, ModelRequest, ModelResponse, Usage
from callgate.llms.scripted import ScriptedModel, answer, calls
from callgate.telemetry import Telemetry

from .conftest import Spans


def registry(ran: list[str]) -> Registry:
    """lookup (allowed) and wire (asks a person)."""
    tools = Registry()

    @tools.tool(effects="read:orders", risk="read")
    def lookup(order_id: str) -> str:
        """Look up an order."""
        ran.append("lookup")
        return f"order {order_id}: shipped"

    @tools.tool(effects="spend:USD")
    def wire(amount: int) -> str:
        """Send money."""
        ran.append("wire")
        return f"sent {amount}"

    return tools


def test_a_run_is_one_trace_of_agent_chat_and_tool_spans(spans: Spans) -> None:
    """A run that calls a tool then answers: one invoke_agent span, two chat spans (client
    kind, model, provider, tokens) and the tool's span, all children of the agent span."""
    ran: list[str] = []
    model = ScriptedModel(
        [
            calls(("lookup", {"order_id": "o-1"}), usage=Usage(input_tokens=11, output_tokens=3)),
            answer("o-1 shipped", usage=Usage(input_tokens=20, output_tokens=4)),
        ]
    )
    gate = Gate(registry(ran), ledger=MemoryLedger(), telemetry=Telemetry(spans.provider))
    result = Agent(model, gate).run(
        "where is o-1?", authority=Authority(principal="agent", grants=["read:orders"])
    )
    assert result.answered
    assert ran == ["lookup"]
    agent = spans.one("invoke_agent callgate")
    chats = spans.named(f"chat {model.name}")
    tool = spans.one("execute_tool lookup")
    assert len(chats) == 2
    for child in [*chats, tool]:
        assert child.parent is not None
        assert child.parent.span_id == agent.context.span_id
        assert child.context.trace_id == agent.context.trace_id
    first, second = sorted(chats, key=lambda s: s.start_time or 0)
    assert first.kind is SpanKind.CLIENT
    expected = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model.name,
        "gen_ai.response.model": model.name,
        "gen_ai.provider.name": "callgate.scripted",
        "gen_ai.usage.input_tokens": 11,
        "gen_ai.usage.output_tokens": 3,
        "callgate.run.id": result.run_id,
        "callgate.step": 1,
    }
    got = dict(first.attributes or {})
    assert {k: got.get(k) for k in expected} == expected
    assert (second.attributes or {})["gen_ai.usage.output_tokens"] == 4
    assert (second.attributes or {})["callgate.step"] == 2
    assert (first.end_time or 0) <= (tool.start_time or 0) <= (second.start_time or 0)
    assert (agent.attributes or {})["callgate.agent.reason"] == result.reason.value
    assert (agent.attributes or {})["gen_ai.operation.name"] == "invoke_agent"


def test_a_paused_run_and_its_resumption_are_two_agent_spans(spans: Spans) -> None:
    """A run paused for approval ends its agent span with reason awaiting_approval; resuming
    opens another, under which the approved call's span runs."""
    ran: list[str] = []
    model = ScriptedModel([calls(("wire", {"amount": 5})), answer("sent")])
    gate = Gate(
        registry(ran),
        policy=Policy([allow("lookup"), ask("wire")]),
        ledger=MemoryLedger(),
        telemetry=Telemetry(spans.provider),
    )
    agent = Agent(model, gate)
    paused = agent.run("wire 5", authority=Authority(principal="agent", grants=["spend:USD"]))
    assert paused.paused
    gate.approvals.approve(paused.pending_approvals[0], by="lead")
    done = agent.resume(paused)
    assert done.answered
    assert ran == ["wire"]
    first, second = sorted(spans.named("invoke_agent callgate"), key=lambda s: s.start_time or 0)
    assert (first.attributes or {})["callgate.agent.reason"] == "awaiting_approval"
    assert (second.attributes or {})["callgate.agent.reason"] == done.reason.value
    wires = spans.named("execute_tool wire")
    statuses = sorted((s.attributes or {})["callgate.status"] for s in wires)
    assert statuses == ["ok", "pending"]
    ran_span = next(s for s in wires if (s.attributes or {})["callgate.status"] == "ok")
    assert ran_span.parent is not None
    assert ran_span.parent.span_id == second.context.span_id


def test_a_failing_model_call_is_an_error_chat_span(spans: Spans) -> None:
    """A model call that raises ends its chat span with error.type, the exception's type."""

    def broken(request: object) -> object:
        raise ConnectionError("the provider is down")

    model = ScriptedModel([broken])
    gate = Gate(registry([]), ledger=MemoryLedger(), telemetry=Telemetry(spans.provider))
    result = Agent(model, gate).run(
        "hi", authority=Authority(principal="agent", grants=["read:orders"])
    )
    assert result.reason.value == "model_error"
    chat = spans.one(f"chat {model.name}")
    assert chat.status.status_code is StatusCode.ERROR
    assert (chat.attributes or {})["error.type"] == "ConnectionError"


def test_without_opentelemetry_installed_telemetry_is_a_no_op(tmp_path: Path) -> None:
    """With the opentelemetry package unimportable, callgate imports, Telemetry() says once
    in the log that it makes no spans, and calls run as before."""
    script = textwrap.dedent(
        """
        import logging, sys
        sys.modules["opentelemetry"] = None  # as if not installed
        logging.basicConfig(level=logging.WARNING, format="%(message)s")
        from callgate import Authority, Gate, MemoryLedger, Registry, ToolCall
        from callgate.telemetry import Telemetry

        registry = Registry()

        @registry.tool(effects="read:x", risk="read")
        def get(x: str) -> str:
            return "got " + x

        telemetry = Telemetry(capture_content=True)
        assert telemetry.enabled is False
        gate = Gate(registry, ledger=MemoryLedger(), telemetry=telemetry)
        run = gate.run(authority=Authority(principal="agent", grants=["read:x"]))
        [ok] = run.submit([ToolCall(id="a", name="get", arguments='{"x": "1"}')])
        [bad] = run.submit([ToolCall(id="b", name="get", arguments='{"y": 1}')])
        print(ok.status.value, bad.status.value)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "rejected"]
    assert "opentelemetry-api package is not installed" in done.stderr


def test_the_default_provider_is_the_global_one_even_when_set_later(tmp_path: Path) -> None:
    """Telemetry() with no provider uses the global tracer provider, looked up per span: one
    the application installs after the gate was built receives the spans (run in a
    subprocess: the global provider can be set once per process)."""
    script = textwrap.dedent(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from callgate import Authority, Gate, MemoryLedger, Registry, ToolCall
        from callgate.telemetry import Telemetry

        registry = Registry()

        @registry.tool(effects="read:x", risk="read")
        def get(x: str) -> str:
            return "got " + x

        gate = Gate(registry, ledger=MemoryLedger(), telemetry=Telemetry())
        run = gate.run(authority=Authority(principal="p", grants=["read:x"]))
        run.submit([ToolCall(id="before", name="get", arguments='{"x": "1"}')])
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        run.submit([ToolCall(id="after", name="get", arguments='{"x": "2"}')])
        for span in exporter.get_finished_spans():
            print(span.name, span.attributes["gen_ai.tool.call.id"])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["execute_tool get after"]


class Silent(Model):
    """A model that never answers (until cancelled)."""

    name = "silent"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await anyio.sleep(30)
        raise AssertionError("the time budget should have cancelled this call")


def test_a_model_call_cut_off_by_the_time_budget_is_a_cancelled_chat_span(spans: Spans) -> None:
    """A model call the run's time budget cuts off ends its chat span with error.type
    cancelled; the run ends max_seconds."""
    gate = Gate(registry([]), ledger=MemoryLedger(), telemetry=Telemetry(spans.provider))
    agent = Agent(Silent(), gate, budgets=Budgets(seconds=0.2))
    result = agent.run("hi", authority=Authority(principal="agent", grants=["read:orders"]))
    assert result.reason.value == "max_seconds"
    chat = spans.one("chat silent")
    assert (chat.attributes or {})["error.type"] == "cancelled"
    assert chat.status.status_code is StatusCode.ERROR

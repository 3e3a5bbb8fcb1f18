"""The OpenAI Agents SDK's own loop (``Runner.run``) with its tools gated by callgate: a stub
``Model`` implementing the SDK's interface proposes the calls, the SDK runs them through
`callgate.integrations.openai_agents`, and the ledger records every decision."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from agents import Agent, ModelResponse, RunConfig, Runner, Usage, WebSearchTool, function_tool
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic import AfterValidator

from callgate import Authority, DefinitionError, Gate, Policy, allow
from callgate.integrations import openai_agents

from .support import AUTHORITY, CHARGE_5, CONTRACTS, POLICY, REFUND_80, Shop, ledger, states

CONFIG = RunConfig(tracing_disabled=True)


def call(name: str, arguments: str, call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", call_id=call_id, name=name, arguments=arguments, status="completed"
    )


def reply(text: str) -> ResponseOutputMessage:
    content = ResponseOutputText(type="output_text", text=text, annotations=[])
    return ResponseOutputMessage(
        type="message", id="msg", role="assistant", status="completed", content=[content]
    )


class Stub(Model):
    """The SDK's model interface, answering from a script: each turn's output items, in
    order; the tool outputs it was sent are kept for the test to read."""

    def __init__(self, *turns: list[Any]) -> None:
        self.turns = list(turns)
        self.outputs: list[str] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        if not isinstance(input, str):
            self.outputs = [
                str(item["output"]) for item in input if item.get("type") == "function_call_output"
            ]
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("these tests do not stream")


def agent_of(shop: Shop, model: Model) -> Agent[Any]:
    """An SDK agent whose tools are the shop's functions, made the SDK's way; failures are
    left to callgate to classify (no failure formatter)."""
    tools = [function_tool(f, failure_error_function=None) for f in shop.functions().values()]
    return Agent(name="support", model=model, tools=tools)


def gated(shop: Shop, model: Model, tmp_path: Path) -> tuple[Agent[Any], Any, Gate]:
    agent = agent_of(shop, model)
    gate = Gate(
        openai_agents.registry(agent.tools, CONTRACTS), policy=POLICY, ledger=ledger(tmp_path)
    )
    run = gate.run(authority=AUTHORITY, run_id="run-oa")
    return openai_agents.gate_agent(agent, run), run, gate


def run_sdk(agent: Agent[Any], text: str) -> Any:
    async def go() -> Any:
        return await Runner.run(agent, text, run_config=CONFIG)

    return anyio.run(go)


def test_a_granted_call_runs_and_the_model_reads_its_result(tmp_path: Path) -> None:
    """The SDK's loop runs a granted read through the gate: the model gets the result as the
    tool's output, and the ledger records the call ok."""
    shop = Shop()
    model = Stub([call("get_order", '{"order_id": "o-1"}', "c1")], [reply("shipped")])
    agent, run, gate = gated(shop, model, tmp_path)
    result = run_sdk(agent, "where is o-1?")
    assert result.final_output == "shipped"
    assert model.outputs == ["order o-1: shipped, total 80.00 USD"]
    assert shop.runs == {"get_order": 1}
    assert states(gate.ledger, run.id) == {"get_order": ["ok"]}


def test_an_ungranted_call_is_refused_as_a_tool_output(tmp_path: Path) -> None:
    """A call needing an effect the run was not granted never runs; the model reads why, as
    the tool's output, and the SDK's run goes on to an answer."""
    shop = Shop()
    model = Stub(
        [call("close_account", '{"customer": "ana@example.com"}', "c1")], [reply("cannot")]
    )
    agent, run, gate = gated(shop, model, tmp_path)
    result = run_sdk(agent, "close ana's account")
    assert result.final_output == "cannot"
    assert shop.runs == {}
    [output] = model.outputs
    assert output.startswith("Rejected at the authorize stage")
    assert "write:accounts" in output
    assert states(gate.ledger, run.id) == {"close_account": ["rejected"]}


def test_an_approval_pauses_the_call_and_the_approved_call_runs_once(tmp_path: Path) -> None:
    """A refund above the policy's bound waits for a person (the model is told, nothing
    runs); once approved, the model's next proposal of the same refund runs, once; a third
    proposal with the same idempotency key replays the recorded outcome (no new request,
    the refund does not run again)."""
    shop = Shop()
    model = Stub(
        [call("refund", REFUND_80, "c1")],
        [reply("a person must approve")],
        [call("refund", REFUND_80, "c2")],
        [reply("refunded")],
        [call("refund", REFUND_80, "c3")],
        [reply("already done")],
    )
    agent, run, gate = gated(shop, model, tmp_path)
    first = run_sdk(agent, "refund 80 on o-1")
    assert first.final_output == "a person must approve"
    [waiting] = model.outputs
    assert "needs a person's approval" in waiting
    assert shop.refunds == []
    [approval] = run.pending_approvals
    gate.approvals.approve(approval, by="lead@shop")
    second = run_sdk(agent, "approved: go on")
    assert second.final_output == "refunded"
    assert model.outputs == ["refunded 80.00 USD on o-1"]
    run_sdk(agent, "once more")
    assert shop.refunds == [("o-1", 80.0)]
    assert model.outputs[-1].startswith("[callgate: this idempotency key already ran")
    assert states(gate.ledger, run.id)["refund"] == ["pending", "ok", "ok"]


def test_an_unknown_outcome_is_not_run_again(tmp_path: Path) -> None:
    """A charge whose outcome is unknown is attempted once; the model is told not to repeat
    it, and when it does, the recorded outcome comes back without the charge running."""
    shop = Shop()
    model = Stub(
        [call("charge", CHARGE_5, "c1")],
        [call("charge", CHARGE_5, "c2")],
        [reply("unsure")],
    )
    agent, run, gate = gated(shop, model, tmp_path)
    result = run_sdk(agent, "charge 5")
    assert result.final_output == "unsure"
    assert shop.runs == {"charge": 1}
    first, replayed = model.outputs
    assert "outcome is unknown" in first
    assert "already ran" in replayed
    assert "outcome is unknown" in replayed
    assert states(gate.ledger, run.id) == {"charge": ["unknown", "unknown"]}
    attempts = {
        r.call_id: len(gate.ledger.attempts(run.id, r.call_id)) for r in gate.ledger.calls()
    }
    assert attempts == {"c1": 1, "c2": 0}  # the replay made no attempt


def test_tools_callgate_cannot_run_are_refused_where_the_agent_is_gated() -> None:
    """A hosted tool (the provider runs it) would bypass the gate: building the registry or
    gating the agent raises DefinitionError naming it; so does a contract for no tool. A
    gated tool drops the SDK's own needs_approval: callgate's policy decides."""
    shop = Shop()
    agent = Agent(name="a", tools=[WebSearchTool()])
    with pytest.raises(DefinitionError, match="WebSearchTool"):
        openai_agents.registry(agent.tools)
    tools = [function_tool(f) for f in shop.functions().values()]
    with pytest.raises(DefinitionError, match="refnud"):
        openai_agents.registry(tools, {"refnud": {"effects": "x:y"}})
    gate = Gate(openai_agents.registry(tools[:1]), policy=POLICY)
    run = gate.run(authority=AUTHORITY)
    with pytest.raises(DefinitionError, match="bypass the gate"):
        openai_agents.gate_agent(agent, run)
    with pytest.raises(DefinitionError, match="no tool 'refund'"):
        openai_agents.gate_tool(tools[1], run)
    asking = function_tool(shop.functions()["get_order"], needs_approval=True)
    run = Gate(openai_agents.registry([asking]), policy=POLICY).run(authority=AUTHORITY)
    assert openai_agents.gate_tool(asking, run).needs_approval is False  # callgate decides


def test_run_resume_runs_an_approved_call_without_the_model(tmp_path: Path) -> None:
    """An approved call can also be run by run.resume(), outside the SDK's loop: the
    original tool runs once with a context of its own."""
    shop = Shop()
    model = Stub([call("refund", REFUND_80, "c1")], [reply("waiting")])
    agent, run, gate = gated(shop, model, tmp_path)
    run_sdk(agent, "refund 80 on o-1")
    [approval_id] = run.pending_approvals
    gate.approvals.approve(approval_id, by="lead@shop")
    [observation] = run.resume()
    assert observation.status.value == "ok"
    assert observation.content == "refunded 80.00 USD on o-1"
    assert shop.refunds == [("o-1", 80.0)]
    assert states(gate.ledger, run.id) == {"refund": ["ok"]}


def a_sku(value: str) -> str:
    """A SKU's own check, which no JSON schema shows."""
    if not value.startswith("SKU-"):
        raise ValueError("not a SKU")
    return value


def test_input_the_sdk_refuses_before_the_function_starts_is_an_error_not_unknown(
    tmp_path: Path,
) -> None:
    """A check the JSON schema cannot show (a Pydantic ``AfterValidator`` on an argument):
    the SDK refuses the input before the function starts (``ModelBehaviorError``), so
    nothing ran. It was recorded unknown, and the model told the effect may have happened
    and not to repeat the call; it is a known failure (``error``), and a valid call runs."""
    ran: list[str] = []

    @function_tool(failure_error_function=None)
    def stock(sku: Annotated[str, AfterValidator(a_sku)]) -> str:
        """Units in stock."""
        ran.append(sku)
        return "3 left"

    model = Stub(
        [call("stock", '{"sku": "x"}', "c1")],
        [call("stock", '{"sku": "SKU-1"}', "c2")],
        [reply("3 left")],
    )
    agent: Agent[Any] = Agent(name="shop", tools=[stock], model=model)
    gate = Gate(
        openai_agents.registry(agent.tools),
        policy=Policy([allow("stock")]),
        ledger=ledger(tmp_path),
    )
    run = gate.run(authority=Authority(principal="p", grants=["call:stock"]))
    run_sdk(openai_agents.gate_agent(agent, run), "stock of x?")
    assert ran == ["SKU-1"]
    assert states(gate.ledger, run.id) == {"stock": ["error", "ok"]}
    refused, answered = model.outputs
    assert "may have happened" not in refused
    assert "did not start" in refused
    assert answered == "3 left"

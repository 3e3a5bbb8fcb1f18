"""PydanticAI's own agent loop with a `GatedToolset`: ``FunctionModel`` proposes the calls,
PydanticAI runs them through callgate, approvals pause the run the PydanticAI way
(``DeferredToolRequests``), and the ledger records every decision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, FunctionToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from callgate import DefinitionError, Gate, Policy, allow
from callgate.integrations.pydantic_ai import GatedToolset, registry

from .support import AUTHORITY, CHARGE_5, CONTRACTS, POLICY, REFUND_80, Shop, ledger, states


class Script:
    """A ``FunctionModel`` function answering from a script of response parts; the tool
    returns it was sent are kept for the test to read."""

    def __init__(self, *turns: list[Any]) -> None:
        self.turns = list(turns)
        self.returns: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        self.returns += [str(p.content) for p in last.parts if isinstance(p, ToolReturnPart)]
        return ModelResponse(parts=self.turns.pop(0))


def call(name: str, arguments: str, call_id: str) -> ToolCallPart:
    return ToolCallPart(tool_name=name, args=arguments, tool_call_id=call_id)


def gated(shop: Shop, script: Script, tmp_path: Path) -> tuple[Agent[None, Any], Any, Gate]:
    toolset = FunctionToolset(list(shop.functions().values()))
    gate = Gate(registry(toolset, CONTRACTS), policy=POLICY, ledger=ledger(tmp_path))
    run = gate.run(authority=AUTHORITY, run_id="run-pai")
    agent: Agent[None, Any] = Agent(
        FunctionModel(script),
        toolsets=[GatedToolset(toolset, run=run)],
        output_type=[str, DeferredToolRequests],
    )
    return agent, run, gate


def run_agent(agent: Agent[None, Any], *args: Any, **kwargs: Any) -> Any:
    async def go() -> Any:
        return await agent.run(*args, **kwargs)

    return anyio.run(go)


def test_a_granted_call_runs_and_the_model_reads_its_result(tmp_path: Path) -> None:
    """PydanticAI's loop runs a granted read through the gate; the ledger records it ok."""
    shop = Shop()
    script = Script([call("get_order", '{"order_id": "o-1"}', "c1")], [TextPart("shipped")])
    agent, run, gate = gated(shop, script, tmp_path)
    result = run_agent(agent, "where is o-1?")
    assert result.output == "shipped"
    assert script.returns == ["order o-1: shipped, total 80.00 USD"]
    assert shop.runs == {"get_order": 1}
    assert states(gate.ledger, run.id) == {"get_order": ["ok"]}


def test_an_ungranted_call_is_refused_as_the_tools_return(tmp_path: Path) -> None:
    """A call needing an effect the run lacks never runs; the model reads the policy's
    refusal as the tool's return, and the run goes on."""
    shop = Shop()
    script = Script(
        [call("close_account", '{"customer": "ana@example.com"}', "c1")], [TextPart("cannot")]
    )
    agent, run, gate = gated(shop, script, tmp_path)
    assert run_agent(agent, "close ana's account").output == "cannot"
    assert shop.runs == {}
    [refusal] = script.returns
    assert refusal.startswith("Rejected at the authorize stage")
    assert states(gate.ledger, run.id) == {"close_account": ["rejected"]}


def test_an_approval_pauses_the_run_and_resuming_runs_the_call_once(tmp_path: Path) -> None:
    """A refund above the bound ends the run with DeferredToolRequests carrying callgate's
    approval id; resumed before a person decides, the model reads that it still waits;
    approved in callgate and resumed, the refund runs once."""
    shop = Shop()
    script = Script(
        [call("refund", REFUND_80, "c1")],
        [TextPart("still waiting")],
        [TextPart("refunded")],
    )
    agent, run, gate = gated(shop, script, tmp_path)
    paused = run_agent(agent, "refund 80 on o-1")
    requests = paused.output
    assert isinstance(requests, DeferredToolRequests)
    [part] = requests.approvals
    assert part.tool_call_id == "c1"
    [approval_id] = run.pending_approvals
    assert requests.metadata["c1"]["approval_id"] == approval_id
    assert shop.refunds == []
    approved_in_pydantic_only = DeferredToolResults(approvals={"c1": True})
    early = run_agent(
        agent,
        message_history=paused.all_messages(),
        deferred_tool_results=approved_in_pydantic_only,
    )
    assert early.output == "still waiting"
    assert "needs a person's approval" in script.returns[-1]
    assert shop.refunds == []
    gate.approvals.approve(approval_id, by="lead@shop")
    done = run_agent(
        agent,
        message_history=paused.all_messages(),
        deferred_tool_results=approved_in_pydantic_only,
    )
    assert done.output == "refunded"
    assert script.returns[-1] == "refunded 80.00 USD on o-1"
    assert shop.refunds == [("o-1", 80.0)]
    assert states(gate.ledger, run.id)["refund"] == ["ok"]


def test_an_unknown_outcome_is_not_run_again(tmp_path: Path) -> None:
    """A charge whose outcome is unknown is attempted once and is not a retry prompt; the
    model's repeat gets the recorded outcome back without the charge running."""
    shop = Shop()
    script = Script(
        [call("charge", CHARGE_5, "c1")], [call("charge", CHARGE_5, "c2")], [TextPart("unsure")]
    )
    agent, run, gate = gated(shop, script, tmp_path)
    assert run_agent(agent, "charge 5").output == "unsure"
    assert shop.runs == {"charge": 1}
    first, replayed = script.returns
    assert "outcome is unknown" in first
    assert "already ran" in replayed
    attempts = {
        r.call_id: len(gate.ledger.attempts(run.id, r.call_id)) for r in gate.ledger.calls()
    }
    assert attempts == {"c1": 1, "c2": 0}
    assert states(gate.ledger, run.id) == {"charge": ["unknown", "unknown"]}


def test_a_toolset_the_gate_does_not_hold_is_refused() -> None:
    """Wrapping a toolset whose tools the run's gate lacks raises DefinitionError naming the
    tool; so does GatedToolset without a run."""
    shop = Shop()
    functions = list(shop.functions().values())
    gate = Gate(registry(FunctionToolset(functions[:1])), policy=POLICY)
    run = gate.run(authority=AUTHORITY)
    with pytest.raises(DefinitionError, match="no tool 'refund'"):
        GatedToolset(FunctionToolset(functions), run=run)
    with pytest.raises(DefinitionError, match="needs run="):
        GatedToolset(FunctionToolset(functions))


def test_run_resume_outside_the_agent_run_does_nothing_and_says_so(tmp_path: Path) -> None:
    """A waiting call released by run.resume() (outside PydanticAI's run) cannot reach its
    tool: the outcome is a known failure (error: nothing happened), never unknown."""
    shop = Shop()
    agent, run, gate = gated(shop, Script([call("refund", REFUND_80, "c1")]), tmp_path)
    run_agent(agent, "refund 80 on o-1")
    [approval_id] = run.pending_approvals
    gate.approvals.approve(approval_id, by="lead@shop")
    [observation] = run.resume()
    assert observation.status.value == "error"
    assert "DeferredToolResults" in observation.content
    assert shop.refunds == []


def test_a_model_retry_from_the_tool_is_a_known_failure(tmp_path: Path) -> None:
    """A tool raising PydanticAI's ModelRetry ("nothing happened, try otherwise") is
    callgate's error: the model reads the tool's message, and PydanticAI does not retry it."""
    from pydantic_ai import ModelRetry

    attempts: list[str] = []

    def lookup(order_id: str) -> str:
        """Look up an order."""
        attempts.append(order_id)
        raise ModelRetry(f"no order {order_id}; list the orders first")

    toolset = FunctionToolset([lookup])
    gate = Gate(
        registry(toolset, {"lookup": {"effects": "read:orders"}}),
        policy=Policy([allow("lookup")]),
        ledger=ledger(tmp_path),
    )
    run = gate.run(authority=AUTHORITY, run_id="run-retry")
    script = Script([call("lookup", '{"order_id": "o-404"}', "c1")], [TextPart("not found")])
    agent: Agent[None, Any] = Agent(
        FunctionModel(script), toolsets=[GatedToolset(toolset, run=run)]
    )
    assert run_agent(agent, "find o-404").output == "not found"
    assert attempts == ["o-404"]
    [said] = script.returns
    assert "no order o-404" in said
    assert states(gate.ledger, run.id) == {"lookup": ["error"]}

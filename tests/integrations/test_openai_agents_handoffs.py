"""An Agents SDK agent's handoffs are gated with it: a model (or an instruction injected into
it) cannot hand the conversation to another agent whose tools would run past the gate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import Agent, function_tool, handoff

from callgate import DefinitionError, Gate, Policy, Status, ToolCall, allow, ask
from callgate.integrations import openai_agents

from .support import AUTHORITY, CONTRACTS, POLICY, REFUND_80, Shop, ledger, states
from .test_openai_agents import Stub, call, reply, run_sdk


def _agents(shop: Shop, model: Stub, *, wrap: bool) -> tuple[Agent[Any], list[Any]]:
    """A triage agent with no tool of its own that hands off to a refunds agent (directly,
    or through the SDK's ``handoff()``), which hands back to triage (a cycle)."""
    tools = [function_tool(f, failure_error_function=None) for f in shop.functions().values()]
    refunds = Agent(name="refunds", model=model, tools=tools)
    triage = Agent(name="triage", model=model, handoffs=[handoff(refunds) if wrap else refunds])
    refunds.handoffs = [triage]
    return triage, tools


@pytest.mark.parametrize("wrap", [False, True])
def test_a_handoff_agents_tools_go_through_the_run(tmp_path: Path, wrap: bool) -> None:
    """After a handoff, the other agent's refund above the bound waits for a person and its
    ungranted close_account is refused: neither runs, both are in the ledger."""
    shop = Shop()
    model = Stub(
        [call("transfer_to_refunds", "{}", "h1")],
        [
            call("refund", REFUND_80, "c1"),
            call("close_account", '{"customer": "a@b.example"}', "c2"),
        ],
        [reply("done")],
    )
    triage, tools = _agents(shop, model, wrap=wrap)
    gate = Gate(openai_agents.registry(tools, CONTRACTS), policy=POLICY, ledger=ledger(tmp_path))
    run = gate.run(authority=AUTHORITY, run_id="run-h")
    result = run_sdk(openai_agents.gate_agent(triage, run), "refund 80 on o-1")
    assert result.final_output == "done"
    assert shop.runs == {}
    assert states(gate.ledger, run.id) == {"refund": ["pending"], "close_account": ["rejected"]}


def test_a_handoff_agent_with_a_tool_the_gate_lacks_is_refused() -> None:
    """Gating an agent whose handoff target has a tool outside the run's registry raises
    DefinitionError naming that tool, as for the agent's own tools."""
    shop = Shop()
    triage, tools = _agents(shop, Stub(), wrap=False)
    gate = Gate(openai_agents.registry(tools[:1], {}), policy=POLICY)
    run = gate.run(authority=AUTHORITY)
    with pytest.raises(DefinitionError, match="no tool 'refund'"):
        openai_agents.gate_agent(triage, run)


def _with_agent_tool(shop: Shop, inner_model: Stub, outer_model: Stub) -> tuple[Any, Any, Any]:
    """A refunds agent (the shop's tools) and the registry of its tools plus an agent tool."""
    tools = [function_tool(f, failure_error_function=None) for f in shop.functions().values()]
    inner = Agent(name="refunds", model=inner_model, tools=tools)
    probe = inner.as_tool("ask_refunds", "Ask the refunds agent.")
    contracts = {**CONTRACTS, "ask_refunds": {"effects": "read:orders", "risk": "read"}}
    policy = Policy(
        [
            allow("get_order"),
            allow("ask_refunds"),
            allow("refund", when=lambda a: a["amount"] <= 50),
            ask("refund", when=lambda a: a["amount"] > 50),
            allow("close_account"),
        ]
    )
    gate = Gate(openai_agents.registry([*tools, probe], contracts), policy=policy)
    return inner, gate, outer_model


def test_an_agent_tool_whose_agent_is_not_gated_is_refused() -> None:
    """An agent used as a tool runs its own tools inside the call: gating an agent that has
    such a tool built from an ungated agent raises DefinitionError saying how to gate it."""
    inner, gate, _ = _with_agent_tool(Shop(), Stub(), Stub())
    run = gate.run(authority=AUTHORITY)
    outer = Agent(name="front", tools=[inner.as_tool("ask_refunds", "Ask the refunds agent.")])
    with pytest.raises(DefinitionError, match="gate_agent"):
        openai_agents.gate_agent(outer, run)


def test_an_agent_tool_made_from_a_gated_agent_gates_its_calls(tmp_path: Path) -> None:
    """An agent tool built from gate_agent(inner, run) is accepted, and the inner agent's
    refund above the bound waits and its ungranted close_account is refused."""
    shop = Shop()
    inner_model = Stub(
        [
            call("refund", REFUND_80, "i1"),
            call("close_account", '{"customer": "a@b.example"}', "i2"),
        ],
        [reply("inner done")],
    )
    outer_model = Stub([call("ask_refunds", '{"input": "refund 80 on o-1"}', "o1")], [reply("ok")])
    inner, gate, _ = _with_agent_tool(shop, inner_model, outer_model)
    gate = Gate(gate.registry, policy=gate.policy, ledger=ledger(tmp_path))
    run = gate.run(authority=AUTHORITY, run_id="run-at")
    probe = openai_agents.gate_agent(inner, run).as_tool("ask_refunds", "Ask the refunds agent.")
    outer = openai_agents.gate_agent(Agent(name="front", model=outer_model, tools=[probe]), run)
    assert run_sdk(outer, "refund 80 on o-1").final_output == "ok"
    assert shop.runs == {}
    assert states(gate.ledger, run.id) == {
        "ask_refunds": ["ok"],
        "refund": ["pending"],
        "close_account": ["rejected"],
    }


def test_an_agent_tool_submitted_outside_its_gated_agent_does_nothing() -> None:
    """Submitted to the run directly (as run.resume() does), an agent tool is a known failure
    saying how to run it; the inner agent is never started, so none of its tools run."""
    shop = Shop()
    inner_model = Stub([call("close_account", '{"customer": "a@b.example"}', "i1")])
    _, gate, _ = _with_agent_tool(shop, inner_model, Stub())
    run = gate.run(authority=AUTHORITY)
    [obs] = run.submit([ToolCall(id="x", name="ask_refunds", arguments='{"input": "close"}')])
    assert obs.status is Status.ERROR
    assert "gate_agent(agent, run).as_tool" in obs.content
    assert shop.runs == {}
    assert len(inner_model.turns) == 1

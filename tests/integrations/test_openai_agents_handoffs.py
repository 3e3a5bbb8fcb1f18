"""An Agents SDK agent's handoffs are gated with it: a model (or an instruction injected into
it) cannot hand the conversation to another agent whose tools would run past the gate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import Agent, function_tool, handoff

from callgate import DefinitionError, Gate
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

"""Argument text from a model is hostile: whatever a framework hands an adapter, the call is
answered (never an exception out of the tool), and the tool runs only on arguments that
validate against its schema (hypothesis)."""

from __future__ import annotations

import json
import math
from typing import Any

import anyio
import pytest
from agents import Agent, function_tool
from agents.mcp import MCPServerStdio
from agents.tool_context import ToolContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool

from callgate import DefinitionError, Gate, MemoryLedger, Policy, Registry, allow
from callgate.integrations import langchain, openai_agents

from .support import AUTHORITY, CONTRACTS, Shop

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
AMOUNT = st.integers(-20, 150) | st.floats(-50, 150) | st.floats(allow_nan=False) | JSON
SHAPED = st.fixed_dictionaries(
    {"order_id": st.text(max_size=8), "amount": AMOUNT, "operation_id": st.text(max_size=8)}
)
"""Refund arguments of the right shape, their amount within the grant or not, or not a number."""
ARGUMENT_TEXT = st.one_of(
    SHAPED.map(json.dumps),  # twice, and first: most examples should be near-valid
    SHAPED.map(json.dumps),
    st.fixed_dictionaries(
        {"order_id": JSON, "amount": JSON, "operation_id": JSON}, optional={"extra": JSON}
    ).map(json.dumps),
    st.text(max_size=60),
    JSON.map(json.dumps),
)
POLICY = Policy([allow("get_order"), allow("refund"), allow("charge"), allow("close_account")])


def _sdk() -> tuple[Shop, list[Any], Registry]:
    shop = Shop()
    tools = [function_tool(f, failure_error_function=None) for f in shop.functions().values()]
    return shop, tools, openai_agents.registry(tools, CONTRACTS)


def _langchain() -> tuple[Shop, list[Any], Registry]:
    shop = Shop()
    tools = [StructuredTool.from_function(f) for f in shop.functions().values()]
    return shop, tools, langchain.registry(tools, CONTRACTS)


SDK = _sdk()
LANGCHAIN = _langchain()
"""Each adapter's tools and registry, built once: the examples count the refund's runs."""
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def valid_refund(text: str) -> bool:
    """Whether ``text`` is arguments the refund tool's schema accepts (the oracle, written
    from the schema, not from callgate)."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    if not isinstance(value, dict) or set(value) != {"order_id", "amount", "operation_id"}:
        return False
    amount = value["amount"]
    return (
        isinstance(value["order_id"], str)
        and isinstance(value["operation_id"], str)
        and isinstance(amount, int | float)
        and not isinstance(amount, bool)
        and math.isfinite(amount)
    )


@SETTINGS
@given(text=ARGUMENT_TEXT)
def test_the_agents_sdk_adapter_answers_every_argument_text(text: str) -> None:
    """on_invoke_tool of a gated SDK tool returns text for any argument text, and the refund
    ran exactly when the text was valid refund arguments within the grant."""
    shop, tools, registry = SDK
    before = shop.runs.get("refund", 0)
    gate = Gate(registry, policy=POLICY, ledger=MemoryLedger())  # fresh keys per example
    refund = openai_agents.gate_tool(tools[1], gate.run(authority=AUTHORITY))
    context = ToolContext(None, tool_name="refund", tool_call_id="h1", tool_arguments=text)

    async def go() -> Any:
        return await refund.on_invoke_tool(context, text)

    output = anyio.run(go)
    assert isinstance(output, str)
    within = valid_refund(text) and 0 <= json.loads(text)["amount"] <= 100
    assert (shop.runs.get("refund", 0) == before + 1) is within


@SETTINGS
@given(arguments=SHAPED | SHAPED | st.dictionaries(st.text(max_size=10), JSON, max_size=4) | JSON)
def test_the_langchain_adapter_answers_every_tool_call(arguments: Any) -> None:
    """A gated LangChain tool answers any tool call's args with a ToolMessage under its id,
    and the refund ran exactly when the args were valid refund arguments within the grant."""
    shop, tools, registry = LANGCHAIN
    before = shop.runs.get("refund", 0)
    gate = Gate(registry, policy=POLICY, ledger=MemoryLedger())  # fresh keys per example
    [refund] = langchain.gate_tools(tools[1:2], gate.run(authority=AUTHORITY))
    call = {"name": "refund", "args": arguments, "id": "h1", "type": "tool_call"}
    message = refund.invoke(call)
    assert isinstance(message, ToolMessage)
    assert message.tool_call_id == "h1"
    text = json.dumps(arguments)
    within = valid_refund(text) and 0 <= arguments["amount"] <= 100
    assert (shop.runs.get("refund", 0) == before + 1) is within


def test_an_agent_with_mcp_servers_is_refused() -> None:
    """The SDK calls an MCP server's tools past gate_agent: an agent with MCP servers is
    refused with DefinitionError naming callgate's MCP proxy."""
    shop = Shop()
    tools = [function_tool(f) for f in shop.functions().values()]
    server = MCPServerStdio(params={"command": "true"}, name="files")
    agent = Agent(name="a", tools=tools, mcp_servers=[server])
    gate = Gate(openai_agents.registry(tools, CONTRACTS), policy=POLICY)
    with pytest.raises(DefinitionError, match="MCP proxy"):
        openai_agents.gate_agent(agent, gate.run(authority=AUTHORITY))

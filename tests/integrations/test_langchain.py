"""LangChain tools gated by callgate inside a LangGraph graph: LangChain's fake chat model
proposes the calls, LangGraph's ``ToolNode`` runs the `GatedTool`s, an approval pauses the
graph with ``interrupt`` and ``Command(resume=...)`` resumes it, and the ledger records every
decision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from callgate import Authority, DefinitionError, Gate, Policy, allow
from callgate.integrations.langchain import GatedTool, gate_tools, registry

from .support import AUTHORITY, CHARGE_5, CONTRACTS, POLICY, REFUND_80, Shop, ledger, states


def ai_call(name: str, arguments: str, call_id: str) -> AIMessage:
    import json

    return AIMessage(
        content="", tool_calls=[{"name": name, "args": json.loads(arguments), "id": call_id}]
    )


def tools_of(shop: Shop) -> list[BaseTool]:
    """The shop's functions as LangChain tools; get_order async, the rest sync."""
    functions = shop.functions()
    sync = [StructuredTool.from_function(f) for n, f in functions.items() if n != "get_order"]
    reader = functions["get_order"]

    async def get_order(order_id: str) -> str:
        return reader(order_id)  # type: ignore[operator,no-any-return]

    lookup = StructuredTool.from_function(
        coroutine=get_order, name="get_order", description=reader.__doc__ or ""
    )
    return [lookup, *sync]


def graph(shop: Shop, replies: list[BaseMessage], tmp_path: Path, **options: Any) -> Any:
    """model → ToolNode(gated tools) → model …, checkpointed in memory."""
    tools = tools_of(shop)
    gate = Gate(registry(tools, CONTRACTS), policy=POLICY, ledger=ledger(tmp_path))
    run = gate.run(authority=AUTHORITY, run_id="run-lg")
    model = FakeMessagesListChatModel(responses=replies)

    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(gate_tools(tools, run, **options)))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    compiled = builder.compile(checkpointer=InMemorySaver())
    return compiled, run, gate


CONFIG = {"configurable": {"thread_id": "t1"}}


def tool_messages(result: Any) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


def test_a_granted_call_runs_in_the_tool_node(tmp_path: Path) -> None:
    """The graph's ToolNode runs a granted (async) read through the gate: a success
    ToolMessage under the model's call id, and the ledger records it ok."""
    shop = Shop()
    replies: list[BaseMessage] = [
        ai_call("get_order", '{"order_id": "o-1"}', "c1"),
        AIMessage(content="shipped"),
    ]
    app, run, gate = graph(shop, replies, tmp_path)
    result = app.invoke({"messages": [HumanMessage("where is o-1?")]}, CONFIG)
    [message] = tool_messages(result)
    assert message.tool_call_id == "c1"
    assert message.status == "success"
    assert message.content == "order o-1: shipped, total 80.00 USD"
    assert result["messages"][-1].content == "shipped"
    assert states(gate.ledger, run.id) == {"get_order": ["ok"]}


def test_an_ungranted_call_is_refused_as_an_error_tool_message(tmp_path: Path) -> None:
    """A call needing an effect the run lacks never runs: an error ToolMessage with the
    policy's refusal, stage authorize in its artifact; the graph goes on to the answer."""
    shop = Shop()
    replies: list[BaseMessage] = [
        ai_call("close_account", '{"customer": "ana@example.com"}', "c1"),
        AIMessage(content="cannot"),
    ]
    app, run, gate = graph(shop, replies, tmp_path)
    result = app.invoke({"messages": [HumanMessage("close ana's account")]}, CONFIG)
    [message] = tool_messages(result)
    assert message.status == "error"
    assert str(message.content).startswith("Rejected at the authorize stage")
    assert message.artifact == {"status": "rejected", "stage": "authorize"}
    assert shop.runs == {}
    assert states(gate.ledger, run.id) == {"close_account": ["rejected"]}


def test_an_approval_interrupts_the_graph_and_resuming_runs_the_call_once(
    tmp_path: Path,
) -> None:
    """With pending="interrupt", a refund above the bound pauses the graph (the interrupt
    carries callgate's approval id) and nothing runs; approved in callgate, Command(resume=...)
    runs the tool node again and the refund runs once, under the model's call id."""
    shop = Shop()
    replies: list[BaseMessage] = [ai_call("refund", REFUND_80, "c1"), AIMessage(content="refunded")]
    app, run, gate = graph(shop, replies, tmp_path, pending="interrupt")
    paused = app.invoke({"messages": [HumanMessage("refund 80 on o-1")]}, CONFIG)
    [interrupt] = paused["__interrupt__"]
    [approval_id] = run.pending_approvals
    assert interrupt.value["approval_id"] == approval_id
    assert interrupt.value["tool_call_id"] == "c1"
    assert shop.refunds == []
    assert states(gate.ledger, run.id) == {"refund": ["pending"]}
    gate.approvals.approve(approval_id, by="lead@shop")
    done = app.invoke(Command(resume="approved"), CONFIG)
    [message] = tool_messages(done)
    assert message.tool_call_id == "c1"
    assert message.content == "refunded 80.00 USD on o-1"
    assert done["messages"][-1].content == "refunded"
    assert shop.refunds == [("o-1", 80.0)]
    assert states(gate.ledger, run.id) == {"refund": ["ok"]}


def test_a_graph_resumed_before_the_decision_stays_paused_until_denied(tmp_path: Path) -> None:
    """Resuming the graph while the approval is undecided runs nothing and pauses the graph
    again (the resume value approves nothing); once the reviewer denies, the next resume
    tells the model (an error ToolMessage, stage approve) and the graph goes on."""
    shop = Shop()
    replies: list[BaseMessage] = [ai_call("refund", REFUND_80, "c1"), AIMessage(content="denied")]
    app, run, gate = graph(shop, replies, tmp_path, pending="interrupt")
    paused = app.invoke({"messages": [HumanMessage("refund 80 on o-1")]}, CONFIG)
    undecided = app.invoke(Command(resume="go on"), CONFIG)
    assert "__interrupt__" in undecided
    assert tool_messages(undecided) == []
    [waiting] = paused["__interrupt__"]
    gate.approvals.deny(waiting.value["approval_id"], by="lead@shop", reason="too much")
    decided = app.invoke(Command(resume="go on"), CONFIG)
    [message] = tool_messages(decided)
    assert message.status == "error"
    assert message.artifact["stage"] == "approve"
    assert decided["messages"][-1].content == "denied"
    assert shop.refunds == []
    assert states(gate.ledger, run.id) == {"refund": ["rejected"]}


def test_an_unknown_outcome_is_not_run_again(tmp_path: Path) -> None:
    """A charge whose outcome is unknown is attempted once (an error ToolMessage saying so);
    the model's repeat gets the recorded outcome without the charge running."""
    shop = Shop()
    replies: list[BaseMessage] = [
        ai_call("charge", CHARGE_5, "c1"),
        ai_call("charge", CHARGE_5, "c2"),
        AIMessage(content="unsure"),
    ]
    app, run, gate = graph(shop, replies, tmp_path)
    result = app.invoke({"messages": [HumanMessage("charge 5")]}, CONFIG)
    first, replayed = tool_messages(result)
    assert first.status == "error"
    assert "outcome is unknown" in str(first.content)
    assert "already ran" in str(replayed.content)
    assert shop.runs == {"charge": 1}
    attempts = {
        r.call_id: len(gate.ledger.attempts(run.id, r.call_id)) for r in gate.ledger.calls()
    }
    assert attempts == {"c1": 1, "c2": 0}


def test_a_tool_exception_is_a_known_failure_and_ainvoke_works_alone(tmp_path: Path) -> None:
    """Outside a graph, ainvoke of a tool call answers under its id; a ToolException raised
    by the wrapped tool is callgate's error (nothing happened), not an unknown outcome."""

    def flaky(order_id: str) -> str:
        """Fails, knowing nothing happened."""
        raise ToolException("the order service refused: no such order")

    tool = StructuredTool.from_function(flaky)
    gate = Gate(
        registry([tool], {"flaky": {"effects": "read:orders"}}),
        policy=Policy([allow("flaky")]),
        ledger=ledger(tmp_path),
    )
    run = gate.run(authority=AUTHORITY)
    [gated] = gate_tools([tool], run)
    assert isinstance(gated, GatedTool)

    async def go() -> ToolMessage:
        call = {"name": "flaky", "args": {"order_id": "o-9"}, "id": "x1", "type": "tool_call"}
        return await gated.ainvoke(call)

    message = anyio.run(go)
    assert message.tool_call_id == "x1"
    assert message.artifact == {"status": "error", "stage": "execute"}
    assert "no such order" in str(message.content)


def test_tools_the_gate_does_not_hold_are_refused() -> None:
    """Gating a tool the run's gate lacks, or a non-LangChain object, raises DefinitionError."""
    shop = Shop()
    tools = tools_of(shop)
    gate = Gate(registry(tools[:1]), policy=POLICY)
    run = gate.run(authority=AUTHORITY)
    with pytest.raises(DefinitionError, match="no tool 'refund'"):
        gate_tools(tools, run)
    with pytest.raises(DefinitionError, match="LangChain tools"):
        registry([shop.functions()["refund"]])  # type: ignore[list-item]
    with pytest.raises(DefinitionError, match="pending must be"):
        gate_tools(tools[:1], run, pending="wait")  # type: ignore[arg-type]


def test_a_tool_given_no_contract_needs_its_default_effect(tmp_path: Path) -> None:
    """A tool adapted without a contract needs the effect call:<tool>: refused without that
    grant (nothing runs), run with it."""
    shop = Shop()
    tools = tools_of(shop)[:1]  # get_order, no contract
    gate = Gate(registry(tools), policy=Policy([allow("get_order")]), ledger=ledger(tmp_path))
    call = {"name": "get_order", "args": {"order_id": "o-1"}, "id": "n1", "type": "tool_call"}

    async def go(grants: list[str]) -> ToolMessage:
        run = gate.run(authority=Authority(principal="bot", grants=grants))
        [tool] = gate_tools(tools, run)
        return await tool.ainvoke(call)

    refused = anyio.run(go, ["read:orders"])
    assert refused.artifact == {"status": "rejected", "stage": "authorize"}
    assert "call:get_order" in str(refused.content)
    assert shop.runs == {}
    allowed = anyio.run(go, ["call:get_order"])
    assert allowed.status == "success"
    assert shop.runs == {"get_order": 1}


def test_a_gated_tool_is_shown_to_a_model_as_the_original() -> None:
    """bind_tools sees the same definition (name, description, parameters) for the gated
    tool as for the original, for the sync and the async tools."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    tools = tools_of(Shop())
    gate = Gate(registry(tools, CONTRACTS), policy=POLICY)
    gated_tools = gate_tools(tools, gate.run(authority=AUTHORITY))
    for original, gated in zip(tools, gated_tools, strict=True):
        assert convert_to_openai_tool(gated) == convert_to_openai_tool(original)

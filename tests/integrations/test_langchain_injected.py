"""LangChain tools with arguments LangGraph injects (``InjectedToolCallId``,
``InjectedState``) run through the gate as they run in a bare ``ToolNode``: the injected
values pass through, unvalidated by the model's schema, and the call is never recorded
``unknown`` for a tool that did not run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, ToolNode, tools_condition
from langgraph.types import Command, interrupt

from callgate import Authority, Gate, Policy, allow
from callgate.integrations.langchain import gate_tools, registry

from .support import ledger, states
from .test_langchain import tool_messages


def _tools(seen: dict[str, Any]) -> list[BaseTool]:
    @tool
    def note(text: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Write a note."""
        seen["note"] = (text, tool_call_id)
        return f"noted {text}"

    @tool
    def count(word: str, state: Annotated[dict[str, Any], InjectedState]) -> str:
        """Count the messages so far."""
        seen["count"] = (word, len(state["messages"]))
        return f"{word}: {len(state['messages'])} messages"

    return [note, count]


def _graph(tools: list[BaseTool], node_tools: list[BaseTool], replies: list[BaseMessage]) -> Any:
    model = FakeMessagesListChatModel(responses=replies)

    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(node_tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=InMemorySaver())


def _replies(name: str, args: dict[str, Any]) -> list[BaseMessage]:
    return [
        AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "call_7"}]),
        AIMessage(content="done"),
    ]


CASES = [
    ("note", {"text": "hi"}, ("hi", "call_7"), "noted hi"),
    ("count", {"word": "so far"}, ("so far", 2), "so far: 2 messages"),
]


@pytest.mark.parametrize(("name", "args", "received", "answer"), CASES)
def test_a_bare_tool_node_runs_tools_with_injected_arguments(
    name: str, args: dict[str, Any], received: tuple[Any, ...], answer: str
) -> None:
    """The baseline: LangGraph's ToolNode injects the call id or the state and runs it."""
    seen: dict[str, Any] = {}
    tools = _tools(seen)
    app = _graph(tools, tools, _replies(name, args))
    result = app.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    assert seen == {name: received}
    assert [m.content for m in tool_messages(result)] == [answer]


@pytest.mark.parametrize(("name", "args", "received", "answer"), CASES)
def test_a_gated_tool_gets_its_injected_arguments_and_runs_once(
    tmp_path: Path, name: str, args: dict[str, Any], received: tuple[Any, ...], answer: str
) -> None:
    """Gated, the same call is validated on the model's arguments only, runs once with the
    injected call id or state, and is recorded ok (it was recorded unknown, the tool never
    having run, or rejected at the validate stage)."""
    seen: dict[str, Any] = {}
    tools = _tools(seen)
    gate = Gate(
        registry(tools),
        policy=Policy([allow("note"), allow("count")]),
        ledger=ledger(tmp_path),
    )
    run = gate.run(authority=Authority(principal="p", grants=["call:note", "call:count"]))
    app = _graph(tools, list(gate_tools(tools, run)), _replies(name, args))
    result = app.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    assert seen == {name: received}
    [message] = tool_messages(result)
    assert (message.content, message.status) == (answer, "success")
    assert states(gate.ledger, run.id) == {name: ["ok"]}


def test_a_call_langchain_refuses_before_the_tool_starts_is_an_error_not_unknown(
    tmp_path: Path,
) -> None:
    """A check of the tool's own args_schema that the JSON schema cannot show (a Pydantic
    validator) refuses the input inside LangChain before the function starts: the call is
    recorded error (nothing ran, the model may try otherwise), not unknown."""
    from langchain_core.tools import StructuredTool
    from pydantic import BaseModel, field_validator

    class Args(BaseModel):
        sku: str

        @field_validator("sku")
        @classmethod
        def known(cls, value: str) -> str:
            if not value.startswith("SKU-"):
                raise ValueError("not a SKU")
            return value

    ran: list[str] = []
    stock = StructuredTool.from_function(
        lambda sku: ran.append(sku) or "3 left",
        name="stock",
        description="Stock.",
        args_schema=Args,
    )
    gate = Gate(registry([stock]), policy=Policy([allow("stock")]), ledger=ledger(tmp_path))
    run = gate.run(authority=Authority(principal="p", grants=["call:stock"]))
    [gated] = gate_tools([stock], run)
    bad = gated.invoke({"type": "tool_call", "name": "stock", "id": "c1", "args": {"sku": "x"}})
    good = gated.invoke(
        {"type": "tool_call", "name": "stock", "id": "c2", "args": {"sku": "SKU-1"}}
    )
    assert (bad.artifact["status"], good.artifact["status"]) == ("error", "ok")
    assert ran == ["SKU-1"]
    assert states(gate.ledger, run.id) == {"stock": ["error", "ok"]}


class _TopicState(MessagesState):
    topic: str


def _topic_tool(seen: dict[str, Any]) -> BaseTool:
    @tool
    def set_topic(topic: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
        """Set the conversation's topic."""
        seen["set_topic"] = topic
        message = ToolMessage(f"topic is {topic}", tool_call_id=tool_call_id)
        return Command(update={"messages": [message], "topic": topic})

    return set_topic


def _topic_graph(node_tools: list[BaseTool]) -> Any:
    model = FakeMessagesListChatModel(responses=_replies("set_topic", {"topic": "billing"}))

    def agent(state: _TopicState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(_TopicState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(node_tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=InMemorySaver())


def test_a_tool_returning_a_command_updates_the_graph_gated_as_bare(tmp_path: Path) -> None:
    """A tool that returns LangGraph's ``Command(update=...)`` (the common way a tool writes
    graph state): bare, ToolNode applies it; gated, the call is recorded ok and the same
    Command reaches ToolNode (it was dropped: the state kept no topic and the model read
    the Command's JSON dump)."""
    seen: dict[str, Any] = {}
    bare = _topic_graph([_topic_tool(seen)])
    result = bare.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    assert (seen, result["topic"]) == ({"set_topic": "billing"}, "billing")
    seen = {}
    tools = [_topic_tool(seen)]
    gate = Gate(registry(tools), policy=Policy([allow("set_topic")]), ledger=ledger(tmp_path))
    run = gate.run(authority=Authority(principal="p", grants=["call:set_topic"]))
    app = _topic_graph(list(gate_tools(tools, run)))
    result = app.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    assert (seen, result.get("topic")) == ({"set_topic": "billing"}, "billing")
    [message] = tool_messages(result)
    assert (message.content, message.tool_call_id) == ("topic is billing", "call_7")
    assert states(gate.ledger, run.id) == {"set_topic": ["ok"]}


def test_a_denied_command_tool_changes_no_state(tmp_path: Path) -> None:
    """Refused by the policy, a Command-returning tool never runs: the state keeps no topic
    and the model reads callgate's refusal."""
    seen: dict[str, Any] = {}
    tools = [_topic_tool(seen)]
    gate = Gate(registry(tools), policy=Policy([]), ledger=ledger(tmp_path))
    run = gate.run(authority=Authority(principal="p", grants=[]))
    app = _topic_graph(list(gate_tools(tools, run)))
    result = app.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    assert (seen, result.get("topic")) == ({}, None)
    [message] = tool_messages(result)
    assert message.status == "error"
    assert message.artifact["status"] == "rejected"


def _wire_tool(ran: list[tuple[float, Any]]) -> BaseTool:
    @tool
    def wire(amount: float) -> str:
        """Wire money, once the user confirms."""
        answer = interrupt({"confirm": amount})
        ran.append((amount, answer))
        return f"wired {amount}" if answer == "yes" else "cancelled"

    return wire


def test_a_tool_that_interrupts_the_graph_pauses_it_gated_as_bare(tmp_path: Path) -> None:
    """A tool calling LangGraph's ``interrupt()`` itself (human in the loop inside the
    tool): bare, the graph pauses and the resumed tool gets the answer. Gated it was
    recorded unknown and the graph never paused (the model told the effect may have
    happened); now the graph pauses (the call recorded error, nothing done), and on resume
    the same call is submitted again, decided by the policy, and runs once."""
    thread = {"configurable": {"thread_id": "t"}}
    ran: list[tuple[float, Any]] = []
    bare = _graph([], [_wire_tool(ran)], _replies("wire", {"amount": 5}))
    assert bare.invoke({"messages": [HumanMessage("go")]}, thread).get("__interrupt__")
    bare.invoke(Command(resume="yes"), thread)
    assert ran == [(5.0, "yes")]
    ran = []
    tools = [_wire_tool(ran)]
    gate = Gate(registry(tools), policy=Policy([allow("wire")]), ledger=ledger(tmp_path))
    run = gate.run(authority=Authority(principal="p", grants=["call:wire"]))
    app = _graph(tools, list(gate_tools(tools, run)), _replies("wire", {"amount": 5}))
    paused = app.invoke({"messages": [HumanMessage("go")]}, thread)
    [pause] = paused["__interrupt__"]
    assert pause.value == {"confirm": 5.0}
    assert ran == []
    assert tool_messages(paused) == []
    result = app.invoke(Command(resume="yes"), thread)
    assert ran == [(5.0, "yes")]
    [message] = tool_messages(result)
    assert (message.content, message.status) == ("wired 5.0", "success")
    assert states(gate.ledger, run.id) == {"wire": ["error", "ok"]}

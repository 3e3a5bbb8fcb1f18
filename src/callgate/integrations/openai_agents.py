"""The OpenAI Agents SDK under callgate: every function tool call goes through a callgate run.

```python
from agents import Agent, Runner, function_tool
from callgate import Authority, Gate, Policy, allow, ask
from callgate.integrations import openai_agents

@function_tool(failure_error_function=None)   # callgate classifies the failures
def refund(order_id: str, amount: float) -> str: ...

agent = Agent(name="support", tools=[refund])
registry = openai_agents.registry(agent.tools, {"refund": {"effects": "spend:USD={amount}"}})
gate = Gate(registry, policy=Policy([ask("refund")]))
run = gate.run(authority=Authority(principal="support", grants=["spend:USD<=100"]))
result = await Runner.run(openai_agents.gate_agent(agent, run), "refund o-1")
```

`registry` turns the agent's `FunctionTool`s into callgate tools (their own
JSON schema, the contract you give per tool); `gate_agent` returns a copy of
the agent whose tools' ``on_invoke_tool`` submits each call to the run and
returns the observation's text, which the SDK hands to the model as the
tool's output: a result, or callgate's message for a rejection, a failure,
an unknown outcome, or a call waiting for a person's approval. The SDK's own
loop, guardrails and tracing are unchanged. A waiting call runs once a
person approves it: when the model proposes it again (the approval covers
the exact call, under any call id), or through ``run.resume()``.

The original tool runs as callgate's handler with the SDK's `ToolContext`
of the call, its exceptions passed to callgate (the wrapped copy has no
failure formatter), so a `ToolFailure` is an ``error``, an `OutcomeUnknown`
or any other exception an ``unknown`` outcome that is never retried. A tool's
SDK ``timeout`` becomes its callgate contract's ``timeout`` (unless the contract
gives one): its expiry is an ``unknown`` outcome, not the SDK's "timed out".
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Iterable
from typing import Any

from agents import Agent, FunctionTool, Handoff, ModelBehaviorError
from agents.tool import set_function_tool_failure_error_function
from agents.tool_context import ToolContext
from pydantic import ValidationError

from callgate.errors import DefinitionError, ToolFailure
from callgate.gate import Run
from callgate.integrations.common import (
    Contracts,
    contract_for,
    frozen_arguments,
    submit_one,
)
from callgate.telemetry import agent_scope
from callgate.tools import Registry

__all__ = ["gate_agent", "gate_tool", "registry"]

_CONTEXT: contextvars.ContextVar[ToolContext[Any] | None] = contextvars.ContextVar(
    "callgate_openai_agents_context", default=None
)
"""The SDK's context of the call being run, for the original tool (callgate's handler)."""
_TOOL: contextvars.ContextVar[FunctionTool | None] = contextvars.ContextVar(
    "callgate_openai_agents_tool", default=None
)
"""The tool `gate_tool` wrapped, for the call being run: an agent tool made from a gated
agent runs as itself, not as the ungated copy the registry was built from."""
_RUN_MARK = "_callgate_run"
"""The attribute `gate_agent` sets on the agents and tools it makes: the run they go through."""
_SOURCE = "_callgate_source"
"""The attribute holding what an object was built from: on `registry`'s handlers and on the
tools `gate_tool` makes, the registered ``FunctionTool``; on `gate_agent`'s copies, the agent."""


def registry(tools: Iterable[Any], contracts: Contracts | None = None) -> Registry:
    """A callgate `Registry` of the SDK ``FunctionTool``s among ``tools`` (an agent's
    ``tools``), each with the contract ``contracts`` gives its name.

    Tools of other kinds (hosted tools such as web search, which the provider runs) cannot
    be gated and raise `DefinitionError`; give the agent only tools callgate can run.
    """
    tools = list(tools)
    for tool in tools:
        if not isinstance(tool, FunctionTool):
            raise DefinitionError(
                f"tool {getattr(tool, 'name', tool)!r} is a {type(tool).__name__}, not a "
                "FunctionTool: callgate cannot run it, so it would bypass the gate. Remove "
                "it from the agent, or wrap what it does in a function tool"
            )
    names = [t.name for t in tools]
    built = Registry()
    for tool in tools:
        contract = contract_for(tool.name, contracts, names)
        if tool.timeout_seconds is not None and contract.get("timeout") is None:
            # The SDK's timeout becomes callgate's: the gated copy has none (see gate_tool).
            contract["timeout"] = tool.timeout_seconds
        built.add_schema_tool(
            tool.name,
            tool.description or "",
            tool.params_json_schema,
            _handler(tool),
            **contract,
        )
    return built


def _handler(tool: FunctionTool) -> Any:
    """The original tool as callgate's handler: its SDK invoker, without the SDK's failure
    formatter (so callgate sees the exception), called with the SDK context of the call."""
    inner = dataclasses.replace(tool)
    set_function_tool_failure_error_function(inner, None)
    agent_tool = _is_agent_tool(tool)

    async def invoke(**arguments: Any) -> Any:
        chosen = inner
        current = _TOOL.get()
        if current is not None and _built_from(current, tool):
            chosen = dataclasses.replace(current)
            set_function_tool_failure_error_function(chosen, None)
        elif agent_tool:  # the registry's copy runs its agent's own tools past the gate
            raise ToolFailure(
                f"agent tool {tool.name!r} runs only through its gated agent "
                "(gate_agent(agent, run).as_tool(...)); nothing was done"
            )
        context = _CONTEXT.get()
        if context is None:  # called outside a gated invocation (tests, run.resume())
            context = ToolContext(
                None,
                tool_name=tool.name,
                tool_call_id="callgate",
                tool_arguments=frozen_arguments(arguments),
            )
        try:
            return await chosen.on_invoke_tool(context, frozen_arguments(arguments))
        except ModelBehaviorError as exc:
            if _refused_before_start(exc):  # nothing ran: a known failure, not unknown
                raise ToolFailure(
                    f"tool {tool.name!r} did not start: the SDK refused its input "
                    f"({_input_refusal(exc)}); nothing was done. Check each value against "
                    "the tool's description and propose the call again"
                ) from None
            raise

    invoke.__name__ = tool.name
    setattr(invoke, _SOURCE, tool)
    return invoke


def _refused_before_start(exc: BaseException) -> bool:
    """Whether the SDK raised ``exc`` checking a function tool's input, before the
    function started: the traceback's first SDK invocation frame
    (``_on_invoke_tool_impl``) called its argument preparation (``_prepare_arguments``),
    not the function. A refusal raised inside the function (a nested run of its own) has
    the function's frame there instead, and stays unknown."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "_on_invoke_tool_impl":
            following = tb.tb_next
            return following is not None and (
                following.tb_frame.f_code.co_name == "_prepare_arguments"
                and following.tb_frame.f_code.co_filename == tb.tb_frame.f_code.co_filename
            )
        tb = tb.tb_next
    return False


def _input_refusal(exc: ModelBehaviorError) -> str:
    """What the SDK's argument check said, for the model: the validation errors' messages
    (``ValueError`` texts of the tool's own validators), never the input itself."""
    cause = exc.__cause__
    if isinstance(cause, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in cause.errors())
    return "its own validators, which the JSON schema does not show, refused a value"


def _registered(tool: FunctionTool, run: Run) -> FunctionTool:
    """The ``FunctionTool`` the run's registry holds under ``tool``'s name, once ``tool`` is
    shown to be it (or a tool the adapter built from it); else `DefinitionError`.

    The gate decides by identity, never by name: an agent holding a *different* function
    under a registered name would otherwise run it under the registered tool's schema,
    contract and policy, and the ledger would record it as the registered tool."""
    spec = run.gate.registry.get(tool.name)
    if spec is None:
        raise DefinitionError(
            f"the run's gate has no tool {tool.name!r}: build the gate from "
            "callgate.integrations.openai_agents.registry(agent.tools, ...)"
        )
    source = getattr(spec.fn, _SOURCE, None)
    if not isinstance(source, FunctionTool) or not _built_from(tool, source):
        raise DefinitionError(
            f"tool {tool.name!r} is not the tool the run's gate registered under that name "
            "(a different FunctionTool object, so possibly a different function): callgate "
            "gates a tool by identity, never by name. Build the registry from the very tools "
            "every agent holds (handoff targets included), and give each function one name"
        )
    return source


def _built_from(tool: FunctionTool, source: FunctionTool) -> bool:
    """Whether ``tool`` is ``source``, a gated copy of it, or (for an agent used as a tool)
    the same agent's tool made from its gated copy (``gate_agent(agent, run).as_tool()``)."""
    if tool is source or getattr(tool, _SOURCE, None) is source:
        return True
    if _is_agent_tool(tool) and _is_agent_tool(source):
        agent = getattr(tool, "_agent_instance", None)
        original = getattr(source, "_agent_instance", None)
        return original is not None and getattr(agent, _SOURCE, None) is original
    return False


def gate_tool(tool: FunctionTool, run: Run) -> FunctionTool:
    """A copy of ``tool`` whose every call goes through ``run`` (its gate's registry must
    hold this very tool, not only one of its name: see `registry`); its output is the
    observation's text. A tool already gated through ``run`` is returned as it is."""
    marked = getattr(tool, _RUN_MARK, None)
    if marked is run:
        return tool
    if marked is not None:
        raise DefinitionError(
            f"tool {tool.name!r} is already gated through another run; gate the original "
            "tool, not the gated copy"
        )
    if _is_agent_tool(tool):
        agent = getattr(tool, "_agent_instance", None)
        if getattr(agent, _RUN_MARK, None) is not run:
            raise DefinitionError(
                f"tool {tool.name!r} is an agent used as a tool: it runs that agent's own "
                "tools inside the call, past the gate. Make it from the gated agent: "
                "openai_agents.gate_agent(agent, run).as_tool(...)"
            )
    source = _registered(tool, run)
    name = tool.name

    async def on_invoke_tool(context: ToolContext[Any], arguments: str) -> str:
        token = _CONTEXT.set(context)
        chosen = _TOOL.set(tool)
        try:
            with agent_scope(getattr(getattr(context, "agent", None), "name", None)):
                observation = await submit_one(run, context.tool_call_id, name, arguments)
        finally:
            _TOOL.reset(chosen)
            _CONTEXT.reset(token)
        return observation.content

    # No SDK timeout on the gated copy: the SDK would cancel callgate mid-call and tell the
    # model only "timed out", inviting a retry of an effect that may have happened. The
    # tool's timeout is its callgate contract's (`registry`), whose expiry is an unknown
    # outcome the model is told not to retry blindly.
    wrapped = dataclasses.replace(
        tool, on_invoke_tool=on_invoke_tool, needs_approval=False, timeout_seconds=None
    )
    set_function_tool_failure_error_function(wrapped, None)
    setattr(wrapped, _SOURCE, source)
    setattr(wrapped, _RUN_MARK, run)
    return wrapped


def gate_agent(agent: Agent[Any], run: Run) -> Agent[Any]:
    """A copy of ``agent`` whose function tools all go through ``run``. Any tool the
    gate cannot run raises `DefinitionError` (see `registry`), and so do MCP servers
    attached to the agent: the SDK would list and call their tools past the gate.

    Its handoffs are gated the same way, through ``run``, however deep (cycles
    included): the model chooses the handoff, so an injected instruction could
    otherwise hand the conversation to an agent whose tools run ungated. An agent
    behind an SDK ``handoff()`` is gated when the handoff hands it over, and at once
    when the handoff still knows it (so a tool the run's gate lacks raises here).

    An agent used as a tool (``Agent.as_tool``) runs that agent's tools inside the
    call: it is accepted only when made from an agent gated through the same run
    (``gate_agent(inner, run).as_tool(...)``), and then runs as that gated agent.
    """
    return _gated_agent(agent, run, {})


_Gated = dict[int, tuple[Agent[Any], Agent[Any]]]
"""Agents already gated in one `gate_agent` call, by ``id`` of the original: (it, its copy)."""


def _gated_agent(agent: object, run: Run, done: _Gated) -> Agent[Any]:
    known = done.get(id(agent))
    if known is not None:
        return known[1]
    if not isinstance(agent, Agent):
        raise DefinitionError(
            f"a handoff handed over a {type(agent).__name__}, not an Agent: callgate cannot "
            "gate its tools, so it is refused"
        )
    _refuse_run_time_tools(agent)
    if getattr(agent, "mcp_servers", None):
        raise DefinitionError(
            f"agent {agent.name!r} has MCP servers, whose tools the SDK would call past the "
            "gate; put callgate's MCP proxy (callgate mcp proxy) between the agent and the "
            "servers, or import their tools into the registry instead"
        )
    tools = []
    for tool in agent.tools:
        if not isinstance(tool, FunctionTool):
            raise DefinitionError(
                f"agent {agent.name!r} has tool {getattr(tool, 'name', tool)!r}, a "
                f"{type(tool).__name__} callgate cannot run: it would bypass the gate"
            )
        tools.append(gate_tool(tool, run))
    copy = agent.clone(tools=tools, handoffs=[])
    setattr(copy, _RUN_MARK, run)
    setattr(copy, _SOURCE, agent)
    done[id(agent)] = (agent, copy)
    copy.handoffs = [
        _gated_agent(h, run, done) if isinstance(h, Agent) else _gated_handoff(h, run, done)
        for h in agent.handoffs
    ]
    return copy


_TOOL_METHODS = ("get_all_tools", "get_mcp_tools", "clone")
"""The `Agent` methods through which an agent's tools reach the SDK's run loop."""


def _refuse_run_time_tools(agent: Agent[Any]) -> None:
    """Refuse an agent whose tools are not all in ``agent.tools`` when it is gated: a
    ``SandboxAgent`` (its capabilities add ``exec_command``, ``apply_patch``, file tools at
    run time, which the SDK runs on the sandbox, or the host, past the gate), or any
    subclass that changes how the SDK reads its tools."""
    capabilities = getattr(agent, "capabilities", None)
    if _is_sandbox_agent(agent) or capabilities:
        kinds = ", ".join(sorted({type(c).__name__ for c in capabilities or ()})) or "none"
        raise DefinitionError(
            f"agent {agent.name!r} is a {type(agent).__name__}: the SDK adds its capabilities' "
            f"tools ({kinds}: exec_command, apply_patch, file tools) at run time and runs them "
            "past the gate, so it is refused. Use a plain Agent, and give it function tools "
            "that do what the sandbox would (callgate's own sandbox runs commands under the gate)"
        )
    for method in _TOOL_METHODS:
        if getattr(type(agent), method) is not getattr(Agent, method):
            raise DefinitionError(
                f"agent {agent.name!r} is a {type(agent).__name__}, whose {method}() replaces "
                "the SDK's: tools it returns at run time would run past the gate, so it is "
                "refused; use a plain Agent"
            )


def _is_sandbox_agent(agent: object) -> bool:
    """Whether ``agent`` is the SDK's ``SandboxAgent`` (its module is imported only if the
    application already did: an agent cannot be one otherwise)."""
    import sys

    module = sys.modules.get("agents.sandbox.sandbox_agent")
    kind = getattr(module, "SandboxAgent", None)
    return isinstance(kind, type) and isinstance(agent, kind)


def _is_agent_tool(tool: FunctionTool) -> bool:
    """Whether the SDK made ``tool`` from an agent (``Agent.as_tool``)."""
    return bool(getattr(tool, "_is_agent_tool", False))


def _gated_handoff(target: Handoff[Any, Any], run: Run, done: _Gated) -> Handoff[Any, Any]:
    """A copy of an SDK ``Handoff`` that hands over the gated copy of its agent."""
    if not isinstance(target, Handoff):
        raise DefinitionError(
            f"handoff {target!r} is a {type(target).__name__}, neither an Agent nor a Handoff: "
            "callgate cannot gate what it hands over"
        )
    referenced = target._agent_ref() if target._agent_ref is not None else None
    if referenced is not None:
        _gated_agent(referenced, run, done)  # refuse a tool the gate lacks now, not mid-run
    hand_over = target.on_invoke_handoff

    async def on_invoke_handoff(context: Any, arguments: str) -> Agent[Any]:
        return _gated_agent(await hand_over(context, arguments), run, done)

    return dataclasses.replace(target, on_invoke_handoff=on_invoke_handoff)

"""LangChain tools under callgate, for LangGraph's ``ToolNode`` or any LangChain caller.

```python
from langgraph.prebuilt import ToolNode
from callgate import Authority, Gate, Policy, allow, ask
from callgate.integrations.langchain import gate_tools, registry

tools = [get_order, refund]                       # LangChain tools (@tool, StructuredTool)
gate = Gate(registry(tools, {"refund": {"effects": "spend:USD={amount}"}}), policy=...)
run = gate.run(authority=Authority(principal="support", grants=["spend:USD<=100"]))
node = ToolNode(gate_tools(tools, run, pending="interrupt"))
```

`gate_tools` returns one `GatedTool` per tool: the same name, description
and arguments schema (so a chat model bound to them sees the same tools),
whose ``invoke``/``ainvoke`` submits the call to the run under the tool
call's id and returns a ``ToolMessage`` holding the observation's text,
``status="error"`` for anything but ``ok`` (a rejection, a failure, an
unknown outcome, a call waiting for approval); its ``artifact`` is the
observation's status and stage.

A call waiting for a person's approval returns that message
(``pending="message"``, the default), or pauses the graph with LangGraph's
``interrupt`` (``pending="interrupt"``; the graph needs a checkpointer): the
interrupt's value holds callgate's ``approval_id``. Resuming the graph
(``Command(resume=...)``) runs the tool node again, so the call is
submitted again and callgate's approval decides: approved, it runs once;
denied, the model reads the denial; still undecided, the graph pauses again
(a resume value approves nothing, and does not spend the interrupt).

The wrapped tool runs as callgate's handler (its own ``handle_tool_error``
off, so callgate sees what it raised): a ``ToolException`` is a known
failure (``error``), any other exception an ``unknown`` outcome that is
never retried. An exception raised before the tool's function started
(LangChain's own input checks) is a known failure too: nothing ran.

Arguments LangGraph injects (``InjectedToolCallId``, ``InjectedState``,
``InjectedStore``, ``ToolRuntime``) are not the model's: callgate validates
and records only the arguments of the model's schema (``tool_call_schema``),
and the injected values pass through to the tool as ``ToolNode`` gave them.

Tools are gated by identity: `gate_tools` accepts only the very tool objects
`registry` was built from (a different tool under a registered name raises
`DefinitionError`).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict

from callgate.calls import Observation, Status
from callgate.errors import DefinitionError, ToolFailure
from callgate.gate import Run
from callgate.integrations.common import Contracts, contract_for, submit_one, submit_one_sync
from callgate.telemetry import agent_scope
from callgate.tools import Registry

__all__ = ["GatedTool", "gate_tools", "registry"]

_SOURCE = "_callgate_source"
"""The attribute on `registry`'s handlers holding the LangChain tool it was built from."""


@dataclass
class _Invocation:
    """What the wrapped tool needs of the gated call being run: the LangChain config
    (callbacks, tags), the call id (for ``InjectedToolCallId``), the injected arguments
    (state, store, runtime), and whether the tool's own function started."""

    config: RunnableConfig | None = None
    call_id: str | None = None
    injected: dict[str, Any] = field(default_factory=dict)
    started: bool = False
    command: Any = None
    paused: BaseException | None = None
    """LangGraph's ``GraphInterrupt`` the tool raised by calling ``interrupt()``: re-raised
    once the call is recorded, so the graph pauses as it does bare."""
    """The LangGraph ``Command`` the tool returned, if it did: handed to ``ToolNode`` as
    it is once the call is ``ok`` (its state update and ``goto`` applied as bare)."""


_CALL: contextvars.ContextVar[_Invocation | None] = contextvars.ContextVar(
    "callgate_langchain_call", default=None
)

Pending = Literal["message", "interrupt"]

_MAX_EARLY_RESUMES = 1000
"""How many resumes sent before the reviewer decides one paused call absorbs (each is a
value in the graph's checkpoint); past that the node stops rather than grow it further."""


def registry(tools: Iterable[BaseTool], contracts: Contracts | None = None) -> Registry:
    """A callgate `Registry` of LangChain tools (the arguments schema a model is shown for
    each), each with the contract ``contracts`` gives its name."""
    tools = list(tools)
    for tool in tools:
        if not isinstance(tool, BaseTool):
            raise DefinitionError(
                f"registry() takes LangChain tools (BaseTool), got {type(tool).__name__}; "
                "make it one with langchain_core.tools.tool or StructuredTool.from_function"
            )
    names = [t.name for t in tools]
    built = Registry()
    for tool in tools:
        schema = convert_to_openai_tool(tool)["function"].get("parameters", {})
        built.add_schema_tool(
            tool.name,
            tool.description or "",
            schema,
            _handler(tool),
            **contract_for(tool.name, contracts, names),
        )
    return built


def _handler(tool: BaseTool) -> Any:
    """The tool as callgate's handler: ``ainvoke`` for a tool with a coroutine, else
    ``invoke``, given the full tool call (the call id and the injected arguments back); a
    ``ToolException``, or any exception before the tool's function started, becomes a
    `ToolFailure` (nothing ran)."""
    update: dict[str, Any] = {"handle_tool_error": False, "handle_validation_error": False}
    watched = False
    for attribute in ("func", "coroutine"):
        function = getattr(tool, attribute, None)
        if callable(function):
            update[attribute] = _watched(function)
            watched = True
    inner = tool.model_copy(update=update)

    def tool_call(arguments: dict[str, Any]) -> tuple[dict[str, Any], RunnableConfig | None]:
        current = _CALL.get() or _Invocation()
        call = {
            "type": "tool_call",
            "name": tool.name,
            "id": current.call_id or "callgate_" + uuid.uuid4().hex[:16],
            "args": {**arguments, **current.injected},
        }
        return call, current.config

    def failed(exc: Exception) -> Exception:
        current = _CALL.get()
        if isinstance(exc, ToolException):
            return ToolFailure(str(exc))
        if _is_graph_interrupt(exc) and current is not None:
            current.paused = exc
            return ToolFailure(
                f"tool {tool.name!r} paused the graph (LangGraph interrupt) before finishing; "
                "it runs again, from its start, when the graph resumes"
            )
        if watched and current is not None and not current.started:
            return ToolFailure(
                f"tool {tool.name!r} did not start: LangChain refused its input "
                f"({type(exc).__name__}); nothing was done"
            )
        return exc

    if getattr(tool, "coroutine", None) is not None:

        async def invoke_async(**arguments: Any) -> Any:
            call, config = tool_call(arguments)
            try:
                return _content(await inner.ainvoke(call, config))
            except Exception as exc:
                raise failed(exc) from None

        invoke_async.__name__ = tool.name
        setattr(invoke_async, _SOURCE, tool)
        return invoke_async

    def invoke(**arguments: Any) -> Any:
        call, config = tool_call(arguments)
        try:
            return _content(inner.invoke(call, config))
        except Exception as exc:
            raise failed(exc) from None

    invoke.__name__ = tool.name
    setattr(invoke, _SOURCE, tool)
    return invoke


def _watched(function: Any) -> Any:
    """``function`` marking the gated call as started when it is entered (same signature,
    so LangChain still finds its injected and config parameters)."""
    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def started_async(*args: Any, **kwargs: Any) -> Any:
            _mark_started()
            return await function(*args, **kwargs)

        return started_async

    @functools.wraps(function)
    def started(*args: Any, **kwargs: Any) -> Any:
        _mark_started()
        return function(*args, **kwargs)

    return started


def _mark_started() -> None:
    current = _CALL.get()
    if current is not None:
        current.started = True


def _agent_of(config: RunnableConfig | None) -> str | None:
    """The LangChain agent making the call, as its config's metadata names it
    (``lc_agent_name``, set by ``create_agent(name=...)``), for the tool span."""
    metadata = (config or {}).get("metadata") or {}
    name = metadata.get("lc_agent_name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) else None


def _content(output: Any) -> Any:
    """What the tool returned, out of the ``ToolMessage`` LangChain wraps a tool call's
    output in. A LangGraph ``Command`` is kept on the gated call for ``ToolNode`` (which
    applies its update and ``goto``) and recorded as its messages' text."""
    if _is_command(output):
        current = _CALL.get()
        if current is not None:
            current.command = output
        update = getattr(output, "update", None)
        messages = update.get("messages") if isinstance(update, Mapping) else None
        texts = [m.content for m in messages or () if isinstance(m, ToolMessage)]
        return texts[0] if len(texts) == 1 else texts
    return output.content if isinstance(output, ToolMessage) else output


def _is_graph_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is LangGraph's ``GraphInterrupt`` (raised by ``interrupt()``)."""
    import sys

    module = sys.modules.get("langgraph.errors")
    kind = getattr(module, "GraphInterrupt", None)
    return isinstance(kind, type) and isinstance(exc, kind)


def _is_command(output: Any) -> bool:
    """Whether ``output`` is a LangGraph ``Command`` (LangGraph is imported only if the
    application already did: a tool cannot have returned one otherwise)."""
    import sys

    module = sys.modules.get("langgraph.types")
    kind = getattr(module, "Command", None)
    return isinstance(kind, type) and isinstance(output, kind)


def _injected_keys(tool: BaseTool) -> frozenset[str]:
    """The arguments of ``tool`` the framework injects: in its input schema, not in the
    schema the model is shown (``tool_call_schema``)."""
    if isinstance(tool.args_schema, dict):
        return frozenset()
    full = tool.get_input_schema()
    shown = tool.tool_call_schema
    if isinstance(shown, dict) or not hasattr(full, "model_fields"):
        return frozenset()
    return frozenset(full.model_fields) - frozenset(getattr(shown, "model_fields", {}))


class GatedTool(BaseTool):
    """A LangChain tool whose every call goes through a callgate run (see `gate_tools`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tool: BaseTool
    callgate_run: Run
    """The callgate run its calls go through (``run`` is LangChain's own method)."""
    pending: Pending = "message"

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - invoke is overridden
        raise NotImplementedError("GatedTool is called through invoke/ainvoke")

    def invoke(
        self, input: str | Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        """Submit the call to the run (in this thread); the observation as a ``ToolMessage``."""
        call_id, arguments = _call(input)
        arguments, invocation = self._split(call_id, arguments, config)
        token = _CALL.set(invocation)
        try:
            with agent_scope(_agent_of(config)):
                observation = submit_one_sync(self.callgate_run, call_id, self.name, arguments)
        finally:
            _CALL.reset(token)
        return self._answer(call_id, observation, invocation)

    async def ainvoke(
        self, input: str | Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        """Submit the call to the run on the event loop; the observation as a ``ToolMessage``."""
        call_id, arguments = _call(input)
        arguments, invocation = self._split(call_id, arguments, config)
        token = _CALL.set(invocation)
        try:
            with agent_scope(_agent_of(config)):
                observation = await submit_one(self.callgate_run, call_id, self.name, arguments)
        finally:
            _CALL.reset(token)
        return self._answer(call_id, observation, invocation)

    def _split(
        self, call_id: str, arguments: str | Mapping[str, Any], config: RunnableConfig | None
    ) -> tuple[str | Mapping[str, Any], _Invocation]:
        """The model's arguments (what callgate validates and records) apart from the ones
        the framework injected (which pass through to the tool)."""
        injected: dict[str, Any] = {}
        if isinstance(arguments, Mapping):
            keys = _injected_keys(self.tool)
            injected = {k: v for k, v in arguments.items() if k in keys}
            arguments = {k: v for k, v in arguments.items() if k not in keys}
        return arguments, _Invocation(config=config, call_id=call_id, injected=injected)

    def _answer(
        self, call_id: str, observation: Observation, invocation: _Invocation | None = None
    ) -> Any:
        """The observation as a ``ToolMessage``; for an ``ok`` call whose tool returned a
        LangGraph ``Command`` in this invocation, that Command (what ``ToolNode`` applies);
        for a tool that called ``interrupt()``, its interrupt, raised (the graph pauses)."""
        if invocation is not None and invocation.paused is not None:
            raise invocation.paused
        if (
            observation.status is Status.OK
            and invocation is not None
            and invocation.command is not None
        ):
            return invocation.command
        if observation.status is Status.PENDING and self.pending == "interrupt":
            from langgraph.types import interrupt  # the graph's own pause

            payload = {
                "approval_id": observation.approval_id,
                "tool": self.name,
                "tool_call_id": call_id,
                "message": observation.content,
            }
            # Still undecided in callgate: a resume value LangGraph hands back (a
            # Command(resume=...) sent before the reviewer decided) approves nothing, so
            # this node asks again, until LangGraph has no resume value left and pauses
            # the graph. Each resume re-runs the node, and the submit above sees the
            # reviewer's decision first.
            for _ in range(_MAX_EARLY_RESUMES):
                interrupt(payload)
            raise ToolFailure(
                f"the graph was resumed {_MAX_EARLY_RESUMES} times before callgate's approval "
                f"{observation.approval_id} was decided; stopped"
            )
        return ToolMessage(
            content=observation.content,
            tool_call_id=call_id,
            name=self.name,
            status="success" if observation.status is Status.OK else "error",
            artifact={"status": observation.status.value, "stage": observation.stage.value},
        )


def _call(input: str | Mapping[str, Any]) -> tuple[str, str | Mapping[str, Any]]:
    """The call id and arguments of a tool input: a tool call (``{"name", "args", "id",
    "type": "tool_call"}``), plain arguments, or their JSON text (given an id of its own)."""
    if isinstance(input, Mapping) and input.get("type") == "tool_call":
        args = input.get("args", {})
        call_id = input.get("id")
        return (
            call_id if isinstance(call_id, str) and call_id else "lc_" + uuid.uuid4().hex[:16]
        ), args
    if isinstance(input, str | Mapping):
        return "lc_" + uuid.uuid4().hex[:16], input
    raise TypeError(
        f"a gated tool takes a tool call, its arguments or their JSON text, got "
        f"{type(input).__name__}"
    )


def gate_tools(
    tools: Sequence[BaseTool], run: Run, *, pending: Pending = "message"
) -> list[GatedTool]:
    """Each tool wrapped so that its calls go through ``run`` (its gate built with
    `registry`); usable in LangGraph's ``ToolNode`` and with ``bind_tools``."""
    if pending not in ("message", "interrupt"):
        raise DefinitionError(f"pending must be 'message' or 'interrupt', got {pending!r}")
    wrapped: list[GatedTool] = []
    for tool in tools:
        if isinstance(tool, GatedTool) and tool.callgate_run is run:
            wrapped.append(tool)
            continue
        spec = run.gate.registry.get(tool.name)
        if spec is None:
            raise DefinitionError(
                f"the run's gate has no tool {tool.name!r}: build the gate from "
                "callgate.integrations.langchain.registry(tools, ...)"
            )
        if getattr(spec.fn, _SOURCE, None) is not tool:
            raise DefinitionError(
                f"tool {tool.name!r} is not the tool the run's gate registered under that "
                "name (a different object, so possibly a different function): callgate gates "
                "a tool by identity, never by name. Build the registry from these very tools"
            )
        wrapped.append(
            GatedTool(
                name=tool.name,
                description=tool.description,
                args_schema=tool.args_schema,
                tool=tool,
                callgate_run=run,
                pending=pending,
            )
        )
    return wrapped

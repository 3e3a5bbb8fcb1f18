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
still undecided, the model reads that it waits.

The wrapped tool runs as callgate's handler (its own ``handle_tool_error``
off, so callgate sees what it raised): a ``ToolException`` is a known
failure (``error``), any other exception an ``unknown`` outcome that is
never retried.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Iterable, Mapping, Sequence
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
from callgate.tools import Registry

__all__ = ["GatedTool", "gate_tools", "registry"]

_CONFIG: contextvars.ContextVar[RunnableConfig | None] = contextvars.ContextVar(
    "callgate_langchain_config", default=None
)
"""The LangChain config of the call being run (callbacks, tags), for the wrapped tool."""

Pending = Literal["message", "interrupt"]


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
    ``invoke``; a ``ToolException`` becomes a `ToolFailure`."""
    inner = tool.model_copy(update={"handle_tool_error": False, "handle_validation_error": False})
    if getattr(tool, "coroutine", None) is not None:

        async def invoke_async(**arguments: Any) -> Any:
            try:
                return await inner.ainvoke(arguments, _CONFIG.get())
            except ToolException as exc:
                raise ToolFailure(str(exc)) from None

        invoke_async.__name__ = tool.name
        return invoke_async

    def invoke(**arguments: Any) -> Any:
        try:
            return inner.invoke(arguments, _CONFIG.get())
        except ToolException as exc:
            raise ToolFailure(str(exc)) from None

    invoke.__name__ = tool.name
    return invoke


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
    ) -> ToolMessage:
        """Submit the call to the run (in this thread); the observation as a ``ToolMessage``."""
        call_id, arguments = _call(input)
        token = _CONFIG.set(config)
        try:
            observation = submit_one_sync(self.callgate_run, call_id, self.name, arguments)
        finally:
            _CONFIG.reset(token)
        return self._answer(call_id, observation)

    async def ainvoke(
        self, input: str | Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> ToolMessage:
        """Submit the call to the run on the event loop; the observation as a ``ToolMessage``."""
        call_id, arguments = _call(input)
        token = _CONFIG.set(config)
        try:
            observation = await submit_one(self.callgate_run, call_id, self.name, arguments)
        finally:
            _CONFIG.reset(token)
        return self._answer(call_id, observation)

    def _answer(self, call_id: str, observation: Observation) -> ToolMessage:
        if observation.status is Status.PENDING and self.pending == "interrupt":
            from langgraph.types import interrupt  # the graph's own pause

            interrupt(
                {
                    "approval_id": observation.approval_id,
                    "tool": self.name,
                    "tool_call_id": call_id,
                    "message": observation.content,
                }
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
    wrapped = []
    for tool in tools:
        if run.gate.registry.get(tool.name) is None:
            raise DefinitionError(
                f"the run's gate has no tool {tool.name!r}: build the gate from "
                "callgate.integrations.langchain.registry(tools, ...)"
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

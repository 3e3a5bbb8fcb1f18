"""PydanticAI under callgate: a toolset wrapper that puts every tool call through a callgate run.

```python
from pydantic_ai import Agent, DeferredToolRequests, FunctionToolset
from callgate import Authority, Gate, Policy, allow, ask
from callgate.integrations.pydantic_ai import GatedToolset, registry

tools = FunctionToolset([get_order, refund])
gate = Gate(registry(tools, {"refund": {"effects": "spend:USD={amount}"}}), policy=...)
run = gate.run(authority=Authority(principal="support", grants=["spend:USD<=100"]))
agent = Agent(model, toolsets=[GatedToolset(tools, run)], output_type=[str, DeferredToolRequests])
```

`GatedToolset` is PydanticAI's own extension point for changing how tools
run (a `WrapperToolset`): the agent lists the wrapped toolset's tools as
they are, and each ``call_tool`` is submitted to the run. The model reads
the observation's text: a result, or callgate's message for a rejection, a
failure or an unknown outcome (never a ``ModelRetry``: retrying is the
model's choice, told by callgate's message).

A call waiting for a person's approval pauses the agent the PydanticAI way:
``ApprovalRequired`` (the run ends with `DeferredToolRequests`, its metadata
holding callgate's ``approval_id``), so the agent's ``output_type`` must
include ``DeferredToolRequests``; with ``pause=False`` the model reads that
the call waits instead. Once a person decides in callgate, run the agent
again with ``deferred_tool_results=DeferredToolResults(approvals={call_id:
True})``: the call is submitted again and callgate's approval, not
PydanticAI's flag, decides whether it runs (undecided: the model reads that
it still waits). ``run.resume()`` cannot run a PydanticAI tool outside the
agent's run: the call ends ``error``, nothing done.

The wrapped tool runs as callgate's handler; a ``ModelRetry`` it raises is a
known failure (``error``: nothing happened, the model may try otherwise),
any other exception an ``unknown`` outcome that is never retried.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any

from pydantic_ai import ApprovalRequired, ModelRetry, RunContext
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from callgate.calls import Status
from callgate.errors import DefinitionError, ToolFailure
from callgate.gate import Run
from callgate.integrations.common import Contracts, contract_for, submit_one
from callgate.tools import Registry

__all__ = ["GatedToolset", "registry"]

_Call = tuple[AbstractToolset[Any], RunContext[Any], ToolsetTool[Any]]
_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
    "callgate_pydantic_ai_call", default=None
)
"""The wrapped toolset, run context and tool of the call being run, for callgate's handler."""


def registry(toolset: FunctionToolset[Any], contracts: Contracts | None = None) -> Registry:
    """A callgate `Registry` of the tools of a PydanticAI ``FunctionToolset`` (their own
    JSON schemas and descriptions), each with the contract ``contracts`` gives its name."""
    if not isinstance(toolset, FunctionToolset):
        raise DefinitionError(
            f"registry() reads the tools of a FunctionToolset, got {type(toolset).__name__}; "
            "put the functions in a pydantic_ai.FunctionToolset"
        )
    names = list(toolset.tools)
    built = Registry()
    for name, tool in toolset.tools.items():
        definition = tool.tool_def
        built.add_schema_tool(
            name,
            definition.description or "",
            definition.parameters_json_schema,
            _handler(name),
            **contract_for(name, contracts, names),
        )
    return built


def _handler(name: str) -> Any:
    """The wrapped toolset's own ``call_tool`` as callgate's handler."""

    async def invoke(**arguments: Any) -> Any:
        current = _CALL.get()
        if current is None:  # e.g. run.resume(): nothing ran, and the outcome says so
            raise ToolFailure(
                f"tool {name!r} runs only inside its PydanticAI agent run (it needs the run's "
                "context); nothing was done. Resume the agent run with DeferredToolResults "
                "instead of run.resume()"
            )
        wrapped, ctx, tool = current
        try:
            return await wrapped.call_tool(name, arguments, ctx, tool)
        except ModelRetry as retry:  # the tool's "nothing happened, try otherwise"
            raise ToolFailure(str(retry.message)) from None

    invoke.__name__ = name
    return invoke


@dataclass
class GatedToolset(WrapperToolset[Any]):
    """A toolset whose every call goes through ``run`` (its gate built with `registry`).

    ``pause``: a call waiting for approval raises PydanticAI's ``ApprovalRequired``
    (the default); False: the model reads that it waits.
    """

    run: Run | None = None
    pause: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.run, Run):
            raise DefinitionError(
                f"GatedToolset needs run=<a callgate Run>, got {type(self.run).__name__}"
            )
        if isinstance(self.wrapped, FunctionToolset):
            missing = [n for n in self.wrapped.tools if self.run.gate.registry.get(n) is None]
            if missing:
                raise DefinitionError(
                    f"the run's gate has no tool {missing[0]!r}: build the gate from "
                    "callgate.integrations.pydantic_ai.registry(toolset, ...)"
                )

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        run = self.run
        assert run is not None
        if run.gate.registry.get(name) is None:
            raise DefinitionError(
                f"the run's gate has no tool {name!r}: build the gate from "
                "callgate.integrations.pydantic_ai.registry(toolset, ...)"
            )
        token = _CALL.set((self.wrapped, ctx, tool))
        try:
            observation = await submit_one(run, ctx.tool_call_id or "", name, tool_args)
        finally:
            _CALL.reset(token)
        if observation.status is Status.PENDING and self.pause and not ctx.tool_call_approved:
            raise ApprovalRequired(
                metadata={"approval_id": observation.approval_id, "message": observation.content}
            )
        return observation.content

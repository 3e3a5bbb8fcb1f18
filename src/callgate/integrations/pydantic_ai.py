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
known failure (``error``: nothing happened, the model may try otherwise), and
so is a ``CallDeferred`` or ``ApprovalRequired`` it raises itself (callgate's
policy, not the tool, asks for approval),
any other exception an ``unknown`` outcome that is never retried. A tool's
PydanticAI ``timeout`` (its own or its toolset's) becomes its callgate
contract's ``timeout`` (unless the contract gives one): its expiry is an
``unknown`` outcome, not PydanticAI's "Timed out" retry prompt (a known
failure, though the effect may have happened).

The arguments reach the gate as JSON: PydanticAI has already validated them
into Python objects (a ``date``, a ``UUID``, a ``Decimal``, a Pydantic
model), so they are serialised back with pydantic-core (PydanticAI's own
serialiser for arguments crossing a boundary), checked by callgate against
the tool's JSON schema, and validated again by the tool's own validator
before the function runs.

Tools are gated by identity: each tool of the wrapped ``FunctionToolset``
must be the very function `registry` was built from (a different function
under a registered name is refused), and only a ``FunctionToolset`` can be
gated (MCP servers, deferred/external tools, combined or dynamic toolsets
are refused with `DefinitionError`). When the agent's run starts, every
other toolset of the agent that holds a tool (``Agent(tools=...)``, another
toolset, ``@agent.tool``, a toolset given to one run with
``agent.run(..., toolsets=[...])``) is refused too: it would run past the gate.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_ai import ApprovalRequired, CallDeferred, ModelRetry, RunContext, Tool
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset, FunctionToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_ai.toolsets.function import FunctionToolsetTool
from pydantic_core import to_jsonable_python

from callgate.calls import Status
from callgate.errors import DefinitionError, ToolFailure
from callgate.gate import Run
from callgate.integrations.common import Contracts, contract_for, submit_one
from callgate.telemetry import agent_scope
from callgate.tools import Registry

__all__ = ["GatedToolset", "registry"]

_SOURCE = "_callgate_source"
"""The attribute on `registry`'s handlers holding the PydanticAI ``Tool`` it was built from."""

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
        contract = contract_for(name, contracts, names)
        timeout = tool.timeout if tool.timeout is not None else toolset.timeout
        if timeout is not None and contract.get("timeout") is None:
            # PydanticAI's timeout becomes callgate's (see `_handler`): its expiry is an
            # unknown outcome, not PydanticAI's "Timed out, try again".
            contract["timeout"] = timeout
        built.add_schema_tool(
            name,
            definition.description or "",
            definition.parameters_json_schema,
            _handler(name, tool),
            **contract,
        )
    return built


def _handler(name: str, source: Tool[Any]) -> Any:
    """The wrapped toolset's own ``call_tool`` as callgate's handler: the JSON arguments
    callgate validated are validated again by the tool's own validator (dates, UUIDs,
    models back to Python objects) before the function runs."""

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
            validated = _revalidate(source, tool, arguments, ctx)
            if isinstance(tool, FunctionToolsetTool):
                # The function itself, without FunctionToolset's timeout: its expiry would
                # be a ModelRetry ("Timed out", a known failure) for an effect that may have
                # happened. The timeout is the callgate contract's (`registry`): unknown.
                return await tool.call_func(validated, ctx)
            return await wrapped.call_tool(name, validated, ctx, tool)
        except ModelRetry as retry:  # the tool's "nothing happened, try otherwise"
            raise ToolFailure(str(retry.message)) from None
        except (ApprovalRequired, CallDeferred) as deferred:  # the tool's "not now"
            raise ToolFailure(
                f"tool {name!r} raised PydanticAI's {type(deferred).__name__} (run it only "
                "once approved, or elsewhere); nothing was done. Under callgate, approval is "
                "callgate's: give the tool an ask rule in the policy instead"
            ) from None

    invoke.__name__ = name
    setattr(invoke, _SOURCE, source)
    return invoke


def _revalidate(
    source: Tool[Any], tool: ToolsetTool[Any], arguments: dict[str, Any], ctx: RunContext[Any]
) -> dict[str, Any]:
    """The tool's own validation of JSON ``arguments`` (what `_as_json` made of them); a
    failure here is PydanticAI's, before the function ran, so it is a known failure."""
    schema = source.function_schema
    single = schema.single_arg_name
    try:
        if tool.args_validator is schema.validator:
            envelope = {single: arguments} if single is not None else arguments
            return schema.revalidate(envelope, context=ctx.validation_context)
        return dict(tool.args_validator.validate_python(arguments, context=ctx.validation_context))
    except Exception as exc:  # validation, before the function ran: nothing was done
        where = (
            "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            if isinstance(exc, ValidationError)
            else type(exc).__name__
        )
        raise ToolFailure(
            f"the arguments did not validate as the tool's own types ({where}); nothing was done"
        ) from None


def _as_json(source: Tool[Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """PydanticAI's validated arguments back as the JSON the model's schema describes: a
    single model argument is the schema itself (PydanticAI unwraps it), so it is sent as
    its fields, and every value as pydantic-core serialises it (by alias)."""
    single = source.function_schema.single_arg_name
    value = arguments[single] if single is not None and single in arguments else arguments
    jsonable = to_jsonable_python(value, by_alias=True)
    if not isinstance(jsonable, dict):
        raise DefinitionError(
            f"tool {source.name!r}: its arguments serialised to a {type(jsonable).__name__}, "
            "not a JSON object"
        )
    return jsonable


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
        if not _plain_function_toolset(self.wrapped):
            raise DefinitionError(
                f"GatedToolset gates a pydantic_ai.FunctionToolset, got a "
                f"{type(self.wrapped).__name__}: callgate cannot see the tools it runs (MCP "
                "servers, deferred or external tools, combined and dynamic toolsets), so they "
                "would run past the gate. Put the functions in a FunctionToolset (an MCP "
                "server behind `callgate mcp proxy`)"
            )
        assert isinstance(self.wrapped, FunctionToolset)
        for name in self.wrapped.tools:
            self._registered(name)

    def _registered(self, name: str) -> Tool[Any]:
        """The wrapped toolset's tool ``name``, once shown to be the very tool the run's
        registry was built from (identity, never the name alone); else `DefinitionError`."""
        assert self.run is not None
        spec = self.run.gate.registry.get(name)
        if spec is None:
            raise DefinitionError(
                f"the run's gate has no tool {name!r}: build the gate from "
                "callgate.integrations.pydantic_ai.registry(toolset, ...)"
            )
        source = getattr(spec.fn, _SOURCE, None)
        assert isinstance(self.wrapped, FunctionToolset)
        held = self.wrapped.tools.get(name)
        if not isinstance(source, Tool) or held is None or held.function is not source.function:
            raise DefinitionError(
                f"tool {name!r} is not the function the run's gate registered under that "
                "name: callgate gates a tool by identity, never by name. Build the registry "
                "from this toolset, and give each function one name"
            )
        return source

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The wrapped toolset's tools, once the agent is shown to run no tool past the gate."""
        _refuse_other_toolsets(self, ctx)
        return await super().get_tools(ctx)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        run = self.run
        assert run is not None
        original = getattr(tool, "original_name", None) or name
        source = self._registered(original)
        token = _CALL.set((self.wrapped, ctx, tool))
        try:
            arguments = _as_json(source, tool_args)
            with agent_scope(getattr(ctx.agent, "name", None)):
                observation = await submit_one(run, ctx.tool_call_id or "", original, arguments)
        finally:
            _CALL.reset(token)
        if observation.status is Status.PENDING and self.pause and not ctx.tool_call_approved:
            raise ApprovalRequired(
                metadata={"approval_id": observation.approval_id, "message": observation.content}
            )
        return observation.content


def _plain_function_toolset(toolset: object) -> bool:
    """Whether ``toolset`` is a ``FunctionToolset`` that lists and calls its tools the
    FunctionToolset way (a subclass replacing ``get_tools`` or ``call_tool`` could run
    something callgate never saw)."""
    return isinstance(toolset, FunctionToolset) and all(
        getattr(type(toolset), method) is getattr(FunctionToolset, method)
        for method in ("get_tools", "call_tool")
    )


def _refuse_other_toolsets(gated: GatedToolset, ctx: RunContext[Any]) -> None:
    """Refuse, as the agent's run starts, any toolset of the agent that holds tools outside
    the gate (``Agent(tools=...)``, ``@agent.tool``, another toolset beside this one), and
    an output function (`_refuse_output_functions`)."""
    agent = ctx.agent
    if agent is None:
        return
    _refuse_output_functions(agent)
    for toolset in agent.toolsets:
        _refuse_ungated(agent, toolset, combined=False)
    manager = ctx.tool_manager
    run_toolset = getattr(manager, "toolset", None) if manager is not None else None
    if isinstance(run_toolset, AbstractToolset):
        # The run's own toolset: the agent's, plus those given to this run only
        # (``agent.run(..., toolsets=[...])``), which ``agent.toolsets`` does not list.
        _refuse_ungated(agent, run_toolset, combined=True)


def _refuse_ungated(agent: Any, toolset: AbstractToolset[Any], *, combined: bool) -> None:
    """Refuse ``toolset`` unless it is (under PydanticAI's wrappers) a GatedToolset or an
    empty FunctionToolset; with ``combined``, a ``CombinedToolset`` is looked into (the
    run's own combination of the agent's toolsets) rather than refused."""
    inner = toolset
    while isinstance(inner, WrapperToolset) and not isinstance(inner, GatedToolset):
        inner = inner.wrapped  # a prefixed, filtered or renamed GatedToolset is gated
    if isinstance(inner, GatedToolset):
        return
    if combined and isinstance(inner, CombinedToolset):
        for member in inner.toolsets:
            _refuse_ungated(agent, member, combined=True)
        return
    if isinstance(inner, FunctionToolset) and not inner.tools:
        return  # the agent's own function toolset, empty
    names = sorted(getattr(inner, "tools", {}) or ())
    raise DefinitionError(
        f"agent {agent.name!r} has a {type(inner).__name__}"
        f"{' (' + ', '.join(names) + ')' if names else ''} beside its GatedToolset: "
        "its tools would run past the gate, so the run is refused. Give the agent (and "
        "agent.run(toolsets=...)) only GatedToolsets"
    )


def _refuse_output_functions(agent: Any) -> None:
    """Refuse an agent whose output runs a function (``output_type=a_function``,
    ``TextOutput(a_function)``): the model ends the run by calling it, past the gate."""
    toolset = getattr(agent, "_output_toolset", None)
    processors = getattr(toolset, "processors", None)
    named = dict(processors) if isinstance(processors, dict) else {}
    schema = getattr(agent, "_output_schema", None)
    text = getattr(schema, "text_processor", None)
    if text is not None:
        named["text output"] = text
    for name, processor in named.items():
        if getattr(processor, "_function_schema", None) is not None:
            raise DefinitionError(
                f"agent {agent.name!r} has an output function ({name}): the model ends the "
                "run by calling it, so it would run past the gate; make the function a tool "
                "of the gated toolset and give the agent a plain output type"
            )

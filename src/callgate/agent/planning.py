"""``plan_first``: the model names the tools it will use before it reads any tool output.

The planning turn is the first model call of a run. The model sees the
system prompt, the user's message (the run's trusted text, and nothing
else: no tool has run yet) and one tool, ``plan(tools)``, with the names
and first lines of the tools the run may use. Nothing is executed. The
names it lists that are tools of the run become the run's intent
(``Intent(tools=..., source="plan")``, `callgate.authorize.intent`): once
the run has read untrusted content, a call of any other tool needs a person.

This is the dual-LLM / CaMeL idea in its simplest form: the plan is made by
a model that has seen only what the user asked, so text inside a tool's
output cannot add to it. An injected instruction can still misuse a tool
the plan names (argument constraints and provenance of sinks are the
defences there), but it cannot reach one the task never needed.

A turn without a ``plan`` call, or one whose arguments cannot be read,
gives an empty plan: read-only tools only, everything else asks (safe, and
visible in the transcript as ``agent.plan``).

The plan may also bind argument values the user's message itself states
(``arguments={"transfer_money": {"amount": [85]}}``): the tool is then
inside the intent only with those values (`Intent.arguments`). Values for
parameters the tool does not have are left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from callgate.authorize.intent import Intent
from callgate.providers.base import Extraction
from callgate.tools import Registry, ToolSpec, make_spec

__all__ = ["PLAN", "PLAN_SPEC", "Plan", "plan_instruction", "read_plan"]

PLAN = "plan"
"""The name of the planning tool, offered only in the planning turn."""

_MAX_LISTED = 200
_MAX_LINE = 160


PlannedValue = str | int | float | bool


def plan(
    tools: Annotated[
        list[str],
        Field(
            description="The names of every tool you will call to do what the user asked.",
            max_length=_MAX_LISTED,
        ),
    ],
    arguments: Annotated[
        dict[str, dict[str, list[PlannedValue]]] | None,
        Field(
            description=(
                "Optional. For a tool you listed, the argument values the user's message "
                "itself states (a recipient, an amount, a title, a date): "
                '{"tool": {"argument": ["value", ...]}}. That tool will then be used only '
                "with those values. Leave out values you will only learn from tool output."
            ),
        ),
    ] = None,
) -> str:
    """Name the tools you will use for the user's request, before any of them runs."""
    return f"planned {len(tools)} tool(s)"


PLAN_SPEC: ToolSpec = make_spec(plan, name=PLAN, risk="read")
"""The planning tool's contract, for the provider format's tool definitions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """What the planning turn gave: the intent, and the names it listed that are no tool."""

    intent: Intent
    ignored: tuple[str, ...] = ()
    read: bool = True
    """Whether the turn held a readable ``plan`` call (False: the empty plan)."""


def plan_instruction(system: str | None, names: Sequence[str], registry: Registry) -> str:
    """The planning turn's system prompt: the run's own, then what to do and the tools."""
    lines = []
    for name in names:
        spec = registry.get(name)
        first = (spec.description.strip().splitlines() or [""])[0] if spec is not None else ""
        lines.append(f"- {name}: {first[:_MAX_LINE]}" if first else f"- {name}")
    listed = "\n".join(lines) if lines else "(none)"
    instruction = (
        "Before you act, plan. Call the tool `plan` once, with the names of every tool you "
        "will need to do what the user asked, chosen from the list below. Nothing runs in "
        "this turn. Later, once tool output has been read, a tool you did not list needs "
        "the user's approval: list what the request needs, and nothing else. Where the "
        "user's message itself states a value (a recipient, an amount, a title), you may "
        "bind it with `arguments`.\n"
        f"Tools:\n{listed}"
    )
    return f"{system}\n\n{instruction}" if system else instruction


def read_plan(
    extraction: Extraction, names: Sequence[str], registry: Registry | None = None
) -> Plan:
    """The plan in a planning turn's extraction; only names of ``names`` are kept, and
    (with ``registry``) only argument values for parameters those tools have."""
    known = set(names)
    for call in extraction.calls:
        if call.name != PLAN:
            continue
        decoded = _decoded(call.arguments)
        listed = _listed(decoded)
        if listed is None:
            continue
        kept = tuple(dict.fromkeys(n for n in listed if n in known))
        ignored = tuple(dict.fromkeys(n for n in listed if n not in known))
        bound = _bound(decoded, kept, registry) if registry is not None else {}
        intent = Intent(tools=kept, arguments=bound, source="plan")
        return Plan(intent=intent, ignored=ignored[:_MAX_LISTED])
    return Plan(intent=Intent(tools=(), source="plan"), read=False)


def _decoded(arguments: str | Mapping[str, Any]) -> Mapping[str, Any] | None:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    return arguments if isinstance(arguments, Mapping) else None


def _listed(arguments: Mapping[str, Any] | None) -> list[str] | None:
    """The tool names in a ``plan`` call's arguments (None: not readable as a plan)."""
    if arguments is None:
        return None
    tools = arguments.get("tools")
    if not isinstance(tools, list):
        return None
    return [t[:_MAX_LINE] for t in tools[:_MAX_LISTED] if isinstance(t, str) and t.strip()]


def _bound(
    arguments: Mapping[str, Any] | None, kept: Sequence[str], registry: Registry
) -> dict[str, dict[str, list[PlannedValue]]]:
    """The planned argument values of kept tools, for parameters they have; values that are
    not text, numbers or booleans, and empty lists, are left out (no constraint)."""
    raw = arguments.get("arguments") if arguments is not None else None
    if not isinstance(raw, Mapping):
        return {}
    bound: dict[str, dict[str, list[PlannedValue]]] = {}
    for tool in kept:
        spec = registry.get(tool)
        constraints = raw.get(tool)
        if spec is None or not isinstance(constraints, Mapping):
            continue
        fields = spec.arguments_model.model_fields
        for argument, values in constraints.items():
            if argument not in fields:
                continue
            listed = values if isinstance(values, list) else [values]
            plain = [
                v if not isinstance(v, str) else v[:_MAX_LINE]
                for v in listed[:_MAX_LISTED]
                if isinstance(v, str | int | float | bool)
            ]
            if plain:
                bound.setdefault(tool, {})[argument] = plain
    return bound

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


def plan(
    tools: Annotated[
        list[str],
        Field(
            description="The names of every tool you will call to do what the user asked.",
            max_length=_MAX_LISTED,
        ),
    ],
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
        "the user's approval: list what the request needs, and nothing else.\n"
        f"Tools:\n{listed}"
    )
    return f"{system}\n\n{instruction}" if system else instruction


def read_plan(extraction: Extraction, names: Sequence[str]) -> Plan:
    """The plan in a planning turn's extraction; only names of ``names`` are kept."""
    known = set(names)
    for call in extraction.calls:
        if call.name != PLAN:
            continue
        listed = _listed(call.arguments)
        if listed is None:
            continue
        kept = tuple(dict.fromkeys(n for n in listed if n in known))
        ignored = tuple(dict.fromkeys(n for n in listed if n not in known))
        return Plan(intent=Intent(tools=kept, source="plan"), ignored=ignored[:_MAX_LISTED])
    return Plan(intent=Intent(tools=(), source="plan"), read=False)


def _listed(arguments: str | Mapping[str, Any]) -> list[str] | None:
    """The tool names in a ``plan`` call's arguments (None: not readable as a plan)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, Mapping):
        return None
    tools = arguments.get("tools")
    if not isinstance(tools, list):
        return None
    return [t[:_MAX_LINE] for t in tools[:_MAX_LISTED] if isinstance(t, str) and t.strip()]

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
inside the intent only with those values (`Intent.arguments`). A value for a
parameter the tool does not have leaves that tool out of the plan, with the
reason in `Plan.errors` (a misspelled constraint never widens the plan).

And it may list *calls* (`callgate.authorize.steps`): ``{"tool": "create_event"}``
admits one ``create_event``, a second asks; ``{"tool": "send_money", "bind":
{"iban": {"from": "bill", "field": "iban"}}}`` admits a payment only to the IBAN
that the planned call with the id ``bill`` (``{"tool": "read_bill", "id":
"bill", "arguments": {"name": ["bill-may.txt"]}}``) returned. The planning
tool's JSON schema holds these fields, so the grammar export
(`callgate.grammar.tool_grammar`) keeps a small model's plan well-formed. A
planned call that cannot be read (unknown tool, a binding to no planned call,
a count out of range, a fixed value or binding of a parameter its tool does not
have) is left out with its reason in `Plan.errors`, and its tool is dropped
from the plan too: after untrusted content it asks. Plan text too deep or with
numbers too long to read gives the empty plan, never an exception.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field
from typing_extensions import TypedDict

from callgate.authorize.intent import Intent
from callgate.authorize.steps import MAX_TIMES, PlanError, PlannedCall, parse_call
from callgate.errors import DefinitionError
from callgate.providers.base import Extraction
from callgate.tools import Registry, ToolSpec, make_spec

__all__ = ["PLAN", "PLAN_SPEC", "Plan", "plan_instruction", "read_plan"]

PLAN = "plan"
"""The name of the planning tool, offered only in the planning turn."""

_MAX_LISTED = 200
_MAX_LINE = 160


PlannedValue = str | int | float | bool
Pick = Literal["any", "max", "min", "first", "last"]
"""The reducers of `callgate.authorize.steps.PICKS` (a test holds them equal)."""

PlannedBind = TypedDict(
    "PlannedBind",
    {
        "from": Annotated[str, Field(description="The id of the planned call it comes from.")],
        "field": Annotated[str, Field(description="The field of that call's result, e.g. iban.")],
        "pick": NotRequired[
            Annotated[
                Pick, Field(description="Which record: any (default), max, min, first, last.")
            ]
        ],
        "by": NotRequired[
            Annotated[str, Field(description="For max and min: the field compared, e.g. size.")]
        ],
        "where": NotRequired[
            Annotated[
                dict[str, PlannedValue],
                Field(description='Only records with these field values, e.g. {"name": "Clara"}.'),
            ]
        ],
    },
)
PlannedBind.__pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[attr-defined]


class PlannedStep(TypedDict):
    """One call the plan expects."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    tool: Annotated[str, Field(description="The tool this call uses.")]
    id: NotRequired[
        Annotated[str, Field(description="A short name, for other calls to bind to its result.")]
    ]
    arguments: NotRequired[
        Annotated[
            dict[str, list[PlannedValue]],
            Field(description="Argument values the user's message itself states."),
        ]
    ]
    bind: NotRequired[
        Annotated[
            dict[str, PlannedBind],
            Field(
                description="Arguments whose value comes from an earlier planned call's result "
                "the user's message points at: "
                '{"iban": {"from": "bill", "field": "iban"}}.'
            ),
        ]
    ]
    times: NotRequired[
        Annotated[int, Field(ge=1, le=MAX_TIMES, description="How many such calls (default 1).")]
    ]


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
    calls: Annotated[
        list[PlannedStep] | None,
        Field(
            description=(
                "Optional. The calls that change or send something, each once unless times "
                "says more; a call the plan does not list will need the user's approval."
            ),
            max_length=_MAX_LISTED,
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
    errors: tuple[str, ...] = ()
    """Why planned calls were left out (`PlanError` messages); their tools then ask."""


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
        "bind it with `arguments`. List each call that changes or sends something in "
        "`calls` (once each, unless `times` says more); where the user points at the record "
        "a value comes from (the IBAN in a bill they name, the largest of their files), give "
        "the reading call an `id` and `bind` the argument to it.\n"
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
        try:
            plan = _plan_of(call.arguments, known, registry)
        except (RecursionError, ValueError, DefinitionError) as exc:
            # Nesting past the interpreter's depth, a number too long to print: no plan.
            reason = f"the plan could not be read ({type(exc).__name__}); nothing is planned"
            return Plan(intent=Intent(tools=(), source="plan"), errors=(reason,))
        if plan is not None:
            return plan
    return Plan(intent=Intent(tools=(), source="plan"), read=False)


def _plan_of(
    arguments: str | Mapping[str, Any], known: set[str], registry: Registry | None
) -> Plan | None:
    decoded = _decoded(arguments)
    listed = _listed(decoded)
    if listed is None:
        return None
    kept = tuple(dict.fromkeys(n for n in listed if n in known))
    ignored = tuple(dict.fromkeys(n for n in listed if n not in known))
    bound: dict[str, dict[str, list[PlannedValue]]] = {}
    unbound: set[str] = set()
    errors: list[str] = []
    if registry is not None:
        bound, unbound, errors = _bound(decoded, kept, registry)
    planned, dropped, call_errors = _planned_calls(decoded, known, registry)
    dropped = dropped | unbound
    kept = tuple(n for n in kept if n not in dropped)
    bound = {t: c for t, c in bound.items() if t not in dropped}
    planned = tuple(c for c in planned if c.tool not in dropped)
    intent = Intent(tools=kept, arguments=bound, calls=planned, source="plan")
    every = tuple([*errors, *call_errors][:_MAX_LISTED])
    return Plan(intent=intent, ignored=ignored[:_MAX_LISTED], errors=every)


def _planned_calls(
    arguments: Mapping[str, Any] | None, known: set[str], registry: Registry | None
) -> tuple[tuple[PlannedCall, ...], frozenset[str], tuple[str, ...]]:
    """The plan's readable planned calls of known tools (values and bindings kept only for
    parameters the tool has); the tools of those left out, which then need a person after
    untrusted content; and why each was left out."""
    raw = arguments.get("calls") if arguments is not None else None
    if raw is None:
        return (), frozenset(), ()
    if not isinstance(raw, list):
        return (), frozenset(), (f"calls: expected a list, got {type(raw).__name__}",)
    readable: list[PlannedCall] = []
    dropped: set[str] = set()
    errors: list[str] = []
    ids: set[str] = set()
    for number, item in enumerate(raw[:_MAX_LISTED]):
        where = f"calls[{number}]"
        try:
            one = parse_call(item, where)
            if one.tool not in known:
                raise PlanError(f"{where}.tool: the run has no tool {one.tool[:_MAX_LINE]!r}")
            if registry is not None:
                _check_parameters(one, registry, where)
            if one.id is not None and one.id in ids:
                raise PlanError(f"{where}.id: {one.id[:_MAX_LINE]!r} names two planned calls")
        except PlanError as exc:
            errors.append(str(exc)[: 2 * _MAX_LINE])
            tool = item.get("tool") if isinstance(item, Mapping) else None
            if isinstance(tool, str):
                dropped.add(tool[:_MAX_LINE])
            continue
        if one.id is not None:
            ids.add(one.id)
        readable.append(one)
    while True:  # a binding needs its source among the planned calls kept
        kept_ids = {c.id for c in readable if c.id is not None and c.tool not in dropped}
        orphan = next(
            (
                c
                for c in readable
                if c.tool not in dropped
                and any(b.source not in kept_ids or b.source == c.id for b in c.bind.values())
            ),
            None,
        )
        if orphan is None:
            break
        errors.append(f"planned call {orphan.tool}: a binding names no planned call kept")
        dropped.add(orphan.tool)
    planned = tuple(c for c in readable if c.tool not in dropped)
    return planned, frozenset(dropped), tuple(errors[:_MAX_LISTED])


def _check_parameters(one: PlannedCall, registry: Registry, where: str) -> None:
    """`PlanError` when ``one`` fixes or binds a parameter its tool does not have (left
    out, it would admit any value there: a typo must narrow, never widen)."""
    spec = registry.get(one.tool)
    if spec is None:
        return
    fields = spec.arguments_model.model_fields
    for kind, names in (("arguments", one.arguments), ("bind", one.bind)):
        for name in names:
            if name not in fields:
                raise PlanError(
                    f"{where}.{kind}.{name[:40]}: {one.tool} has no parameter {name[:40]!r}; "
                    f"its parameters: {sorted(fields)[:20]}"
                )


def _decoded(arguments: str | Mapping[str, Any]) -> Mapping[str, Any] | None:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
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
) -> tuple[dict[str, dict[str, list[PlannedValue]]], set[str], list[str]]:
    """The planned argument values of kept tools; the tools left out because a constraint
    names a parameter they do not have, and why. Values that are not text, numbers (below
    10**60) or booleans, and empty lists, are left out (no constraint)."""
    raw = arguments.get("arguments") if arguments is not None else None
    if not isinstance(raw, Mapping):
        return {}, set(), []
    bound: dict[str, dict[str, list[PlannedValue]]] = {}
    unbound: set[str] = set()
    errors: list[str] = []
    for tool in kept:
        spec = registry.get(tool)
        constraints = raw.get(tool)
        if spec is None or not isinstance(constraints, Mapping):
            continue
        fields = spec.arguments_model.model_fields
        for argument, values in constraints.items():
            if argument not in fields:
                unbound.add(tool)
                errors.append(
                    f"arguments.{tool}.{str(argument)[:40]}: {tool} has no parameter "
                    f"{str(argument)[:40]!r}; its parameters: {sorted(fields)[:20]}"
                )
                continue
            listed = values if isinstance(values, list) else [values]
            plain = [
                v if not isinstance(v, str) else v[:_MAX_LINE]
                for v in listed[:_MAX_LISTED]
                if isinstance(v, str | int | float | bool)
                and not (isinstance(v, int) and abs(v) >= 10**60)
            ]
            if plain:
                bound.setdefault(tool, {})[argument] = plain
    return bound, unbound, errors

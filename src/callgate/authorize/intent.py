"""Intent: a run's authority narrowed to what the trusted request needs.

A run's grants are the assistant's: everything it may ever do. A task needs
less. Provenance stops a call whose *values* come from untrusted text; it
cannot see a call whose values are all trusted but whose *purpose* came from
there (create an event, delete the user's own file, message a real contact,
because a document said so). An `Intent` says what the user's request is
about, written before any untrusted text is read: by the deployer per task,
or by the model in a planning turn that sees only trusted input
(``Agent(plan_first=True)``, the dual-LLM idea in its simplest form).

Once the run has read untrusted content (`TrustIndex.exposed_by`), a call
outside any of the run's intents is escalated to a person (or denied: the
policy's ``outside_intent``); so is a call with an *integrity-sensitive*
effect (``Policy(integrity=[...])``: create, delete, modify the user's own
things) that no intent of the run covers, even when every value is trusted.
Before untrusted content, the intent is not consulted: calls within the
run's grants proceed as they always did. An intent never admits a call the
grants or rules refuse, and a run's intents only accumulate (each further
one narrows): nothing the model writes widens them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from callgate.authorize.provenance import TrustIndex
from callgate.authorize.step_check import PlanMatch, PlanUses, Use, match_call
from callgate.authorize.steps import PlannedCall, canonical_value, parse_calls
from callgate.effects import Effect, Grant, Grants, star_match
from callgate.errors import DefinitionError
from callgate.evidence import Evidence
from callgate.tools import ToolSpec

__all__ = [
    "Intent",
    "IntentFinding",
    "batch_contention",
    "canonical_value",
    "check_intent",
    "plan_matches",
]

_SHOWN = 200


@dataclass(frozen=True, kw_only=True, eq=False)
class Intent:
    """What the trusted request needs: tools and/or effects, optionally argument values.

    A call is inside the intent when its tool matches one of ``tools`` (names,
    ``*`` globs), or it declares effects and ``effects`` (grant patterns,
    ``"read:*"``, ``"spend:USD<=50"``) cover every one of them, or ``reads``
    and its tool is read-only with no effect but reads (``read:...``): it can
    neither change nor send anything; and every constrained
    argument (``arguments={"send_email": {"to": ["bob@acme.example"]}}``) holds
    one of its allowed values, compared as provenance compares values (case,
    whitespace, link form; numbers by value, `canonical_value`). An argument
    that is absent passes; each item of a list must be allowed.

    ``source`` says who declared it (``"deployer"``, ``"plan"``): findings and
    approval texts name it.
    """

    tools: Sequence[str] = ()
    effects: Sequence[str | Grant] = ()
    arguments: Mapping[str, Mapping[str, Sequence[Any] | str]] = field(default_factory=dict)
    reads: bool = True
    source: str = "deployer"
    calls: Sequence[PlannedCall | Mapping[str, Any]] = ()
    """Planned calls (`callgate.authorize.steps`): each admits a number of calls of its tool,
    with fixed and bound argument values; a tool a planned call names is governed by the
    planned calls alone."""
    _tool_parts: tuple[tuple[str, ...], ...] = field(init=False, repr=False)
    _grants: Grants = field(init=False, repr=False)
    _allowed: dict[str, dict[str, frozenset[str]]] = field(init=False, repr=False)
    _governed: frozenset[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        planned = parse_calls(list(self.calls)) if self.calls else ()
        object.__setattr__(self, "calls", planned)
        object.__setattr__(self, "_governed", frozenset(c.tool for c in planned))
        if isinstance(self.tools, str):
            object.__setattr__(self, "tools", (self.tools,))
        if isinstance(self.effects, str):
            object.__setattr__(self, "effects", (self.effects,))
        for name in self.tools:
            if not isinstance(name, str) or not name.strip():
                raise DefinitionError(
                    f"Intent tools must be tool names or '*' globs, got {name!r}; "
                    "e.g. Intent(tools=['read_file', 'send_*'])"
                )
        object.__setattr__(self, "_tool_parts", tuple(tuple(t.split("*")) for t in self.tools))
        object.__setattr__(self, "_grants", Grants(self.effects))
        allowed: dict[str, dict[str, frozenset[str]]] = {}
        for tool, constraints in self.arguments.items():
            if not isinstance(constraints, Mapping):
                raise DefinitionError(
                    f"Intent arguments[{tool!r}] must map argument names to allowed values, "
                    f"got {type(constraints).__name__}; e.g. {{'to': ['bob@acme.example']}}"
                )
            allowed[tool] = {
                argument: frozenset(
                    canonical_value(v) for v in ((values,) if isinstance(values, str) else values)
                )
                for argument, values in constraints.items()
            }
        object.__setattr__(self, "_allowed", allowed)

    def as_record(self) -> dict[str, Any]:
        """The intent as plain data, for the run's ``run.intent`` journal record (a resumed
        run gets it back with `from_record`)."""
        return {
            "tools": list(self.tools),
            "effects": [g.text for g in self._grants.grants],
            "arguments": {
                tool: {
                    argument: [values] if isinstance(values, str) else list(values)
                    for argument, values in constraints.items()
                }
                for tool, constraints in self.arguments.items()
            },
            "reads": self.reads,
            "source": self.source,
            **({"calls": [c.as_record() for c in self.planned]} if self.calls else {}),
        }

    @property
    def planned(self) -> tuple[PlannedCall, ...]:
        """The planned calls, parsed (`callgate.authorize.steps`)."""
        return tuple(c for c in self.calls if isinstance(c, PlannedCall))

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> Intent:
        """The intent a ``run.intent`` record holds (`as_record`)."""
        return cls(
            tools=tuple(str(t) for t in data.get("tools") or ()),
            effects=tuple(str(e) for e in data.get("effects") or ()),
            arguments={
                str(tool): {str(a): list(v) for a, v in dict(constraints).items()}
                for tool, constraints in dict(data.get("arguments") or {}).items()
            },
            reads=bool(data.get("reads", True)),
            source=str(data.get("source") or "deployer"),
            calls=list(data.get("calls") or ()),
        )

    def describe(self) -> str:
        """The intent in one line, for approval texts: what it lets the run do."""
        parts = []
        if self.tools:
            parts.append("tools " + ", ".join(self.tools))
        if self.effects:
            parts.append("effects " + ", ".join(g.text for g in self._grants.grants))
        if self.calls:
            parts.append("calls " + ", ".join(c.describe() for c in self.planned))
        if self.reads:
            parts.append("read-only tools")
        for tool, constraints in self.arguments.items():
            for argument, values in constraints.items():
                shown = [values] if isinstance(values, str) else list(values)
                parts.append(f"{tool}.{argument} in {shown!r}")
        return "; ".join(parts) if parts else "nothing"

    def check(self, tools: Iterable[ToolSpec]) -> None:
        """`DefinitionError` naming the first planned call or argument constraint that names
        a tool the run does not have, or a parameter its tool does not have, with the
        choices. Call it where the intent is written: a typo there never widens the run
        (the policy check also treats such a planned call as matching nothing)."""
        specs = {spec.name: spec for spec in tools}
        for planned in self.planned:
            spec = specs.get(planned.tool)
            if spec is None:
                raise DefinitionError(
                    f"Intent: the planned call {planned.describe()} names no tool of the run; "
                    f"its tools: {sorted(specs)[:30]}"
                )
            missing = unknown_parameters(planned, spec)
            if missing:
                raise DefinitionError(f"Intent: {missing}; fix the planned call's names")
        for tool, constraints in self.arguments.items():
            spec = specs.get(tool)
            if spec is None:
                raise DefinitionError(
                    f"Intent arguments: {tool!r} is no tool of the run; its tools: "
                    f"{sorted(specs)[:30]}"
                )
            fields = spec.arguments_model.model_fields
            for argument in constraints:
                if argument not in fields:
                    raise DefinitionError(
                        f"Intent arguments: {tool} has no parameter {argument!r}; its "
                        f"parameters: {sorted(fields)[:30]}"
                    )

    def governs(self, tool: str) -> bool:
        """Whether a planned call of this intent names ``tool`` (then only planned calls
        admit it, also when it is read-only: a source read again, with other arguments, is
        not the read the plan made)."""
        return tool in self._governed

    def outside(
        self,
        spec: ToolSpec,
        values: Mapping[str, Any],
        effects: Sequence[Effect],
        match: PlanMatch | None = None,
    ) -> tuple[str | None, str | None] | None:
        """None if the call is inside; else ``(argument, value)`` of the constraint it
        breaks, or ``(None, None)`` when its tool or effects are not in the intent.
        ``match``: how this intent's planned calls take the call (`match_call`)."""
        if spec.name in self._governed:
            if match is None or match.step is None:
                return (match.argument, match.value) if match is not None else (None, None)
        else:
            inside = (
                any(star_match(parts, spec.name) for parts in self._tool_parts)
                or (bool(effects) and not self._grants.missing(effects))
                or (self.reads and _reads_only(spec, effects))
            )
            if not inside:
                return (None, None)
        for argument, allowed in self._allowed.get(spec.name, {}).items():
            value = values.get(argument)
            if value is None:
                continue
            items = value if isinstance(value, list | tuple | set | frozenset) else (value,)
            for item in items:
                if hasattr(item, "value") and not isinstance(item, str):
                    item = item.value  # an Enum
                if canonical_value(item) not in allowed:
                    return (argument, str(item))
        return None


def unknown_parameters(planned: PlannedCall, spec: ToolSpec) -> str:
    """What a planned call fixes or binds that its tool has no parameter for ("": none)."""
    fields = spec.arguments_model.model_fields
    for kind, names in (("fixes", planned.arguments), ("binds", planned.bind)):
        for name in names:
            if name not in fields:
                return (
                    f"the plan's {planned.describe()} {kind} {name!r}, which {spec.name} does "
                    f"not have (its parameters: {', '.join(sorted(fields)[:30])})"
                )
    return ""


def _reads_only(spec: ToolSpec, effects: Sequence[Effect]) -> bool:
    """A read-only tool whose effects, if any, are all reads (``read:...``)."""
    return not spec.side_effecting and all(e.name.startswith("read:") for e in effects)


@dataclass(frozen=True, slots=True, kw_only=True)
class IntentFinding:
    """Why a call after untrusted content needs a person: outside the run's intent, or an
    integrity-sensitive effect that no intent covers."""

    rule: str
    """``outside_intent``, ``integrity_effect`` or ``unnamed_target``."""
    tool: str
    intent: str | None
    """Who declared the intent the call is outside (None: the run has no intent)."""
    intended: str | None
    """What that intent covers (`Intent.describe`)."""
    exposed_by: tuple[str, ...]
    """The calls whose untrusted output the run had read."""
    effect: str | None = None
    argument: str | None = None
    value: str | None = None
    detail: str = ""
    """What the plan's planned calls found wrong (used up, another value, no source yet)."""

    def explain(self) -> str:
        """One line for the approval text, the model and the audit trail."""
        read = ", ".join(self.exposed_by[:3]) + (" ..." if len(self.exposed_by) > 3 else "")
        after = f"the run has read untrusted content (call {read})"
        if self.rule == "unnamed_target":
            shown = _shown(self.value or "")
            return (
                f"'{self.tool}' acts on the user's own data (effect '{self.effect}'), {after}, "
                f"and the value of '{self.argument}' ({shown!r}) is not what the user asked "
                "for: neither their request nor a record it names mentions it"
            )
        if self.rule == "integrity_effect":
            return (
                f"'{self.tool}' changes the user's own data (effect '{self.effect}', marked "
                f"integrity-sensitive), {after}, and no intent of the run covers it: the user "
                "did not ask for this, as far as trusted input shows"
            )
        declared = f"the intent declared by the {self.intent}" if self.intent else "the intent"
        if self.detail:
            return (
                f"'{self.tool}' is outside what the user asked for: {self.detail} "
                f"({declared} covers: {self.intended}), and {after}"
            )
        if self.argument is not None:
            shown = _shown(self.value or "")
            return (
                f"the value of '{self.argument}' ({shown!r}) is outside what the user asked "
                f"for ({declared} allows: {self.intended}), and {after}"
            )
        return (
            f"'{self.tool}' is outside what the user asked for ({declared} covers: "
            f"{self.intended}), and {after}"
        )

    def as_dict(self) -> dict[str, Any]:
        """The finding as a plain record for the ledger and `Observation.details`."""
        return {
            "rule": self.rule,
            "tool": self.tool,
            "intent": self.intent,
            "effect": self.effect,
            "argument": self.argument,
            "value": _shown(self.value) if self.value is not None else None,
            "exposed_by": list(self.exposed_by),
            **({"plan": self.detail} if self.detail else {}),
        }


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def check_intent(
    spec: ToolSpec,
    values: Mapping[str, Any],
    effects: Sequence[Effect],
    *,
    intents: Sequence[Intent],
    integrity: Grants | None,
    exposed_by: Sequence[str],
    named: Callable[[Any], bool] | None = None,
    named_targets: Grants | None = None,
    matches: Mapping[Intent, PlanMatch] | None = None,
) -> IntentFinding | None:
    """Whether a call needs a person because of the run's intent: None before untrusted
    content, or when it is inside every intent and (with no intent) touches no
    integrity-sensitive effect.

    ``named_targets`` (`Policy(named_targets=...)`): a call with such an effect must
    also have every sink value ``named`` by the request (`TrustIndex.named`): the file
    the user named, not another file of theirs. ``matches``: how each intent's planned
    calls take the call; an argument a matched planned call binds to a source counts as
    named.
    """
    if not exposed_by:
        return None
    exposed = tuple(exposed_by)
    matches = matches or {}
    for intent in intents:
        match = matches.get(intent)
        broken = intent.outside(spec, values, effects, match)
        if broken is not None:
            argument, value = broken
            return IntentFinding(
                rule="outside_intent",
                tool=spec.name,
                intent=intent.source,
                intended=intent.describe(),
                exposed_by=exposed,
                argument=argument,
                value=value,
                detail=match.why if match is not None and match.step is None else "",
            )
    marked = None
    if integrity is not None:
        marked = next((e for e in effects if integrity.covers(e)), None)
    if marked is not None and not intents:
        return IntentFinding(
            rule="integrity_effect",
            tool=spec.name,
            intent=None,
            intended=None,
            exposed_by=exposed,
            effect=str(marked),
        )
    target = None
    if named_targets is not None and named is not None:
        target = next((e for e in effects if named_targets.covers(e)), None)
    if target is None or named is None:
        return None
    bound = {a for m in matches.values() if m.step is not None for a in m.bound}
    for argument in spec.sinks:
        if argument in bound:
            continue
        value = values.get(argument)
        items = value if isinstance(value, list | tuple | set | frozenset) else (value,)
        for item in items:
            if item is not None and not named(item):
                return IntentFinding(
                    rule="unnamed_target",
                    tool=spec.name,
                    intent=intents[0].source if intents else None,
                    intended=None,
                    exposed_by=exposed,
                    effect=str(target),
                    argument=argument,
                    value=str(getattr(item, "value", item)),
                )
    return None


def integrity_grants(patterns: Iterable[str]) -> Grants | None:
    """Integrity-sensitive effect patterns as `Grants` (None: none marked)."""
    grants = Grants(patterns)
    return grants if grants.grants else None


def plan_matches(
    spec: ToolSpec,
    values: Mapping[str, Any],
    intents: Sequence[Intent],
    evidence: Evidence,
    provenance: TrustIndex | None,
) -> dict[Intent, PlanMatch]:
    """How each intent's planned calls take this call (`callgate.authorize.steps`); the
    run's uses of them are kept beside what it has read (`TrustIndex.plan_uses`)."""
    if provenance is None:
        return {}
    matches: dict[Intent, PlanMatch] = {}
    for intent in intents:
        if not intent.governs(spec.name):
            continue
        planned = intent.planned
        uses = provenance.plan_uses.get(intent)
        if uses is None:
            uses = provenance.plan_uses[intent] = PlanUses(users=[[] for _ in planned])
        match = match_call(
            planned, spec.name, values, evidence, uses, lambda p: unknown_parameters(p, spec)
        )
        if match is not None:
            matches[intent] = match
    return matches


def batch_contention(
    batch: Sequence[tuple[ToolSpec, Mapping[str, Any]]],
    intents: Sequence[Intent],
    evidence: Evidence,
    provenance: TrustIndex,
) -> dict[int, str]:
    """The calls of one batch that compete for a planned call, by their index in ``batch``,
    with why: more calls of the batch fit it than it has uses left, so whichever the
    policy checked first would take it (an injected call proposed before the user's own).
    Each of them should ask. Nothing is committed: the run's uses are not changed.

    For the gate's batch admission to call once per batch, before it decides the calls
    one by one, and to send each call it names to a person (`authorize`'s ``contended``).
    """
    found: dict[int, str] = {}
    for intent in intents:
        planned = intent.planned
        if not planned:
            continue
        held = provenance.plan_uses.get(intent)
        copied = (
            [[Use(u.digest, u.waiting, u.item) for u in step] for step in held.users]
            if held
            else None
        )
        uses = PlanUses(users=copied if copied is not None else [[] for _ in planned])
        if held is not None:
            uses.seen = held.seen
        fits: dict[int, list[int]] = {}
        for index, (spec, values) in enumerate(batch):
            if not intent.governs(spec.name):
                continue
            match = match_call(
                planned,
                spec.name,
                values,
                evidence,
                uses,
                lambda p, spec=spec: unknown_parameters(p, spec),  # type: ignore[misc]
            )
            if match is not None and match.step is not None and match.reuse is None:
                fits.setdefault(match.step, []).append(index)
        for step, indexes in fits.items():
            left = planned[step].times - len(uses.users[step])
            if len(indexes) > left:
                why = (
                    f"{len(indexes)} calls of this batch fit the plan's "
                    f"{planned[step].describe()}, which has {left} use(s) left; none is "
                    "taken without a person"
                )
                for index in indexes:
                    found.setdefault(index, why)
    return found

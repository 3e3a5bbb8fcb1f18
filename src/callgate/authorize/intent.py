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

import decimal
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from callgate.authorize.text import normalize
from callgate.effects import Effect, Grant, Grants, star_match
from callgate.errors import DefinitionError
from callgate.regex import compile_re2
from callgate.tools import ToolSpec

__all__ = ["Intent", "IntentFinding", "canonical_value", "check_intent"]

_SHOWN = 200
# A plain decimal written as text ("85", "-12.50"): short, anchored, no nesting.
_DECIMAL = compile_re2(r"[+-]?\d{1,30}(?:\.\d{1,9})?")


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
    _tool_parts: tuple[tuple[str, ...], ...] = field(init=False, repr=False)
    _grants: Grants = field(init=False, repr=False)
    _allowed: dict[str, dict[str, frozenset[str]]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
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
        }

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
        )

    def describe(self) -> str:
        """The intent in one line, for approval texts: what it lets the run do."""
        parts = []
        if self.tools:
            parts.append("tools " + ", ".join(self.tools))
        if self.effects:
            parts.append("effects " + ", ".join(g.text for g in self._grants.grants))
        if self.reads:
            parts.append("read-only tools")
        for tool, constraints in self.arguments.items():
            for argument, values in constraints.items():
                shown = [values] if isinstance(values, str) else list(values)
                parts.append(f"{tool}.{argument} in {shown!r}")
        return "; ".join(parts) if parts else "nothing"

    def outside(
        self, spec: ToolSpec, values: Mapping[str, Any], effects: Sequence[Effect]
    ) -> tuple[str | None, str | None] | None:
        """None if the call is inside; else ``(argument, value)`` of the constraint it
        breaks, or ``(None, None)`` when its tool or effects are not in the intent."""
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


def canonical_value(value: Any) -> str:
    """The form in which an argument value is compared with an intent's allowed values:
    numbers by value (``85``, ``85.0`` and ``"85.00"`` are one), anything else as
    provenance compares values (`normalize`: case, whitespace, link form)."""
    if isinstance(value, bool):
        return "#true" if value else "#false"
    text = value if isinstance(value, str) else None
    if isinstance(value, int | float | decimal.Decimal) or (
        text is not None and len(text) <= 40 and _DECIMAL.fullmatch(text.strip())
    ):
        try:
            number = decimal.Decimal(str(value).strip())
        except decimal.InvalidOperation:
            return normalize(value)
        if number.is_finite():
            return "#" + str(number.normalize() + 0)
    return normalize(value)


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
) -> IntentFinding | None:
    """Whether a call needs a person because of the run's intent: None before untrusted
    content, or when it is inside every intent and (with no intent) touches no
    integrity-sensitive effect.

    ``named_targets`` (`Policy(named_targets=...)`): a call with such an effect must
    also have every sink value ``named`` by the request (`TrustIndex.named`): the file
    the user named, not another file of theirs.
    """
    if not exposed_by:
        return None
    exposed = tuple(exposed_by)
    for intent in intents:
        broken = intent.outside(spec, values, effects)
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
    for argument in spec.sinks:
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

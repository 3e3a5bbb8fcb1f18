"""Checking a call against an intent's planned calls (`callgate.authorize.steps`).

`match_call` finds the planned call that admits a call: one of its tool with a
use left (or the one this same call used before), whose fixed values hold and
whose bound values a run of the named source produced (`source_values`: at the
binding's field, of the records its ``where`` keeps and its ``pick`` selects).
`commit` records the use; `PlanUses` keeps a run's uses, rebuilt from the
run's ``ok`` calls when the run is resumed.
"""

from __future__ import annotations

import decimal
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic_core

from callgate.authorize.paths import TrustPath
from callgate.authorize.provenance import leaves, records_of
from callgate.authorize.steps import Bind, PlannedCall, canonical_value, value_items
from callgate.authorize.text import words
from callgate.canonical import canonical_json
from callgate.evidence import Evidence, EvidenceItem

__all__ = ["PlanMatch", "PlanUses", "call_digest", "commit", "match_call", "source_values"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanMatch:
    """How one intent's planned calls take one call.

    ``step`` is the planned call that admits it (None: none does); ``bound`` the arguments
    it binds (vouched for); without a step, ``why`` says what failed and ``argument`` and
    ``value`` name the value that broke a planned call."""

    step: int | None
    digest: str
    bound: frozenset[str] = frozenset()
    why: str = ""
    argument: str | None = None
    value: str | None = None


@dataclass(slots=True)
class PlanUses:
    """Which calls used each planned call of one intent in one run (by call digest)."""

    users: list[set[str]]
    seen: int = 0
    """Evidence items already attributed (a resumed run rebuilds its uses from them)."""


def call_digest(tool: str, values: Mapping[str, Any]) -> str:
    """A call's identity for counting: its tool and argument values."""
    try:
        plain = pydantic_core.to_jsonable_python(dict(values))
    except (TypeError, ValueError, pydantic_core.PydanticSerializationError):
        plain = {k: repr(v) for k, v in values.items()}
    return tool + "\x00" + canonical_json(plain)


def match_call(
    calls: Sequence[PlannedCall],
    tool: str,
    values: Mapping[str, Any],
    evidence: Evidence,
    uses: PlanUses,
) -> PlanMatch | None:
    """The planned call that admits this call (None: no planned call names its tool)."""
    steps = [n for n, planned in enumerate(calls) if planned.tool == tool]
    if not steps:
        return None
    _attribute(calls, evidence, uses)
    digest = call_digest(tool, values)
    why = ""
    broken: tuple[str, str] | None = None
    ordered = sorted(steps, key=lambda n: digest not in uses.users[n])  # its own step first
    for number in ordered:
        planned = calls[number]
        if digest not in uses.users[number] and len(uses.users[number]) >= planned.times:
            times = "once" if planned.times == 1 else f"{planned.times} times"
            why = why or f"the plan's {planned.describe()} was already used ({times})"
            continue
        fixed = planned.fixed_broken(values)
        if fixed is not None:
            broken = broken or fixed
            why = why or f"'{fixed[0]}' is not the value the plan fixed ({planned.describe()})"
            continue
        failed = _binding_broken(calls, planned, values, evidence)
        if failed is not None:
            argument, value, reason = failed
            broken = broken or (argument, value)
            why = why or reason
            continue
        return PlanMatch(step=number, digest=digest, bound=frozenset(planned.bind))
    return PlanMatch(
        step=None,
        digest=digest,
        why=why,
        argument=broken[0] if broken else None,
        value=broken[1] if broken else None,
    )


def commit(uses: PlanUses, match: PlanMatch) -> None:
    """Record that ``match``'s call used its planned call."""
    if match.step is not None:
        uses.users[match.step].add(match.digest)


def _attribute(calls: Sequence[PlannedCall], evidence: Evidence, uses: PlanUses) -> None:
    """Count the run's ``ok`` calls no check of this process counted (a resumed run)."""
    if uses.seen >= len(evidence):
        return
    counted = set().union(*uses.users) if uses.users else set()
    for item in evidence.since(uses.seen):
        steps = [n for n, planned in enumerate(calls) if planned.tool == item.tool]
        if not steps:
            continue
        digest = call_digest(item.tool, item._values)
        if digest in counted:
            continue
        for number in steps:
            planned = calls[number]
            if (
                len(uses.users[number]) < planned.times
                and planned.fixed_broken(item._values) is None
            ):
                uses.users[number].add(digest)
                counted.add(digest)
                break
    uses.seen = len(evidence)


def _binding_broken(
    calls: Sequence[PlannedCall],
    planned: PlannedCall,
    values: Mapping[str, Any],
    evidence: Evidence,
) -> tuple[str, str, str] | None:
    """The first bound argument whose value no run of its source produced, with why."""
    for argument, bound in planned.bind.items():
        items = value_items(values.get(argument))
        if not items:
            continue
        source = next(c for c in calls if c.id == bound.source)
        produced = source_values(source, bound, evidence)
        for item in items:
            if hasattr(item, "value") and not isinstance(item, str):
                item = item.value  # an Enum
            if canonical_value(item) not in produced:
                if not produced:
                    reason = (
                        f"'{argument}' is bound to the {bound.describe()}, and no call of "
                        f"{source.describe().rsplit(' ', 1)[0]} has returned one yet"
                    )
                else:
                    reason = (
                        f"'{argument}' is bound to the {bound.describe()}, and "
                        f"{str(item)[:80]!r} is not that value"
                    )
                return (argument, str(item), reason)
    return None


def source_values(source: PlannedCall, bound: Bind, evidence: Evidence) -> frozenset[str]:
    """The values (compared form) a binding accepts: at ``bound.field`` of the record
    ``bound.pick`` selects, in each ``ok`` result of a call matching ``source``."""
    accepted: set[str] = set()
    for item in _runs_of(source, evidence):
        records = [r for r in records_of(item.result) if _kept(r, bound)]
        chosen = _pick(records, bound)
        for record in chosen:
            accepted.update(canonical_value(v) for v in _at(record, bound._field))
    return frozenset(accepted)


def _runs_of(source: PlannedCall, evidence: Evidence) -> Iterator[EvidenceItem]:
    for item in evidence:
        if item.tool == source.tool and source.fixed_broken(item._values) is None:
            yield item


def _kept(record: Mapping[str, Any], bound: Bind) -> bool:
    """Whether ``record`` holds every value of the binding's ``where``."""
    for path, value, spoken in bound._where:
        held = list(_at(record, path))
        if not any(
            canonical_value(v) == value
            or (spoken is not None and isinstance(v, str) and spoken in words(v))
            for v in held
        ):
            return False
    return True


def _pick(records: list[Mapping[str, Any]], bound: Bind) -> list[Mapping[str, Any]]:
    if not records or bound.pick == "any":
        return records
    if bound.pick == "first":
        return records[:1]
    if bound.pick == "last":
        return records[-1:]
    assert bound._by is not None
    keyed: list[tuple[decimal.Decimal, int]] = []
    for number, record in enumerate(records):
        for value in _at(record, bound._by):
            number_value = _number(value)
            if number_value is not None:
                keyed.append((number_value, number))
                break
    if not keyed:
        return []
    best = max(k for k, _ in keyed) if bound.pick == "max" else min(k for k, _ in keyed)
    return [records[n] for k, n in keyed if k == best]


def _number(value: Any) -> decimal.Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | decimal.Decimal) or (
        isinstance(value, str) and len(value) <= 40
    ):
        try:
            number = decimal.Decimal(str(value).strip())
        except decimal.InvalidOperation:
            return None
        return number if number.is_finite() else None
    return None


def _at(record: Mapping[str, Any], path: TrustPath) -> Iterator[Any]:
    """The scalar values of one record at ``path`` (lists transparent)."""
    for where, value, is_key in leaves(record):
        if is_key == path.keys and path.matches(where) and value is not None:
            yield value

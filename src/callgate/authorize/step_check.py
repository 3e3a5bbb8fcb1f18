"""Checking a call against an intent's planned calls (`callgate.authorize.steps`).

`match_call` finds the planned call that admits a call: one of its tool with a
use left, whose fixed values hold and whose bound values a run *of the source's
planned call* produced (`Accepted`: at the binding's field, of the records its
``where`` keeps and its ``pick`` selects). `commit` records the use.

A use (`Use`) is spent once the policy admits its call; a call the policy sent
to a person holds its use while it waits, and the same call checked again (the
approved call released) takes that use, not another. The same tool and values
again after that is another call: it needs a use of its own. `PlanUses` ties
each use to the ``ok`` result it produced, so a binding reads only the results
of the calls that used its source's planned call; a resumed run (whose uses are
not in memory) attributes its ``ok`` calls in order, checking fixed values and
bindings against the results before each, as they stood.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic_core

from callgate.authorize.paths import TrustPath
from callgate.authorize.provenance import leaves, records_of
from callgate.authorize.steps import Bind, PlannedCall, canonical_value, value_items
from callgate.authorize.text import normalize, words
from callgate.canonical import canonical_json
from callgate.evidence import Evidence, EvidenceItem

__all__ = [
    "Accepted",
    "PlanMatch",
    "PlanUses",
    "Use",
    "accepted_values",
    "call_digest",
    "commit",
    "holds",
    "match_call",
]

_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyz -'")
"""Characters of a ``where`` value compared by its words (a name); any other (@ . : / digits)
makes it an identifier, compared whole."""
_CACHED = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanMatch:
    """How one intent's planned calls take one call.

    ``step`` is the planned call that admits it (None: none does); ``bound`` the arguments
    it binds (vouched for); ``reuse`` the use it takes again (a call that waited for a
    person); without a step, ``why`` says what failed and ``argument`` and ``value`` name
    the value that broke a planned call."""

    step: int | None
    digest: str
    bound: frozenset[str] = frozenset()
    reuse: int | None = None
    why: str = ""
    argument: str | None = None
    value: str | None = None


@dataclass(eq=False, slots=True)
class Use:
    """One call that used a planned call: its identity, whether it waits for a person (then
    the same call checked again takes this use), and its ``ok`` result once it ran."""

    digest: str
    waiting: bool
    item: EvidenceItem | None = None


@dataclass(frozen=True, slots=True)
class Accepted:
    """The values one source result gives a binding, in the forms they are compared in:
    text as text, numbers (JSON numbers, and texts for a numeric parameter) as numbers."""

    text: frozenset[str]
    numbers: frozenset[str]
    """Numbers of JSON-number values: they compare with a text argument as numbers."""
    numeric: frozenset[str]
    """Numbers of every value that reads as one: for an argument that is a number."""
    records: int
    ambiguous: str = ""


@dataclass(slots=True)
class PlanUses:
    """Which calls used each planned call of one intent in one run."""

    users: list[list[Use]]
    seen: int = 0
    """Evidence items already attributed (a resumed run rebuilds its uses from them)."""
    cache: dict[tuple[int, int, str], Accepted] = field(default_factory=dict)
    """Accepted values per (source result, planned call, argument)."""


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
    unfit: Callable[[PlannedCall], str] | None = None,
) -> PlanMatch | None:
    """The planned call that admits this call (None: no planned call names its tool).
    ``unfit``: why a planned call cannot fit the tool ("" when it can), e.g. it fixes a
    parameter the tool lacks; such a planned call admits nothing."""
    if not any(planned.tool == tool for planned in calls):
        return None
    _attribute(calls, evidence, uses)
    return _match(calls, tool, values, call_digest(tool, values), uses, unfit)


def _match(
    calls: Sequence[PlannedCall],
    tool: str,
    values: Mapping[str, Any],
    digest: str,
    uses: PlanUses,
    unfit: Callable[[PlannedCall], str] | None = None,
) -> PlanMatch:
    steps = [n for n, planned in enumerate(calls) if planned.tool == tool]
    why = ""
    if unfit is not None:
        fitting = []
        for number in steps:
            reason = unfit(calls[number])
            if reason:
                why = why or reason
            else:
                fitting.append(number)
        steps = fitting
    for number in steps:
        for index, use in enumerate(uses.users[number]):
            if use.waiting and use.item is None and use.digest == digest:
                broken = _broken(calls, number, values, uses)
                if broken is None:
                    bound = frozenset(calls[number].bind)
                    return PlanMatch(step=number, digest=digest, bound=bound, reuse=index)
    first: tuple[str, str] | None = None
    for number in steps:
        planned = calls[number]
        if len(uses.users[number]) >= planned.times:
            times = "once" if planned.times == 1 else f"{planned.times} times"
            why = why or f"the plan's {planned.describe()} was already used ({times})"
            continue
        broken = _broken(calls, number, values, uses)
        if broken is not None:
            argument, value, reason = broken
            first = first or (argument, value)
            why = why or reason
            continue
        return PlanMatch(step=number, digest=digest, bound=frozenset(planned.bind))
    return PlanMatch(
        step=None,
        digest=digest,
        why=why,
        argument=first[0] if first else None,
        value=first[1] if first else None,
    )


def commit(uses: PlanUses, match: PlanMatch, *, admitted: bool = True) -> None:
    """Record that ``match``'s call used its planned call: spent when ``admitted``, held
    while it waits for a person otherwise."""
    if match.step is None:
        return
    held = uses.users[match.step]
    if match.reuse is not None and match.reuse < len(held):
        if admitted:
            held[match.reuse].waiting = False
        return
    held.append(Use(match.digest, waiting=not admitted))


def _attribute(calls: Sequence[PlannedCall], evidence: Evidence, uses: PlanUses) -> None:
    """Tie each new ``ok`` result to the use its call took; a result no use of this process
    is waiting for (a resumed run) is matched as its call would have been then."""
    if uses.seen >= len(evidence):
        return
    for item in evidence.since(uses.seen):
        steps = [n for n, planned in enumerate(calls) if planned.tool == item.tool]
        if not steps:
            continue
        digest = call_digest(item.tool, item._values)
        use = next(
            (
                u
                for n in steps
                for u in uses.users[n]
                if u.item is None and u.digest == digest and not u.waiting
            ),
            None,
        ) or next(
            (u for n in steps for u in uses.users[n] if u.item is None and u.digest == digest),
            None,
        )
        if use is None:
            match = _match(calls, item.tool, item._values, digest, uses)
            if match.step is None or match.reuse is not None:
                continue
            use = Use(digest, waiting=False)
            uses.users[match.step].append(use)
        use.item = item
        use.waiting = False
    uses.seen = len(evidence)


def _broken(
    calls: Sequence[PlannedCall], number: int, values: Mapping[str, Any], uses: PlanUses
) -> tuple[str, str, str] | None:
    """The first fixed or bound argument of planned call ``number`` the call breaks, with
    why; None when it holds."""
    planned = calls[number]
    fixed = planned.fixed_broken(values)
    if fixed is not None:
        argument, value = fixed
        return (
            argument,
            value,
            f"'{argument}' is not the value the plan fixed ({planned.describe()})",
        )
    for argument, bound in planned.bind.items():
        items = value_items(values.get(argument))
        if not items:
            continue
        source = next(n for n, c in enumerate(calls) if c.id == bound.source)
        runs = [u for u in uses.users[source] if u.item is not None]
        found = [_accepted(uses, u, number, argument, bound) for u in runs]
        for item in items:
            if hasattr(item, "value") and not isinstance(item, str):
                item = item.value  # an Enum
            if any(holds(a, item) for a in found):
                continue
            return (argument, str(item), _why(calls[source], bound, argument, item, found))
    return None


def _why(
    source: PlannedCall, bound: Bind, argument: str, item: Any, found: Sequence[Accepted]
) -> str:
    said = f"'{argument}' is bound to the {bound.describe()}"
    if not found:
        name = source.describe().rsplit(" ", 1)[0]
        return f"{said}, and the plan's {name} has not run yet"
    ambiguous = next((a.ambiguous for a in found if a.ambiguous), "")
    if ambiguous:
        return f"{said}, and {ambiguous}"
    if not any(a.text or a.numeric for a in found):
        records = sum(a.records for a in found)
        return f"{said}, and the source returned {records} records; none held {bound.field!r}"
    return f"{said}, and {str(item)[:80]!r} is not that value"


def holds(accepted: Accepted, item: Any) -> bool:
    """Whether an argument value is one the source gave: a number argument as a number, a
    text as text (or as a number when the source gave a JSON number), others as values."""
    if isinstance(item, bool):
        return canonical_value(item) in accepted.text
    if isinstance(item, int | float | decimal.Decimal):
        return _number_key(item) in accepted.numeric
    if isinstance(item, str):
        if normalize(item) in accepted.text:
            return True
        key = _number_key(item)
        return key is not None and key in accepted.numbers
    return normalize(item) in accepted.text


def _accepted(uses: PlanUses, use: Use, number: int, argument: str, bound: Bind) -> Accepted:
    """What one run of the source gives this binding, remembered per run and binding."""
    key = (id(use), number, argument)
    hit = uses.cache.get(key)
    if hit is None:
        assert use.item is not None
        hit = accepted_values(use.item.result, bound)
        if len(uses.cache) < _CACHED:
            uses.cache[key] = hit
    return hit


def accepted_values(result: Any, bound: Bind) -> Accepted:
    """The values a binding accepts from one source result: at ``bound.field`` of the
    records its ``where`` keeps and its ``pick`` selects."""
    records, field_path, by, where = _records(result, bound)
    kept, ambiguous = _kept(records, where)
    text: set[str] = set()
    numbers: set[str] = set()
    numeric: set[str] = set()
    if not ambiguous:
        for record in _pick(kept, bound.pick, by):
            for value in _at(record, field_path):
                if isinstance(value, bool):
                    text.add(canonical_value(value))
                    continue
                key = _number_key(value)
                if isinstance(value, int | float | decimal.Decimal):
                    if key is not None:
                        numbers.add(key)
                        numeric.add(key)
                    continue
                text.add(normalize(value))
                if key is not None:
                    numeric.add(key)
    return Accepted(
        text=frozenset(text),
        numbers=frozenset(numbers),
        numeric=frozenset(numeric),
        records=len(records),
        ambiguous=ambiguous,
    )


Where = tuple[tuple[TrustPath, Any], ...]


def _records(
    result: Any, bound: Bind
) -> tuple[list[Mapping[str, Any]], TrustPath, TrustPath | None, Where]:
    """The records a binding reads and its paths inside them: the list its field's path
    goes through when the result wraps one (``files.id`` of ``{"files": [...], ...}``),
    else the records as provenance cuts them."""
    where: Where = tuple(zip(bound._where_paths, bound.where.values(), strict=True))
    head = bound._field.segments[0] if bound._field.segments else None
    if (
        isinstance(result, Mapping)
        and head is not None
        and len(bound._field.segments) > 1
        and isinstance(result.get(head), list)
    ):
        listed = [r for r in result[head] if isinstance(r, Mapping)]
        return (
            listed,
            _inside(bound._field, head),
            None if bound._by is None else _inside(bound._by, head),
            tuple((_inside(p, head), v) for p, v in where),
        )
    return list(records_of(result)), bound._field, bound._by, where


def _inside(path: TrustPath, head: str) -> TrustPath:
    """``path`` below its first segment when that is ``head`` (else unchanged)."""
    if len(path.segments) > 1 and path.segments[0] == head:
        return TrustPath(path.segments[1:], keys=path.keys)
    return path


def _kept(records: list[Mapping[str, Any]], where: Where) -> tuple[list[Mapping[str, Any]], str]:
    """The records holding every ``where`` value, and why the choice is ambiguous ("" when
    it is not). A plain word ("Clara") also keeps a longer text holding it ("Clara Weiss")
    unless some record holds it whole; texts holding @ . : / or digits (addresses, links,
    IBANs) are compared whole; numbers as numbers. Word matches that keep records of
    different values at that field are ambiguous: the binding accepts nothing."""
    kept = records
    for path, wanted in where:
        whole = [r for r in kept if any(_same(v, wanted) for v in _at(r, path))]
        if whole or not _plain(wanted):
            kept = whole
            continue
        spoken = f" {words(wanted).strip()} "
        partly = [
            r for r in kept if any(isinstance(v, str) and spoken in words(v) for v in _at(r, path))
        ]
        holders = {normalize(v) for r in partly for v in _at(r, path) if isinstance(v, str)}
        if len(holders) > 1:
            shown = ", ".join(sorted(repr(h) for h in holders)[:3])
            return [], (
                f"where {wanted!r} matches records of different values ({shown}); name the "
                "record whole (its full name) so that one record holds it"
            )
        kept = partly
    return kept, ""


def _plain(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip()) and set(value.lower()) <= _PLAIN


def _same(held: Any, wanted: Any) -> bool:
    if isinstance(wanted, bool) or isinstance(held, bool):
        return canonical_value(held) == canonical_value(wanted)
    if isinstance(wanted, int | float | decimal.Decimal):
        key = _number_key(held)
        return key is not None and key == _number_key(wanted)
    if isinstance(held, int | float | decimal.Decimal):
        key = _number_key(wanted)
        return key is not None and key == _number_key(held)
    return normalize(held) == normalize(wanted)


def _pick(
    records: list[Mapping[str, Any]], pick: str, by: TrustPath | None
) -> list[Mapping[str, Any]]:
    if not records or pick == "any":
        return records
    if pick == "first":
        return records[:1]
    if pick == "last":
        return records[-1:]
    assert by is not None
    keyed: list[tuple[decimal.Decimal, int]] = []
    for number, record in enumerate(records):
        for value in _at(record, by):
            number_value = _number(value)
            if number_value is not None:
                keyed.append((number_value, number))
                break
    if not keyed:
        return []
    best = max(k for k, _ in keyed) if pick == "max" else min(k for k, _ in keyed)
    return [records[n] for k, n in keyed if k == best]


def _number(value: Any) -> decimal.Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and abs(value) >= 10**60:
        return None
    if isinstance(value, int | float | decimal.Decimal) or (
        isinstance(value, str) and len(value) <= 40
    ):
        try:
            number = decimal.Decimal(str(value).strip())
        except (decimal.InvalidOperation, ValueError):
            return None
        return number if number.is_finite() else None
    return None


def _number_key(value: Any) -> str | None:
    number = _number(value)
    return None if number is None else "#" + str(number.normalize() + 0)


def _at(record: Mapping[str, Any], path: TrustPath) -> Iterator[Any]:
    """The scalar values of one record at ``path`` (lists transparent)."""
    if not path.keys:
        yield from _below(record, path.segments, 0)
        return
    for where, value, is_key in leaves(record):
        if is_key and path.matches(where) and value is not None:
            yield value


_DEPTH = 32


def _below(value: Any, segments: tuple[str | None, ...], depth: int) -> Iterator[Any]:
    """The scalars at ``segments`` under ``value``: one step per segment, lists transparent
    (as `leaves` walks them, without walking the rest of the record)."""
    if depth > _DEPTH:
        return
    if isinstance(value, list | tuple):
        for item in value:
            yield from _below(item, segments, depth + 1)
        return
    if not segments:
        if value is not None and not isinstance(value, Mapping):
            yield value
        return
    if not isinstance(value, Mapping):
        return
    head, rest = segments[0], segments[1:]
    if head is None:
        for key, inner in value.items():
            if isinstance(key, str):
                yield from _below(inner, rest, depth + 1)
    elif head in value:
        yield from _below(value[head], rest, depth + 1)

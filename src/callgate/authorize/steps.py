"""Plans that count calls and bind arguments to sources.

An `Intent` may list *calls*, not only tools: ``PlannedCall("create_event")``
admits one ``create_event``; a second is outside the plan. A planned call may
hold argument values fixed (``arguments={"name": "bill-may.txt"}``) and may
*bind* an argument to a source: another planned call's result, read at a
field, optionally narrowed by a named reducer::

    PlannedCall(tool="read_bill", id="bill", arguments={"name": "bill-may.txt"})
    PlannedCall(tool="send_money", bind={"iban": Bind(source="bill", field="iban")})
    PlannedCall(tool="list_files", id="files")
    PlannedCall(tool="delete_file",
                bind={"file_id": Bind(source="files", field="id", pick="max", by="size")})

Checked when the call comes, on the run's recorded evidence (its ``ok``
observations): the bound argument's value must equal a value that a call
*which used the source's planned call* returned in this run at ``field`` (a
`TrustPath` into each record of its result, or into each record of the list
the path goes through when the result wraps one), of the record the reducer
picks when one is named: ``max``/``min`` by the number at ``by``,
``first``/``last`` record, or ``any`` (the default: any record). Values
compare as text, and as numbers only when the argument is a number or the
source gave a JSON number. A source that has not run yet binds nothing: the
call is outside the plan. A bound value the check accepted is vouched for as
a sink (the user designated where it comes from), and is named by the
request for `Policy(named_targets=...)`.

Counting: each planned call admits ``times`` calls (default 1), counted from
the run's start whatever the run has read. A call the policy admits spends a
use; a call waiting for a person holds one, and the same call checked again
(released by the approval) takes it; the same tool and values again after
that is another call. A fixed argument the call leaves out breaks the match.
A tool that one of an intent's planned calls names is governed by its
planned calls alone, read-only or not: naming it in ``tools`` too admits no
more calls (`callgate.authorize.step_check`).

What it does not do: a binding checks equality with a value the source
produced, not that the source is honest. A source the attacker can write
(a shared document's free text) binds the attacker's value: bind to fields
a system of record fills (a bill's IBAN field, a listing's ids and sizes),
never to free text.

This module defines planned calls and reads them from data; checking a call
against them is `callgate.authorize.step_check`.
"""

from __future__ import annotations

import dataclasses
import decimal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from callgate.authorize.paths import TrustPath
from callgate.authorize.text import normalize
from callgate.errors import DefinitionError
from callgate.regex import compile_re2

__all__ = [
    "PICKS",
    "Bind",
    "PlanError",
    "PlannedCall",
    "canonical_value",
    "parse_call",
    "parse_calls",
    "value_items",
]

PICKS = ("any", "max", "min", "first", "last")
"""The reducers a binding may name."""
MAX_CALLS = 200
"""Planned calls one intent may hold."""
MAX_TIMES = 100
_MAX_TEXT = 200
_MAX_VALUES = 200
_MAX_WHERE = 10
_MAX_DIGITS = 60
_MAX_VALUE_TEXT = 10_000
# A plain decimal written as text ("85", "-12.50"): short, anchored, no nesting.
_DECIMAL = compile_re2(r"[+-]?\d{1,30}(?:\.\d{1,9})?")


class PlanError(DefinitionError):
    """A plan that cannot be read: the message names the planned call, the field, what was
    expected and what was found."""


def _text(value: Any, where: str, *, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > _MAX_TEXT:
        shown = repr(value)[:60]
        raise PlanError(
            f"{where}: expected a non-empty text of at most {_MAX_TEXT} characters, got "
            f"{shown}; write it as in the example of `callgate.authorize.steps`"
        )
    return value


def _huge(value: Any) -> bool:
    """An integer too long to be an argument (and to print: Python refuses past 4300
    digits)."""
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**_MAX_DIGITS


def _path(text: str, where: str) -> TrustPath:
    try:
        return TrustPath.parse(text)
    except DefinitionError as exc:
        raise PlanError(f"{where}: {exc}") from None


@dataclass(frozen=True, kw_only=True)
class Bind:
    """An argument bound to a source: the value ``source``'s result holds at ``field``,
    of the record ``pick`` selects (``max``/``min`` need ``by``, the field compared)."""

    source: str
    field: str
    pick: str = "any"
    by: str | None = None
    where: Mapping[str, str | int | float | bool] = dataclasses.field(default_factory=dict)
    """Only records whose field (a path) holds this value, applied before ``pick``: numbers
    as numbers; a text holding ``@ . : /`` or digits (an address, a link, an IBAN) whole;
    a plain name also as words of a longer text (``{"counterparty": "Clara"}`` keeps the
    record of "Clara Weiss") unless a record holds it whole, and only while the records it
    keeps so agree on that field (with "Clara Weiss" and "Clara Roth" it keeps none)."""
    _field: TrustPath = dataclasses.field(init=False, repr=False, compare=False)
    _by: TrustPath | None = dataclasses.field(init=False, repr=False, compare=False)
    _where_paths: tuple[TrustPath, ...] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _text(self.source, "Bind.source (the id of the planned call the value comes from)")
        _text(self.field, "Bind.field (a path into each record of the source's result)")
        if self.pick not in PICKS:
            raise PlanError(
                f"Bind.pick: expected one of {list(PICKS)}, got {self.pick!r}; 'max' and "
                "'min' pick the record with the largest or smallest number at 'by'"
            )
        if self.pick in ("max", "min") and self.by is None:
            raise PlanError(
                f"Bind.by: pick={self.pick!r} compares records by a field; name it, e.g. "
                f"Bind(source={self.source!r}, field={self.field!r}, pick={self.pick!r}, "
                "by='size')"
            )
        if self.pick not in ("max", "min") and self.by is not None:
            raise PlanError(
                f"Bind.by: only 'max' and 'min' compare by a field, got pick={self.pick!r}"
            )
        object.__setattr__(self, "_field", _path(self.field, "Bind.field"))
        by = None if self.by is None else _path(_text(self.by, "Bind.by") or "", "Bind.by")
        object.__setattr__(self, "_by", by)
        if not isinstance(self.where, Mapping) or len(self.where) > _MAX_WHERE:
            raise PlanError(
                f"Bind.where: expected an object of at most {_MAX_WHERE} field: value pairs, "
                f"e.g. {{'counterparty': 'Clara'}}, got {type(self.where).__name__}"
            )
        where: list[TrustPath] = []
        for key, value in self.where.items():
            _text(key, "Bind.where key (a field path)")
            if (
                not isinstance(value, str | int | float | bool)
                or (isinstance(value, str) and len(value) > _MAX_TEXT)
                or _huge(value)
            ):
                raise PlanError(
                    f"Bind.where.{str(key)[:40]}: expected a text, number or boolean of at most "
                    f"{_MAX_TEXT} characters (numbers below 10**{_MAX_DIGITS}), got "
                    f"{type(value).__name__}"
                )
            where.append(_path(key, "Bind.where"))
        object.__setattr__(self, "_where_paths", tuple(where))

    def describe(self) -> str:
        """The binding in words: ``iban of bill``, ``id of the max (by size) of files``."""
        where = "".join(f" where {k} = {v!r}" for k, v in self.where.items())
        if self.pick == "any":
            return f"{self.field} of {self.source}{where}"
        by = f" (by {self.by})" if self.by else ""
        return f"{self.field} of the {self.pick}{by} of {self.source}{where}"

    def as_record(self) -> dict[str, Any]:
        """The binding as plain data (`from_data` reads it back)."""
        data: dict[str, Any] = {"from": self.source, "field": self.field}
        if self.pick != "any":
            data["pick"] = self.pick
        if self.by is not None:
            data["by"] = self.by
        if self.where:
            data["where"] = dict(self.where)
        return data

    @classmethod
    def from_data(cls, data: Any, where: str = "bind") -> Bind:
        """A binding from plain data ``{"from": id, "field": path, "pick": ..., "by": ...}``;
        anything else raises `PlanError`."""
        if isinstance(data, Bind):
            return data
        if not isinstance(data, Mapping):
            raise PlanError(
                f"{where}: expected an object such as {{'from': 'bill', 'field': 'iban'}}, got "
                f"{type(data).__name__}"
            )
        keys = ("from", "field", "pick", "by", "where")
        unknown = sorted(str(k)[:40] for k in data if k not in keys)
        if unknown:
            raise PlanError(
                f"{where}: unknown keys {unknown[:10]}; a binding has from, field, pick, by, where"
            )
        pick = data.get("pick", "any")
        if pick is None:
            pick = "any"
        if not isinstance(pick, str):
            raise PlanError(f"{where}.pick: expected one of {list(PICKS)}, got {pick!r:.60}")
        try:
            return cls(
                source=_text(data.get("from"), f"{where}.from") or "",
                field=_text(data.get("field"), f"{where}.field") or "",
                pick=pick,
                by=_text(data.get("by"), f"{where}.by", required=False),
                where=_where_of(data.get("where"), f"{where}.where"),
            )
        except PlanError as exc:
            raise PlanError(f"{where}: {exc}") from None


def _where_of(data: Any, where: str) -> dict[str, str | int | float | bool]:
    """A binding's ``where`` from plain data (None: no filter)."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise PlanError(
            f"{where}: expected an object such as {{'counterparty': 'Clara'}}, got "
            f"{type(data).__name__}"
        )
    return {str(k)[:_MAX_TEXT]: v for k, v in data.items()}


def canonical_value(value: Any) -> str:
    """The form in which an argument value is compared with a plan's values: numbers by
    value (``85``, ``85.0`` and ``"85.00"`` are one), anything else as provenance compares
    values (`normalize`: case, whitespace, link form)."""
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


canonical_item = canonical_value


@dataclass(frozen=True, kw_only=True, eq=False)
class PlannedCall:
    """One call a plan expects: its tool, the argument values it fixes (a value, or a list of
    allowed values), the arguments it binds to sources, and how many calls it admits."""

    tool: str
    id: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    bind: Mapping[str, Bind] = field(default_factory=dict)
    times: int = 1
    _allowed: dict[str, frozenset[str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _text(self.tool, "PlannedCall.tool (a tool name)")
        if "*" in self.tool:
            raise PlanError(f"PlannedCall.tool: a planned call names one tool, got {self.tool!r}")
        _text(self.id, "PlannedCall.id", required=False)
        if isinstance(self.times, bool) or not isinstance(self.times, int) or _huge(self.times):
            shown = "a number of more than 60 digits" if _huge(self.times) else repr(self.times)
            raise PlanError(f"PlannedCall.times: expected a whole number, got {shown:.40}")
        if not 1 <= self.times <= MAX_TIMES:
            raise PlanError(f"PlannedCall.times: expected 1 to {MAX_TIMES} calls, got {self.times}")
        if not isinstance(self.arguments, Mapping) or not isinstance(self.bind, Mapping):
            raise PlanError(
                "PlannedCall.arguments and .bind: expected objects keyed by argument name"
            )
        allowed: dict[str, frozenset[str]] = {}
        for name, values in self.arguments.items():
            where = f"planned call {self.tool}: arguments.{str(name)[:40]}"
            _text(name, where)
            listed = values if isinstance(values, list | tuple) else [values]
            if not listed or len(listed) > _MAX_VALUES:
                raise PlanError(f"{where}: expected 1 to {_MAX_VALUES} values, got {len(listed)}")
            for item in listed:
                if not isinstance(item, str | int | float | bool | decimal.Decimal):
                    raise PlanError(
                        f"{where}: expected text, numbers or booleans, got "
                        f"{type(item).__name__}; leave out values you learn from tool output"
                    )
                if _huge(item) or (isinstance(item, str) and len(item) > _MAX_VALUE_TEXT):
                    raise PlanError(
                        f"{where}: a value too large to be an argument (numbers below "
                        f"10**{_MAX_DIGITS}, texts of at most {_MAX_VALUE_TEXT} characters)"
                    )
            allowed[str(name)] = frozenset(canonical_item(v) for v in listed)
        for name, bound in self.bind.items():
            _text(name, f"planned call {self.tool}: bind key")
            if not isinstance(bound, Bind):
                raise PlanError(f"planned call {self.tool}: bind.{name} must be a Bind")
            if name in allowed:
                raise PlanError(
                    f"planned call {self.tool}: argument {name!r} is both fixed and bound; keep one"
                )
        object.__setattr__(self, "_allowed", allowed)

    def describe(self) -> str:
        """The planned call in one line: ``send_money(iban ← iban of bill) once``."""
        parts = [
            f"{a}={sorted(v)[0] if len(v) == 1 else sorted(v)}" for a, v in self._allowed.items()
        ]
        parts += [f"{a} ← {b.describe()}" for a, b in self.bind.items()]
        times = "once" if self.times == 1 else f"{self.times} times"
        return f"{self.tool}({', '.join(parts)}) {times}"

    def fixed_broken(self, values: Mapping[str, Any]) -> tuple[str, str] | None:
        """The first fixed argument whose value (an item of it) is not allowed, or None. A
        fixed argument the call leaves out (or sets to None) breaks it: a read by another
        argument (``id=`` for ``name=``) is another read."""
        for argument, allowed in self._allowed.items():
            items = value_items(values.get(argument))
            if not items:
                return (argument, "(left out)")
            for item in items:
                if canonical_item(item) not in allowed:
                    return (argument, str(item))
        return None

    def as_record(self) -> dict[str, Any]:
        """The planned call as plain data (`parse_calls` reads it back)."""
        data: dict[str, Any] = {"tool": self.tool}
        if self.id is not None:
            data["id"] = self.id
        if self.arguments:
            data["arguments"] = {
                a: list(v) if isinstance(v, list | tuple) else [v]
                for a, v in self.arguments.items()
            }
        if self.bind:
            data["bind"] = {a: b.as_record() for a, b in self.bind.items()}
        if self.times != 1:
            data["times"] = self.times
        return data


def value_items(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, list | tuple | set | frozenset):
        return tuple(v for v in value if v is not None)
    return (value,)


def parse_calls(data: Any) -> tuple[PlannedCall, ...]:
    """Planned calls from plain data (a plan's ``calls``, a journal record): a list of
    ``{"tool", "id", "arguments", "bind", "times"}``. Raises `PlanError` (naming the
    planned call, the field, what was expected and found) and nothing else."""
    if isinstance(data, PlannedCall):
        data = [data]
    if not isinstance(data, list | tuple):
        raise PlanError(f"calls: expected a list of planned calls, got {type(data).__name__}")
    if len(data) > MAX_CALLS:
        raise PlanError(f"calls: at most {MAX_CALLS} planned calls, got {len(data)}")
    parsed = [parse_call(item, f"calls[{number}]") for number, item in enumerate(data)]
    _check_sources(parsed)
    return tuple(parsed)


def parse_call(item: Any, where: str = "call") -> PlannedCall:
    """One planned call from plain data, its bindings' sources not yet checked (`parse_calls`
    checks them); raises `PlanError` and nothing else."""
    if isinstance(item, PlannedCall):
        return item
    if not isinstance(item, Mapping):
        raise PlanError(
            f"{where}: expected an object such as {{'tool': 'send_money'}}, got "
            f"{type(item).__name__}"
        )
    keys = ("tool", "id", "arguments", "bind", "times")
    unknown = sorted(str(k)[:40] for k in item if k not in keys)
    if unknown:
        raise PlanError(
            f"{where}: unknown keys {unknown[:10]}; use tool, id, arguments, bind, times"
        )
    arguments = item.get("arguments") or {}
    binds = item.get("bind") or {}
    if not isinstance(arguments, Mapping) or not isinstance(binds, Mapping):
        raise PlanError(f"{where}: 'arguments' and 'bind' must be objects keyed by argument")
    times = item.get("times", 1)
    try:
        return PlannedCall(
            tool=_text(item.get("tool"), f"{where}.tool") or "",
            id=_text(item.get("id"), f"{where}.id", required=False),
            arguments=dict(arguments),
            bind={
                str(a): Bind.from_data(b, f"{where}.bind.{str(a)[:40]}") for a, b in binds.items()
            },
            times=1 if times is None else times,
        )
    except PlanError as exc:
        raise PlanError(f"{where}: {exc}") from None


def _check_sources(calls: Sequence[PlannedCall]) -> None:
    ids: dict[str, int] = {}
    for number, planned in enumerate(calls):
        if planned.id is not None:
            if planned.id in ids:
                raise PlanError(f"calls[{number}].id: {planned.id!r} names two planned calls")
            ids[planned.id] = number
    for number, planned in enumerate(calls):
        for argument, bound in planned.bind.items():
            if bound.source not in ids:
                raise PlanError(
                    f"calls[{number}].bind.{argument}.from: no planned call has the id "
                    f"{bound.source!r}; known ids: {sorted(ids)[:10]}"
                )
            if ids[bound.source] == number:
                raise PlanError(f"calls[{number}].bind.{argument}: a call cannot bind to itself")

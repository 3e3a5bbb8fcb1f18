"""The one place where model-facing text is written.

Every rejection a model reads is built here from structured facts (the rule,
the field, the expected and actual value, what to do), bounded in length,
and never from ``str()`` of an arbitrary exception.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from callgate.calls import Stage

__all__ = [
    "MAX_MESSAGE_CHARS",
    "Problem",
    "Rejection",
    "bounded",
    "describe_value",
    "schema_problems",
]

MAX_MESSAGE_CHARS = 1200
_MAX_PROBLEMS = 6


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One thing wrong with a call, as facts; `Rejection.message` renders them."""

    rule: str
    message: str
    field: str | None = None
    expected: str | None = None
    actual: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The problem as a plain dict, without empty fields."""
        fields = ("rule", "field", "expected", "actual", "message")
        return {k: getattr(self, k) for k in fields if getattr(self, k) is not None}


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejection:
    """Why a call stopped before execution, and what to do about it."""

    stage: Stage
    problems: tuple[Problem, ...]
    advice: str
    retryable: bool = True
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def message(self) -> str:
        """The model-facing text: each problem on its own line, then the advice."""
        shown = self.problems[:_MAX_PROBLEMS]
        lines = [f"- {p.message}" for p in shown]
        if len(self.problems) > len(shown):
            lines.append(f"- ... and {len(self.problems) - len(shown)} more problem(s)")
        head = f"Rejected at the {self.stage.value} stage:"
        return bounded("\n".join([head, *lines, self.advice]))


def bounded(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters with a visible marker."""
    if len(text) <= limit:
        return text
    return text[: limit - 20].rstrip() + " ... [message cut]"


def describe_value(value: Any, limit: int = 60) -> str:
    """A short, typed rendering of a value a model sent: ``string "abc"``, ``integer 5``."""
    kind = json_type(value)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return kind if kind in ("null", "object", "array") and len(text) > limit else f"{kind} {text}"


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _loc(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(arguments)"


def _expected(schema: Mapping[str, Any], loc: Sequence[int | str]) -> str | None:
    """The expected type of the field at ``loc``, read from the tool's JSON Schema."""
    node: Any = schema
    defs = schema.get("$defs", {})
    for part in loc:
        node = _deref(node, defs)
        if isinstance(part, int):
            node = node.get("items", {}) if isinstance(node, dict) else {}
        else:
            node = node.get("properties", {}).get(part) if isinstance(node, dict) else None
        if node is None:
            return None
    return _type_text(_deref(node, defs), defs)


def _deref(node: Any, defs: Mapping[str, Any]) -> Any:
    if isinstance(node, dict) and isinstance(node.get("$ref"), str):
        return defs.get(node["$ref"].rsplit("/", 1)[-1], {})
    return node


def _type_text(node: Any, defs: Mapping[str, Any]) -> str | None:
    if not isinstance(node, dict):
        return None
    if "enum" in node:
        return "one of " + ", ".join(json.dumps(v) for v in node["enum"])
    if "const" in node:
        return json.dumps(node["const"])
    if "anyOf" in node:
        alts = [_type_text(_deref(a, defs), defs) for a in node["anyOf"]]
        return " or ".join(a for a in alts if a)
    kind = node.get("type")
    if kind is None:
        return None
    text = str(kind)
    if kind == "array" and isinstance(node.get("items"), dict):
        inner = _type_text(_deref(node["items"], defs), defs)
        text = f"array of {inner}" if inner else text
    bounds = [
        f"{sym} {node[key]}"
        for key, sym in (
            ("minimum", ">="),
            ("exclusiveMinimum", ">"),
            ("maximum", "<="),
            ("exclusiveMaximum", "<"),
        )
        if key in node
    ]
    if "minLength" in node or "maxLength" in node:
        bounds.append(f"length {node.get('minLength', 0)}..{node.get('maxLength', '')}")
    if "pattern" in node:
        bounds.append(f"matching {node['pattern']}")
    return f"{text} ({', '.join(bounds)})" if bounds else text


def schema_problems(
    error: ValidationError, schema: Mapping[str, Any], arguments: Mapping[str, Any]
) -> tuple[Problem, ...]:
    """Turn Pydantic's errors into problems that name field, expected and actual value."""
    allowed = ", ".join(schema.get("properties", {})) or "(none)"
    problems = []
    for err in error.errors(include_url=False):
        loc = tuple(err["loc"])
        path = _loc(loc)
        kind = err["type"]
        expected = _expected(schema, loc)
        if kind == "missing":
            problems.append(
                Problem(
                    rule="required",
                    field=path,
                    expected=expected,
                    message=f"missing required field '{path}'"
                    + (f" (expected {expected})" if expected else ""),
                )
            )
        elif kind == "extra_forbidden":
            where = "this tool" if len(loc) == 1 else f"'{_loc(loc[:-1])}'"
            problems.append(
                Problem(
                    rule="no_extra_fields",
                    field=path,
                    actual=describe_value(err.get("input")),
                    message=f"unexpected field '{path}': {where} has no such field"
                    + (f"; allowed fields: {allowed}" if len(loc) == 1 else ""),
                )
            )
        else:
            actual = describe_value(err.get("input"))
            detail = err["msg"]
            text = f"field '{path}': {detail}"
            if expected:
                text += f"; expected {expected}"
            text += f", got {actual}"
            problems.append(
                Problem(rule=kind, field=path, expected=expected, actual=actual, message=text)
            )
    return tuple(problems)

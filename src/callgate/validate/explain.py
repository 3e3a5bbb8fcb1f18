"""The validate stage's explanations: why arguments do not fit a tool's schema, in words.

A Pydantic `ValidationError` (a decorated function's or a Pydantic model's arguments)
becomes `Problem` facts that name the field, the expected and the actual value, without
Python reprs; `callgate.render` lays them out for the model. A tool defined by a JSON
Schema raises its failures already in words (`callgate.definitions.explain`, whose field
paths and type descriptions this module shares); they are taken over as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from callgate.definitions.explain import field_name, field_path, type_text
from callgate.render import Problem, bounded, describe_value, escape_hidden, render_json

__all__ = ["schema_problems"]


def _node_at(schema: Mapping[str, Any], loc: Sequence[int | str]) -> Any:
    """The subschema describing the value at ``loc`` (None where the schema does not say)."""
    node: Any = schema
    defs = _defs(schema)
    for part in loc:
        node = _deref(node, defs)
        if not isinstance(node, dict):
            return None
        if isinstance(part, int):
            node = node.get("items")
        else:
            props = node.get("properties")
            node = props.get(part) if isinstance(props, dict) else None
    return _deref(node, defs)


def _defs(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    defs = schema.get("$defs", schema.get("definitions", {}))
    return defs if isinstance(defs, dict) else {}


def _deref(node: Any, defs: Mapping[str, Any]) -> Any:
    """``node`` with a local reference followed and a nullable ``anyOf`` unwrapped."""
    for _ in range(8):
        if isinstance(node, dict) and isinstance(node.get("$ref"), str):
            node = defs.get(node["$ref"].rsplit("/", 1)[-1], {})
            continue
        if isinstance(node, dict) and isinstance(node.get("anyOf"), list):
            others = [
                a for a in node["anyOf"] if not (isinstance(a, dict) and a.get("type") == "null")
            ]
            if len(others) == 1 and len(others) < len(node["anyOf"]):
                node = others[0]
                continue
        break
    return node


def _expected(schema: Mapping[str, Any], loc: Sequence[int | str]) -> str | None:
    """The expected type of the field at ``loc``, read from the tool's JSON Schema."""
    node = _node_at(schema, loc)
    return type_text(node, _defs(schema)) if node is not None else None


def _allowed(schema: Mapping[str, Any], loc: Sequence[int | str]) -> str:
    node = _node_at(schema, loc) if loc else schema
    props = node.get("properties") if isinstance(node, dict) else None
    names = [field_name(str(n)) for n in props] if isinstance(props, dict) else []
    shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
    return shown or "(none)"


# Pydantic error types, by what they mean to the model.
_TYPE_NAMES = {
    "int": "integer",
    "float": "number",
    "string": "string",
    "str": "string",
    "bool": "boolean",
    "list": "array",
    "tuple": "array",
    "set": "array",
    "frozen_set": "array",
    "dict": "object",
    "model": "object",
    "model_attributes": "object",
    "dataclass": "object",
    "dataclass_exact": "object",
    "typed_dict": "object",
    "none": "null",
}
_RANGE = {
    "greater_than": ">",
    "greater_than_equal": ">=",
    "less_than": "<",
    "less_than_equal": "<=",
    "multiple_of": "a multiple of",
}
_RANGE_CTX = {
    "greater_than": "gt",
    "greater_than_equal": "ge",
    "less_than": "lt",
    "less_than_equal": "le",
    "multiple_of": "multiple_of",
}


def _pydantic_reason(kind: str, ctx: Mapping[str, Any]) -> tuple[str, str | None]:
    """What an error type means, and the expectation its context states (if any)."""
    if kind in ("literal_error", "enum"):
        return "is not one of the allowed values", None
    if kind in _RANGE:
        return "is out of range", f"{_RANGE[kind]} {render_json(ctx.get(_RANGE_CTX[kind]), 30)}"
    if kind in ("string_too_short", "too_short"):
        unit = "characters" if kind.startswith("string") else "items"
        return "is too short", f"at least {render_json(ctx.get('min_length'), 20)} {unit}"
    if kind in ("string_too_long", "too_long"):
        unit = "characters" if kind.startswith("string") else "items"
        return "is too long", f"at most {render_json(ctx.get('max_length'), 20)} {unit}"
    if kind == "string_pattern_mismatch":
        return "does not match its pattern", f"matching {render_json(ctx.get('pattern'), 80)}"
    if kind == "int_from_float":
        return "must be a whole number written without a fraction", "integer"
    if kind == "recursion_loop":
        return "is nested too deeply", None
    for suffix in ("_type", "_parsing"):
        if kind.endswith(suffix):
            name = kind.removesuffix(suffix)
            return "has the wrong type", _TYPE_NAMES.get(name, name.replace("_", " "))
    if kind in ("none_required", "is_instance_of", "union_tag_invalid", "union_tag_not_found"):
        return "has the wrong type", None
    return "", None


def schema_problems(
    error: ValidationError, schema: Mapping[str, Any], arguments: Mapping[str, Any]
) -> tuple[Problem, ...]:
    """Turn Pydantic's errors into problems that name field, expected and actual value."""
    problems = []
    for err in error.errors(include_url=False):
        loc = tuple(err["loc"])
        path = field_path(loc)
        kind = err["type"]
        ctx: Mapping[str, Any] = err.get("ctx") or {}
        if kind == "json_schema" and "rule" in ctx:
            # Already our own sentence (`callgate.definitions.explain`), facts in the context.
            facts = {k: ctx.get(k) for k in ("rule", "field", "expected", "actual")}
            problems.append(
                Problem(
                    rule=str(facts["rule"]),
                    field=_opt(facts["field"]),
                    expected=_opt(facts["expected"]),
                    actual=_opt(facts["actual"]),
                    message=bounded(str(ctx.get("message", "")), 400),
                )
            )
            continue
        expected = _expected(schema, loc)
        if kind == "missing":
            problems.append(
                Problem(
                    rule="required",
                    field=path,
                    expected=expected,
                    message=f"missing required field '{path}'"
                    + (f" (expected {expected})." if expected else "."),
                )
            )
        elif kind in ("extra_forbidden", "unexpected_keyword_argument"):
            problems.append(_unexpected(path, loc, schema, err.get("input")))
        else:
            problems.append(_wrong_value(kind, path, expected, err, ctx))
    return tuple(problems)


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)


def _unexpected(
    path: str, loc: Sequence[int | str], schema: Mapping[str, Any], value: Any
) -> Problem:
    parent = loc[:-1]
    where = "this tool" if not parent else f"'{field_path(parent)}'"
    return Problem(
        rule="no_extra_fields",
        field=path,
        actual=describe_value(value),
        message=f"unexpected field '{path}': {where} has no such field; "
        f"allowed fields: {_allowed(schema, parent)}.",
    )


def _wrong_value(
    kind: str, path: str, expected: str | None, err: Any, ctx: Mapping[str, Any]
) -> Problem:
    actual = describe_value(err.get("input"))
    reason, stated = _pydantic_reason(kind, ctx)
    if kind in _RANGE and expected and stated and stated.split(" ")[0] not in expected:
        expected = f"{expected} ({stated})"
    wanted = expected or stated
    if not reason:
        # A check of the type's own (a validator in a nested model): its text, made visible.
        detail = escape_hidden(str(err.get("msg", "")))[:200].rstrip(". ")
        text = f"field '{path}' was rejected: {detail}; got {actual}."
        return Problem(rule=kind, field=path, expected=expected, actual=actual, message=text)
    text = f"field '{path}' {reason}: " + (
        f"expected {wanted}, got {actual}." if wanted else f"got {actual}."
    )
    return Problem(rule=kind, field=path, expected=wanted, actual=actual, message=text)

"""The validate stage's explanations: why arguments do not fit a tool's schema, in words.

A Pydantic `ValidationError` (a decorated function's or a Pydantic model's arguments) and a
``jsonschema`` error (a tool defined by a JSON Schema: MCP, OpenAPI, A2A, skills) become
`Problem` facts that name the field, the expected and the actual value, without Python
reprs; `callgate.render` lays them out for the model. The JSON Schema errors reach here
inside Pydantic's: `callgate.definitions.arguments` raises each as a ``json_schema`` error
carrying the ``jsonschema`` error itself (``ctx["error"]``, and where the value sits,
``ctx["prefix"]``), and `schema_problems` explains it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from callgate.regex import ecma_search
from callgate.render import Problem, bounded, describe_value, escape_hidden, json_type, render_json

__all__ = ["schema_error_problem", "schema_problems"]

_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_$@.:-]{1,64}$")


def _name(part: str) -> str:
    """A field name as it appears inside quotes in a message: visible and bounded."""
    if _PLAIN_NAME.fullmatch(part):
        return part
    if not part:
        return '""'  # the empty name, visible
    shown = escape_hidden(part[:64]).replace("'", "\\'")
    return shown if len(part) <= 64 else shown + "..."


def _loc(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{_name(part)}" if out else _name(part)
    return out or "(arguments)"


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
    return _type_text(node, _defs(schema)) if node is not None else None


def _type_text(node: Any, defs: Mapping[str, Any], depth: int = 0) -> str | None:
    if not isinstance(node, dict) or depth > 4:
        return None
    if isinstance(node.get("$ref"), str):
        return _type_text(defs.get(node["$ref"].rsplit("/", 1)[-1]), defs, depth + 1)
    if "enum" in node and isinstance(node["enum"], list):
        return (
            "one of "
            + ", ".join(render_json(v, 40) for v in node["enum"][:12])
            + (", ..." if len(node["enum"]) > 12 else "")
        )
    if "const" in node:
        return render_json(node["const"], 40)
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list):
            alts = [_type_text(a, defs, depth + 1) for a in node[key]]
            return " or ".join(a for a in alts if a) or None
    kind = node.get("type")
    if kind is None:
        return None
    text = " or ".join(str(k) for k in kind) if isinstance(kind, list) else str(kind)
    if kind == "array" and isinstance(node.get("items"), dict):
        inner = _type_text(node["items"], defs, depth + 1)
        text = f"array of {inner}" if inner else text
    bounds = [
        f"{sym} {render_json(node[key], 30)}"
        for key, sym in (
            ("minimum", ">="),
            ("exclusiveMinimum", ">"),
            ("maximum", "<="),
            ("exclusiveMaximum", "<"),
            ("multipleOf", "a multiple of"),
        )
        if key in node and not isinstance(node[key], bool)
    ]
    if "minLength" in node or "maxLength" in node:
        bounds.append(f"length {node.get('minLength', 0)}..{node.get('maxLength', '')}")
    if "minItems" in node or "maxItems" in node:
        bounds.append(f"{node.get('minItems', 0)}..{node.get('maxItems', '')} items")
    if "pattern" in node:
        bounds.append(f"matching the pattern {render_json(node['pattern'], 80)}")
    return f"{text} ({', '.join(bounds)})" if bounds else text


def _allowed(schema: Mapping[str, Any], loc: Sequence[int | str]) -> str:
    node = _node_at(schema, loc) if loc else schema
    props = node.get("properties") if isinstance(node, dict) else None
    names = [_name(str(n)) for n in props] if isinstance(props, dict) else []
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
        path = _loc(loc)
        kind = err["type"]
        ctx: Mapping[str, Any] = err.get("ctx") or {}
        if kind == "json_schema" and "error" in ctx:
            # A JSON Schema keyword failed (`callgate.definitions.arguments`): explained here.
            problems.append(schema_error_problem(ctx["error"], ctx.get("prefix", ())))
            continue
        if kind == "json_schema" and "rule" in ctx:
            # Already our own sentence (a schema the definitions cannot resolve), as facts.
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
    where = "this tool" if not parent else f"'{_loc(parent)}'"
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


# -- JSON Schema errors (imported tools) ---------------------------------------------------

_JSON_RANGE = {
    "minimum": ">=",
    "exclusiveMinimum": ">",
    "maximum": "<=",
    "exclusiveMaximum": "<",
    "multipleOf": "a multiple of",
}


def schema_error_problem(error: Any, prefix: Sequence[int | str] = ()) -> Problem:
    """A ``jsonschema`` validation error as our own problem, without Python reprs.

    ``prefix`` is where the validated value sits in the arguments (the name of
    the argument checked, or nothing for the whole object).
    """
    keyword = str(error.validator) if error.validator is not None else "false"
    loc = (*prefix, *error.absolute_path)
    path = _loc(loc)
    value = error.instance
    rule_value = error.validator_value
    node = error.schema if isinstance(error.schema, dict) else {}
    actual = describe_value(value)
    expected: str | None = None
    if keyword == "required" and isinstance(value, dict) and isinstance(rule_value, list):
        missing = next((r for r in rule_value if r not in value), "")
        field = _loc((*loc, str(missing)))
        props = node.get("properties")
        expected = _type_text(props.get(missing), {}) if isinstance(props, dict) else None
        text = f"missing required field '{field}'" + (
            f" (expected {expected})." if expected else "."
        )
        return Problem(rule="required", field=field, expected=expected, message=text)
    if keyword in ("additionalProperties", "unevaluatedProperties") and isinstance(value, dict):
        declared = node.get("properties")
        known: dict[str, Any] = declared if isinstance(declared, dict) else {}
        found = node.get("patternProperties")
        patterns: dict[str, Any] = found if isinstance(found, dict) else {}
        extra = next(
            (k for k in value if k not in known and not any(_search(p, k) for p in patterns)),
            "",
        )
        field = _loc((*loc, extra))
        where = "this tool" if not loc else f"'{path}'"
        names = ", ".join(_name(str(n)) for n in list(known)[:20]) or "(none)"
        return Problem(
            rule="no_extra_fields",
            field=field,
            actual=describe_value(value.get(extra)),
            message=f"unexpected field '{field}': {where} has no such field; "
            f"allowed fields: {names}.",
        )
    if keyword == "type":
        kinds = rule_value if isinstance(rule_value, list) else [rule_value]
        expected = " or ".join(str(k) for k in kinds)
        reason = "has the wrong type"
    elif keyword in ("enum", "const"):
        expected = _type_text({keyword: rule_value}, {})
        reason = "is not one of the allowed values" if keyword == "enum" else "has the wrong value"
    elif keyword in _JSON_RANGE:
        kind = node.get("type") if isinstance(node.get("type"), str) else json_type(value)
        expected = f"{kind} ({_JSON_RANGE[keyword]} {render_json(rule_value, 30)})"
        reason = "is out of range"
    elif keyword in ("minLength", "maxLength", "minItems", "maxItems"):
        least = keyword.startswith("min")
        unit = "characters" if keyword.endswith("Length") else "items"
        expected = f"{'at least' if least else 'at most'} {render_json(rule_value, 20)} {unit}"
        reason = "is too short" if least else "is too long"
    elif keyword in ("minProperties", "maxProperties"):
        least = keyword.startswith("min")
        expected = f"{'at least' if least else 'at most'} {render_json(rule_value, 20)} fields"
        reason = "has too few fields" if least else "has too many fields"
    elif keyword == "pattern":
        expected = f"a string matching the pattern {render_json(rule_value, 80)}"
        reason = "does not match its pattern"
    elif keyword == "format":
        expected = f"a valid {render_json(rule_value, 30)}"
        reason = "is not in the required format"
    elif keyword == "uniqueItems":
        expected = "items that all differ"
        reason = "has repeated items"
    elif keyword in ("anyOf", "oneOf"):
        shapes = [_shape_text(a) for a in rule_value] if isinstance(rule_value, list) else []
        expected = " or ".join(s for s in shapes if s)[:300] or None
        matched_several = keyword == "oneOf" and not error.context
        reason = (
            "matches more than one of the allowed shapes, but must match exactly one"
            if matched_several
            else "matches none of the allowed shapes"
        )
    elif keyword in ("dependentRequired", "dependencies") and isinstance(value, dict):
        pair = next(
            (
                (k, d)
                for k, deps in (rule_value or {}).items()
                if k in value and isinstance(deps, list)
                for d in deps
                if d not in value
            ),
            None,
        )
        if pair is not None:
            first, needed = pair
            field = _loc((*loc, str(needed)))
            return Problem(
                rule="required",
                field=field,
                message=f"missing field '{field}': it is required when "
                f"'{_loc((*loc, str(first)))}' is given.",
            )
        reason = "lacks a field that another field requires"
    elif keyword == "not":
        reason = "is a value this field must not take"
    elif keyword == "false":
        reason = "is not allowed: this place accepts no value at all"
    else:
        reason = f"does not satisfy the rule {render_json(keyword, 40)} of the tool's schema"
    text = f"field '{path}' {reason}: " + (
        f"expected {expected}, got {actual}." if expected else f"got {actual}."
    )
    return Problem(rule=keyword, field=path, expected=expected, actual=actual, message=text)


def _search(pattern: Any, text: Any) -> bool:
    """Whether a schema's ``patternProperties`` pattern matches the key ``text``.

    The same RE2 patterns the validator runs (`callgate.regex.ecma_search`): the
    model chose the key, so a backtracking engine must never read it.
    """
    if not isinstance(pattern, str) or not isinstance(text, str):
        return False
    return ecma_search(pattern, text)


def _shape_text(node: Any) -> str | None:
    """One alternative of an ``anyOf``/``oneOf``, in words."""
    text = _type_text(node, {})
    if text:
        return text
    if isinstance(node, dict) and isinstance(node.get("required"), list) and node["required"]:
        names = ", ".join(f"'{_name(str(n))}'" for n in node["required"][:6])
        return f"an object with {names}"
    return None

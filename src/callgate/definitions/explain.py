"""A ``jsonschema`` error in words: what a tool defined by a JSON Schema (MCP, OpenAPI,
A2A, skills) tells the model when its arguments break the schema.

The arguments model of such a tool (`callgate.definitions.arguments`) checks a value with
``jsonschema`` while Pydantic validates, and raises the failure as Pydantic's own error
carrying this sentence and its facts, so every reader of the ``ValidationError`` (the
validate stage, an adapter, a direct caller) reads the same words. The validate stage's
explanation of Pydantic's other errors (`callgate.validate.explain`) builds on the field
paths and type descriptions here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from callgate.regex import ecma_search
from callgate.render import Problem, describe_value, escape_hidden, json_type, render_json

__all__ = ["field_name", "field_path", "schema_error_problem", "type_text"]

_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_$@.:-]{1,64}$")


def field_name(part: str) -> str:
    """A field name as it appears inside quotes in a message: visible and bounded."""
    if _PLAIN_NAME.fullmatch(part):
        return part
    if not part:
        return '""'  # the empty name, visible
    shown = escape_hidden(part[:64]).replace("'", "\\'")
    return shown if len(part) <= 64 else shown + "..."


def field_path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{field_name(part)}" if out else field_name(part)
    return out or "(arguments)"


def type_text(node: Any, defs: Mapping[str, Any], depth: int = 0) -> str | None:
    if not isinstance(node, dict) or depth > 4:
        return None
    if isinstance(node.get("$ref"), str):
        return type_text(defs.get(node["$ref"].rsplit("/", 1)[-1]), defs, depth + 1)
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
            alts = [type_text(a, defs, depth + 1) for a in node[key]]
            return " or ".join(a for a in alts if a) or None
    kind = node.get("type")
    if kind is None:
        return None
    text = " or ".join(str(k) for k in kind) if isinstance(kind, list) else str(kind)
    if kind == "array" and isinstance(node.get("items"), dict):
        inner = type_text(node["items"], defs, depth + 1)
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
    path = field_path(loc)
    value = error.instance
    rule_value = error.validator_value
    node = error.schema if isinstance(error.schema, dict) else {}
    actual = describe_value(value)
    expected: str | None = None
    if keyword == "required" and isinstance(value, dict) and isinstance(rule_value, list):
        missing = next((r for r in rule_value if r not in value), "")
        field = field_path((*loc, str(missing)))
        props = node.get("properties")
        expected = type_text(props.get(missing), {}) if isinstance(props, dict) else None
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
        field = field_path((*loc, extra))
        where = "this tool" if not loc else f"'{path}'"
        names = ", ".join(field_name(str(n)) for n in list(known)[:20]) or "(none)"
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
        expected = type_text({keyword: rule_value}, {})
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
            field = field_path((*loc, str(needed)))
            return Problem(
                rule="required",
                field=field,
                message=f"missing field '{field}': it is required when "
                f"'{field_path((*loc, str(first)))}' is given.",
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
    text = type_text(node, {})
    if text:
        return text
    if isinstance(node, dict) and isinstance(node.get("required"), list) and node["required"]:
        names = ", ".join(f"'{field_name(str(n))}'" for n in node["required"][:6])
        return f"an object with {names}"
    return None

"""Where a rejection's model-facing text is assembled.

Every rejection a model reads is laid out here from structured facts (the
rule, the field, the expected and actual value, what to do), bounded in
length, and never from ``str()`` of an arbitrary exception. The one-line
sentences inside those facts (``Problem.message``, the advice) are written by
the stage that finds the failure, and a few notes (an idempotency conflict, a
cut result) are written whole by the module that sends them; see
docs/design-notes.md, "Where model-facing text is written".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from callgate.calls import Stage
from callgate.regex import ecma_search

__all__ = [
    "HIDDEN_CATEGORIES",
    "MAX_MESSAGE_CHARS",
    "Problem",
    "Rejection",
    "bounded",
    "char_escape",
    "describe_value",
    "render_json",
    "schema_error_problem",
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
            lines.append(f"- ... and {len(self.problems) - len(shown)} more problem(s).")
        head = f"Rejected at the {self.stage.value} stage:"
        return bounded("\n".join([head, *lines, self.advice]))


def bounded(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters with a visible marker."""
    if len(text) <= limit:
        return text
    return text[: limit - 20].rstrip() + " ... [message cut]"


HIDDEN_CATEGORIES: frozenset[str] = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Unicode categories a reader cannot see: controls, format characters (bidirectional
overrides, zero width), lone surrogates, private use, unassigned code points, line and
paragraph separators. The CLI and the console show characters of these as escapes."""

_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def char_escape(char: str) -> str:
    """One character as a visible escape: ``\\t``, ``\\n``, ``\\r``, ``\\xNN``,
    ``\\uNNNN`` or ``\\UNNNNNNNN`` (what a terminal or a page shows for a hidden one)."""
    code = ord(char)
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _escape_hidden(text: str) -> str:
    """``text`` with every character a reader cannot see written as a ``\\uXXXX`` escape.

    That is what Python calls non-printable: controls, format characters
    (bidirectional overrides, zero-width), lone surrogates, private use,
    unassigned code points, and every separator but the plain space.
    """
    if text.isprintable():
        return text
    out = []
    for char in text:
        if char.isprintable():
            out.append(char)
        elif ord(char) > 0xFFFF:
            code = ord(char) - 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{ord(char):04x}")
    return "".join(out)


def render_json(value: Any, limit: int = 60) -> str:
    """A value as JSON text for a message: readable, visible, and at most ``limit`` characters.

    Non-ASCII text stays as it is (``"거대한"``, not ``"\\uac70..."``); control,
    format and other invisible characters are written as ``\\uXXXX`` escapes;
    a longer rendering is cut with ``...``.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, default=_not_json)
    except (TypeError, ValueError, RecursionError):
        text = json_type(value)
    text = _escape_hidden(text[: limit * 7])
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def _not_json(value: Any) -> str:
    return f"<{type(value).__name__}>"


def describe_value(value: Any, limit: int = 60) -> str:
    """A short, typed rendering of a value a model sent: ``string "abc"``, ``integer 5``."""
    kind = json_type(value)
    if value is None:
        return "null"
    return f"{kind} {render_json(value, limit)}"


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


_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_$@.:-]{1,64}$")


def _name(part: str) -> str:
    """A field name as it appears inside quotes in a message: visible and bounded."""
    if _PLAIN_NAME.fullmatch(part):
        return part
    if not part:
        return '""'  # the empty name, visible
    shown = _escape_hidden(part[:64]).replace("'", "\\'")
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
        if kind == "json_schema" and "rule" in ctx:
            # Already our own sentence (see `schema_error_problem`), facts in the context.
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
        detail = _escape_hidden(str(err.get("msg", "")))[:200].rstrip(". ")
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

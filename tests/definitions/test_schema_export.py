"""A JSON-Schema tool's exports agree with its validation, for every provider format.

Property: a value the gate accepts validates against every export; a value an
export accepts and the gate refuses is refused for a reason the export could
not carry (the keywords OpenAI's strict mode and Gemini's subset drop, the same
deliberate differences as decorated tools, see tests/core/test_export_agreement.py).
Strict mode is used only where the schema is representable; otherwise the tool
is exported non-strict and `ToolSpec.strict_obstacle` says why.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate import Registry, ToolSpec
from callgate.providers import anthropic, gemini, mcp, openai_chat, openai_responses, text
from callgate.render import Rejection
from callgate.validate import validate_arguments

pytestmark = pytest.mark.timeout(120)

CLOSED = {
    "type": "object",
    "properties": {
        "_from": {"type": "string", "minLength": 1},
        "kind": {"type": "string", "enum": ["a", "b"]},
        "count": {"type": "integer", "minimum": 0, "maximum": 5},
        "price": {"type": "number", "exclusiveMinimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "where": {"$ref": "#/$defs/Place"},
        "note": {"type": ["string", "null"]},
        "choice": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
    },
    "required": ["_from", "kind"],
    "$defs": {
        "Place": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "floor": {"type": "integer"}},
            "required": ["city"],
            "additionalProperties": False,
        }
    },
}
ONE_OF = {
    "type": "object",
    "properties": {
        "pay": {
            "oneOf": [
                {"type": "integer", "minimum": 0},
                {"type": "integer", "maximum": 10},
            ]
        }
    },
    "required": ["pay"],
}
OPEN_NESTED = {
    "type": "object",
    "properties": {
        "meta": {"type": "object", "properties": {"lang": {"type": "string"}}},
        "_class": {"type": "string", "pattern": "^[a-z]+$"},
    },
}


def _handler(**arguments: Any) -> None:
    return None


REGISTRY = Registry()
CLOSED_TOOL = REGISTRY.add_schema_tool("closed.tool", "A closed schema.", CLOSED, _handler)
ONE_OF_TOOL = REGISTRY.add_schema_tool("one_of", "Exactly one of two.", ONE_OF, _handler)
OPEN_TOOL = REGISTRY.add_schema_tool("open_nested", "An open nested object.", OPEN_NESTED, _handler)
TOOLS = [CLOSED_TOOL, ONE_OF_TOOL, OPEN_TOOL]


def _is_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)


def _nullable(node: Any) -> Any:
    if isinstance(node, list):
        return [_nullable(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _nullable(v) for k, v in node.items() if k != "nullable"}
    return {"anyOf": [out, {"type": "null"}]} if node.get("nullable") else out


def _exports(spec: ToolSpec) -> dict[str, tuple[dict[str, Any], bool]]:
    chat = openai_chat.tool_definitions([spec])[0]["function"]
    responses = openai_responses.tool_definitions([spec])[0]
    return {
        "openai_chat": (chat["parameters"], chat["strict"]),
        "openai_responses": (responses["parameters"], responses["strict"]),
        "anthropic": (anthropic.tool_definitions([spec])[0]["input_schema"], False),
        "gemini": (_nullable(gemini.tool_definitions([spec])[0]["parameters"]), False),
        "mcp": (mcp.tool_definitions([spec])[0]["inputSchema"], False),
        "text": (text.tool_definitions([spec])[0]["function"]["parameters"], False),
    }


EXPORTS = {spec.name: _exports(spec) for spec in TOOLS}
STRICT_DROPS = {"minLength", "maxLength"}
# Gemini: no additionalProperties, no exclusive bounds, and oneOf told as anyOf.
GEMINI_DROPS = {"additionalProperties", "exclusiveMinimum", "exclusiveMaximum", "oneOf"}


def test_strict_mode_is_used_only_where_the_schema_is_representable() -> None:
    """Closed schema: strict; oneOf or an open nested object: non-strict, the reason recorded."""
    assert EXPORTS[CLOSED_TOOL.name]["openai_chat"][1] is True
    assert CLOSED_TOOL.strict_obstacle is None
    assert EXPORTS[ONE_OF_TOOL.name]["openai_chat"][1] is False
    assert "oneOf" in (ONE_OF_TOOL.strict_obstacle or "")
    assert EXPORTS[OPEN_TOOL.name]["openai_responses"][1] is False
    assert "field 'meta'" in (OPEN_TOOL.strict_obstacle or "")


def test_the_exported_name_is_the_mapped_one_and_the_schema_is_valid() -> None:
    """Every format carries the provider-safe name and a schema that is itself valid."""
    for schema, _ in EXPORTS[CLOSED_TOOL.name].values():
        Validator.check_schema(schema)
    names = {d["function"]["name"] for d in openai_chat.tool_definitions(REGISTRY)}
    assert "closed_tool" in names
    assert "closed.tool" not in names


_SCALARS = st.none() | st.booleans() | st.integers(-3, 12) | st.sampled_from([2.5, 5.0, "", "x"])


def _value(node: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    if isinstance(node, dict) and "$ref" in node:
        node = CLOSED["$defs"]["Place"]
    if not isinstance(node, dict) or depth > 3:
        return _SCALARS
    kind = node.get("type")
    if "enum" in node:
        main: st.SearchStrategy[Any] = st.sampled_from([*node["enum"], "c"])
    elif "anyOf" in node or "oneOf" in node:
        main = st.one_of([_value(a, depth + 1) for a in node.get("anyOf", node.get("oneOf"))])
    elif kind == "array":
        main = st.lists(_value(node["items"], depth + 1), max_size=3)
    elif kind == "object":
        props = node.get("properties", {})
        main = st.fixed_dictionaries(
            {}, optional={k: _value(v, depth + 1) for k, v in props.items()} | {"zz": _SCALARS}
        )
    elif kind == "string" or kind == ["string", "null"]:
        main = st.sampled_from(["", "abc", "A1", "Oslo"])
    else:
        main = _SCALARS
    return st.integers(0, 6).flatmap(lambda i: _SCALARS if i == 0 else main)


def _explained(spec: ToolSpec, fmt: str, strict: bool, value: dict[str, Any]) -> bool:
    errors = list(Validator(spec.input_schema).iter_errors(value))
    allowed = set(STRICT_DROPS if strict else ()) | (GEMINI_DROPS if fmt == "gemini" else set())

    def explained(error: Any) -> bool:
        if error.context:
            groups: dict[Any, list[Any]] = {}
            for sub in error.context:
                groups.setdefault(sub.relative_schema_path[0], []).append(sub)
            return any(all(explained(e) for e in g) for g in groups.values())
        return bool({error.validator, *error.absolute_schema_path} & allowed)

    return bool(errors) and all(explained(e) for e in errors)


def _strict_shape(value: dict[str, Any], spec: ToolSpec) -> dict[str, Any]:
    """What a strict-mode model sends: every top-level property, null for the optional ones."""
    return {k: value.get(k) for k in spec.input_schema["properties"]} | value


def _accepts_null(node: Any) -> bool:
    if not isinstance(node, dict):
        return True
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    alternatives = node.get("anyOf", node.get("oneOf", []))
    return any(_accepts_null(a) for a in alternatives) or not (
        {"type", "anyOf", "oneOf", "$ref", "enum", "const"} & set(node)
    )


def _without_absent_nulls(value: Any, node: Any) -> Any:
    if isinstance(node, dict) and "$ref" in node:
        node = CLOSED["$defs"]["Place"]
    if not isinstance(value, dict) or not isinstance(node, dict):
        return value
    props = node.get("properties", {})
    required = set(node.get("required", []))
    return {
        k: _without_absent_nulls(v, props.get(k))
        for k, v in value.items()
        if not (v is None and k in props and k not in required and not _accepts_null(props[k]))
    }


@st.composite
def _calls(draw: Any) -> tuple[ToolSpec, dict[str, Any]]:
    spec = draw(st.sampled_from(TOOLS))
    props = spec.input_schema["properties"]
    value = draw(
        st.fixed_dictionaries(
            {}, optional={k: _value(v) for k, v in props.items()} | {"extra": _SCALARS}
        )
    )
    return spec, value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(call=_calls())
def test_the_gate_accepts_a_value_iff_each_export_does(
    call: tuple[ToolSpec, dict[str, Any]],
) -> None:
    """gate accepts ⇒ every export accepts; export accepts, gate refuses ⇒ a declared drop."""
    spec, value = call
    for fmt, (schema, strict) in EXPORTS[spec.name].items():
        sent = _strict_shape(value, spec) if strict else value
        accepted = not isinstance(validate_arguments(spec, sent), Rejection)
        # A null for an optional argument that refuses null means "not given" at every
        # depth (strict mode sends one): DELIBERATE, as for decorated tools.
        plain = _without_absent_nulls(sent, spec.input_schema)
        exported = Validator(schema).is_valid(sent if strict else plain)
        if accepted:
            assert exported, f"{fmt} refuses what the gate accepts: {json.dumps(sent)}"
        elif exported:
            assert _explained(spec, fmt, strict, plain), (
                f"{fmt} accepts what the gate refuses: {sent}"
            )

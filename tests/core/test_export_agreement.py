"""Export and validation agree at every depth (issue 12, item 6).

One property: for every exported format, a value is accepted by the gate if and
only if it validates (``jsonschema``) against the schema that format exports,
over tools with nested optional fields, lists of models, enums, bounds,
integers and numbers, unions, TypedDicts, dataclasses and imported JSON Schema
tools.

How each format is read, and the deliberate differences, stated once:

- Strict exports (OpenAI chat and Responses with ``strict: true``): a strict-mode
  model sends every property, ``null`` for the optional ones; the value is
  compared in that shape (absent optional properties filled with ``null`` at
  every depth) and must agree exactly.
- Non-strict exports do not mark optional properties nullable, yet the gate
  reads a ``null`` there as "use the default" (one rule for every provider: the
  same tool may be exported strictly to OpenAI). DELIBERATELY LOOSER GATE: such
  nulls are taken out before the value is checked against the export.
- Integers: JSON Schema counts ``5.0`` as an integer; the gate does not, so
  that a handler declared for ``int`` never receives a float. DELIBERATELY
  STRICTER GATE: the export is read with the same rule (an integer is a JSON
  number without a fraction).
- Keywords a format cannot carry are dropped from what the model is told; the
  gate still enforces them. DELIBERATELY LOOSER EXPORT, allowed only for those
  keywords: OpenAI strict drops ``minLength``/``maxLength`` (and the other
  keywords strict mode refuses); Gemini's OpenAPI subset has no
  ``additionalProperties`` and no exclusive bounds.
- Imported tools: the gate refuses unknown top-level arguments even where the
  server's schema leaves the top level open (callgate forwards only declared
  arguments). DELIBERATELY STRICTER GATE, at the top level of an imported tool
  only; nested objects follow the server's schema (open stays open).
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Callable
from typing import Annotated, Any, Literal, NotRequired

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict  # Pydantic needs this one before Python 3.12

from callgate import ToolSpec, tool
from callgate.mcp import remote_arguments
from callgate.providers import anthropic, gemini, openai_chat, openai_responses
from callgate.providers import mcp as mcp_format
from callgate.render import Rejection
from callgate.validate import validate_arguments, validate_text_fast

pytestmark = pytest.mark.timeout(120)


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Line(BaseModel):
    """A nested model with Pydantic's default configuration (extra fields ignored, lax)."""

    sku: Annotated[str, Field(min_length=1)]
    quantity: Annotated[int, Field(ge=1, le=99)] = 1
    note: str | None = None
    colour: Colour = Colour.RED


class Shipping(TypedDict):
    city: str
    express: NotRequired[bool]


@dataclasses.dataclass
class Discount:
    code: str
    percent: Annotated[float, Field(ge=0, le=100)] = 0.0


@tool
def place_order(
    lines: Annotated[list[Line], Field(min_length=1, max_length=3)],
    shipping: Shipping | None = None,
    discount: Discount | None = None,
    region: Literal["eu", "us"] = "eu",
    budget: Annotated[float, Field(gt=0)] = 10.0,
    ref: int | str = 0,
) -> None:
    """Place an order."""


@tool
def tag_items(labels: dict[str, int], weight: float = 1.0, line: Line | None = None) -> None:
    """Tag items (a free-form object: exported without strict mode)."""


TARGET = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "label": {"type": "string"}},
    "required": ["id"],
    "additionalProperties": False,
}
IMPORTED_OPEN = {
    "type": "object",
    "properties": {
        "_from": {"type": "string", "minLength": 1},
        "count": {"type": "integer", "minimum": 0, "x-unit": "items"},
        "meta": {
            "type": "object",
            "properties": {"lang": {"type": "string"}, "depth": {"type": "integer"}},
            "required": ["lang"],
        },
        "target": {"$ref": "#/$defs/Target"},
        "mode": {"enum": ["fast", "safe"]},
    },
    "required": ["_from"],
    "$defs": {"Target": TARGET},
}
IMPORTED_CLOSED = {
    "type": "object",
    "properties": {
        "target": {"$ref": "#/$defs/Target"},
        "limit": {"type": "integer", "maximum": 10},
        "_class": {"type": "string", "enum": ["a", "b"]},
    },
    "required": ["target"],
    "additionalProperties": False,
    "$defs": {"Target": TARGET},
}


def _imported(name: str, schema: dict[str, Any]) -> ToolSpec:
    """A tool built the way `callgate.mcp` builds one from a server's ``inputSchema``."""
    arguments = remote_arguments(name, schema)

    async def call(**values: Any) -> Any:
        return arguments.payload(values)

    return ToolSpec(
        name=name,
        description="An imported tool.",
        fn=call,
        is_async=True,
        arguments_model=arguments.model,
        context_param=None,
        input_schema=schema,
        null_means_default=arguments.null_means_default,
    )


TOOLS = [
    place_order,
    tag_items,
    _imported("imported_open", IMPORTED_OPEN),
    _imported("imported_closed", IMPORTED_CLOSED),
]
IMPORTED = {"imported_open", "imported_closed"}


# -- reading each export -------------------------------------------------------------------


def _is_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


# DELIBERATE (see the module docstring): an integer is a JSON number without a fraction.
Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)


def _openapi_nullable(node: Any) -> Any:
    """Gemini's OpenAPI ``nullable: true`` read as OpenAPI means it: also ``null``."""
    if isinstance(node, list):
        return [_openapi_nullable(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _openapi_nullable(v) for k, v in node.items() if k != "nullable"}
    return {"anyOf": [out, {"type": "null"}]} if node.get("nullable") else out


def _chat(spec: ToolSpec) -> tuple[dict[str, Any], bool]:
    function = openai_chat.tool_definitions([spec])[0]["function"]
    return function["parameters"], function["strict"]


def _responses(spec: ToolSpec) -> tuple[dict[str, Any], bool]:
    definition = openai_responses.tool_definitions([spec])[0]
    return definition["parameters"], definition["strict"]


def _anthropic(spec: ToolSpec) -> tuple[dict[str, Any], bool]:
    return anthropic.tool_definitions([spec])[0]["input_schema"], False


def _gemini(spec: ToolSpec) -> tuple[dict[str, Any], bool]:
    return _openapi_nullable(gemini.tool_definitions([spec])[0]["parameters"]), False


def _mcp(spec: ToolSpec) -> tuple[dict[str, Any], bool]:
    return mcp_format.tool_definitions([spec])[0]["inputSchema"], False


FORMATS: dict[str, Callable[[ToolSpec], tuple[dict[str, Any], bool]]] = {
    "openai_chat": _chat,
    "openai_responses": _responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "mcp": _mcp,
}

# DELIBERATELY LOOSER EXPORTS: keywords the format cannot carry (the gate enforces them).
OPENAI_STRICT_DROPS = {"minLength", "maxLength", "uniqueItems", "minProperties", "maxProperties"}
GEMINI_DROPS = {"additionalProperties", "exclusiveMinimum", "exclusiveMaximum"}

EXPORTS = {(fmt, spec.name): export(spec) for fmt, export in FORMATS.items() for spec in TOOLS}
for exported_schema, _ in EXPORTS.values():
    Validator.check_schema(exported_schema)


# -- the shape a model sends, per format ------------------------------------------------------


def _resolve(node: Any, root: dict[str, Any]) -> Any:
    for _ in range(8):
        if isinstance(node, dict) and isinstance(node.get("$ref"), str):
            node = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def _accepts_null(node: Any, root: dict[str, Any]) -> bool:
    node = _resolve(node, root)
    if not isinstance(node, dict):
        return False
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_accepts_null(alt, root) for alt in node.get("anyOf", []))


def _object_schema(node: Any, root: dict[str, Any]) -> Any:
    """The one object alternative of ``node`` (an optional model is anyOf [model, null])."""
    node = _resolve(node, root)
    if isinstance(node, dict) and "anyOf" in node:
        objects = [
            _resolve(a, root)
            for a in node["anyOf"]
            if isinstance(_resolve(a, root), dict) and "properties" in _resolve(a, root)
        ]
        return objects[0] if len(objects) == 1 else None
    return node


def _reshape(value: Any, node: Any, root: dict[str, Any], strict: bool) -> Any:
    """``value`` as sent to a strict format (optional fields filled with null) or to another.

    For a non-strict format, a null for an optional field whose type does not accept
    null is taken out (DELIBERATE: the gate reads it as the default).
    """
    if isinstance(value, list):
        node = _resolve(node, root)
        items = node.get("items") if isinstance(node, dict) else None
        return [_reshape(v, items, root, strict) for v in value]
    node = _object_schema(node, root)
    if not isinstance(value, dict) or not isinstance(node, dict):
        return value
    props = node.get("properties")
    if not isinstance(props, dict):
        extra = node.get("additionalProperties")
        return {k: _reshape(v, extra, root, strict) for k, v in value.items()}
    required = set(node.get("required", []))
    out = {}
    for key, item in value.items():
        prop = props.get(key)
        optional_null = (
            item is None
            and prop is not None
            and key not in required
            and not _accepts_null(prop, root)
        )
        if optional_null and not strict:
            continue
        out[key] = _reshape(item, prop, root, strict)
    if strict:
        for key in props:
            out.setdefault(key, None)
    return out


# -- values a model might send ------------------------------------------------------------------

_JSON_SCALARS = (
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([5.0, 2.5, "x", ""])
)


def _values(node: Any, root: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Mostly well-formed values for ``node``, with the mistakes models make mixed in."""
    node = _resolve(node, root)
    wrong = _JSON_SCALARS | st.just({"zz": 1}) | st.just([])
    if not isinstance(node, dict) or depth > 4:
        return wrong
    if "anyOf" in node:
        main = st.one_of([_values(alt, root, depth + 1) for alt in node["anyOf"]])
    elif "enum" in node:
        main = st.sampled_from([*node["enum"], "RED", "거대한"])
    else:
        main = _typed_values(node, root, depth)
    return st.integers(0, 9).flatmap(lambda i: wrong if i == 0 else main)


def _typed_values(node: dict[str, Any], root: dict[str, Any], depth: int) -> Any:
    kind = node.get("type")
    if kind == "integer":
        low, high = node.get("minimum", -5), node.get("maximum", 120)
        return st.integers(low - 2, high + 2) | st.sampled_from([5.0, 1.5, True, "5"])
    if kind == "number":
        low, high = node.get("minimum", node.get("exclusiveMinimum", -5)), node.get("maximum", 150)
        return (
            st.integers(int(low) - 2, int(high) + 2)
            | st.floats(low - 1, high + 1, allow_nan=False)
            | st.sampled_from([True, "1"])
        )
    if kind == "string":
        return st.text(max_size=4) | st.sampled_from(["", "fast", "eu", "us", "a"])
    if kind == "boolean":
        return st.booleans() | st.sampled_from([0, "true"])
    if kind == "array":
        items = _values(node.get("items", {}), root, depth + 1)
        return st.lists(items, max_size=node.get("maxItems", 3) + 1)
    if kind == "object" or "properties" in node:
        return _object_values(node, root, depth)
    return _JSON_SCALARS


def _object_values(node: dict[str, Any], root: dict[str, Any], depth: int) -> Any:
    props = node.get("properties")
    if not isinstance(props, dict):
        extra = node.get("additionalProperties", {})
        return st.dictionaries(
            st.sampled_from(["a", "b", "_c"]), _values(extra, root, depth + 1), max_size=3
        )
    required = [k for k in node.get("required", []) if k in props]
    fixed = {k: _values(props[k], root, depth + 1) for k in required}
    optional = {
        k: _values(props[k], root, depth + 1) | st.none() for k in props if k not in required
    }
    base = st.fixed_dictionaries(fixed, optional=optional)
    extras = st.dictionaries(st.sampled_from(["zz", "_x", "Sku"]), _JSON_SCALARS, max_size=1)
    drops = st.sets(st.sampled_from(required), max_size=1) if required else st.just(set())
    return st.tuples(base, extras, drops).map(
        lambda t: {k: v for k, v in {**t[0], **t[1]}.items() if k not in t[2]}
    )


# -- the property -------------------------------------------------------------------------


def _gate_accepts(spec: ToolSpec, value: dict[str, Any]) -> bool:
    accepted = not isinstance(validate_arguments(spec, value), Rejection)
    # The one-step fast path (used first in `submit`) agrees; only a top-level null that
    # means "use the default" sends a call to the full path.
    fast = validate_text_fast(spec, json.dumps(value)) is not None
    assert fast is accepted or (accepted and any(v is None for v in value.values()))
    return accepted


def _explained(fmt: str, spec: ToolSpec, sent: dict[str, Any]) -> bool:
    """Whether the export accepts and the gate refuses ``sent`` for a reason declared above."""
    gate_reading = dict(spec.input_schema)
    if spec.name in IMPORTED:
        gate_reading["additionalProperties"] = False  # DELIBERATE: declared arguments only
    plain = _reshape(sent, spec.input_schema, spec.input_schema, strict=False)
    errors = list(Validator(gate_reading).iter_errors(plain))
    if not errors:
        return False
    allowed = set()
    if fmt in ("openai_chat", "openai_responses") and EXPORTS[(fmt, spec.name)][1]:
        allowed |= OPENAI_STRICT_DROPS
    if fmt == "gemini":
        allowed |= GEMINI_DROPS

    def explained(error: Any) -> bool:
        if error.context:  # anyOf / oneOf: one branch whose every error is explained suffices
            branches: dict[Any, list[Any]] = {}
            for sub in error.context:
                branches.setdefault(sub.relative_schema_path[0], []).append(sub)
            return any(all(explained(e) for e in group) for group in branches.values())
        top_level_extra = (
            spec.name in IMPORTED and error.validator == "additionalProperties" and not error.path
        )
        # A dropped keyword drops its subschema too (Gemini keeps no schema for a map's values).
        dropped = {error.validator, *error.absolute_schema_path} & allowed
        return bool(top_level_extra or dropped)

    return all(explained(error) for error in errors)


@st.composite
def _calls(draw: Any) -> tuple[ToolSpec, dict[str, Any]]:
    spec = draw(st.sampled_from(TOOLS))
    value = draw(_object_values(spec.input_schema, spec.input_schema, 0))
    return spec, value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(call=_calls())
def test_the_gate_accepts_a_value_iff_every_export_does(
    call: tuple[ToolSpec, dict[str, Any]],
) -> None:
    """For each format: gate accepts ⇔ ``jsonschema`` accepts the export (differences declared)."""
    spec, value = call
    as_sent = _gate_accepts(spec, value)
    for fmt in FORMATS:
        schema, strict = EXPORTS[(fmt, spec.name)]
        sent = _reshape(value, spec.input_schema, spec.input_schema, strict)
        # A null for an optional field is the default: the reshaped call means the same.
        assert _gate_accepts(spec, sent) is as_sent, (fmt, sent)
        exported = Validator(schema).is_valid(sent)
        if as_sent:
            assert exported, f"{fmt} refuses what the gate accepts: {sent}"
        elif exported:
            assert _explained(fmt, spec, sent), f"{fmt} accepts what the gate refuses: {sent}"


# -- the cases the outside tester found, one by one --------------------------------------------


def test_a_nested_optional_field_sent_as_null_reads_as_its_default() -> None:
    """``{"lines":[{"sku":"A","quantity":null}]}``: allowed by the strict export and the gate."""
    schema, strict = EXPORTS[("openai_chat", "place_order")]
    value = {"lines": [{"sku": "A", "quantity": None}]}
    assert strict
    assert Validator(schema).is_valid(
        _reshape(value, place_order.input_schema, place_order.input_schema, True)
    )
    model = validate_arguments(place_order, value)
    assert not isinstance(model, Rejection)
    assert model.lines[0].quantity == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("value", "field"),
    [
        pytest.param({"lines": [{"sku": "A", "size": "L"}]}, "lines[0].size", id="model-in-list"),
        pytest.param(
            {"lines": [{"sku": "A"}], "shipping": {"city": "Oslo", "door": 4}},
            "shipping.door",
            id="typed-dict",
        ),
        pytest.param(
            {"lines": [{"sku": "A"}], "discount": {"code": "X", "why": "vip"}},
            "discount.why",
            id="dataclass",
        ),
        pytest.param(
            {"labels": {}, "line": {"sku": "A", "qty": 2}}, "line.qty", id="optional-model"
        ),
    ],
)
def test_unknown_fields_are_rejected_at_every_depth(value: dict[str, Any], field: str) -> None:
    """The export says ``additionalProperties: false`` at every depth; the gate refuses them too."""
    spec = place_order if "lines" in value else tag_items
    rejection = validate_arguments(spec, value)
    assert isinstance(rejection, Rejection)
    assert f"unexpected field '{field}'" in rejection.message
    for node in _objects(spec.input_schema):
        assert node["additionalProperties"] is not True


def _objects(node: Any) -> list[dict[str, Any]]:
    found = []
    if isinstance(node, dict):
        if "properties" in node:
            found.append(node)
        for value in node.values():
            found += _objects(value)
    elif isinstance(node, list):
        for value in node:
            found += _objects(value)
    return found


def test_nested_models_are_validated_strictly_like_the_top_level() -> None:
    """``"5"`` is not an integer inside a nested model either (the export says integer)."""
    rejection = validate_arguments(place_order, {"lines": [{"sku": "A", "quantity": "5"}]})
    assert isinstance(rejection, Rejection)
    assert "'lines[0].quantity'" in rejection.message


def test_the_nested_type_itself_is_left_as_it_was() -> None:
    """Sealing changes the tool's validator only: ``Line`` used elsewhere keeps its own rules."""
    assert Line.model_validate({"sku": "A", "quantity": "5", "extra": 1}).quantity == 5


def test_an_imported_schema_without_additional_properties_is_exported_open() -> None:
    """JSON Schema's default is open: the export is not strict and says why."""
    schema, strict = EXPORTS[("openai_chat", "imported_open")]
    assert strict is False
    assert "additionalProperties" not in schema["properties"]["meta"]
    reason = TOOLS[2].strict_obstacle
    assert reason is not None
    assert "the arguments object" in reason
    assert "additionalProperties" in reason
    assert EXPORTS[("openai_chat", "imported_closed")][1] is True
    assert TOOLS[3].strict_obstacle is None
    meta_only = {**IMPORTED_OPEN, "additionalProperties": False}
    assert "field 'meta'" in str(_imported("meta_open", meta_only).strict_obstacle)


def test_an_open_nested_object_of_an_imported_tool_accepts_unknown_fields() -> None:
    """Open stays open: the server's schema allows more fields in ``meta``, so does the gate."""
    model = validate_arguments(TOOLS[2], {"_from": "a", "meta": {"lang": "en", "tone": "dry"}})
    assert not isinstance(model, Rejection)


def test_a_nested_null_in_an_imported_tool_is_left_out_of_what_is_sent() -> None:
    """Strict export makes ``target.label`` nullable; the server never sees the null."""
    spec = TOOLS[3]
    model = validate_arguments(spec, {"target": {"id": 3, "label": None}, "limit": None})
    assert not isinstance(model, Rejection)
    arguments = remote_arguments("imported_closed", IMPORTED_CLOSED)
    assert arguments.payload(model.__dict__) == {"target": {"id": 3}}


class Loose(BaseModel):
    """A nested type that asks for extra fields to be kept."""

    model_config = ConfigDict(extra="allow")
    name: str


@tool
def keep_loose(item: Loose) -> None:
    """Take an object that may carry more fields."""


def test_a_nested_type_that_allows_extra_fields_stays_open_and_says_so() -> None:
    """``extra="allow"`` is the type's own choice: accepted, exported open, never strict."""
    assert keep_loose.input_schema["$defs"]["Loose"]["additionalProperties"] is True
    assert not isinstance(
        validate_arguments(keep_loose, {"item": {"name": "a", "b": 1}}), Rejection
    )
    assert _chat(keep_loose)[1] is False

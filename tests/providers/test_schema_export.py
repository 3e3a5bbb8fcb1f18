"""Tool definitions per format, from each tool's one schema: golden shapes and equivalence.

The golden outputs are written by hand from each provider's documented shape.
The equivalence tests check, with ``jsonschema``, that every exported schema
accepts and rejects the same argument sets as callgate's own validation,
except for the gaps a format cannot express (listed, and tested as gaps).
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal

import jsonschema
import pytest
from mcp_types import Tool as McpTool  # what mcp.types.Tool re-exports; no tests/mcp shadowing
from pydantic import BaseModel, ConfigDict, Field

from callgate import DefinitionError, Registry, ToolSpec
from callgate.providers import anthropic, gemini, openai_chat, openai_responses, text
from callgate.providers import mcp as mcp_format
from callgate.render import Rejection
from callgate.validate import validate_arguments

from .support import sdk_accepts


class Address(BaseModel):
    """A postal address."""

    model_config = ConfigDict(extra="forbid")
    street: str
    city: str


def _registry() -> Registry:
    registry = Registry()

    @registry.tool(effects="write:orders")
    def ship_order(
        order_id: str,
        address: Address,
        speed: Literal["standard", "express"] = "standard",
        gift_note: str | None = None,
        parcels: Annotated[int, Field(ge=1, le=10)] = 1,
    ) -> str:
        """Ship an order to an address.

        Args:
            order_id: The order to ship.
            address: Where to ship it.
            speed: How fast to ship.
            gift_note: Text printed on the gift card.
            parcels: Number of parcels.
        """
        return "shipped"

    @registry.tool(effects="read:clock")
    def get_time() -> str:
        """The current time."""
        return "12:00"

    @registry.tool(effects="write:tags")
    def tag_item(item_id: str, labels: dict[str, str]) -> str:
        """Attach free-form labels to an item."""
        return "tagged"

    return registry


REGISTRY = _registry()
SHIP = REGISTRY.get("ship_order")
assert SHIP is not None

_ADDRESS = {
    "type": "object",
    "description": "Where to ship it.",
    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
    "required": ["street", "city"],
    "additionalProperties": False,
}

# -- golden shapes ---------------------------------------------------------------

OPENAI_STRICT_PARAMETERS = {
    "type": "object",
    "$defs": {
        "Address": {
            "type": "object",
            "description": "A postal address.",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            "required": ["street", "city"],
            "additionalProperties": False,
        }
    },
    "properties": {
        "order_id": {"type": "string", "description": "The order to ship."},
        "address": _ADDRESS,
        "speed": {
            "anyOf": [{"type": "string", "enum": ["standard", "express"]}, {"type": "null"}],
            "description": "How fast to ship.",
        },
        "gift_note": {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "description": "Text printed on the gift card.",
        },
        "parcels": {
            "anyOf": [{"type": "integer", "minimum": 1, "maximum": 10}, {"type": "null"}],
            "description": "Number of parcels.",
        },
    },
    "required": ["order_id", "address", "speed", "gift_note", "parcels"],
    "additionalProperties": False,
}

EMPTY_STRICT = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}

TAG_SCHEMA = {
    "type": "object",
    "properties": {
        "item_id": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["item_id", "labels"],
    "additionalProperties": False,
}


def test_openai_chat_tools_are_strict_with_every_field_required_and_optionals_nullable() -> None:
    """Chat Completions: ``{"type": "function", "function": {..., "strict": true}}``."""
    from openai.types.chat import ChatCompletionFunctionToolParam

    assert openai_chat.tool_definitions(REGISTRY) == [
        {
            "type": "function",
            "function": {
                "name": "ship_order",
                "description": "Ship an order to an address.",
                "parameters": OPENAI_STRICT_PARAMETERS,
                "strict": True,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "get_time",
                "description": "The current time.",
                "parameters": EMPTY_STRICT,
                "strict": True,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "tag_item",
                "description": "Attach free-form labels to an item.",
                "parameters": TAG_SCHEMA,
                "strict": False,
            },
        },
    ]
    for definition in openai_chat.tool_definitions(REGISTRY):
        sdk_accepts(ChatCompletionFunctionToolParam, definition)


def test_openai_responses_tools_are_flat_and_strict() -> None:
    """Responses: ``{"type": "function", "name": ..., "parameters": ..., "strict": true}``."""
    from openai.types.responses import FunctionToolParam

    assert openai_responses.tool_definitions(REGISTRY) == [
        {
            "type": "function",
            "name": "ship_order",
            "description": "Ship an order to an address.",
            "parameters": OPENAI_STRICT_PARAMETERS,
            "strict": True,
        },
        {
            "type": "function",
            "name": "get_time",
            "description": "The current time.",
            "parameters": EMPTY_STRICT,
            "strict": True,
        },
        {
            "type": "function",
            "name": "tag_item",
            "description": "Attach free-form labels to an item.",
            "parameters": TAG_SCHEMA,
            "strict": False,
        },
    ]
    for definition in openai_responses.tool_definitions(REGISTRY):
        sdk_accepts(FunctionToolParam, definition)


CANONICAL_SHIP = {
    "type": "object",
    "$defs": {
        "Address": {
            "type": "object",
            "description": "A postal address.",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            "required": ["street", "city"],
            "additionalProperties": False,
        }
    },
    "properties": {
        "order_id": {"type": "string", "description": "The order to ship."},
        "address": {"$ref": "#/$defs/Address", "description": "Where to ship it."},
        "speed": {
            "type": "string",
            "enum": ["standard", "express"],
            "default": "standard",
            "description": "How fast to ship.",
        },
        "gift_note": {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "default": None,
            "description": "Text printed on the gift card.",
        },
        "parcels": {
            "type": "integer",
            "minimum": 1,
            "maximum": 10,
            "default": 1,
            "description": "Number of parcels.",
        },
    },
    "required": ["order_id", "address"],
    "additionalProperties": False,
}
CANONICAL_EMPTY = {"type": "object", "properties": {}, "additionalProperties": False}


def test_anthropic_tools_carry_the_tools_own_schema_as_input_schema() -> None:
    """Anthropic: ``{"name", "description", "input_schema"}`` with the canonical schema."""
    from anthropic.types import ToolParam

    assert anthropic.tool_definitions(REGISTRY) == [
        {
            "name": "ship_order",
            "description": "Ship an order to an address.",
            "input_schema": CANONICAL_SHIP,
        },
        {"name": "get_time", "description": "The current time.", "input_schema": CANONICAL_EMPTY},
        {
            "name": "tag_item",
            "description": "Attach free-form labels to an item.",
            "input_schema": TAG_SCHEMA,
        },
    ]
    for definition in anthropic.tool_definitions(REGISTRY):
        sdk_accepts(ToolParam, definition)


def test_gemini_declarations_use_the_openapi_subset() -> None:
    """Gemini: references inlined, ``nullable`` instead of anyOf-null, no additionalProperties."""
    assert gemini.tool_definitions(REGISTRY) == [
        {
            "name": "ship_order",
            "description": "Ship an order to an address.",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {"type": "string", "description": "The order to ship."},
                    "address": {
                        "type": "object",
                        "description": "Where to ship it.",
                        "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                        "required": ["street", "city"],
                    },
                    "speed": {
                        "type": "string",
                        "enum": ["standard", "express"],
                        "description": "How fast to ship.",
                    },
                    "gift_note": {
                        "type": "string",
                        "nullable": True,
                        "description": "Text printed on the gift card.",
                    },
                    "parcels": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 10,
                        "description": "Number of parcels.",
                    },
                },
                "required": ["order_id", "address"],
            },
        },
        {"name": "get_time", "description": "The current time."},
        {
            "name": "tag_item",
            "description": "Attach free-form labels to an item.",
            "parameters": {
                "type": "object",
                "properties": {"item_id": {"type": "string"}, "labels": {"type": "object"}},
                "required": ["item_id", "labels"],
            },
        },
    ]


def test_mcp_tools_validate_as_mcp_tool_objects() -> None:
    """MCP: ``{"name", "description", "inputSchema"}``, accepted by the SDK's ``Tool`` model."""
    definitions = mcp_format.tool_definitions(REGISTRY)
    assert definitions[0] == {
        "name": "ship_order",
        "description": "Ship an order to an address.",
        "inputSchema": CANONICAL_SHIP,
    }
    for definition, spec in zip(definitions, REGISTRY, strict=True):
        tool = McpTool.model_validate(definition)
        assert tool.name == spec.name
        assert tool.description == spec.description
        assert tool.input_schema == spec.input_schema


def test_text_tools_use_the_chat_template_shape() -> None:
    """Open models: ``{"type": "function", "function": {...}}`` with the canonical schema."""
    assert text.tool_definitions([SHIP]) == [
        {
            "type": "function",
            "function": {
                "name": "ship_order",
                "description": "Ship an order to an address.",
                "parameters": CANONICAL_SHIP,
            },
        }
    ]


@pytest.mark.parametrize(
    "format_", [openai_chat, openai_responses, anthropic, gemini, mcp_format, text]
)
def test_tool_definitions_refuse_what_is_not_a_tool_spec(format_: Any) -> None:
    """A plain function in the list is a developer mistake, said at definition time."""

    def not_a_tool() -> None: ...

    with pytest.raises(DefinitionError, match="decorate functions with @tool"):
        format_.tool_definitions([not_a_tool])


def test_exports_do_not_change_the_tools_own_schema() -> None:
    """Every export works on a copy: the one source of truth stays as it was."""
    before = copy.deepcopy(SHIP.input_schema)
    for format_ in (openai_chat, openai_responses, anthropic, gemini, mcp_format, text):
        format_.tool_definitions(REGISTRY)
    assert SHIP.input_schema == before


# -- the same argument sets accepted and rejected ------------------------------------

ADDRESS = {"street": "1 Main St", "city": "Oslo"}

GOOD = {
    "required-only": {"order_id": "o-1", "address": ADDRESS},
    "all-fields": {
        "order_id": "o-1",
        "address": ADDRESS,
        "speed": "express",
        "gift_note": "Happy birthday",
        "parcels": 10,
    },
    "nullable-note-null": {"order_id": "o-1", "address": ADDRESS, "gift_note": None},
}
BAD = {
    "missing-order-id": {"address": ADDRESS},
    "order-id-number": {"order_id": 7, "address": ADDRESS},
    "speed-not-in-enum": {"order_id": "o-1", "address": ADDRESS, "speed": "overnight"},
    "parcels-below-minimum": {"order_id": "o-1", "address": ADDRESS, "parcels": 0},
    "parcels-above-maximum": {"order_id": "o-1", "address": ADDRESS, "parcels": 11},
    "parcels-as-string": {"order_id": "o-1", "address": ADDRESS, "parcels": "2"},
    "parcels-fractional": {"order_id": "o-1", "address": ADDRESS, "parcels": 2.5},
    "address-not-object": {"order_id": "o-1", "address": "1 Main St, Oslo"},
    "address-missing-city": {"order_id": "o-1", "address": {"street": "1 Main St"}},
    "extra-field": {"order_id": "o-1", "address": ADDRESS, "priority": "high"},
    "address-extra-field": {"order_id": "o-1", "address": {**ADDRESS, "zip": "0150"}},
}

# What a format cannot say. The gate still rejects these; the model is just not told.
KNOWN_GAPS = {
    ("gemini", "extra-field"),  # no additionalProperties in Gemini's subset
    ("gemini", "address-extra-field"),
}


def _openapi_to_json_schema(node: Any) -> Any:
    """Read Gemini's OpenAPI ``nullable`` the way OpenAPI means it, for ``jsonschema``."""
    if isinstance(node, list):
        return [_openapi_to_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _openapi_to_json_schema(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable"):
        return {"anyOf": [out, {"type": "null"}]}
    return out


def _strict_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """The same call as a strict-mode model sends it: every optional field present, null."""
    return {**dict.fromkeys(SHIP.input_schema["properties"]), **arguments}


EXPORTS: dict[str, tuple[Any, bool]] = {
    "openai_chat": (openai_chat.tool_definitions([SHIP])[0]["function"]["parameters"], True),
    "openai_responses": (openai_responses.tool_definitions([SHIP])[0]["parameters"], True),
    "anthropic": (anthropic.tool_definitions([SHIP])[0]["input_schema"], False),
    "gemini": (_openapi_to_json_schema(gemini.tool_definitions([SHIP])[0]["parameters"]), False),
    "mcp": (mcp_format.tool_definitions([SHIP])[0]["inputSchema"], False),
}


def _callgate_accepts(arguments: dict[str, Any]) -> bool:
    return not isinstance(validate_arguments(SHIP, arguments), Rejection)


@pytest.mark.parametrize("format_name", list(EXPORTS))
@pytest.mark.parametrize("case", [*GOOD, *BAD])
def test_exported_schema_accepts_exactly_what_callgate_accepts(format_name: str, case: str) -> None:
    """``jsonschema`` on the export and callgate's validation agree on every argument set."""
    schema, strict = EXPORTS[format_name]
    arguments = GOOD.get(case) or BAD[case]
    if strict:
        arguments = _strict_arguments(arguments)
    jsonschema.Draft202012Validator.check_schema(schema)
    exported = jsonschema.Draft202012Validator(schema).is_valid(arguments)
    ours = _callgate_accepts(arguments)
    assert ours is (case in GOOD)
    if (format_name, case) in KNOWN_GAPS:
        assert exported, "a listed gap that no longer exists: remove it from KNOWN_GAPS"
        assert not ours
    else:
        assert exported is ours


def test_strict_exports_reject_a_missing_optional_field_that_callgate_fills_in() -> None:
    """Strict mode makes the model send every field; callgate reads a null as the default."""
    schema, _ = EXPORTS["openai_chat"]
    short = GOOD["required-only"]
    assert not jsonschema.Draft202012Validator(schema).is_valid(short)
    filled = _strict_arguments(short)
    assert jsonschema.Draft202012Validator(schema).is_valid(filled)
    model = validate_arguments(SHIP, filled)
    assert not isinstance(model, Rejection)
    assert (model.speed, model.parcels, model.gift_note) == ("standard", 1, None)  # type: ignore[attr-defined]


def _every_object(node: Any) -> list[dict[str, Any]]:
    found = []
    if isinstance(node, dict):
        if node.get("type") == "object":
            found.append(node)
        for value in node.values():
            found += _every_object(value)
    elif isinstance(node, list):
        for value in node:
            found += _every_object(value)
    return found


@pytest.mark.parametrize("spec", list(REGISTRY), ids=lambda s: s.name)
def test_strict_exports_close_every_object_and_never_put_keywords_beside_a_ref(
    spec: ToolSpec,
) -> None:
    """OpenAI's strict subset: all properties required, no extras, ``$ref`` alone."""
    [definition] = openai_chat.tool_definitions([spec])
    if not definition["function"]["strict"]:
        return
    parameters = definition["function"]["parameters"]
    for node in _every_object(parameters):
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])
    for node in _every_object(parameters):
        for value in node.get("properties", {}).values():
            assert "$ref" not in value or len(value) == 1
            assert "default" not in value


@pytest.mark.parametrize("spec", list(REGISTRY), ids=lambda s: s.name)
def test_gemini_exports_hold_no_keyword_outside_the_subset(spec: ToolSpec) -> None:
    """No references, definitions, additionalProperties, defaults or null types."""
    [declaration] = gemini.tool_definitions([spec])
    flat = repr(declaration.get("parameters", {}))
    for keyword in ("$ref", "$defs", "additionalProperties", "default", "'null'"):
        assert keyword not in flat

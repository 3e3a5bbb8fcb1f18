"""Gemini's ``Schema.type`` is one type: a JSON Schema ``type`` list becomes ``anyOf``.

Found by the corpus tier (``make corpus``): the MCP reference server
sequential-thinking declares ``"type": ["boolean", "string"]``, and the Gemini export
passed the list through, which Gemini's function declarations refuse.
"""

from __future__ import annotations

from typing import Any

import pytest

from callgate import Registry
from callgate.providers import gemini


def _declaration(schema: dict[str, Any]) -> dict[str, Any]:
    registry = Registry()
    registry.add_schema_tool("think", "Think.", schema, lambda **kw: "ok")
    [declaration] = gemini.tool_definitions(registry)
    parameters: dict[str, Any] = declaration["parameters"]
    return parameters


def test_a_type_list_becomes_any_of_one_type_each() -> None:
    """``["boolean", "string"]`` with a description: anyOf of the two, description kept."""
    parameters = _declaration(
        {
            "type": "object",
            "properties": {"next": {"type": ["boolean", "string"], "description": "Go on?"}},
            "required": ["next"],
        }
    )
    assert parameters["properties"]["next"] == {
        "description": "Go on?",
        "anyOf": [{"type": "boolean"}, {"type": "string"}],
    }


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {"type": ["string", "integer"], "maxLength": 5, "minimum": 1},
            {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "integer", "minimum": 1}]},
        ),
        (
            {"type": ["array", "null", "string"], "items": {"type": "integer"}},
            {
                "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "string"}],
                "nullable": True,
            },
        ),
        ({"type": ["null", "number"]}, {"type": "number", "nullable": True}),
    ],
)
def test_each_branch_keeps_the_keywords_of_its_own_type(
    schema: dict[str, Any], expected: dict[str, Any]
) -> None:
    """Type-specific keywords go to the branch of their type; null becomes nullable."""
    parameters = _declaration({"type": "object", "properties": {"x": schema}})
    assert parameters["properties"]["x"] == expected

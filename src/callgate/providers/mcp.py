"""MCP: tools exported in the shape of the Model Context Protocol's ``Tool``.

Only the schema export lives here; serving and calling MCP tools is the
job of ``callgate.mcp``.
"""

from __future__ import annotations

from typing import Any

from callgate.providers.base import Tools, specs_of

__all__ = ["tool_definitions"]


def tool_definitions(tools: Tools) -> list[dict[str, Any]]:
    """MCP ``Tool`` dicts: ``{"name", "description", "inputSchema"}`` per tool."""
    definitions = []
    for spec in specs_of(tools):
        definition: dict[str, Any] = {"name": spec.name}
        if spec.description:
            definition["description"] = spec.description
        definition["inputSchema"] = spec.input_schema
        definitions.append(definition)
    return definitions

"""Definitions read for linting: function definitions in a JSON file, as schema tools.

A file of function definitions — a list, or an object with a ``tools`` or
``functions`` list — in any of the shapes providers use
(``{"name", "description", "parameters"}``, OpenAI's ``{"type":
"function", "function": {...}}``, Anthropic's ``input_schema``, MCP's
``inputSchema``) is read into a registry with `Registry.add_schema_tool`.
A definition callgate cannot enforce is not skipped silently: it becomes a
CG100 finding (error) carrying the refusal's reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from callgate.errors import DefinitionError
from callgate.lint.rules import Finding
from callgate.tools import Registry

__all__ = ["function_definitions", "is_function_list"]


def _handler(**arguments: Any) -> None:
    """Linting never calls a tool."""


def _entries(data: Any) -> list[Any] | None:
    if isinstance(data, Mapping):
        for key in ("tools", "functions"):
            if isinstance(data.get(key), list):
                return list(data[key])
        return None
    return list(data) if isinstance(data, list) else None


def is_function_list(data: Any) -> bool:
    """Whether decoded JSON looks like a list of function definitions."""
    entries = _entries(data)
    return bool(entries) and all(isinstance(e, Mapping) for e in entries or ())


def function_definitions(data: Any) -> tuple[Registry, list[Finding]]:
    """The definitions as schema tools, and a CG100 finding for each that was refused."""
    registry = Registry()
    refused: list[Finding] = []
    for position, entry in enumerate(_entries(data) or []):
        item = entry.get("function", entry) if isinstance(entry, Mapping) else entry
        if not isinstance(item, Mapping):
            continue
        name = str(item.get("name") or f"definition {position + 1}")
        schema = item.get("parameters", item.get("input_schema", item.get("inputSchema")))
        if schema is None:
            schema = {"type": "object", "properties": {}}
        try:
            registry.add_schema_tool(name, str(item.get("description") or ""), schema, _handler)
        except DefinitionError as exc:
            refused.append(
                Finding(
                    rule="CG100",
                    severity="error",
                    tool=name,
                    location="schema",
                    message=f"cannot be enforced as written: {exc}",
                    fix="change the schema as the message says; callgate refuses rather than "
                    "loosens it",
                )
            )
    return registry, refused

"""Definitions read for linting: function definitions in a JSON file, as schema tools.

A file of function definitions — a list, or an object with a ``tools`` or
``functions`` list — in any of the shapes providers use
(``{"name", "description", "parameters"}``, OpenAI's ``{"type":
"function", "function": {...}}``, Anthropic's ``input_schema``, MCP's
``inputSchema``) is read into a registry with `Registry.add_schema_tool`.

Nothing is skipped silently, and one bad definition never stops the rest:
each definition that could not be made into a tool (not an object, no name,
a name defined twice, a schema callgate cannot enforce, or even a failure of
callgate itself) is a CG100 finding (error) at ``definition <n>`` carrying
the reason, and the others are linted. An OpenAPI document's operations
left out of the import are CG100 findings too (`left_out`), and a source
that yields no tool at all is one more (`nothing_defined`): "0 tools, 0
findings" would read as clean.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from callgate.definitions import UnenforceableSchema
from callgate.errors import DefinitionError
from callgate.lint.rules import Finding
from callgate.render import render_json
from callgate.tools import NameTaken, Registry

__all__ = ["function_definitions", "is_function_list", "left_out", "nothing_defined"]


def _handler(**arguments: Any) -> None:
    """Linting never calls a tool."""


def _entries(data: Any) -> list[Any] | None:
    if isinstance(data, Mapping):
        if "openapi" in data or "swagger" in data:
            return None
        for key in ("tools", "functions"):
            if isinstance(data.get(key), list):
                return list(data[key])
        return None
    return list(data) if isinstance(data, list) else None


def is_function_list(data: Any) -> bool:
    """Whether decoded JSON looks like a list of function definitions.

    A list (or ``{"tools": [...]}``) counts when any entry is an object: the
    entries that are not become findings, they do not make the file something else.
    An empty ``tools`` list counts too (it defines nothing, which lint reports).
    """
    entries = _entries(data)
    if entries is None:
        return False
    if not entries:
        return isinstance(data, Mapping)
    return any(isinstance(e, Mapping) for e in entries)


def _refused(position: int, tool: str | None, message: str, fix: str) -> Finding:
    return Finding(
        rule="CG100",
        severity="error",
        tool=tool,
        location=f"definition {position}",
        message=message,
        fix=fix,
    )


def function_definitions(data: Any) -> tuple[Registry, list[Finding]]:
    """The definitions as schema tools, and a CG100 finding for each that was refused."""
    registry = Registry()
    refused: list[Finding] = []
    for position, entry in enumerate(_entries(data) or [], start=1):
        item = entry.get("function", entry) if isinstance(entry, Mapping) else entry
        if not isinstance(item, Mapping):
            refused.append(
                _refused(
                    position,
                    None,
                    f"not a function definition: a JSON object with a name and parameters "
                    f"was expected, and this is {render_json(item, 60)}",
                    'write it as {"name": ..., "description": ..., "parameters": {...}}',
                )
            )
            continue
        name = item.get("name")
        if not isinstance(name, str) or not name:
            refused.append(
                _refused(
                    position,
                    None,
                    f"the definition has no name (its 'name' is {render_json(name, 40)})",
                    "give it a name: providers call tools by name",
                )
            )
            continue
        schema = item.get("parameters", item.get("input_schema", item.get("inputSchema")))
        if schema is None:
            schema = {"type": "object", "properties": {}}
        refused.extend(_define(registry, position, name, item.get("description"), schema))
    return registry, refused


def _define(
    registry: Registry, position: int, name: str, description: Any, schema: Any
) -> list[Finding]:
    """Register one definition; the finding that says why it could not be, if it could not."""
    try:
        registry.add_schema_tool(name, str(description or ""), schema, _handler)
    except NameTaken as exc:
        return [
            _refused(
                position,
                name,
                f"the name is defined more than once: {exc}",
                "give each definition its own name (a model cannot tell two tools of one "
                "name apart), or delete the repeated one",
            )
        ]
    except UnenforceableSchema as exc:
        return [
            _refused(
                position,
                name,
                f"cannot be enforced as written: {exc}",
                "change the schema as the message says; callgate refuses rather than loosens it",
            )
        ]
    except DefinitionError as exc:
        return [
            _refused(
                position,
                name,
                f"cannot be defined: {exc}",
                "correct the definition as the message says",
            )
        ]
    except Exception as exc:  # a failure of callgate itself: reported, the rest still linted
        return [
            _refused(
                position,
                name,
                f"callgate failed on this definition ({type(exc).__name__}: "
                f"{render_json(str(exc), 200)}); this is a bug in callgate",
                "report it with this definition; the other definitions were linted",
            )
        ]
    return []


def left_out(skipped: Mapping[str, str]) -> list[Finding]:
    """A CG100 finding for each operation of an OpenAPI document left out of the import."""
    return [
        Finding(
            rule="CG100",
            severity="error",
            tool=key,
            location="operation",
            message=f"left out of the import: {why}",
            fix="change the operation as the reason says, or leave it out on purpose "
            "(OperationConfig(include=False)) and lint with --disable CG100",
        )
        for key, why in skipped.items()
    ]


def nothing_defined(target: str, refused: int) -> Finding:
    """The CG100 finding for a source that yielded no tool: nothing was linted."""
    why = (
        f"all {refused} definitions were left out (see the findings above)"
        if refused
        else "it holds no definition"
    )
    return Finding(
        rule="CG100",
        severity="error",
        tool=None,
        location="source",
        message=f"no tool was linted from {render_json(target, 120)}: {why}",
        fix="lint a source that defines tools, or correct the definitions left out",
    )

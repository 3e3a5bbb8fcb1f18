"""Schema dialects callgate reads, each turned into JSON Schema 2020-12.

Two dialects are accepted for a tool's arguments:

* ``"2020-12"``: JSON Schema 2020-12 (a ``$schema`` naming it, or none);
* ``"openapi-3.0"``: the Schema Object of OpenAPI 3.0, a dialect of draft 4
  with its own words: ``nullable: true`` (the value may also be ``null``),
  boolean ``exclusiveMinimum``/``exclusiveMaximum`` beside ``minimum``/
  ``maximum``, and ``example``. OpenAPI 3.1's Schema Object *is* 2020-12.

The 2020-12 form is what callgate validates with and what it exports, so the
model is told exactly the schema the gate enforces. Annotations that carry no
rule for the model (``x-...`` extensions, ``xml``, ``externalDocs``,
``discriminator``) are dropped; ``example`` becomes ``examples``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from callgate.errors import DefinitionError

__all__ = ["Dialect", "to_2020_12"]

Dialect = Literal["2020-12", "openapi-3.0"]

_2020_12 = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2020-12/schema#",
        "http://json-schema.org/draft/2020-12/schema",
        "http://json-schema.org/draft/2020-12/schema#",
    }
)
_DROPPED = frozenset({"xml", "externalDocs", "discriminator"})
# Keys whose values are data (or maps of names), never schemas to rewrite.
_DATA = frozenset({"enum", "const", "default", "examples", "example", "required"})
_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"})


def to_2020_12(schema: Mapping[str, Any], dialect: Dialect, *, tool: str) -> dict[str, Any]:
    """``schema`` in ``dialect``, as JSON Schema 2020-12 (a new object; the input is kept)."""
    if dialect not in ("2020-12", "openapi-3.0"):
        raise DefinitionError(
            f"tool {tool!r}: schema dialect {dialect!r} is not one callgate reads; "
            "use '2020-12' (JSON Schema) or 'openapi-3.0' (OpenAPI 3.0 Schema Object)"
        )
    declared = schema.get("$schema")
    if declared is not None and dialect == "2020-12" and str(declared) not in _2020_12:
        raise DefinitionError(
            f"tool {tool!r}: the schema declares $schema {str(declared)[:100]!r}; callgate "
            "reads JSON Schema 2020-12 (and the OpenAPI 3.0 dialect, dialect='openapi-3.0'). "
            "Convert the schema to 2020-12 (for draft-07: 'definitions' becomes '$defs', "
            "array-form 'items' becomes 'prefixItems') and drop or update $schema"
        )
    converted = _convert(schema, openapi=dialect == "openapi-3.0")
    converted.pop("$schema", None)
    return converted


def _convert(node: Mapping[str, Any], *, openapi: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if not isinstance(key, str) or key.startswith("x-") or key in _DROPPED:
            continue
        if key in _DATA:
            out[key] = value
        elif key in _MAPS and isinstance(value, Mapping):
            out[key] = {
                name: _convert(sub, openapi=openapi) if isinstance(sub, Mapping) else sub
                for name, sub in value.items()
            }
        elif isinstance(value, Mapping):
            out[key] = _convert(value, openapi=openapi)
        elif isinstance(value, list) and key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            out[key] = [
                _convert(v, openapi=openapi) if isinstance(v, Mapping) else v for v in value
            ]
        else:
            out[key] = value
    if "example" in out:
        example = out.pop("example")
        out.setdefault("examples", [example])
    if openapi:
        out = _openapi_words(out)
    return out


def _openapi_words(node: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI 3.0's own keywords in 2020-12 terms."""
    for bound, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        flag = node.get(exclusive)
        if isinstance(flag, bool):
            del node[exclusive]
            if flag and bound in node:
                node[exclusive] = node.pop(bound)
    nullable = node.pop("nullable", False)
    if nullable is not True:
        return node
    kind = node.get("type")
    if isinstance(kind, str):
        node["type"] = [kind, "null"]
        if isinstance(node.get("enum"), list) and None not in node["enum"]:
            node["enum"] = [*node["enum"], None]
        return node
    if isinstance(kind, list):
        if "null" not in kind:
            node["type"] = [*kind, "null"]
        return node
    description = node.pop("description", None)
    widened: dict[str, Any] = {"anyOf": [node, {"type": "null"}]}
    if description is not None:
        widened["description"] = description
    return widened

"""Arguments models for remote tools, built from the server's JSON Schema.

callgate validates every call before it is sent, with the same machinery as
local tools: a Pydantic model whose fields are the tool's top-level
arguments. Simple properties (strings, integers, booleans, enums, arrays of
them) become typed Pydantic fields; any other property is kept as its JSON
value and checked by ``jsonschema`` against the property's own schema (so
``$ref``, ``anyOf``, nested objects and patterns behave as JSON Schema says).
Keywords that constrain the whole object (``allOf``, ``oneOf``,
``dependentRequired``, ...) are checked on the whole argument object.

Unknown arguments are rejected, even when the server's schema leaves
``additionalProperties`` open: callgate forwards only declared arguments. An
optional argument left out, or given as ``null``, is not sent.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator
from pydantic_core import PydanticCustomError

from callgate.schema import ArgumentsModel

Validator = Any  # jsonschema.protocols.Validator (jsonschema ships no type information)

__all__ = ["RemoteArguments", "UnsupportedSchema", "remote_arguments"]

# Keywords that only describe; they never reject a value.
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly"}
    | {"writeOnly", "format", "contentMediaType", "contentEncoding"}
)
# Top-level keywords the arguments model itself implements.
_OBJECT_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "$schema", "$id", "$defs"}
    | {"definitions", "unevaluatedProperties"}
)
_SIMPLE_SCALAR = {"string": str, "integer": int, "boolean": bool}
_SCALAR_CONSTRAINTS = {
    "string": {"minLength": "min_length", "maxLength": "max_length"},
    "integer": {
        "minimum": "ge",
        "maximum": "le",
        "exclusiveMinimum": "gt",
        "exclusiveMaximum": "lt",
        "multipleOf": "multiple_of",
    },
    "boolean": {},
}
_RESERVED = frozenset(name for name in dir(BaseModel) if name.startswith("model_"))


class UnsupportedSchema(ValueError):
    """A remote tool's input schema that callgate cannot validate or forward faithfully."""


class _RemoteBase(ArgumentsModel):
    """Base of remote arguments models: strict, frozen, unknown fields forbidden."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteArguments:
    """The arguments model of one remote tool and what the gate needs to know about it."""

    model: type[ArgumentsModel]
    required: frozenset[str]
    null_means_default: frozenset[str]
    """Optional arguments whose schema does not accept ``null``: a ``null`` there means absent."""

    def payload(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments to send: validated values, optional ones left out when absent."""
        return {k: v for k, v in values.items() if v is not None or k in self.required}


def remote_arguments(tool: str, schema: Mapping[str, Any]) -> RemoteArguments:
    """Build the arguments model for a remote tool's input schema.

    Raises `UnsupportedSchema` when the schema is not a JSON Schema object
    with named properties that callgate can forward.
    """
    if not isinstance(schema, Mapping):
        raise UnsupportedSchema("the input schema is not a JSON object")
    if schema.get("type", "object") != "object":
        raise UnsupportedSchema(f"the input schema's type is {schema.get('type')!r}, not 'object'")
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        raise UnsupportedSchema("'properties' must be an object and 'required' an array")
    for name in properties:
        if not isinstance(name, str) or not name or name.startswith("_") or name in _RESERVED:
            raise UnsupportedSchema(
                f"argument name {name!r} cannot be represented (empty, leading underscore, "
                "or reserved by Pydantic)"
            )
    missing = [r for r in required if r not in properties]
    if missing:
        raise UnsupportedSchema(f"required argument(s) {missing} are not declared in 'properties'")
    external = sorted(_external_refs(schema))
    if external:
        raise UnsupportedSchema(
            f"the input schema refers to other documents ({', '.join(external[:3])}), "
            "which callgate never fetches"
        )
    validator = _validator(schema)
    fields: dict[str, Any] = {}
    validators: dict[str, Any] = {}
    null_means_default = set()
    for name, prop in properties.items():
        is_required = name in required
        typed = _typed(prop)
        if typed is not None:
            annotation, constraints = typed
            default = ... if is_required else None
            fields[name] = (annotation, Field(default, **constraints))
        else:
            fields[name] = (Any, Field(... if is_required else None))
            validators[f"_check_{len(validators)}"] = _property_check(
                validator, name, prop, is_required
            )
        if not is_required and not _accepts_null(prop):
            null_means_default.add(name)
    whole = {k: v for k, v in schema.items() if k not in _OBJECT_KEYWORDS | _ANNOTATIONS}
    if whole:
        validators["_check_object"] = _object_check(validator, schema, set(required))
    with warnings.catch_warnings():
        # A field named like a deprecated BaseModel method ("json", "schema") works.
        warnings.simplefilter("ignore", UserWarning)
        model = create_model(
            _model_name(tool),
            __base__=_RemoteBase,
            __validators__=validators,
            **fields,
        )
    return RemoteArguments(
        model=model,
        required=frozenset(required),
        null_means_default=frozenset(null_means_default),
    )


def _model_name(tool: str) -> str:
    cleaned = "".join(c if c.isalnum() else "_" for c in tool)
    return f"{cleaned or 'Remote'}Arguments"


def _validator(schema: Mapping[str, Any]) -> Validator:
    """A compiled validator for the server's schema; `UnsupportedSchema` if it is invalid."""
    from jsonschema import SchemaError  # type: ignore[import-untyped]
    from jsonschema.validators import validator_for  # type: ignore[import-untyped]
    from referencing import Registry

    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise UnsupportedSchema(
            f"the input schema is not valid JSON Schema: {exc.message}"
        ) from exc
    # An empty registry: references resolve inside this schema only, never over the network.
    validator: Validator = cls(schema, registry=Registry())
    return validator


def _external_refs(node: Any) -> set[str]:
    """``$ref`` values that point outside the schema document."""
    found: set[str] = set()
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            found.add(ref)
        for value in node.values():
            found |= _external_refs(value)
    elif isinstance(node, list):
        for item in node:
            found |= _external_refs(item)
    return found


def _typed(prop: Any) -> tuple[Any, dict[str, Any]] | None:
    """A Pydantic annotation and constraints equivalent to ``prop``, if it is simple."""
    if not isinstance(prop, Mapping):
        return None
    keys = set(prop) - _ANNOTATIONS
    if "enum" in prop or "const" in prop:
        values = prop["enum"] if "enum" in prop else [prop["const"]]
        rest = keys - {"enum", "const", "type"}
        ok = isinstance(values, list) and values and not rest
        if ok and all(isinstance(v, str) for v in values):
            return _literal(values), {}
        return None
    kind = prop.get("type")
    if kind == "array":
        items = prop.get("items")
        if keys - {"type", "items", "minItems", "maxItems"}:
            return None
        inner = _typed(items) if items is not None else None
        if inner is None or inner[1]:
            return None
        constraints = {}
        if "minItems" in prop:
            constraints["min_length"] = prop["minItems"]
        if "maxItems" in prop:
            constraints["max_length"] = prop["maxItems"]
        return list.__class_getitem__(inner[0]), constraints
    if not isinstance(kind, str) or kind not in _SIMPLE_SCALAR:
        return None
    allowed = _SCALAR_CONSTRAINTS[kind]
    if keys - {"type"} - set(allowed):
        return None
    constraints = {allowed[k]: prop[k] for k in allowed if k in prop}
    if kind == "integer" and not all(isinstance(v, int) for v in constraints.values()):
        return None
    return _SIMPLE_SCALAR[kind], constraints


def _literal(values: list[Any]) -> Any:
    return Literal.__getitem__(tuple(values))


def _accepts_null(prop: Any) -> bool:
    if prop is True or not isinstance(prop, Mapping):
        return prop is True
    kind = prop.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if None in prop.get("enum", [0]) or ("const" in prop and prop["const"] is None):
        return True
    return any(_accepts_null(alt) for key in ("anyOf", "oneOf") for alt in prop.get(key, []))


def _describe_error(error: Any, prefix: str) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    where = f" at '{prefix}{path}'" if path else ""
    return f"{error.message}{where}"


def _first_error(validator: Validator, value: Any, schema: Any) -> Any:
    from jsonschema.exceptions import best_match  # type: ignore[import-untyped]
    from referencing.exceptions import Unresolvable

    try:
        return best_match(validator.evolve(schema=schema).iter_errors(value))
    except Unresolvable as exc:
        raise PydanticCustomError(
            "json_schema",
            "the tool's schema has a reference callgate cannot resolve: {ref}",
            {"ref": str(exc)[:200]},
        ) from None


def _property_check(validator: Validator, name: str, prop: Any, is_required: bool) -> Any:
    """A field validator checking one argument against its own schema."""

    def check(cls: type[BaseModel], value: Any) -> Any:
        if value is None and not is_required and not _accepts_null(prop):
            return value  # null for an optional argument: not sent
        error = _first_error(validator, value, prop)
        if error is not None:
            raise PydanticCustomError(
                "json_schema",
                "{detail}",
                {"detail": _describe_error(error, name)},
            )
        return value

    return field_validator(name)(check)


def _object_check(validator: Validator, schema: Mapping[str, Any], required: set[str]) -> Any:
    """A model validator for keywords on the whole argument object."""

    def check(model: BaseModel) -> BaseModel:
        values = {k: v for k, v in model.__dict__.items() if v is not None or k in required}
        error = _first_error(validator, values, dict(schema))
        if error is not None:
            raise PydanticCustomError(
                "json_schema", "{detail}", {"detail": _describe_error(error, "")}
            )
        return model

    wrapped: Callable[[BaseModel], BaseModel] = check
    return model_validator(mode="after")(wrapped)

"""JSON Schema from Python signatures: the one source of truth for arguments.

`build_arguments_model` turns a function's parameters into a Pydantic model
(unknown fields forbidden); `json_schema` gives the canonical JSON Schema of
that model; `strict_schema` and `inline_refs` are the transformations that
provider formats need (OpenAI strict mode, Gemini's reference-free subset).
The per-provider shapes themselves live in ``providers/``.
"""

from __future__ import annotations

import copy
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from callgate.errors import DefinitionError

__all__ = [
    "ArgumentsModel",
    "build_arguments_model",
    "has_open_objects",
    "inline_refs",
    "json_schema",
    "parse_docstring",
    "strict_schema",
]

JSON = dict[str, Any]


class ArgumentsModel(BaseModel):
    """Base of every generated arguments model: unknown fields are forbidden."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def parse_docstring(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The description of ``fn`` and the text of each parameter from its Args section."""
    doc = inspect.getdoc(fn) or ""
    parsed = docstring_parser.parse(doc)
    parts = [p for p in (parsed.short_description, parsed.long_description) if p]
    description = "\n\n".join(parts).strip()
    params = {p.arg_name: (p.description or "").strip() for p in parsed.params}
    return description, {k: v for k, v in params.items() if v}


def build_arguments_model(
    fn: Callable[..., Any],
    *,
    model_name: str,
    descriptions: Mapping[str, str],
    injected: Callable[[Any], bool],
) -> tuple[type[ArgumentsModel], str | None]:
    """Build the arguments model of ``fn``.

    Returns the model and the name of the parameter that receives the
    `CallContext` (``injected`` tells which annotation that is), which never
    appears in the schema.
    """
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # NameError from an unresolvable forward reference
        raise DefinitionError(
            f"tool {model_name!r}: cannot resolve the type hints of {fn.__qualname__}: {exc}"
        ) from exc
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise DefinitionError(
                f"tool {model_name!r}: parameter *{name} cannot be described by a schema; "
                "declare each argument as a named, typed parameter"
            )
        if name not in hints:
            raise DefinitionError(
                f"tool {model_name!r}: parameter {name!r} has no type annotation; "
                "every argument needs one so that it can be validated"
            )
        annotation = hints[name]
        if injected(annotation):
            context_param = name
            continue
        if name.startswith("_"):
            raise DefinitionError(
                f"tool {model_name!r}: parameter {name!r} starts with an underscore, "
                "which Pydantic cannot use as a field name; rename it"
            )
        default = ... if param.default is param.empty else param.default
        field = _field_for(annotation, default, descriptions.get(name))
        fields[name] = (annotation, field)
    model = create_model(model_name, __base__=ArgumentsModel, **fields)
    return model, context_param


def _field_for(annotation: Any, default: Any, description: str | None) -> FieldInfo:
    """A Field carrying the default and, unless the annotation has one, the description."""
    has_own_description = any(
        isinstance(meta, FieldInfo) and meta.description
        for meta in getattr(annotation, "__metadata__", ())
    )
    if isinstance(default, FieldInfo):
        if description and not default.description and not has_own_description:
            default.description = description
        return default
    if description and not has_own_description:
        return Field(default, description=description)  # type: ignore[no-any-return]
    return Field(default)  # type: ignore[no-any-return]


def json_schema(model: type[BaseModel]) -> JSON:
    """The canonical JSON Schema of an arguments model, without Pydantic's titles."""
    schema = model.model_json_schema()
    _drop_titles(schema)
    schema.pop("description", None)
    schema.setdefault("properties", {})
    schema["additionalProperties"] = False
    return schema


def _drop_titles(node: Any) -> None:
    if isinstance(node, dict):
        title = node.get("title")
        if isinstance(title, str):
            del node["title"]
        props = node.get("properties")
        if isinstance(props, dict):
            for value in props.values():
                _drop_titles(value)
        for key, value in node.items():
            if key != "properties":
                _drop_titles(value)
    elif isinstance(node, list):
        for item in node:
            _drop_titles(item)


def strict_schema(schema: JSON) -> JSON:
    """The schema rewritten for OpenAI's ``strict: true`` structured outputs.

    Every object lists all of its properties in ``required`` and forbids extra
    ones; a property that was optional becomes nullable (the gate reads a
    ``null`` there as "use the default"); ``default`` is dropped.
    """
    out = copy.deepcopy(schema)
    _make_strict(out)
    return out


def _make_strict(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _make_strict(item)
        return
    if not isinstance(node, dict):
        return
    node.pop("default", None)
    props = node.get("properties")
    if node.get("type") == "object" or isinstance(props, dict):
        props = props if isinstance(props, dict) else {}
        node["properties"] = props
        required = set(node.get("required", []))
        for name, prop in props.items():
            if name not in required:
                props[name] = _nullable(prop)
        node["required"] = list(props)
        node["additionalProperties"] = False
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            for prop in value.values():
                _make_strict(prop)
        elif isinstance(value, dict | list):
            _make_strict(value)


def _nullable(prop: JSON) -> JSON:
    """``prop`` widened to also accept ``null``, keeping its description on the outside."""
    if _accepts_null(prop):
        return prop
    description = prop.pop("description", None)
    prop.pop("default", None)
    widened: JSON = {"anyOf": [prop, {"type": "null"}]}
    if "anyOf" in prop and len(prop) == 1:
        widened = {"anyOf": [*prop["anyOf"], {"type": "null"}]}
    if description:
        widened["description"] = description
    return widened


def _accepts_null(prop: JSON) -> bool:
    if prop.get("type") == "null":
        return True
    if isinstance(prop.get("type"), list) and "null" in prop["type"]:
        return True
    return any(_accepts_null(alt) for alt in prop.get("anyOf", []) if isinstance(alt, dict))


def has_open_objects(node: Any) -> bool:
    """Whether a schema admits free-form objects or untyped values.

    Such values have no fixed key order (so a model dump is not canonical) and
    cannot be described by OpenAI's strict mode.
    """
    if not isinstance(node, dict):
        return False
    if not any(k in node for k in ("type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const")):
        return True
    if node.get("additionalProperties", False) is not False:
        return True
    if node.get("type") == "object" and "properties" not in node:
        return True
    for key, value in node.items():
        if key in ("properties", "$defs") and isinstance(value, dict):
            subs: list[Any] = list(value.values())
        elif key == "items":
            subs = [value]
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
            subs = value
        else:
            continue
        if any(has_open_objects(sub) for sub in subs):
            return True
    return False


def inline_refs(schema: JSON) -> JSON:
    """The schema with every local ``$ref`` replaced by its definition (no recursion allowed)."""
    defs = schema.get("$defs", {})

    def resolve(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [resolve(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            if name in seen:
                raise DefinitionError(
                    f"schema type {name!r} is recursive; this format cannot express recursion"
                )
            target = dict(defs[name])
            extra = {k: v for k, v in node.items() if k != "$ref"}
            target.update(extra)
            return resolve(target, (*seen, name))
        return {k: resolve(v, seen) for k, v in node.items() if k != "$defs"}

    resolved: JSON = resolve(schema, ())
    return resolved

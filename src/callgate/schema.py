"""JSON Schema from Python signatures: the one source of truth for arguments.

`build_arguments_model` turns a function's parameters into a Pydantic model
(unknown fields forbidden); `seal` makes such a model read its arguments the
way its exported schema describes them at every depth; `json_schema` gives the
canonical JSON Schema of that model; `strict_schema` and `inline_refs` are the
transformations that provider formats need (OpenAI strict mode, Gemini's
reference-free subset). The per-provider shapes themselves live in
``providers/``. `subschemas`, `map_subschemas` and `reachable_schemas` are the
one way callgate walks a JSON Schema: they enter only the places that hold
schemas, so a property *named* ``type``, ``$ref`` or ``default`` is a name,
never a keyword, and data is never read as a schema.

The rules `seal` applies, at every depth (nested models, TypedDicts,
dataclasses, list items, union members):

- unknown fields are rejected (a nested type that says ``extra="allow"``
  stays open, and its schema says so with ``additionalProperties: true``);
- values are validated strictly (``"5"`` is not an integer, ``5.0`` is not
  an integer, ``1`` is not a boolean), as at the top level;
- ``null`` sent for an optional field (one with a default) whose type does not
  itself accept ``null`` means "use the default": this is exactly where
  `strict_schema` makes a field nullable.
"""

from __future__ import annotations

import copy
import inspect
import threading
import typing
import urllib.parse
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo
from pydantic_core import PydanticOmit, PydanticUseDefault, SchemaValidator

from callgate.errors import DefinitionError

__all__ = [
    "DATA_KEYWORDS",
    "SCHEMA_LISTS",
    "SCHEMA_MAPS",
    "SCHEMA_ONE",
    "ArgumentsModel",
    "build_arguments_model",
    "has_open_objects",
    "inline_refs",
    "json_schema",
    "map_subschemas",
    "parse_docstring",
    "pointer_name",
    "pointer_token",
    "reachable_schemas",
    "seal",
    "strict_obstacle",
    "strict_schema",
    "subschemas",
]

JSON = dict[str, Any]


class ArgumentsModel(BaseModel):
    """Base of every generated arguments model: unknown fields are forbidden."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


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
        if name in _PYDANTIC_RESERVED:
            raise DefinitionError(
                f"tool {model_name!r}: parameter {name!r} is a name Pydantic reserves for its "
                f"own use; name the parameter otherwise and give the model the name as an "
                f"alias: {name}_: Annotated[..., Field(alias={name!r})]"
            )
        default = ... if param.default is param.empty else param.default
        field = _field_for(annotation, default, descriptions.get(name))
        fields[name] = (annotation, field)
    with warnings.catch_warnings():
        # A field named like a deprecated BaseModel method ("json", "schema", "copy")
        # shadows it harmlessly: the gate reads fields, never those methods.
        warnings.filterwarnings("ignore", message="Field name .* shadows an attribute")
        model = create_model(model_name, __base__=ArgumentsModel, **fields)
    seal(model)
    return model, context_param


_PYDANTIC_RESERVED = frozenset(n for n in dir(BaseModel) if n.startswith("model_"))
"""Names Pydantic's models use for themselves (``model_config``, ``model_dump``): never fields."""


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


# -- sealing: validation that agrees with the export at every depth --------------------

_FIELD_KINDS = frozenset({"model-field", "typed-dict-field", "dataclass-field"})
_CLASS_KINDS = frozenset({"model", "dataclass", "typed-dict"})
_EXTRA_KINDS = frozenset({"model-fields", "typed-dict", "dataclass-args"})
_WRAPPERS = frozenset(
    {"function-before", "function-after", "function-wrap", "lax-or-strict", "json-or-python"}
)
# Building a validator flips ``__pydantic_complete__`` on nested classes for a moment.
_SEAL_LOCK = threading.Lock()


def _null_means_default(value: Any) -> Any:
    """Before an optional field's own validator: ``null`` means "use the default"."""
    if value is None:
        raise PydanticUseDefault
    return value


def _null_means_absent(value: Any) -> Any:
    """Before an optional TypedDict key's validator: ``null`` means "not given"."""
    if value is None:
        raise PydanticOmit
    return value


def seal(model: type[BaseModel]) -> None:
    """Make ``model`` validate its arguments the way its exported schema reads, at every depth.

    Pydantic applies a model's configuration to that model only: a nested
    `BaseModel` keeps its own (unknown fields silently dropped, ``"5"``
    accepted for an integer), while the exported schema says objects are
    closed and types exact. This rebuilds the model's validator from its core
    schema with unknown fields forbidden and strict validation in every nested
    type (unless one says ``extra="allow"``), and with ``null`` read as "use
    the default" for every optional field below the top level whose type does
    not accept ``null``. Only ``model``'s own validator changes; the nested
    classes are untouched.

    At the top level, `callgate.validate.validate_arguments` takes such nulls
    out before validating (`ToolSpec.null_means_default`): a call without
    nulls then costs no Python call per optional field on the fast path.
    """
    original = model.__pydantic_core_schema__
    refs: dict[str, Any] = {}
    _collect_refs(original, refs)
    classes: list[type] = []
    sealed = _sealed(original, refs, classes, _top_level_fields(original))
    with _SEAL_LOCK:
        # pydantic-core reuses the ready-made validator of a complete class found in a
        # schema (the model itself, a nested model) instead of building the one given.
        flipped = [c for c in classes if c.__dict__.get("__pydantic_complete__") is True]
        for cls in flipped:
            cls.__pydantic_complete__ = False  # type: ignore[attr-defined]
        try:
            validator = SchemaValidator(sealed)
        finally:
            for cls in flipped:
                cls.__pydantic_complete__ = True  # type: ignore[attr-defined]
    model.__pydantic_validator__ = validator


# The keys of a core schema that hold core schemas (one, a list, or a map of names to
# them: model and TypedDict ``fields``, a tagged union's ``choices``). Any other key holds
# data (``default``, a literal's ``expected`` values, ``metadata``, a class), and a map's
# keys are field names, never keywords: a field named ``type`` is a name, not a type.
_CORE_SCHEMA_KEYS = frozenset(
    {"schema", "items_schema", "keys_schema", "values_schema", "extras_schema"}
    | {"extras_keys_schema", "return_schema", "lax_schema", "strict_schema", "json_schema"}
    | {"python_schema", "json_schema_input_schema", "var_args_schema", "var_kwargs_schema"}
    | {"arguments_schema", "steps", "definitions", "choices", "fields", "computed_fields"}
)
_CORE_NAME_MAPS = frozenset({"fields", "choices"})


def _core_mapped(node: Mapping[str, Any], fn: Callable[[Any], Any]) -> dict[str, Any]:
    """A shallow copy of the core schema ``node`` with ``fn`` applied to each schema it holds."""
    out = dict(node)
    for key, value in node.items():
        if key not in _CORE_SCHEMA_KEYS:
            continue
        if isinstance(value, dict):
            if key in _CORE_NAME_MAPS:
                out[key] = {name: fn(sub) for name, sub in value.items()}
            else:
                out[key] = fn(value)
        elif isinstance(value, list):
            out[key] = [
                (fn(item[0]), *item[1:]) if isinstance(item, tuple) and item else fn(item)
                for item in value
            ]
    return out


def _core_children(node: Mapping[str, Any]) -> list[Any]:
    """The core schemas directly under ``node`` (where `_core_mapped` would apply a function)."""
    children: list[Any] = []
    _core_mapped(node, lambda sub: children.append(sub))
    return children


def _collect_refs(node: Any, refs: dict[str, Any]) -> None:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("ref")
            if isinstance(ref, str):
                refs[ref] = item
            stack.extend(_core_children(item))


def _top_level_fields(schema: Any) -> frozenset[int]:
    """Identities of the field schemas of the model itself (not of nested types)."""
    node = schema.get("schema") if schema.get("type") == "definitions" else schema
    inner = node.get("schema") if isinstance(node, dict) and node.get("type") == "model" else None
    if isinstance(inner, dict) and isinstance(inner.get("fields"), dict):
        return frozenset(id(f) for f in inner["fields"].values())
    return frozenset()


def _sealed(node: Any, refs: Mapping[str, Any], classes: list[type], top: frozenset[int]) -> Any:
    """A copy of a core schema with the rules of `seal` applied (the original is kept)."""
    if not isinstance(node, dict):
        return node
    out = _core_mapped(node, lambda sub: _sealed(sub, refs, classes, top))
    kind = out.get("type")
    if kind in _CLASS_KINDS:
        if isinstance(out.get("cls"), type):
            classes.append(out["cls"])
        config = dict(out.get("config") or {})
        if config.get("extra_fields_behavior") != "allow":
            config["extra_fields_behavior"] = "forbid"
        config["strict"] = True
        out["config"] = config
    if kind in _EXTRA_KINDS and out.get("extra_behavior") == "ignore":
        out["extra_behavior"] = "forbid"
    if kind in _FIELD_KINDS and id(node) not in top:
        inner = out["schema"]
        if inner.get("type") == "default" and not _core_accepts_none(inner["schema"], refs):
            out["schema"] = {**inner, "schema": _before(_null_means_default, inner["schema"])}
        elif (
            kind == "typed-dict-field"
            and out.get("required") is False
            and not _core_accepts_none(inner, refs)
        ):
            out["schema"] = _before(_null_means_absent, inner)
    return out


def _before(function: Callable[[Any], Any], schema: Any) -> dict[str, Any]:
    return {
        "type": "function-before",
        "function": {"type": "no-info", "function": function},
        "schema": schema,
    }


def _core_accepts_none(
    node: Any, refs: Mapping[str, Any], seen: frozenset[str] = frozenset()
) -> bool:
    """Whether a core schema accepts ``None`` (unknown shapes count as accepting it)."""
    if not isinstance(node, dict):
        return True
    kind = node.get("type")
    if kind in ("none", "nullable", "any"):
        return True
    if kind == "definition-ref":
        ref = node.get("schema_ref")
        if not isinstance(ref, str) or ref in seen or ref not in refs:
            return True
        return _core_accepts_none(refs[ref], refs, seen | {ref})
    if kind == "definitions":
        return _core_accepts_none(node.get("schema"), refs, seen)
    if kind in ("union", "tagged-union"):
        choices = node.get("choices")
        options = choices.values() if isinstance(choices, dict) else choices or ()
        return any(
            _core_accepts_none(c[0] if isinstance(c, tuple) else c, refs, seen) for c in options
        )
    if kind in _WRAPPERS or kind == "default":
        inner = node.get("schema", node.get("strict_schema", node.get("json_schema")))
        return inner is None or _core_accepts_none(inner, refs, seen)
    if kind == "function-plain" or kind == "custom-error":
        return kind == "function-plain" or _core_accepts_none(node.get("schema"), refs, seen)
    return False


def json_schema(model: type[BaseModel]) -> JSON:
    """The canonical JSON Schema of an arguments model, without Pydantic's titles."""
    schema = model.model_json_schema()
    for _, node in subschemas(schema):
        # Titles of schemas only: a property named "title", or a default value with a
        # "title" key, is kept.
        if isinstance(node.get("title"), str):
            del node["title"]
        # A sealed model forbids unknown fields at every depth (see `seal`); Pydantic
        # writes that only for the types whose own configuration says so.
        if isinstance(node.get("properties"), dict):
            node.setdefault("additionalProperties", False)
    schema.pop("description", None)
    schema.setdefault("properties", {})
    return schema


# -- where a JSON Schema's subschemas are ------------------------------------------------

SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
    | {"dependencies"}
)
"""Keywords whose value maps names (properties, definitions) to schemas."""
SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
"""Keywords whose value is a list of schemas (and ``items`` in its old array form)."""
SCHEMA_ONE = frozenset(
    {"items", "additionalItems", "additionalProperties", "unevaluatedItems", "not", "if"}
    | {"unevaluatedProperties", "then", "else", "contains", "propertyNames", "contentSchema"}
)
"""Keywords whose value is one schema."""


def _children(node: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each schema object directly under ``node``, with its JSON pointer relative to it."""
    for key, value in node.items():
        if key in SCHEMA_MAPS and isinstance(value, Mapping):
            for name, sub in value.items():
                if isinstance(sub, Mapping):
                    yield f"/{key}/{pointer_token(str(name))}", sub
        elif (key in SCHEMA_LISTS or key == "items") and isinstance(value, list):
            for i, sub in enumerate(value):
                if isinstance(sub, Mapping):
                    yield f"/{key}/{i}", sub
        elif key in SCHEMA_ONE and isinstance(value, Mapping):
            yield f"/{key}", value


def pointer_token(name: str) -> str:
    """``name`` as one token of a JSON pointer (``~`` and ``/`` escaped)."""
    return name.replace("~", "~0").replace("/", "~1")


def subschemas(node: Any, pointer: str = "") -> Iterator[tuple[str, JSON]]:
    """Every schema object in ``node`` with its JSON pointer, ``node`` first.

    Only the places that hold schemas are entered: the keys of ``properties``,
    ``$defs``... are names, never keywords (a property named ``type`` or
    ``$ref`` is a name), and data (``default``, ``enum``, ``const``,
    ``examples``) is never read as a schema. Parents come before their
    children, and a node's children are read only after it was yielded, so a
    caller may rewrite a node in place (a wrapped property is then entered as
    wrapped). Iterative: a deep schema cannot exhaust the stack.
    """
    if not isinstance(node, Mapping):
        return
    stack: list[tuple[str, Any]] = [(pointer, node)]
    while stack:
        where, item = stack.pop()
        yield where, item
        stack.extend(reversed([(where + rel, sub) for rel, sub in _children(item)]))


DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "example"})
"""Keywords whose value is data, never a schema, whatever it looks like."""


def reachable_schemas(node: Any, pointer: str = "") -> Iterator[tuple[str, JSON]]:
    """Every object in ``node`` that a validator could read as a schema, with its pointer.

    `subschemas`, and also the objects under keywords callgate does not know: a
    ``$ref`` may point anywhere in the document, so a check that must see every
    pattern or format reads them too. Data (``default``, ``enum``, ``const``,
    ``examples``) is left out, and a map of names (``properties``) is entered,
    never read as a schema itself: a property named ``pattern`` is a name.
    """
    if not isinstance(node, Mapping):
        return
    stack: list[tuple[str, Any]] = [(pointer, node)]
    while stack:
        where, item = stack.pop()
        yield where, item
        found: list[tuple[str, Any]] = []
        for key, value in item.items():
            if key in DATA_KEYWORDS:
                continue
            path = f"{where}/{pointer_token(str(key))}"
            if key in SCHEMA_MAPS and isinstance(value, Mapping):
                found.extend((f"{path}/{pointer_token(str(n))}", v) for n, v in value.items())
            elif isinstance(value, list):
                found.extend((f"{path}/{i}", v) for i, v in enumerate(value))
            else:
                found.append((path, value))
        stack.extend(reversed([(w, v) for w, v in found if isinstance(v, Mapping)]))


def map_subschemas(node: Mapping[str, Any], fn: Callable[[Mapping[str, Any]], Any]) -> JSON:
    """A shallow copy of the schema object ``node`` with ``fn`` applied to each schema
    object directly under it (where `subschemas` would enter), data and names kept."""
    out = dict(node)
    for key, value in node.items():
        if key in SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {n: fn(v) if isinstance(v, Mapping) else v for n, v in value.items()}
        elif (key in SCHEMA_LISTS or key == "items") and isinstance(value, list):
            out[key] = [fn(v) if isinstance(v, Mapping) else v for v in value]
        elif key in SCHEMA_ONE and isinstance(value, Mapping):
            out[key] = fn(value)
    return out


def strict_schema(schema: JSON) -> JSON:
    """The schema rewritten for OpenAI's ``strict: true`` structured outputs.

    Every object lists all of its properties in ``required`` and forbids extra
    ones; a property that was optional becomes nullable (the gate reads a
    ``null`` there as "use the default"); ``default`` is dropped.
    """
    out = copy.deepcopy(schema)
    for _, node in subschemas(out):
        node.pop("default", None)
        props = node.get("properties")
        if node.get("type") == "object" or isinstance(props, dict):
            props = props if isinstance(props, dict) else {}
            node["properties"] = props
            required = set(node.get("required", []))
            for name, prop in props.items():
                if name not in required and isinstance(prop, dict):
                    props[name] = _nullable(prop)
            node["required"] = list(props)
            node["additionalProperties"] = False
    return out


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
    cannot be described by OpenAI's strict mode. An object that does not say
    ``additionalProperties`` is open: that is JSON Schema's default.
    """
    return _open_reason(node) is not None


def strict_obstacle(node: Any) -> str | None:
    """Why a schema cannot be exported in OpenAI's strict mode, or None if it can.

    Strict mode closes every object; a schema with an open object (an
    ``additionalProperties`` that is absent or not ``false``, an object without
    ``properties``) or an untyped value would be narrowed by it. Strict mode has
    no ``oneOf`` ("exactly one of", which ``anyOf`` would loosen) and no
    ``allOf`` of several schemas. Such a schema is exported as it is, without
    ``strict``, and this text says why.
    """
    open_reason = _open_reason(node)
    if open_reason is not None:
        return open_reason
    for path, sub in _located(node, _ROOT):
        if isinstance(sub.get("oneOf"), list):
            return (
                f"{path} must match exactly one of several schemas (oneOf), "
                "which strict mode cannot express"
            )
        all_of = sub.get("allOf")
        if isinstance(all_of, list) and len(all_of) > 1:
            return f"{path} must match several schemas at once (allOf), which strict mode lacks"
    return None


def _open_reason(node: Any) -> str | None:
    for path, sub in _located(node, _ROOT):
        if not any(k in sub for k in ("type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const")):
            return f"{path} may hold any value, which strict mode cannot express"
        if sub.get("type") == "object" or "properties" in sub:
            extra = sub.get("additionalProperties", True)
            if "properties" not in sub and extra is not False:
                return f"{path} is a free-form object, which strict mode cannot express"
            if extra is not False:
                return (
                    f"{path} accepts fields beyond its declared properties "
                    "(additionalProperties is not false), which strict mode cannot express"
                )
    return None


_ROOT = "the arguments object"


def _located(node: Any, path: str) -> Iterator[tuple[str, JSON]]:
    """Every schema object in ``node`` with a readable location, ``$defs`` included."""
    if not isinstance(node, dict):
        return
    yield path, node
    for key, value in node.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            for name, sub in value.items():
                where = f"field '{name}'" if key == "properties" else f"definition '{name}'"
                yield from _located(sub, where if path == _ROOT else f"{where} in {path}")
        elif key == "items":
            yield from _located(value, f"each item of {path}")
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
            for sub in value:
                yield from _located(sub, path)
        elif key == "additionalProperties" and isinstance(value, dict):
            yield from _located(value, f"each extra field of {path}")


def inline_refs(schema: JSON) -> JSON:
    """The schema with every local ``$ref`` replaced by its definition (no recursion allowed).

    Definitions are read under ``$defs`` and under draft-07's ``definitions``.
    """
    maps = {key: schema.get(key) for key in ("$defs", "definitions")}
    defs = {f"#/{k}/": v for k, v in maps.items() if isinstance(v, Mapping)}

    def resolve(node: Mapping[str, Any], seen: tuple[str, ...]) -> JSON:
        ref = node.get("$ref")
        prefix = next((p for p in defs if isinstance(ref, str) and ref.startswith(p)), None)
        if isinstance(ref, str) and prefix is not None:
            name = pointer_name(ref.removeprefix(prefix))
            if ref in seen:
                raise DefinitionError(
                    f"schema type {name!r} is recursive; this format cannot express recursion"
                )
            target = defs[prefix].get(name)
            if not isinstance(target, Mapping):
                raise DefinitionError(f"the schema refers to {ref!r}, which it does not define")
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return resolve(merged, (*seen, ref))
        out = map_subschemas(node, lambda sub: resolve(sub, seen))
        out.pop("$defs", None)
        out.pop("definitions", None)
        return out

    return resolve(schema, ())


def pointer_name(token: str) -> str:
    """The name one JSON pointer token in a URI fragment stands for (``a~1b`` is ``a/b``)."""
    return urllib.parse.unquote(token).replace("~1", "/").replace("~0", "~")

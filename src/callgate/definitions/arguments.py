"""Arguments models built from a JSON Schema: validation with the schema's own semantics.

`schema_arguments` turns a tool's JSON Schema (2020-12; see `dialects` for
OpenAPI 3.0) into the same kind of Pydantic model a decorated function gets,
so a tool defined by a schema goes through the gate's one validation path.
Simple properties (strings, integers, booleans, string enums, arrays of
them, without ``format`` or ``pattern``) become typed Pydantic fields; any
other property is kept as its JSON value and checked by ``jsonschema``
against the property's own schema (``$ref``/``$defs``, ``anyOf``/``oneOf``,
nested objects, formats and patterns behave as JSON Schema says). Keywords
on the whole object (``allOf``, ``oneOf``, ``dependentRequired``, ...) are
checked on the whole argument object.

Imported MCP tools are built by this function too (`callgate.mcp.arguments`,
where a format callgate does not know is an annotation rather than a
refusal). The readings:

- unknown top-level arguments are rejected; below the top level objects
  follow the schema (no ``additionalProperties`` means open);
- ``null`` for an optional property whose schema does not accept ``null``
  means "not given", at every depth (OpenAI's strict mode sends it);
- an integer is a JSON number without a fraction or exponent (``5.0`` is not
  an integer), whichever path checks it;
- ``format`` is asserted, not an annotation: the checkers are
  `callgate.definitions.formats` (and the developer's own), and a format
  known to neither is refused at definition time;
- patterns run on RE2 (`callgate.regex`), in time linear in the value: the
  model chooses the values, so it must never choose how long a check takes.
  A pattern RE2 cannot run (a backreference, a lookaround) is refused, as is
  ``unevaluatedProperties`` beside ``patternProperties``;
- references resolve inside the schema only, never over the network; a
  reference to another document is refused.

Property names Pydantic cannot use as field names (``_from``, ``_class``,
``model_dump``) are kept as aliases: the model sends and sees ``_from``, the
field is named ``from_``, and `SchemaArguments.by_schema_name` gives the
values back under the schema's names.

This module imports no stage and no tool: `callgate.tools` builds on it.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator
from pydantic_core import PydanticCustomError

from callgate.definitions.explain import schema_error_problem
from callgate.definitions.formats import FormatCheck, checks_for, unknown_formats
from callgate.definitions.metaschema import check_schema
from callgate.errors import DefinitionError
from callgate.regex import Unsupported, ecma_regex, ecma_search
from callgate.render import render_json
from callgate.schema import ArgumentsModel, reachable_schemas, seal

Validator = Any  # jsonschema.protocols.Validator (jsonschema ships no type information)

__all__ = ["SchemaArguments", "UnenforceableSchema", "schema_arguments"]

# Keywords that can reject a value (JSON Schema drafts 3 to 2020-12); any other key,
# an ``x-...`` extension or an unknown word, is an annotation and changes nothing.
_VALIDATING = frozenset(
    {"type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum"}
    | {"exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems"}
    | {"uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties"}
    | {"required", "dependentRequired", "items", "prefixItems", "additionalItems"}
    | {"contains", "properties", "patternProperties", "additionalProperties"}
    | {"propertyNames", "dependentSchemas", "dependencies", "unevaluatedItems"}
    | {"unevaluatedProperties", "allOf", "anyOf", "oneOf", "not", "if", "then", "else"}
    | {"$ref", "$dynamicRef", "$recursiveRef", "divisibleBy", "disallow", "extends"}
    | {"format"}
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


class UnenforceableSchema(DefinitionError):
    """A tool's schema that callgate cannot enforce as written; the message says why and what to do.

    Raised where the tool is defined: a schema is refused rather than loosened.
    """


class _SchemaBase(ArgumentsModel):
    """Base of schema-built arguments models: strict, frozen, unknown fields forbidden.

    Dumps use the schema's property names (``_from``), not the field names.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, serialize_by_alias=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class SchemaArguments:
    """The arguments model built from one tool's schema, and what the gate needs to know."""

    model: type[ArgumentsModel]
    required: frozenset[str]
    """Field names of the required arguments."""
    null_means_default: frozenset[str]
    """Optional arguments (by the schema's names) whose schema does not accept ``null``.

    A ``null`` sent for one of them means absent.
    """
    names: Mapping[str, str] = field(default_factory=dict)
    """The schema's property name of each field whose name differs (``{"from_": "_from"}``)."""
    fields: Mapping[str, str] = field(default_factory=dict)
    """The field name of each of the schema's property names (``{"_from": "from_"}``)."""
    typed_only: bool = False
    """Every argument is a typed field (no JSON value kept as given): dumps are canonical."""

    def by_schema_name(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Validated values by the schema's names; optional ones left out when not given."""
        names = self.names
        return {
            names.get(k, k): v for k, v in values.items() if v is not None or k in self.required
        }


MAX_SCHEMA_DEPTH = 100
"""JSON levels (objects and arrays inside each other) an arguments schema may take. The
validators, exports and grammars walk a schema recursively: a hostile schema hundreds of
levels deep raised RecursionError from inside jsonschema. A real schema nests a few
levels, and an argument value deeper than the parse stage's 128 levels is refused anyway."""


def _json_depth(value: Any, limit: int) -> int:
    """How deep ``value`` nests, counted without recursion, up to ``limit + 1``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Mapping):
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def schema_arguments(
    tool: str,
    schema: Mapping[str, Any],
    *,
    formats: Mapping[str, FormatCheck | None] | None = None,
) -> SchemaArguments:
    """Build the arguments model for a tool's JSON Schema (2020-12).

    ``formats`` adds format checkers (``{"sku": check}``) or declares formats
    that constrain nothing (``{"phone": None}``). Raises `UnenforceableSchema`
    when the schema is not a JSON Schema object with named properties that
    callgate can enforce as written.
    """
    if not isinstance(schema, Mapping):
        raise UnenforceableSchema(
            f"tool {tool!r}: the arguments schema must be a JSON object, "
            f"got {type(schema).__name__}"
        )
    depth = _json_depth(schema, MAX_SCHEMA_DEPTH)
    if depth > MAX_SCHEMA_DEPTH:
        raise UnenforceableSchema(
            f"tool {tool!r}: the arguments schema is nested more than {MAX_SCHEMA_DEPTH} "
            "levels deep (objects and arrays inside each other), deeper than callgate walks; "
            "move repeated parts under '$defs' and refer to them with '$ref', or flatten it"
        )
    if schema.get("type", "object") != "object":
        raise UnenforceableSchema(
            f"tool {tool!r}: the arguments schema's type is {schema.get('type')!r}; tool "
            "arguments are an object: use type 'object' with one property per argument"
        )
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        raise UnenforceableSchema(
            f"tool {tool!r}: 'properties' must be an object and 'required' an array of names"
        )
    for name in properties:
        if not isinstance(name, str) or not name:
            raise UnenforceableSchema(
                f"tool {tool!r}: argument name {name!r} cannot be represented (empty); name it"
            )
    odd = [r for r in required if not isinstance(r, str)]
    if odd:
        raise UnenforceableSchema(
            f"tool {tool!r}: 'required' must list argument names (strings), and it holds "
            f"{render_json(odd[0], 60)}; list each required argument by its name"
        )
    missing = [r for r in required if r not in properties]
    if missing:
        raise UnenforceableSchema(
            f"tool {tool!r}: required argument(s) {missing} are not declared in 'properties'; "
            "declare them or take them out of 'required'"
        )
    dangling = sorted(r for r in _local_refs(schema) if r != "#" and _resolve(r, schema) is None)
    if dangling:
        raise UnenforceableSchema(
            f"tool {tool!r}: the schema refers to {', '.join(dangling[:3])}, which is not in "
            "the schema; put the definition under '$defs' and refer to it as '#/$defs/<name>'"
        )
    external = sorted(_external_refs(schema))
    if external:
        raise UnenforceableSchema(
            f"tool {tool!r}: the schema refers to other documents ({', '.join(external[:3])}), "
            "which callgate never fetches; copy the definitions under '$defs'"
        )
    formats = dict(formats or {})
    unknown = unknown_formats(schema, formats)
    if unknown:
        name, where = unknown[0]
        raise UnenforceableSchema(
            f"tool {tool!r}: the schema's format {render_json(name, 40)} (at {where}) is not one "
            "callgate checks, and accepting it unchecked would loosen the schema. Pass "
            f"formats={{{name!r}: check}} with a function check(value) -> bool, or "
            f"formats={{{name!r}: None}} to declare that it constrains nothing"
        )
    validator = _validator(schema, formats)
    formats_in_force = checks_for(formats)
    field_names = _field_names(list(properties))
    fields: dict[str, Any] = {}
    validators: dict[str, Any] = {}
    null_means_default = set()
    typed_only = True
    for name, prop in properties.items():
        is_required = name in required
        field_name = field_names[name]
        alias = {"alias": name} if field_name != name else {}
        typed = _typed(prop)
        text = _checked_text(prop, formats_in_force) if typed is None else None
        if typed is not None:
            annotation, constraints = typed
            default = ... if is_required else None
            fields[field_name] = (annotation, Field(default, **constraints, **alias))
        elif text is not None:
            # A string with a pattern or a format: a typed field whose checks run in
            # Python (RE2, the format's checker); `jsonschema` only explains a failure.
            lengths, check = text
            fields[field_name] = (str, Field(... if is_required else None, **lengths, **alias))
            validators[f"_check_{len(validators)}"] = _text_check(
                validator, field_name, name, prop, check
            )
        else:
            typed_only = False
            fields[field_name] = (Any, Field(... if is_required else None, **alias))
            validators[f"_check_{len(validators)}"] = _property_check(
                validator, field_name, name, prop, is_required
            )
        if not is_required and not _accepts_null(prop, schema):
            null_means_default.add(name)
    whole = {k: v for k, v in schema.items() if k in _VALIDATING and k not in _OBJECT_KEYWORDS}
    aliases = {f: n for n, f in field_names.items() if f != n}
    if whole:
        required_fields = {field_names[r] for r in required}
        validators["_check_object"] = _object_check(validator, schema, required_fields, aliases)
    with warnings.catch_warnings():
        # A field named like a deprecated BaseModel method ("json", "schema") works.
        warnings.simplefilter("ignore", UserWarning)
        model = create_model(
            _model_name(tool),
            __base__=_SchemaBase,
            __validators__=validators,
            **fields,
        )
    seal(model)
    return SchemaArguments(
        model=model,
        required=frozenset(field_names[r] for r in required),
        null_means_default=frozenset(null_means_default),
        names=aliases,
        fields=dict(field_names),
        typed_only=typed_only,
    )


def _field_names(names: Sequence[str]) -> dict[str, str]:
    """A Pydantic field name for each property name (itself where Pydantic allows it).

    A leading underscore moves to the end (``_from`` becomes ``from_``), and a
    name reserved by Pydantic gets one (``model_dump_``); more underscores are
    added until the name is free.
    """
    taken = {n for n in names if _usable(n)}
    out: dict[str, str] = {}
    for name in names:
        if _usable(name):
            out[name] = name
            continue
        stripped = name.lstrip("_")
        candidate = (stripped or "field") + "_" * max(1, len(name) - len(stripped))
        while candidate in taken or not _usable(candidate):
            candidate += "_"
        taken.add(candidate)
        out[name] = candidate
    return out


def _usable(name: str) -> bool:
    return not name.startswith("_") and name not in _RESERVED


def _model_name(tool: str) -> str:
    cleaned = "".join(c if c.isalnum() else "_" for c in tool)
    return f"{cleaned or 'Schema'}Arguments"


def _validator(schema: Mapping[str, Any], formats: Mapping[str, FormatCheck | None]) -> Validator:
    """A compiled validator for the tool's schema; `UnenforceableSchema` if it is invalid.

    Two readings differ from plain ``jsonschema``, to agree with the typed
    fields and with the exports: an integer is never a float (``5.0`` is a
    number), and ``null`` for an optional property whose schema does not
    accept it is taken out of the value ("not given") before the properties
    are checked.
    """
    try:
        from jsonschema import SchemaError  # type: ignore[import-untyped]
        from jsonschema.validators import extend, validator_for  # type: ignore[import-untyped]
        from referencing import Registry
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "tools defined by a JSON Schema are validated with jsonschema: "
            "it is a dependency of callgate; reinstall callgate (or pip install 'jsonschema>=4.22')"
        ) from exc

    _refuse_unrunnable_patterns(schema)
    cls = validator_for(schema)
    dialect = _DIALECTS.get(cls)
    if dialect is None:
        # Patterns are ECMA-262 and are checked above (on RE2): Python's `re` must not
        # judge them. Built once per dialect: the memo of `check_schema` is by checker.
        schema_formats = copy.copy(cls.FORMAT_CHECKER)
        schema_formats.checkers = {**schema_formats.checkers, "regex": (_is_text, ())}
        integers = cls.TYPE_CHECKER.redefine("integer", _is_integer)
        keywords = {"properties": _properties(cls.VALIDATORS["properties"])}
        sealed = extend(cls, {**keywords, **_LINEAR_PATTERN_KEYWORDS}, type_checker=integers)
        dialect = _DIALECTS[cls] = (schema_formats, sealed)
    schema_formats, sealed = dialect
    try:
        check_schema(cls, schema, schema_formats)
    except SchemaError as exc:
        raise UnenforceableSchema(
            f"the input schema is not valid JSON Schema: {exc.message}"
        ) from exc
    checker = _tool_formats(dict(schema))
    for name, check in checks_for(formats).items():
        checker.checks(name)(check)
    # An empty registry: references resolve inside this schema only, never over the network.
    validator: Validator = sealed(schema, registry=Registry(), format_checker=checker)
    return validator


_DIALECTS: dict[Any, tuple[Any, Any]] = {}
"""By ``jsonschema`` dialect class: the metaschema's format checker and callgate's
validator class (built once: ``jsonschema.validators.extend`` makes a class, which cost
an OpenAPI import a tenth of its time when made per tool)."""


def _tool_formats(root: Mapping[str, Any]) -> Any:
    """An empty ``jsonschema.FormatChecker`` (the tool's checks are added) carrying ``root``.

    The format checker is the one part of a ``jsonschema`` validator kept as is when it
    descends into a subschema, so the shared validator class finds the tool's own
    ``$defs`` there when it asks whether a property accepts ``null``.
    """
    if not _TOOL_FORMATS:
        from jsonschema import FormatChecker

        class ToolFormats(FormatChecker):  # type: ignore[misc]
            def __init__(self, root: Mapping[str, Any]) -> None:
                super().__init__(formats=())
                self.root = root

        _TOOL_FORMATS.append(ToolFormats)
    return _TOOL_FORMATS[0](root)


_TOOL_FORMATS: list[Any] = []


def _properties(check_properties: Any) -> Any:
    """``properties`` that first takes out a ``null`` meaning "not given" (see `_validator`)."""

    def properties(validator: Any, props: Any, instance: Any, node: Any) -> Iterator[Any]:
        if isinstance(instance, dict) and isinstance(props, dict):
            root = validator.format_checker.root
            required = node.get("required") if isinstance(node, dict) else None
            needed = required if isinstance(required, list) else ()
            for name in [
                n
                for n, v in instance.items()
                if v is None
                and n in props
                and n not in needed
                and not _accepts_null(props[n], root)
            ]:
                del instance[name]
        yield from check_properties(validator, props, instance, node)

    return properties


def _refuse_unrunnable_patterns(schema: Mapping[str, Any]) -> None:
    """`UnenforceableSchema` for a pattern anywhere in ``schema`` that RE2 cannot run.

    Every ``pattern`` text and ``patternProperties`` key of every object a
    validator could read as a schema is compiled (`reachable_schemas`: data
    and property names are not patterns, and a property named ``pattern`` is
    a name).
    """
    has_pattern_properties = has_unevaluated = False
    for where, node in reachable_schemas(schema):
        patterns: list[tuple[str, str]] = []
        if isinstance(node.get("pattern"), str):
            patterns.append((node["pattern"], f"{where}/pattern"))
        found = node.get("patternProperties")
        if isinstance(found, Mapping):
            has_pattern_properties = True
            patterns.extend((str(key), f"{where}/patternProperties") for key in found)
        has_unevaluated = has_unevaluated or "unevaluatedProperties" in node
        for pattern, at in patterns:
            try:
                ecma_regex(pattern)
            except Unsupported as exc:
                raise UnenforceableSchema(
                    f"the input schema's pattern {render_json(pattern, 80)} (at {at or '/'}) "
                    f"uses {exc.construct}, which callgate cannot run: {exc.why}. callgate "
                    "checks patterns on RE2, in time linear in the length of the value"
                ) from None
    if has_pattern_properties and has_unevaluated:
        raise UnenforceableSchema(
            "the input schema has unevaluatedProperties beside patternProperties, which "
            "callgate cannot check in time linear in the length of the arguments"
        )


def _is_text(instance: Any) -> bool:
    return True  # a pattern's own checks are in `_refuse_unrunnable_patterns`


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError  # type: ignore[import-untyped]

    if validator.is_type(instance, "string") and not ecma_search(pattern, instance):
        yield ValidationError("the string does not match the pattern")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if ecma_search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        key
        for key in instance
        if key not in declared and not any(ecma_search(p, key) for p in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        yield ValidationError("additional properties are not allowed")


_LINEAR_PATTERN_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}
"""``jsonschema``'s keywords that run patterns, on RE2 (its own run Python's ``re``)."""


def _is_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


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


_TEXT_KEYWORDS = frozenset({"type", "pattern", "format", "minLength", "maxLength"})


def _checked_text(
    prop: Any, checks: Mapping[str, FormatCheck]
) -> tuple[dict[str, Any], Callable[[str], bool]] | None:
    """Lengths and a check for a string property with a pattern or format, if that is all."""
    if not isinstance(prop, Mapping) or prop.get("type") != "string":
        return None
    if set(prop) & _VALIDATING - _TEXT_KEYWORDS:
        return None
    pattern = prop.get("pattern")
    name = prop.get("format")
    if not isinstance(pattern, str | None) or not isinstance(name, str | None):
        return None
    check_format = checks.get(name) if name is not None else None
    lengths = {
        key: prop[word]
        for word, key in (("minLength", "min_length"), ("maxLength", "max_length"))
        if isinstance(prop.get(word), int) and not isinstance(prop.get(word), bool)
    }
    if len(lengths) != len({"minLength", "maxLength"} & set(prop)):
        return None

    def check(value: str) -> bool:
        if pattern is not None and not ecma_search(pattern, value):
            return False
        return check_format is None or bool(check_format(value))

    return lengths, check


def _text_check(
    validator: Validator, field_name: str, name: str, prop: Any, check: Callable[[str], bool]
) -> Any:
    """A field validator for a checked string; the schema's own error explains a failure."""

    def run(cls: type[BaseModel], value: Any) -> Any:
        if value is None or check(value):
            return value
        error = _first_error(validator, value, prop)
        if error is not None:
            raise _rejection(error, (name,))
        return value

    return field_validator(field_name)(run)


def _local_refs(node: Any) -> set[str]:
    """``$ref`` values that point inside the schema document."""
    found: set[str] = set()
    for _, item in reachable_schemas(node):
        ref = item.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            found.add(ref)
    return found


def _typed(prop: Any) -> tuple[Any, dict[str, Any]] | None:
    """A Pydantic annotation and constraints equivalent to ``prop``, if it is simple."""
    if not isinstance(prop, Mapping):
        return None
    keys = set(prop) & _VALIDATING
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


def _accepts_null(prop: Any, root: Mapping[str, Any], depth: int = 0) -> bool:
    """Whether ``prop`` accepts ``null`` (local references followed)."""
    if prop is True or not isinstance(prop, Mapping) or depth > 16:
        return prop is True
    ref = prop.get("$ref")
    if isinstance(ref, str) and _accepts_null(_resolve(ref, root), root, depth + 1):
        return True
    kind = prop.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if None in prop.get("enum", [0]) or ("const" in prop and prop["const"] is None):
        return True
    if not (set(prop) & _VALIDATING):
        return True  # no rule at all: anything, null included
    return any(
        _accepts_null(alt, root, depth + 1)
        for key in ("anyOf", "oneOf")
        for alt in prop.get(key, [])
    )


def _resolve(ref: str, root: Mapping[str, Any]) -> Any:
    """The target of a local ``#/...`` reference, or None."""
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def _first_error(validator: Validator, value: Any, schema: Any) -> Any:
    from jsonschema.exceptions import best_match
    from referencing.exceptions import Unresolvable

    try:
        return best_match(validator.evolve(schema=schema).iter_errors(value))
    except Unresolvable:
        raise PydanticCustomError(
            "json_schema",
            "{message}",
            {
                "rule": "schema_reference",
                "message": "the tool's schema has a reference callgate cannot resolve; "
                "this tool cannot be called until its definition is fixed.",
            },
        ) from None


def _rejection(error: Any, prefix: Sequence[int | str]) -> PydanticCustomError:
    problem = schema_error_problem(error, prefix)
    return PydanticCustomError("json_schema", "{message}", problem.as_dict())


def _property_check(
    validator: Validator, field_name: str, name: str, prop: Any, is_required: bool
) -> Any:
    """A field validator checking one argument against its own schema.

    It returns the value with the nulls that mean "not given" taken out.
    """
    root = validator.schema

    def check(cls: type[BaseModel], value: Any) -> Any:
        if value is None and not is_required and not _accepts_null(prop, root):
            return value  # null for an optional argument: not sent
        value = copy.deepcopy(value)
        error = _first_error(validator, value, prop)
        if error is not None:
            raise _rejection(error, (name,))
        return value

    return field_validator(field_name)(check)


def _object_check(
    validator: Validator,
    schema: Mapping[str, Any],
    required: set[str],
    aliases: Mapping[str, str],
) -> Any:
    """A model validator for keywords on the whole argument object."""

    def check(model: BaseModel) -> BaseModel:
        values = {
            aliases.get(k, k): v
            for k, v in model.__dict__.items()
            if v is not None or k in required
        }
        error = _first_error(validator, copy.deepcopy(values), dict(schema))
        if error is not None:
            raise _rejection(error, ())
        return model

    wrapped: Callable[[BaseModel], BaseModel] = check
    return model_validator(mode="after")(wrapped)

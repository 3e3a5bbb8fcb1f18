"""A small, deterministic generator of one valid instance of a JSON Schema.

The corpus checks need, for each public tool, one call its schema allows, to see
that callgate accepts it. The generator is written for that job: it is
deterministic (the same schema gives the same instance, so a failure reproduces),
it prefers filling every property it may (so optional properties are exercised
too), and it never guesses silently: whatever it produces is checked with
``jsonschema`` (Draft 2020-12, formats asserted) by the caller, and a schema it
cannot satisfy raises `NoInstance` (the checks count that, and never blame
callgate for it).

It knows the keywords public tool schemas use: ``type`` (one or a list),
``enum``, ``const``, ``$ref`` (local pointers, ``$defs``/``definitions``),
``allOf`` (merged), ``anyOf``/``oneOf`` (the first branch that validates),
``properties``/``required``/``additionalProperties``/``minProperties``,
``items``/``prefixItems``/``minItems``/``maxItems``/``uniqueItems``, string
lengths, ``format`` (the common ones) and ``pattern`` (by walking the regular
expression), and numeric bounds with ``multipleOf``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from re import _constants as sre_constants  # Python 3.11+: the parser lives under re
from re import _parser as sre_parse
from typing import Any

__all__ = ["NoInstance", "instance"]

_MAX_DEPTH = 12

_FORMATS: dict[str, str] = {
    "date-time": "2024-01-02T03:04:05Z",
    "date": "2024-01-02",
    "time": "03:04:05Z",
    "duration": "P1D",
    "email": "user@example.com",
    "idn-email": "user@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uri": "https://example.com/a",
    "url": "https://example.com/a",
    "uri-reference": "https://example.com/a",
    "iri": "https://example.com/a",
    "iri-reference": "https://example.com/a",
    "uri-template": "https://example.com/{id}",
    "uuid": "123e4567-e89b-42d3-a456-426614174000",
    "json-pointer": "/a/b",
    "relative-json-pointer": "0/a",
    "regex": "^a+$",
    "byte": "YWJj",
    "binary": "abc",
    "decimal": "12.50",  # the OpenAPI Format Registry's fixed-point decimal (Stripe's)
    "decimal128": "12.50",
    "password": "secret-value",
    "int32": "1",
    "int64": "1",
}


class NoInstance(Exception):
    """The generator could not build an instance of this schema (not callgate's fault)."""


def instance(schema: Any, *, fill_optional: bool = True) -> Any:
    """One instance of ``schema`` (a JSON Schema), built deterministically.

    ``fill_optional`` fills every declared property (else only required ones).
    Raises `NoInstance` when the schema is beyond the generator (the caller checks
    the result with ``jsonschema`` anyway).
    """
    return _Generator(schema, fill_optional).build(schema, 0)


class _Generator:
    def __init__(self, root: Any, fill_optional: bool) -> None:
        self.root = root
        self.fill_optional = fill_optional

    # -- references and combinators -------------------------------------------------

    def resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            raise NoInstance(f"remote $ref {ref!r}")
        node = self.root
        for part in ref[1:].lstrip("/").split("/") if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise NoInstance(f"unresolvable $ref {ref!r}")
        return node

    def flatten(self, schema: Any, depth: int) -> dict[str, Any]:
        """``schema`` with ``$ref`` and ``allOf`` merged into one mapping."""
        if schema is True or schema == {}:
            return {}
        if schema is False:
            raise NoInstance("false schema")
        if not isinstance(schema, Mapping):
            raise NoInstance(f"schema is a {type(schema).__name__}")
        if depth > _MAX_DEPTH:
            raise NoInstance("schema nested too deep")
        merged: dict[str, Any] = {}
        if isinstance(schema.get("$ref"), str):
            merged.update(self.flatten(self.resolve(schema["$ref"]), depth + 1))
        for part in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
            flat = self.flatten(part, depth + 1)
            for key, value in flat.items():
                if key == "properties" and key in merged:
                    merged[key] = {**merged[key], **value}
                elif key == "required" and key in merged:
                    merged[key] = [*merged[key], *value]
                else:
                    merged.setdefault(key, value)
        for key, value in schema.items():
            if key in ("$ref", "allOf"):
                continue
            if key == "properties" and key in merged:
                merged[key] = {**merged[key], **value}
            elif key == "required" and key in merged:
                merged[key] = [*merged[key], *value]
            else:
                merged[key] = value
        return merged

    def build(self, schema: Any, depth: int) -> Any:
        node = self.flatten(schema, depth)
        if "const" in node:
            return node["const"]
        if isinstance(node.get("enum"), list) and node["enum"]:
            return node["enum"][0]
        for key in ("oneOf", "anyOf"):
            branches = node.get(key)
            if isinstance(branches, list) and branches:
                rest = {k: v for k, v in node.items() if k != key}
                return self.branch(rest, branches, depth)
        if "default" in node and node.get("type") is None and not node.get("properties"):
            return node["default"]
        kind = node.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"] or ["null"]
            kind = kinds[0]
        if kind is None:
            kind = _guess_type(node)
        return self.typed(kind, node, depth)

    def branch(self, rest: dict[str, Any], branches: list[Any], depth: int) -> Any:
        """The first branch (merged with the keywords beside it) that yields a value."""
        problems = []
        for candidate in branches:
            try:
                merged = {**rest, **self.flatten(candidate, depth + 1)}
                if "properties" in rest and "properties" in merged:
                    merged["properties"] = {
                        **rest["properties"],
                        **self.flatten(candidate, depth + 1).get("properties", {}),
                    }
                return self.build(merged, depth + 1)
            except NoInstance as exc:
                problems.append(str(exc))
        raise NoInstance("no branch: " + "; ".join(problems[:3]))

    # -- one value per type -----------------------------------------------------------

    def typed(self, kind: Any, node: dict[str, Any], depth: int) -> Any:
        if kind == "object":
            return self.object(node, depth)
        if kind == "array":
            return self.array(node, depth)
        if kind == "string":
            return _string(node)
        if kind in ("integer", "number"):
            return _number(node, integer=kind == "integer")
        if kind == "boolean":
            return True
        if kind == "null":
            return None
        raise NoInstance(f"unknown type {kind!r}")

    def object(self, node: dict[str, Any], depth: int) -> dict[str, Any]:
        properties = node.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = [r for r in node.get("required", []) if isinstance(r, str)]
        names = list(properties) if self.fill_optional else []
        names += [r for r in required if r not in names]
        value: dict[str, Any] = {}
        for name in names:
            sub = properties.get(name, node.get("additionalProperties", {}))
            if sub is False or sub is None:
                sub = {}
            if name not in required and depth >= 4:
                continue  # keep deep optional structure small
            value[name] = self.build(sub, depth + 1)
        extra = node.get("additionalProperties")
        minimum = node.get("minProperties", 0)
        index = 0
        while isinstance(minimum, int) and len(value) < minimum:
            if extra is False:
                raise NoInstance("minProperties above the declared properties")
            key = f"key{index}"
            index += 1
            if key not in value:
                value[key] = self.build(extra if isinstance(extra, Mapping) else {}, depth + 1)
        return value

    def array(self, node: dict[str, Any], depth: int) -> list[Any]:
        prefix = node.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        items = node.get("items", {})
        if isinstance(items, list):  # draft 4-7 tuple form
            prefix, items = items, node.get("additionalItems", {})
        minimum = node.get("minItems", 0) if isinstance(node.get("minItems"), int) else 0
        maximum = node.get("maxItems") if isinstance(node.get("maxItems"), int) else None
        count = max(minimum, len(prefix), 1)
        if maximum is not None:
            count = min(count, maximum)
        value = [self.build(prefix[i], depth + 1) for i in range(min(count, len(prefix)))]
        for _ in range(count - len(value)):
            if items is False:
                break
            value.append(self.build(items, depth + 1))
        if node.get("uniqueItems") and len(value) > 1:
            unique: list[Any] = []
            for item in value:
                if item not in unique:
                    unique.append(item)
            if len(unique) < minimum:
                raise NoInstance("uniqueItems with minItems > 1 of one value")
            value = unique
        return value


def _guess_type(node: Mapping[str, Any]) -> str:
    if "properties" in node or "additionalProperties" in node or "required" in node:
        return "object"
    if "items" in node or "prefixItems" in node:
        return "array"
    if any(k in node for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
        return "number"
    return "string"


def _string(node: Mapping[str, Any]) -> str:
    low = node.get("minLength", 0) if isinstance(node.get("minLength"), int) else 0
    high = node.get("maxLength") if isinstance(node.get("maxLength"), int) else None
    pattern = node.get("pattern")
    fmt = node.get("format")
    if isinstance(pattern, str):
        text = _from_pattern(pattern)
        if len(text) < low:
            text = _from_pattern(pattern, stretch=min(low, 64))
    elif isinstance(fmt, str) and fmt in _FORMATS:
        text = _FORMATS[fmt]
    elif isinstance(node.get("default"), str):
        text = node["default"]
    elif isinstance(node.get("examples"), list) and node["examples"]:
        text = str(node["examples"][0])
    else:
        text = "sample"
    if len(text) < low:
        if isinstance(pattern, str) or isinstance(fmt, str):
            raise NoInstance("minLength with a pattern or format")
        text = text + "x" * (low - len(text))
    if high is not None and len(text) > high:
        if isinstance(pattern, str) or (isinstance(fmt, str) and fmt in _FORMATS):
            raise NoInstance("maxLength with a pattern or format")
        text = text[:high]
    return text


def _number(node: Mapping[str, Any], *, integer: bool) -> int | float:
    def bound(key: str) -> float | None:
        value = node.get(key)
        return (
            float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        )

    low, high = bound("minimum"), bound("maximum")
    xlow, xhigh = bound("exclusiveMinimum"), bound("exclusiveMaximum")
    step = bound("multipleOf")
    if node.get("exclusiveMinimum") is True and low is not None:  # draft 4
        xlow, low = low, None
    if node.get("exclusiveMaximum") is True and high is not None:
        xhigh, high = high, None
    start = low if low is not None else (xlow if xlow is not None else 0.0)
    if high is not None and start > high:
        start = high
    if xhigh is not None and start >= xhigh:
        start = xhigh - 1
    unit = step if step else 1.0
    candidate = math.ceil(start / unit) * unit
    for _ in range(3):
        if xlow is not None and candidate <= xlow:
            candidate += unit
        if integer and candidate != int(candidate):
            candidate = math.ceil(candidate)
    ok_high = (high is None or candidate <= high) and (xhigh is None or candidate < xhigh)
    ok_low = (low is None or candidate >= low) and (xlow is None or candidate > xlow)
    if not (ok_high and ok_low):
        raise NoInstance("numeric bounds leave no value the generator can find")
    if integer or float(candidate).is_integer():
        return int(candidate)
    return candidate


# -- strings from regular expressions -------------------------------------------------


def _from_pattern(pattern: str, stretch: int = 0) -> str:
    """A string that ``re.search(pattern, ...)`` finds (built from the parse tree); with
    ``stretch``, every repetition repeats up to that many times (for a ``minLength``)."""
    try:
        tree = sre_parse.parse(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        raise NoInstance(f"pattern {pattern!r} is not a Python regular expression") from exc
    groups: dict[int, str] = {}
    return _emit(tree, groups, 0, stretch)


def _emit(tree: Any, groups: dict[int, str], depth: int, stretch: int) -> str:
    if depth > 50:
        raise NoInstance("pattern nested too deep")
    out = []
    for op, arg in tree:
        out.append(_emit_one(op, arg, groups, depth, stretch))
    return "".join(out)


def _emit_one(op: Any, arg: Any, groups: dict[int, str], depth: int, stretch: int) -> str:
    c = sre_constants
    if op is c.LITERAL:
        return chr(arg)
    if op is c.NOT_LITERAL:
        return "a" if arg != ord("a") else "b"
    if op is c.ANY:
        return "a"
    if op is c.IN:
        return _from_set(arg)
    if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
        low, _high, sub = arg
        count = low if low > 0 else (1 if _high and _high > 0 else 0)
        if stretch:
            count = max(count, min(_high, stretch))
        if count > 1000:
            raise NoInstance("pattern repeats too often")
        return "".join(_emit(sub, groups, depth + 1, stretch) for _ in range(count))
    if op is c.SUBPATTERN:
        group, _add, _del, sub = arg
        text = _emit(sub, groups, depth + 1, stretch)
        if group is not None:
            groups[group] = text
        return text
    if op is getattr(c, "ATOMIC_GROUP", None):
        return _emit(arg, groups, depth + 1, stretch)
    if op is c.BRANCH:
        return _emit(arg[1][0], groups, depth + 1, stretch)
    if op is c.GROUPREF:
        return groups.get(arg, "")
    if op is c.AT:
        return ""
    if op in (c.ASSERT, c.ASSERT_NOT):
        return ""
    if op is c.CATEGORY:
        return _from_category(arg)
    raise NoInstance(f"pattern construct {op} not supported")


def _from_set(items: Any) -> str:
    c = sre_constants
    negate = any(op is c.NEGATE for op, _ in items)
    if negate:
        excluded: set[str] = set()
        for op, arg in items:
            if op is c.LITERAL:
                excluded.add(chr(arg))
            elif op is c.RANGE:
                excluded.update(chr(i) for i in range(arg[0], min(arg[1], 0x2FF) + 1))
            elif op is c.CATEGORY:
                excluded.update(_category_chars(arg))
        for candidate in "aZ0_-x!~ ":
            if candidate not in excluded:
                return candidate
        raise NoInstance("negated set excludes every candidate")
    for op, arg in items:
        if op is c.LITERAL:
            return chr(arg)
        if op is c.RANGE:
            return chr(arg[0])
        if op is c.CATEGORY:
            return _from_category(arg)
    raise NoInstance("empty character set")


def _from_category(category: Any) -> str:
    c = sre_constants
    table = {
        c.CATEGORY_DIGIT: "0",
        c.CATEGORY_NOT_DIGIT: "a",
        c.CATEGORY_SPACE: " ",
        c.CATEGORY_NOT_SPACE: "a",
        c.CATEGORY_WORD: "a",
        c.CATEGORY_NOT_WORD: "-",
    }
    if category not in table:
        raise NoInstance(f"pattern category {category} not supported")
    return table[category]


def _category_chars(category: Any) -> set[str]:
    c = sre_constants
    sample = {chr(i) for i in range(32, 127)}
    tests = {
        c.CATEGORY_DIGIT: str.isdigit,
        c.CATEGORY_NOT_DIGIT: lambda s: not s.isdigit(),
        c.CATEGORY_SPACE: str.isspace,
        c.CATEGORY_NOT_SPACE: lambda s: not s.isspace(),
        c.CATEGORY_WORD: lambda s: s.isalnum() or s == "_",
        c.CATEGORY_NOT_WORD: lambda s: not (s.isalnum() or s == "_"),
    }
    test = tests.get(category)
    return {s for s in sample if test(s)} if test else set()

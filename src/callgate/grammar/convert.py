"""JSON Schema to grammar rules, reporting every keyword a target cannot enforce.

`Converter` turns the schemas callgate exports (`callgate.schema.json_schema`)
into `callgate.grammar.nodes` rules. What it writes is *sound for the gate*:
every value the rules accept passes the gate's ``parse`` and ``schema``
stages, unless a keyword was reported as `Unenforced` with
``effect="wider"`` (the grammar then lets through values the gate still
rejects). Where the grammar is narrower than the schema it says so too
(``effect="narrower"``): such a value can be valid and still not be
writable under the grammar.

The choices that keep it sound, and what they cost (all documented in
``docs/local-models.md``):

* JSON is written one way: no whitespace but ``", "`` between items and
  ``": "`` after keys, object keys in the schema's order;
* strings hold any character but the controls, which are written as the
  escapes ``\\n``, ``\\t``... or ``\\u0000``-``\\u001f``; other ``\\u`` escapes
  (a lone surrogate among them, which the gate's JSON reader refuses) are
  not written;
* integers have at most 18 digits and numbers at most 16 before the point,
  24 after it, and an exponent of at most two digits (three if negative):
  a number the gate reads as
  infinite, or an integer too long for Python to read, cannot be written.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from callgate.grammar.nodes import Alt, Lit, Native, Node, Pat, Ref, Rep, Seq
from callgate.schema import pointer_name

__all__ = ["Converter", "Unenforced"]

Target = Literal["gbnf", "lark", "llguidance"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Unenforced:
    """A schema keyword a grammar target does not enforce, and where it is.

    ``effect`` is ``"wider"`` when the grammar accepts values the schema
    refuses (the gate still rejects them, at the ``validate`` stage) and
    ``"narrower"`` when it refuses values the schema allows.
    """

    target: str
    tool: str
    path: str
    keyword: str
    effect: Literal["wider", "narrower"]
    detail: str = ""

    def __str__(self) -> str:
        where = f"{self.tool}: {self.path}" if self.tool else self.path
        detail = f": {self.detail}" if self.detail else ""
        return (
            f"{self.target} cannot enforce '{self.keyword}' at {where} "
            f"(the grammar is {self.effect} than the schema{detail})"
        )


# Keywords that describe a value without constraining it.
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
        "$schema",
        "$id",
        "discriminator",
        "contentMediaType",
        "contentEncoding",
    }
)
_NUMERIC_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_STRING_NATIVE = ("pattern", "format")

# What each JSON type's part of a schema may say, beyond annotations.
_HANDLED = {
    "string": {"minLength", "maxLength", *_STRING_NATIVE},
    "integer": set(_NUMERIC_BOUNDS),
    "number": set(_NUMERIC_BOUNDS),
    "array": {"items", "prefixItems", "minItems", "maxItems"},
    "object": {"properties", "required", "additionalProperties"},
    "boolean": set(),
    "null": set(),
}
_STRUCTURE = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions"}

# No string holds a raw '<' (it is written as \u003c): the text format finds its tags by
# searching the text, so a string holding '</tool_call>' would cut the call short.
_CHAR_GBNF = r'([^"\\<\x00-\x1F] | "\\" (["\\/bfnrt] | "u00" [01] [0-9a-fA-F] | "u003" [cC]))'
_CHAR_RE = r'(?:[^"\\<\x00-\x1f]|\\(?:["\\/bfnrt]|u00[01][0-9a-fA-F]|u003[cC]))'
_INT_GBNF = '"-"? ("0" | [1-9] [0-9]{0,17})'
_INT_RE = r"-?(?:0|[1-9][0-9]{0,17})"
_NUM_GBNF = (
    '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,24})? ([eE] ("-" [0-9]{1,3} | "+"? [0-9]{1,2}))?'
)
_NUM_RE = r"-?(?:0|[1-9][0-9]{0,15})(?:\.[0-9]{1,24})?(?:[eE](?:-[0-9]{1,3}|\+?[0-9]{1,2}))?"
INT_LIMIT = 10**18 - 1
"""The largest integer magnitude any grammar writes (18 digits)."""
NUMBER_LIMIT = 1e16
"""The bound put on the open side of a half-bounded number given to llguidance."""
_ENUMERATE = 64
"""An integer range this small is written as its values in GBNF and Lark."""

STRING = Pat(gbnf=f'"\\"" {_CHAR_GBNF}* "\\""', regex=f'"{_CHAR_RE}*"')
INTEGER = Pat(gbnf=_INT_GBNF, regex=_INT_RE)
NUMBER = Pat(gbnf=_NUM_GBNF, regex=_NUM_RE)


def _bound(low: int, high: int | None) -> str:
    if (low, high) == (0, None):
        return "*"
    return f"{{{low},}}" if high is None else f"{{{low},{high}}}"


def _string(low: int, high: int | None) -> Pat:
    if (low, high) == (0, None):
        return STRING
    bound = _bound(low, high)
    return Pat(gbnf=f'"\\"" {_CHAR_GBNF}{bound} "\\""', regex=f'"{_CHAR_RE}{bound}"')


def pattern_terminal(pattern: str, low: int, high: int | None) -> str | None:
    """A llguidance terminal for the *content* of a string that matches ``pattern``
    (searched, as the gate searches it) and holds no '<', quote, backslash or control;
    None when the pattern's anchors cannot be rewritten (an anchor inside the pattern,
    or a top-level alternative beside one)."""
    body, start, end = pattern, False, False
    if body.startswith("^"):
        body, start = body[1:], True
    if body.endswith("$") and not body.endswith("\\$"):
        body, end = body[:-1], True
    depth, in_class, escaped, alternative = 0, False, False, False
    for ch in body:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch in "^$":
            return None
        elif ch == "|" and depth == 0:
            alternative = True
    if alternative and (start or end):
        return None
    anything = "(?s:.*)"
    searched = f"{'' if start else anything}(?:{body}){'' if end else anything}"
    bound = _bound(low, high)
    plain = f'[^"\\\\<\\x00-\\x1f]{bound}'
    return f"/{plain}/ & /{searched.replace('/', chr(92) + '/')}/"


class Converter:
    """Builds the rules for one grammar; see the module docstring.

    ``native`` lets llguidance enforce, in ``%json`` leaves, the string and
    number keywords it knows (``pattern``, ``format``, numeric bounds,
    ``multipleOf``); without it (GBNF, Lark) they are reported.
    """

    def __init__(self, defs: Mapping[str, Any], *, target: Target) -> None:
        self.defs = defs
        self.target = target
        self.native = target == "llguidance"
        self.rules: dict[str, Node] = {}
        self.terminals: dict[str, str] = {}
        """llguidance terminals (``NAME: expression``) that `Native` leaves name."""
        self.unenforced: list[Unenforced] = []
        self._names: dict[str, str] = {}
        self._json_value: str | None = None
        self.tool = ""

    # -- rules -------------------------------------------------------------------------

    def rule(self, name: str, node: Node) -> Ref:
        """Add a rule (a name already taken gets a number) and return a reference to it."""
        name = self._free_name(name)
        self.rules[name] = node
        return Ref(name)

    def _free_name(self, name: str) -> str:
        """A rule name not in use, of lower-case letters, digits and '-' only.

        Every target can write such a name as it is (Lark with '_' for '-'), so two
        names that differ in a character a target cannot write (``a.b`` beside ``a_b``,
        ``$ref`` beside ``-ref``, ``readOnly`` beside ``readonly``) never become one rule.
        """
        base = re.sub(r"[^a-z0-9-]", "-", name.lower())
        name, n = base, 1
        while name in self.rules:
            n += 1
            name = f"{base}-{n}"
        return name

    def _report(
        self, path: str, keyword: str, effect: Literal["wider", "narrower"], detail: str = ""
    ) -> None:
        self.unenforced.append(
            Unenforced(
                target=self.target,
                tool=self.tool,
                path=path,
                keyword=keyword,
                effect=effect,
                detail=detail,
            )
        )

    # -- values ---------------------------------------------------------------------------

    def value(self, schema: Any, path: str) -> Node:
        """The rule for a value of ``schema`` at ``path`` (a readable location)."""
        if schema is True or schema == {}:
            return self.any_value()
        if schema is False:
            self._report(path, "false", "wider", "a schema that accepts nothing")
            return self.any_value()
        if not isinstance(schema, Mapping):
            self._report(path, "(schema)", "wider", f"not a schema: {schema!r}")
            return self.any_value()
        if "$ref" in schema:
            return self._ref(schema, path)
        if "const" in schema:
            return Lit(_literal(schema["const"]))
        if "enum" in schema:
            values = schema["enum"] if isinstance(schema["enum"], list) else []
            return Alt(tuple(Lit(_literal(v)) for v in values)) if values else self.nothing(path)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self._union(schema, key, path)
        if "allOf" in schema:
            return self._all_of(schema, path)
        kind = schema.get("type")
        if isinstance(kind, list):
            return (
                Alt(tuple(self._typed(schema, str(k), path) for k in kind))
                if kind
                else self.nothing(path)
            )
        if isinstance(kind, str):
            return self._typed(schema, kind, path)
        self._unknown_keys(schema, set(), path)
        return self.any_value()

    def nothing(self, path: str) -> Node:
        """An empty choice: reported, and written as any value (the gate rejects it)."""
        self._report(path, "enum", "wider", "an empty choice accepts nothing")
        return self.any_value()

    def _ref(self, schema: Mapping[str, Any], path: str) -> Node:
        ref = str(schema["$ref"])
        self._unknown_keys(schema, {"$ref"}, path)
        token = ref.removeprefix("#/$defs/").removeprefix("#/definitions/")
        name = pointer_name(token)
        if token == ref or "/" in token or name not in self.defs:
            self._report(path, "$ref", "wider", f"cannot resolve {ref!r}")
            return self.any_value()
        rule = self._names.get(name)
        if rule is None:
            rule = self._free_name(f"def-{name}")
            self._names[name] = rule
            self.rules[rule] = Lit("")  # placeholder: a recursive type refers to itself
            self.rules[rule] = self.value(self.defs[name], f"definition '{name}'")
        return Ref(rule)

    def _union(self, schema: Mapping[str, Any], key: str, path: str) -> Node:
        options = schema[key] if isinstance(schema[key], list) else []
        self._unknown_keys(schema, {key}, path)
        if key == "oneOf" and len(options) > 1:
            self._report(path, "oneOf", "wider", "a value matching two branches is not refused")
        if not options:
            return self.nothing(path)
        return Alt(tuple(self.value(o, path) for o in options))

    def _all_of(self, schema: Mapping[str, Any], path: str) -> Node:
        parts = schema["allOf"] if isinstance(schema["allOf"], list) else []
        self._unknown_keys(schema, {"allOf"}, path)
        if len(parts) != 1:
            self._report(path, "allOf", "wider", "only the first schema of allOf is written")
        return self.value(parts[0], path) if parts else self.any_value()

    def _unknown_keys(self, schema: Mapping[str, Any], handled: set[str], path: str) -> None:
        for key in schema:
            if key not in handled and key not in _ANNOTATIONS and key not in _STRUCTURE:
                self._report(path, key, "wider")

    def _typed(self, schema: Mapping[str, Any], kind: str, path: str) -> Node:
        handled = _HANDLED.get(kind)
        if handled is None:
            self._report(path, "type", "wider", f"unknown type {kind!r}")
            return self.any_value()
        self._unknown_keys(schema, handled, path)
        if kind == "string":
            return self._string(schema, path)
        if kind in ("integer", "number"):
            return self._number(schema, kind, path)
        if kind == "boolean":
            return Alt((Lit("true"), Lit("false")))
        if kind == "null":
            return Lit("null")
        if kind == "array":
            return self._array(schema, path)
        return self._object(schema, path)

    def _string(self, schema: Mapping[str, Any], path: str) -> Node:
        low = _count(schema.get("minLength"), 0)
        high = _count(schema.get("maxLength"), None)
        plain = _string(low, high)
        native = {k: schema[k] for k in (*_STRING_NATIVE, "minLength", "maxLength") if k in schema}
        if not any(k in schema for k in _STRING_NATIVE):
            return plain
        if self.native and "format" not in schema:
            # llguidance's %json strings may hold '<'; the pattern becomes a terminal
            # intersected with '<'-free, escape-free content instead.
            term = pattern_terminal(str(schema["pattern"]), low, high)
            if term is None:
                self._report(
                    path, "pattern", "wider", "its anchors cannot be rewritten as a terminal"
                )
                return plain
            name = f"PATTERN_{len(self.terminals)}"
            self.terminals[name] = term
            return Native(schema={"type": "string", **native}, fallback=plain, terminal=name)
        if self.native:  # the formats llguidance knows never hold '<' (tested)
            return Native(schema={"type": "string", **native}, fallback=plain)
        for key in _STRING_NATIVE:
            if key in schema:
                self._report(path, key, "wider")
        return plain

    def _number(self, schema: Mapping[str, Any], kind: str, path: str) -> Node:
        plain = INTEGER if kind == "integer" else NUMBER
        bounds = {k: schema[k] for k in _NUMERIC_BOUNDS if k in schema}
        if not bounds:
            return plain
        if kind == "integer" and "multipleOf" not in bounds:
            low, high = _int_range(bounds)
            if high is not None and low is not None and 0 <= high - low < _ENUMERATE:
                return Alt(tuple(Lit(str(v)) for v in range(low, high + 1)))
        if self.native:
            native: dict[str, Any] = {"type": kind, **bounds}
            limit: float = INT_LIMIT if kind == "integer" else NUMBER_LIMIT
            if "minimum" not in bounds and "exclusiveMinimum" not in bounds:
                native["minimum"] = -limit
            if "maximum" not in bounds and "exclusiveMaximum" not in bounds:
                native["maximum"] = limit
            return Native(schema=native, fallback=plain)
        for key in bounds:
            self._report(path, key, "wider")
        return plain

    def _array(self, schema: Mapping[str, Any], path: str) -> Node:
        low = _count(schema.get("minItems"), 0)
        high = _count(schema.get("maxItems"), None)
        prefix = schema.get("prefixItems")
        items = schema.get("items", True)
        where = f"each item of {path}"
        if isinstance(prefix, list) and prefix:
            return self._tuple(prefix, low, high, path)
        item = self.value(items, where)
        if high is not None and high < low:
            return self.nothing(path)
        if high == 0:
            return Lit("[]")
        rest = Rep(Seq((Lit(", "), item)), max(low - 1, 0), None if high is None else high - 1)
        body: Node = Seq((item, rest))
        if low == 0:
            body = Rep(body, 0, 1)
        return Seq((Lit("["), body, Lit("]")))

    def _tuple(self, prefix: list[Any], low: int, high: int | None, path: str) -> Node:
        if low != len(prefix) or high != len(prefix):
            self._report(path, "prefixItems", "narrower", "exactly the listed items are written")
        parts: list[Node] = [Lit("[")]
        for n, sub in enumerate(prefix):
            if n:
                parts.append(Lit(", "))
            parts.append(self.value(sub, f"item {n} of {path}"))
        parts.append(Lit("]"))
        return Seq(tuple(parts))

    def _object(self, schema: Mapping[str, Any], path: str) -> Node:
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        required = set(schema.get("required") or ())
        extra = schema.get("additionalProperties", True)
        if not props:
            if isinstance(extra, Mapping) and extra:
                return self._map(self.value(extra, f"each field of {path}"))
            if extra is False:
                return Lit("{}")
            return self._map(self.any_value())
        if extra is not False:
            self._report(
                path, "additionalProperties", "narrower", "only the declared fields are written"
            )
        missing = required - set(props)
        if missing:
            self._report(path, "required", "wider", f"undeclared required fields {sorted(missing)}")
        entries = [
            (
                Seq(
                    (
                        Lit(json.dumps(name, ensure_ascii=False) + ": "),
                        self.value(sub, _field(name, path)),
                    )
                ),
                name in required,
            )
            for name, sub in props.items()
        ]
        # after[(i, first)]: the fields from i on, the first of them written without ", ".
        memo: dict[tuple[int, bool], Node] = {}

        def tail(i: int, first: bool) -> Node:
            if i == len(entries):
                return Seq(())
            key = (i, first)
            if key not in memo:
                entry, needed = entries[i]
                this = (
                    Seq((entry, tail(i + 1, False)))
                    if first
                    else Seq((Lit(", "), entry, tail(i + 1, False)))
                )
                node: Node = this if needed else Alt((this, tail(i + 1, first)))
                memo[key] = self.rule(f"fields-{len(self.rules)}", node)
            return memo[key]

        return Seq((Lit("{"), tail(0, True), Lit("}")))

    def _map(self, value: Node) -> Node:
        entry = Seq((STRING, Lit(": "), value))
        return Seq(
            (Lit("{"), Rep(Seq((entry, Rep(Seq((Lit(", "), entry)), 0, None))), 0, 1), Lit("}"))
        )

    def any_value(self) -> Ref:
        """Any JSON value the gate can read (bounded numbers, no lone surrogates)."""
        if self._json_value is None:
            self._json_value = "json-value"
            self.rules["json-value"] = Lit("")
            ref = Ref("json-value")
            items = Seq((ref, Rep(Seq((Lit(", "), ref)), 0, None)))
            entry = Seq((STRING, Lit(": "), ref))
            entries = Seq((entry, Rep(Seq((Lit(", "), entry)), 0, None)))
            self.rules["json-value"] = Alt(
                (
                    STRING,
                    NUMBER,
                    Lit("true"),
                    Lit("false"),
                    Lit("null"),
                    Seq((Lit("["), Rep(items, 0, 1), Lit("]"))),
                    Seq((Lit("{"), Rep(entries, 0, 1), Lit("}"))),
                )
            )
        return Ref(self._json_value)


def _field(name: str, path: str) -> str:
    return f"field '{name}'" if path == "the arguments" else f"field '{name}' of {path}"


def _literal(value: Any) -> str:
    """A constant as JSON text, any '<' in it written as \u003c (see `_CHAR_GBNF`)."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": ")).replace("<", "\\u003c")


def _count(value: Any, default: int | None) -> Any:
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default
    )


def _int_range(bounds: Mapping[str, Any]) -> tuple[int | None, int | None]:
    low: int | None = None
    high: int | None = None
    if isinstance(bounds.get("minimum"), int | float):
        low = math.ceil(bounds["minimum"])
    if isinstance(bounds.get("exclusiveMinimum"), int | float):
        low = max(low if low is not None else -(10**30), math.floor(bounds["exclusiveMinimum"]) + 1)
    if isinstance(bounds.get("maximum"), int | float):
        high = math.floor(bounds["maximum"])
    if isinstance(bounds.get("exclusiveMaximum"), int | float):
        high = min(high if high is not None else 10**30, math.ceil(bounds["exclusiveMaximum"]) - 1)
    return low, high

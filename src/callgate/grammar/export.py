"""The tools of a registry (or of one step) as one grammar of tool calls.

```python
grammar = tool_grammar(registry)               # or a {name: schema} mapping
grammar.json_schema()     # {"anyOf": [{"name": const, "arguments": schema}, ...]}
grammar.gbnf()            # llama.cpp's grammar sampler
grammar.lark()            # Lark-based engines
grammar.llguidance()      # llguidance, strict: refuses what it cannot enforce
grammar.unenforced("gbnf")  # the keywords GBNF does not enforce, and where
```

A call is ``{"name": <the tool's name>, "arguments": <that tool's schema>}``;
with ``parallel=True`` a list of 1 to ``max_calls`` such calls is accepted too.
By default the call is written between the Hermes tags ``<tool_call>`` and
``</tool_call>``, the shape `callgate.providers.text` reads, so a local
model's constrained output goes through the same extract, parse and schema
stages as any other model's. ``answer=True`` also allows a plain answer
instead of a call: prose without ``<``, ``{``, ``[`` or backticks, so that
nothing in it can be read as a call.

The JSON Schema target is the call schema itself. The grammar targets are
written from it (`callgate.grammar.convert`); a keyword a target cannot
enforce is listed by `ToolGrammar.unenforced`, never dropped silently, and
``strict=True`` (the default for llguidance) refuses such a grammar with a
`GrammarError` naming each keyword.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from callgate.errors import DefinitionError
from callgate.grammar.convert import Converter, Target, Unenforced
from callgate.grammar.nodes import Alt, Lit, Node, Pat, Rep, Seq, gbnf, lark
from callgate.schema import map_subschemas, pointer_token
from callgate.tools import Registry, ToolSpec

__all__ = ["HERMES_TAGS", "GrammarError", "ToolGrammar", "compile_lark", "tool_grammar"]

HERMES_TAGS = ("<tool_call>", "</tool_call>")
"""The tags `callgate.providers.text` reads a call between."""

_ANSWER = Pat(gbnf=r"[^<{\[`\x00]+", regex=r"[^<{\[`\x00]+")
_TARGETS: tuple[Target, ...] = ("gbnf", "lark", "llguidance")


class GrammarError(DefinitionError):
    """A grammar cannot be built as asked: a target cannot enforce the schema (strict),
    or the tools given are not a valid set. The message names each keyword and where."""


@dataclass(frozen=True, kw_only=True)
class ToolGrammar:
    """The grammar of calls to a set of tools; see the module docstring.

    Built by `tool_grammar`. Every target is written on first use and kept.
    """

    schemas: Mapping[str, Mapping[str, Any]]
    """Each tool's arguments schema, by tool name, in order."""
    parallel: bool = False
    max_calls: int = 4
    tags: tuple[str, str] | None = HERMES_TAGS
    answer: bool = False
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def tools(self) -> tuple[str, ...]:
        """The tool names the grammar allows, in order."""
        return tuple(self.schemas)

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of one call (or, with ``parallel``, of a call or a list of calls).

        Each tool's ``$defs`` are hoisted to the top as ``<tool>.<name>`` so
        that two tools' definitions of the same name cannot collide.
        """
        found = self._cache.get("json_schema")
        if found is None:
            found = _call_schema(self.schemas, self.parallel, self.max_calls)
            self._cache["json_schema"] = found
        return copy.deepcopy(found)

    def unenforced(self, target: Target) -> tuple[Unenforced, ...]:
        """The keywords ``target`` (``gbnf``, ``lark`` or ``llguidance``) does not enforce."""
        return self._rules(target)[2]

    def gbnf(self, *, strict: bool = False) -> str:
        """The grammar in GBNF, for llama.cpp's grammar sampler (``LlamaGrammar.from_string``)."""
        rules, root, missing = self._rules("gbnf")
        _check(missing, strict, "gbnf")
        return gbnf(rules, root)

    def lark(self, *, strict: bool = False) -> str:
        """The grammar in Lark syntax (no engine-specific extension)."""
        rules, root, missing = self._rules("lark")
        _check(missing, strict, "lark")
        return lark(rules, root)

    def llguidance_lark(self, *, strict: bool = True) -> str:
        """The grammar in llguidance's Lark, whose ``%json`` leaves enforce patterns, formats
        and numeric bounds. Strict by default: a keyword left unenforced is an error."""
        rules, root, missing = self._rules("llguidance")
        _check(missing, strict, "llguidance")
        terminals = self._cache.get("terminals:llguidance", {})
        return lark(rules, root, native=True, terminals=terminals)

    def llguidance(self, *, strict: bool = True) -> str:
        """The grammar as llguidance takes it (``LLMatcher(tokenizer, grammar)``), checked.

        Raises `GrammarError` if llguidance refuses it (an unknown ``format``,
        a pattern it cannot compile) or, when ``strict``, if a keyword is
        left unenforced.
        """
        key = f"llguidance:{strict}"
        found = self._cache.get(key)
        if found is None:
            found = compile_lark(self.llguidance_lark(strict=strict))
            self._cache[key] = found
        return str(found)

    def _rules(self, target: Target) -> tuple[dict[str, Node], str, tuple[Unenforced, ...]]:
        found = self._cache.get(f"rules:{target}")
        if found is None:
            found, terminals = _build(self, target)
            self._cache[f"rules:{target}"] = found
            self._cache[f"terminals:{target}"] = terminals
        return found


def compile_lark(text: str) -> str:
    """A Lark grammar (llguidance's dialect) as llguidance's grammar text, validated."""
    import llguidance

    grammar = llguidance.LLMatcher.grammar_from_lark(text)
    is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    if is_error or any("Unimplemented" in m or "Unknown" in m for m in messages):
        raise GrammarError(
            "llguidance refused the tool-call grammar (it fails closed rather than "
            f"enforce less than the schema says): {'; '.join(m.strip() for m in messages)[:2000]}. "
            "Change the schema keyword named, or build the grammar with strict=False to "
            "let the gate alone enforce it"
        )
    return grammar


def _check(missing: tuple[Unenforced, ...], strict: bool, target: str) -> None:
    if strict and missing:
        listed = "; ".join(str(m) for m in missing[:20])
        raise GrammarError(
            f"{len(missing)} schema keyword(s) cannot be enforced in {target}: {listed}. "
            "Use a target that enforces them (llguidance enforces pattern, format and numeric "
            "bounds), drop the keyword from the tool's schema, or pass strict=False: the gate "
            "still rejects what the grammar lets through, at the validate stage"
        )


def _build(
    g: ToolGrammar, target: Target
) -> tuple[tuple[dict[str, Node], str, tuple[Unenforced, ...]], dict[str, str]]:
    schema = g.json_schema()
    defs = schema.get("$defs", {})
    conv = Converter(defs, target=target)
    calls: list[Node] = []
    for name, tool_schema in _hoisted(g.schemas).items():
        conv.tool = name
        args = conv.value(tool_schema, "the arguments")
        head = Lit('{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": ')
        calls.append(conv.rule(f"call-{name}", Seq((head, args, Lit("}")))))
    conv.tool = ""
    one = conv.rule("call", Alt(tuple(calls)))
    body: Node = one
    if g.parallel:
        listed = Seq((Lit("["), one, Rep(Seq((Lit(", "), one)), 0, g.max_calls - 1), Lit("]")))
        body = conv.rule("calls", Alt((one, listed)))
    if g.tags is not None:
        body = Seq((Lit(g.tags[0]), body, Lit(g.tags[1])))
    if g.answer:
        body = Alt((body, _ANSWER))
    root = conv.rule("tool-calls", body)
    return (conv.rules, root.name, tuple(conv.unenforced)), conv.terminals


_NAME = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")


def tool_grammar(
    tools: Registry | Iterable[ToolSpec] | Mapping[str, Mapping[str, Any]],
    *,
    parallel: bool = False,
    max_calls: int = 4,
    tags: tuple[str, str] | None = HERMES_TAGS,
    answer: bool = False,
) -> ToolGrammar:
    """The grammar of calls to ``tools`` (a registry, tool specs, or ``{name: schema}``).

    ``parallel`` also accepts a list of 1 to ``max_calls`` calls; ``tags``
    are written around the call (None: the bare JSON); ``answer`` also
    allows a plain answer that cannot be read as a call.
    """
    if isinstance(tools, Mapping):
        schemas = {str(k): v for k, v in tools.items()}
    else:
        schemas = {spec.name: spec.input_schema for spec in tools}
    if not schemas:
        raise GrammarError("a tool grammar needs at least one tool; none was given")
    for name, schema in schemas.items():
        if not _NAME.match(name):
            raise GrammarError(
                f"tool name {name!r} cannot be written in a grammar: expected 1-64 of "
                "letters, digits, '_', '.', '-'"
            )
        if not isinstance(schema, Mapping):
            raise GrammarError(
                f"tool {name!r}: its arguments schema must be a JSON object, "
                f"got {type(schema).__name__}"
            )
    if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1:
        raise GrammarError(f"max_calls must be an integer >= 1, got {max_calls!r}")
    if tags is not None and (len(tags) != 2 or not all(isinstance(t, str) and t for t in tags)):
        raise GrammarError(f"tags must be two non-empty strings (open, close), got {tags!r}")
    return ToolGrammar(
        schemas=schemas, parallel=parallel, max_calls=max_calls, tags=tags, answer=answer
    )


# -- the JSON Schema of a call ------------------------------------------------------------


def _rename_refs(node: Any, tool: str) -> Any:
    """``node`` with its definitions taken out and its references renamed to the hoisted
    ``<tool>.<name>`` (only schema positions are entered: a property named ``$defs`` or
    ``$ref`` is a name, and data such as a ``default`` is kept as it is)."""
    if not isinstance(node, Mapping):
        return node
    out = map_subschemas(node, lambda sub: _rename_refs(sub, tool))
    out.pop("$defs", None)
    out.pop("definitions", None)
    value = out.get("$ref")
    if isinstance(value, str):
        for prefix in ("#/$defs/", "#/definitions/"):
            if value.startswith(prefix):
                name = pointer_token(f"{tool}.") + value.removeprefix(prefix)
                out["$ref"] = f"#/$defs/{name}"
    return out


def _hoisted(schemas: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Each tool's schema with its references renamed to the hoisted definitions."""
    return {name: _rename_refs(schema, name) for name, schema in schemas.items()}


def _call_schema(
    schemas: Mapping[str, Mapping[str, Any]], parallel: bool, max_calls: int
) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    for tool, schema in schemas.items():
        for key in ("$defs", "definitions"):
            for name, sub in (schema.get(key) or {}).items():
                defs[f"{tool}.{name}"] = _rename_refs(sub, tool)
    options = [
        {
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": schema},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for name, schema in _hoisted(schemas).items()
    ]
    one: dict[str, Any] = {"anyOf": options}
    out: dict[str, Any] = one
    if parallel:
        listed = {"type": "array", "items": one, "minItems": 1, "maxItems": max_calls}
        out = {"anyOf": [one, listed]}
    if defs:
        out = {**out, "$defs": defs}
    return out

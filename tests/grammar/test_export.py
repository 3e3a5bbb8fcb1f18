"""The exported grammar: its JSON Schema, its targets, and the keywords each cannot enforce."""

from __future__ import annotations

from typing import Annotated, Any

import jsonschema
import llguidance
import pytest
from pydantic import BaseModel, Field

from callgate import Registry
from callgate.grammar import GrammarError, Unenforced, tool_grammar

from .support import accepts, bounded_registry, gate_rejections, plain_registry, written


class Addr(BaseModel):
    """A street of at most three characters."""

    street: Annotated[str, Field(max_length=3)]


def test_json_schema_is_a_choice_of_name_and_arguments_per_tool() -> None:
    """The JSON Schema target is one anyOf branch per tool: name const, that tool's schema."""
    schema = tool_grammar(plain_registry()).json_schema()
    branches = schema["anyOf"]
    assert [b["properties"]["name"] for b in branches] == [
        {"const": n} for n in ("get_order", "ship", "measure", "ping")
    ]
    assert all(b["required"] == ["name", "arguments"] for b in branches)
    assert all(b["additionalProperties"] is False for b in branches)
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"name": "get_order", "arguments": {"order_id": "o-1"}})
    assert not validator.is_valid({"name": "get_order", "arguments": {"id": "o-1"}})
    assert not validator.is_valid({"name": "ping", "arguments": {"order_id": "o-1"}})


def test_definitions_of_two_tools_with_one_name_do_not_collide() -> None:
    """Each tool's $defs are hoisted under the tool's name, so two 'Item' types stay apart."""

    def tool(field: str, kind: str) -> dict[str, Any]:
        item = {
            "type": "object",
            "properties": {field: {"type": kind}},
            "required": [field],
            "additionalProperties": False,
        }
        return {
            "type": "object",
            "properties": {"item": {"$ref": "#/$defs/Item"}},
            "required": ["item"],
            "additionalProperties": False,
            "$defs": {"Item": item},
        }

    grammar = tool_grammar({"first": tool("sku", "string"), "second": tool("qty", "integer")})
    schema = grammar.json_schema()
    assert set(schema["$defs"]) == {"first.Item", "second.Item"}
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"name": "second", "arguments": {"item": {"qty": 2}}})
    assert not validator.is_valid({"name": "second", "arguments": {"item": {"sku": "a"}}})
    text = grammar.llguidance()
    assert accepts(text, written("second", {"item": {"qty": 2}}))
    assert not accepts(text, written("second", {"item": {"sku": "a"}}))
    assert accepts(text, written("first", {"item": {"sku": "a"}}))


def test_parallel_form_is_a_bounded_list_of_calls() -> None:
    """With parallel=True a list of 1..max_calls calls is accepted, and no more."""
    one = written("ping", {}).removeprefix("<tool_call>").removesuffix("</tool_call>")
    grammar = tool_grammar(plain_registry(), parallel=True, max_calls=2).llguidance()
    assert accepts(grammar, f"<tool_call>[{one}, {one}]</tool_call>")
    assert not accepts(grammar, f"<tool_call>[{one}, {one}, {one}]</tool_call>")
    assert not accepts(
        tool_grammar(plain_registry()).llguidance(), f"<tool_call>[{one}]</tool_call>"
    )


def test_bare_form_has_no_tags() -> None:
    """tags=None writes the bare JSON call, which the JSON Schema target also describes."""
    grammar = tool_grammar(plain_registry(), tags=None).llguidance()
    assert accepts(grammar, '{"name": "ping", "arguments": {}}')
    assert not accepts(grammar, written("ping", {}))


def _keywords(found: tuple[Unenforced, ...]) -> set[tuple[str, str, str]]:
    return {(u.tool, u.keyword, u.effect) for u in found}


def test_gbnf_and_lark_report_what_only_llguidance_enforces() -> None:
    """Patterns, open-ended bounds and multipleOf are listed for GBNF and Lark (wider);
    llguidance enforces them all and lists nothing."""
    grammar = tool_grammar(bounded_registry())
    expected = {
        ("refund", "pattern", "wider"),
        ("refund", "exclusiveMinimum", "wider"),
        ("refund", "maximum", "wider"),
        ("refund", "minimum", "wider"),
        ("refund", "multipleOf", "wider"),
        ("fetch", "pattern", "wider"),
    }
    assert _keywords(grammar.unenforced("gbnf")) == expected
    assert _keywords(grammar.unenforced("lark")) == expected
    assert grammar.unenforced("llguidance") == ()


def test_strict_gbnf_refuses_naming_keyword_and_field() -> None:
    """strict=True turns an unenforced keyword into a GrammarError naming it and its field."""
    with pytest.raises(GrammarError, match=r"'pattern' at fetch: field 'url'"):
        tool_grammar(bounded_registry()).gbnf(strict=True)


def test_small_integer_ranges_are_enforced_everywhere() -> None:
    """An integer range of fewer than 64 values is written as its values: GBNF enforces it."""
    grammar = tool_grammar(plain_registry())
    assert grammar.unenforced("gbnf") == ()
    gbnf = llguidance.grammar_from("gbnf", grammar.gbnf())
    line = {"sku": "a", "qty": 9}
    ship = {"order_id": "o", "address": {"city": "c", "street": "s"}, "lines": [line]}
    assert accepts(gbnf, written("ship", ship))
    ship["lines"] = [{"sku": "a", "qty": 10}]
    assert not accepts(gbnf, written("ship", ship))


@pytest.mark.parametrize(
    ("field", "keyword"),
    [
        ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "uniqueItems"),
        ({"not": {"type": "string"}}, "not"),
        ({"type": "string", "format": "no-such-format"}, None),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, "additionalProperties"),
    ],
)
def test_llguidance_fails_closed_on_what_it_cannot_enforce(
    field: dict[str, Any], keyword: str | None
) -> None:
    """Strict llguidance refuses a schema keyword nobody enforces, and an unknown format
    (llguidance's own refusal), instead of compiling a looser grammar."""
    schema = {
        "type": "object",
        "properties": {"v": field},
        "required": ["v"],
        "additionalProperties": False,
    }
    grammar = tool_grammar({"t": schema})
    with pytest.raises(GrammarError) as caught:
        grammar.llguidance()
    assert (keyword or "no-such-format") in str(caught.value)
    if keyword is not None:
        assert keyword in {u.keyword for u in grammar.unenforced("llguidance")}
        assert grammar.llguidance(strict=False)  # lenient: compiles, and says what it left out


def test_a_wider_grammar_built_leniently_is_still_caught_by_the_gate() -> None:
    """Built with strict=False, GBNF does not enforce a URL's pattern and accepts 'ftp:';
    the gate then rejects that call at the validate stage, so nothing wider reaches a tool."""
    grammar = tool_grammar(bounded_registry())
    output = written("fetch", {"url": "ftp://example.com"})
    assert accepts(llguidance.grammar_from("gbnf", grammar.gbnf()), output)
    assert not accepts(grammar.llguidance(), output)
    assert [stage for stage, _ in gate_rejections(bounded_registry(), output)] == ["validate"]


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ({}, "at least one tool"),
        ({"bad name": {"type": "object"}}, "cannot be written in a grammar"),
        ({"t": []}, "must be a JSON object"),
    ],
)
def test_definition_mistakes_raise_at_once(tools: dict[str, Any], message: str) -> None:
    """An empty tool set, an unwritable name or a non-object schema is a GrammarError."""
    with pytest.raises(GrammarError, match=message):
        tool_grammar(tools)


def test_bounded_strings_count_characters_not_bytes() -> None:
    """maxLength counts characters (an escape or a non-ASCII letter is one), as the gate does."""
    registry = Registry()

    @registry.tool(effects="read:x")
    def move(to: Addr) -> str:
        """Move."""
        return "ok"

    text = tool_grammar(registry).gbnf()
    grammar = llguidance.grammar_from("gbnf", text)
    assert accepts(grammar, written("move", {"to": {"street": "é\nü"}}))
    assert not accepts(grammar, written("move", {"to": {"street": "abcd"}}))


@pytest.mark.parametrize("target", ["llguidance", "gbnf", "lark"])
def test_no_string_can_hold_the_closing_tag(target: str) -> None:
    """A string holding '</tool_call>' would cut the call where the text format searches for
    the tag: every target refuses a raw '<' in strings, and accepts it escaped as \\u003c,
    which the gate reads back as '<'."""
    grammar = tool_grammar(plain_registry())
    text = {
        "llguidance": grammar.llguidance,
        "gbnf": lambda: llguidance.grammar_from("gbnf", grammar.gbnf()),
        "lark": lambda: llguidance.grammar_from("lark", grammar.lark()),
    }[target]()
    raw = (
        '<tool_call>{"name": "get_order", "arguments": {"order_id": "a</tool_call>b"}}</tool_call>'
    )
    assert not accepts(text, raw)
    escaped = written("get_order", {"order_id": "a</tool_call>b"})
    assert "\\u003c/tool_call>" in escaped
    assert accepts(text, escaped)
    assert gate_rejections(plain_registry(), escaped) == []


def test_a_patterned_string_cannot_hold_the_closing_tag_either() -> None:
    """A pattern that allows anything after a prefix ('^https://...(/.*)?$') is enforced
    by llguidance with '<' left out, so the tag cannot appear inside the URL."""
    grammar = tool_grammar(bounded_registry()).llguidance()
    assert accepts(grammar, written("fetch", {"url": "https://a.b/c?d=1"}))
    assert not accepts(
        grammar,
        '<tool_call>{"name": "fetch", "arguments": {"url": "https://a.b/</tool_call>"}}'
        "</tool_call>",
    )


@pytest.mark.parametrize(
    "fmt",
    ["date", "time", "date-time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri"],
)
def test_the_formats_llguidance_enforces_never_hold_a_tag(fmt: str) -> None:
    """Format strings stay %json leaves: none of the formats llguidance knows admits '<'."""
    schema = {
        "type": "object",
        "properties": {"v": {"type": "string", "format": fmt}},
        "required": ["v"],
        "additionalProperties": False,
    }
    grammar = tool_grammar({"t": schema}).llguidance()
    for value in ("</tool_call>", "a<b@c.d", "http://a.b/<", "1<2"):
        assert not accepts(
            grammar, f'<tool_call>{{"name": "t", "arguments": {{"v": "{value}"}}}}</tool_call>'
        )


@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [
        (r"^o-[0-9]{1,4}$", "o-12", "xo-12"),
        (r"[a-z]", "1a1", "111"),
        (r"^ab", "abc", "cab"),
        (r"yz$", "xyz", "yzx"),
        (r"a|b", "xbx", "xcx"),
    ],
)
def test_patterns_are_searched_as_the_gate_searches_them(pattern: str, good: str, bad: str) -> None:
    """A pattern's anchors are kept (start, end, both, neither) and an unanchored pattern
    may match anywhere: llguidance accepts the value the gate accepts and refuses the other."""
    schema = {
        "type": "object",
        "properties": {"v": {"type": "string", "pattern": pattern}},
        "required": ["v"],
        "additionalProperties": False,
    }
    grammar = tool_grammar({"t": schema}).llguidance()
    assert accepts(grammar, written("t", {"v": good}))
    assert not accepts(grammar, written("t", {"v": bad}))


@pytest.mark.parametrize("pattern", [r"^a|b$", r"a^b", r"(^a)"])
def test_anchors_that_cannot_be_rewritten_are_reported(pattern: str) -> None:
    """An anchor inside the pattern, or beside a top-level alternative, cannot become a
    terminal: strict llguidance refuses it, naming 'pattern'."""
    schema = {
        "type": "object",
        "properties": {"v": {"type": "string", "pattern": pattern}},
        "required": ["v"],
        "additionalProperties": False,
    }
    grammar = tool_grammar({"t": schema})
    assert [u.keyword for u in grammar.unenforced("llguidance")] == ["pattern"]
    with pytest.raises(GrammarError, match="'pattern'"):
        grammar.llguidance()

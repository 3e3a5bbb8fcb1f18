"""Stage ``parse``: JSON argument text, its conservative repair, and the rejections."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callgate import Authority, Gate, Registry, Stage, Status, ToolCall
from callgate.messages import Rejection
from callgate.parse import ParsedArguments, parse_arguments, repair_json

# -- decoding ------------------------------------------------------------------


def test_valid_json_object_is_decoded_and_not_marked_repaired() -> None:
    """Valid JSON is taken as it is, with its exact text kept for validation."""
    parsed = parse_arguments('{"city": "Paris", "days": 3}')
    assert parsed == ParsedArguments({"city": "Paris", "days": 3}, '{"city": "Paris", "days": 3}')
    assert parsed.repaired is False


def test_empty_text_means_no_arguments() -> None:
    """Several providers send "" for a call without arguments."""
    assert parse_arguments("") == ParsedArguments({}, "")
    assert parse_arguments("  \n") == ParsedArguments({}, "  \n")


def test_decoded_mapping_is_accepted_without_text() -> None:
    """A provider that already decoded the arguments (Anthropic, Gemini) passes a mapping."""
    assert parse_arguments({"a": 1}) == ParsedArguments({"a": 1}, None)


@pytest.mark.parametrize(
    ("text", "actual"),
    [
        ("[1, 2]", "array [1, 2]"),
        ('"{\\"a\\": 1}"', 'string "{\\"a\\": 1}"'),
        ("3", "integer 3"),
        ("null", "null null"),
    ],
)
def test_json_that_is_not_an_object_is_its_own_rejection(text: str, actual: str) -> None:
    """Arguments must be an object; the message names what came instead."""
    rejection = parse_arguments(text)
    assert isinstance(rejection, Rejection)
    assert rejection.stage is Stage.PARSE
    assert rejection.problems[0].rule == "arguments_type"
    assert f"must be a JSON object, got {actual}" in rejection.message


def test_arguments_of_a_non_json_type_are_rejected() -> None:
    """A number where text or an object belongs is a rejection, not a crash."""
    rejection = parse_arguments(42)  # type: ignore[arg-type]
    assert isinstance(rejection, Rejection)
    assert rejection.problems[0].rule == "arguments_type"


def test_deeply_nested_text_is_rejected_not_raised() -> None:
    """Nesting deeper than the decoder can follow becomes a rejection."""
    rejection = parse_arguments('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert isinstance(rejection, Rejection)
    assert rejection.problems[0].rule == "json_syntax"


# -- repair ----------------------------------------------------------------------

REPAIRS = [
    pytest.param('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}, id="trailing-commas"),
    pytest.param("{'city': 'Paris'}", {"city": "Paris"}, id="single-quotes"),
    pytest.param("{'q': 'it\\'s \"here\"'}", {"q": 'it\'s "here"'}, id="single-quotes-escapes"),
    pytest.param('{"q": "don\'t"}  thanks', {"q": "don't"}, id="apostrophe-in-string-kept"),
    pytest.param('{"a": {"b": "c"', {"a": {"b": "c"}}, id="unclosed-braces-at-end"),
    pytest.param('{"a": ["x", "y"', {"a": ["x", "y"]}, id="unclosed-bracket-at-end"),
    pytest.param('{"ok": true', {"ok": True}, id="unclosed-after-literal"),
    pytest.param(
        'Here are the arguments: {"city": "Oslo"} Hope this helps!',
        {"city": "Oslo"},
        id="object-wrapped-in-prose",
    ),
    pytest.param('```json\n{"city": "Oslo"}\n```', {"city": "Oslo"}, id="code-fence"),
    pytest.param("{'a': [1, 2,], 'b': {'c': 'd'", {"a": [1, 2], "b": {"c": "d"}}, id="combined"),
]


@pytest.mark.parametrize(("text", "expected"), REPAIRS)
def test_repairable_text_is_repaired_and_marked(text: str, expected: dict[str, Any]) -> None:
    """Each repair rule fixes its mistake and the result says it was repaired."""
    parsed = parse_arguments(text)
    assert isinstance(parsed, ParsedArguments)
    assert parsed.value == expected
    assert parsed.repaired is True
    assert parsed.text is not None
    assert json.loads(parsed.text) == expected


@pytest.mark.parametrize(("text", "expected"), REPAIRS)
def test_repair_can_be_switched_off(text: str, expected: dict[str, Any]) -> None:
    """With repair off, the same texts are rejected at the parse stage."""
    rejection = parse_arguments(text, repair=False)
    assert isinstance(rejection, Rejection)
    assert rejection.problems[0].rule == "json_syntax"


NOT_REPAIRED = [
    pytest.param('{"a": 1,', id="comma-at-end-means-cut-off"),
    pytest.param('{"a": "Par', id="cut-inside-string"),
    pytest.param('{"amount": 12', id="number-at-end-may-be-cut"),
    pytest.param('{"a": [', id="open-bracket-at-end"),
    pytest.param('{"a":', id="colon-at-end"),
    pytest.param('{"a": 1, "b"', id="key-without-value"),
    pytest.param('{"a": 1} {"b": 2}', id="two-objects"),
    pytest.param('[{"a": 1}]', id="object-inside-array"),
    pytest.param('see [docs] then {"a": 1}', id="brackets-in-prose"),
    pytest.param('{"a": 1]', id="mismatched-closer"),
    pytest.param("{a: 1}", id="unquoted-key"),
    pytest.param("no json here", id="prose-only"),
    pytest.param('{"a": 1, it\'s}', id="garbage-inside"),
]


@pytest.mark.parametrize("text", NOT_REPAIRED)
def test_ambiguous_or_cut_off_text_is_not_repaired(text: str) -> None:
    """Where the intended JSON is in doubt, repair declines and the call is rejected."""
    assert repair_json(text) is None
    rejection = parse_arguments(text)
    assert isinstance(rejection, Rejection)
    assert rejection.stage is Stage.PARSE


def test_rejection_quotes_the_offending_position() -> None:
    """The message gives line, column, character offset and the text around it."""
    rejection = parse_arguments('{"city": "Paris" "days": 3}', repair=False)
    assert isinstance(rejection, Rejection)
    message = rejection.message
    assert "arguments are not valid JSON: Expecting ',' delimiter" in message
    assert "line 1 column 18 (char 17)" in message
    assert '«{"city": "Paris" "days": 3}»' in message


# -- repair properties -------------------------------------------------------------

# Printable ASCII without the quote and backslash, so that repr() uses no escapes JSON lacks.
_PRINTABLE = st.characters(min_codepoint=32, max_codepoint=126, exclude_characters="'\\")
json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, min_size=1, max_size=5)


@given(st.text(max_size=300))
def test_parse_never_raises_on_arbitrary_text(text: str) -> None:
    """Whatever the model sends, parsing gives arguments or a rejection."""
    result = parse_arguments(text)
    assert isinstance(result, ParsedArguments | Rejection)
    if isinstance(result, ParsedArguments):
        assert isinstance(result.value, dict)


@given(st.text(max_size=300))
def test_repair_result_is_always_a_json_object(text: str) -> None:
    """A repair either declines or yields text that decodes to an object."""
    fixed = repair_json(text)
    if fixed is not None:
        assert isinstance(json.loads(fixed), dict)


@given(json_objects)
def test_trailing_comma_repair_restores_the_object(value: dict[str, Any]) -> None:
    """A comma slipped in before the final brace is dropped and nothing else changes."""
    text = json.dumps(value)
    broken = text[:-1] + ",}"
    parsed = parse_arguments(broken)
    assert isinstance(parsed, ParsedArguments)
    assert parsed.value == value
    assert parsed.repaired


@given(
    st.dictionaries(
        st.text(_PRINTABLE, max_size=8),
        st.text(_PRINTABLE, max_size=12),
        min_size=1,
        max_size=5,
    )
)
def test_python_dict_repr_of_strings_repairs_to_the_same_object(value: dict[str, str]) -> None:
    """Single-quoted (Python-style) strings become JSON strings with the same content."""
    parsed = parse_arguments(repr(value))
    assert isinstance(parsed, ParsedArguments)
    assert parsed.value == value


@given(json_objects, st.sampled_from(["Sure! ", "Arguments:\n", "```json\n"]))
def test_object_wrapped_in_prose_is_extracted(value: dict[str, Any], prefix: str) -> None:
    """The one object in a sentence is the arguments; the prose is dropped."""
    parsed = parse_arguments(prefix + json.dumps(value) + "\nDone.")
    assert isinstance(parsed, ParsedArguments)
    assert parsed.value == value


# -- the gate's repair switch --------------------------------------------------------


def _gate(*, repair: bool) -> Gate:
    registry = Registry()

    @registry.tool(effects="read:weather")
    def get_weather(city: str, days: int = 1) -> str:
        """Forecast for a city."""
        return f"{city}: sunny for {days} day(s)"

    return Gate(registry, repair=repair)


AUTHORITY = Authority(principal="tester", grants=["read:weather"])


def test_gate_runs_a_repaired_call_and_marks_its_observation() -> None:
    """With repair on (the default), a trailing comma does not cost a turn, but it is recorded."""
    run = _gate(repair=True).run(authority=AUTHORITY)
    [obs] = run.submit([ToolCall(id="c1", name="get_weather", arguments='{"city": "Oslo",}')])
    assert obs.status is Status.OK
    assert obs.content == "Oslo: sunny for 1 day(s)"
    assert obs.repaired is True


def test_gate_marks_a_repaired_call_that_is_then_rejected_by_schema() -> None:
    """A repaired call that fails validation still says it was repaired."""
    run = _gate(repair=True).run(authority=AUTHORITY)
    [obs] = run.submit([ToolCall(id="c1", name="get_weather", arguments="{'city': 5}")])
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.SCHEMA
    assert obs.repaired is True


def test_gate_with_repair_off_rejects_the_same_call_at_parse() -> None:
    """``Gate(repair=False)`` sends the model the position of its mistake instead."""
    run = _gate(repair=False).run(authority=AUTHORITY)
    [obs] = run.submit([ToolCall(id="c1", name="get_weather", arguments='{"city": "Oslo",}')])
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.PARSE
    assert "char 16" in obs.content
    assert obs.repaired is False


def test_valid_call_is_not_marked_repaired() -> None:
    """Only calls that needed a repair carry the mark."""
    run = _gate(repair=True).run(authority=AUTHORITY)
    [obs] = run.submit([ToolCall(id="c1", name="get_weather", arguments='{"city": "Oslo"}')])
    assert obs.status is Status.OK
    assert obs.repaired is False

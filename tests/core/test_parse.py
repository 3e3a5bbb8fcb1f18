"""Stage ``parse``: JSON argument text, its conservative repair, and the rejections."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callgate import Authority, Gate, Registry, Stage, Status, ToolCall
from callgate.parse import (
    MAX_ARGUMENT_CHARS,
    MAX_DEPTH,
    ParsedArguments,
    parse_arguments,
    repair_json,
)
from callgate.render import Rejection

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
        ("null", "null"),
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
    assert rejection.problems[0].rule == "json_depth"


# -- repair ----------------------------------------------------------------------

REPAIRS = [
    pytest.param(
        '{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}, ("trailing_comma",), id="trailing-commas"
    ),
    pytest.param("{'city': 'Paris'}", {"city": "Paris"}, ("single_quotes",), id="single-quotes"),
    pytest.param(
        "{'q': 'it\\'s \"here\"'}",
        {"q": 'it\'s "here"'},
        ("single_quotes",),
        id="single-quotes-escapes",
    ),
    pytest.param(
        '{"q": "don\'t"}  thanks',
        {"q": "don't"},
        ("prose_removed",),
        id="apostrophe-in-string-kept",
    ),
    pytest.param(
        'Here are the arguments: {"city": "Oslo"} Hope this helps!',
        {"city": "Oslo"},
        ("prose_removed",),
        id="object-wrapped-in-prose",
    ),
    pytest.param(
        '```json\n{"city": "Oslo"}\n```', {"city": "Oslo"}, ("prose_removed",), id="code-fence"
    ),
    pytest.param(
        "{'a': [1, 2,], 'b': {'c': 'd'}}",
        {"a": [1, 2], "b": {"c": "d"}},
        ("single_quotes", "trailing_comma"),
        id="combined",
    ),
]


@pytest.mark.parametrize(("text", "expected", "repairs"), REPAIRS)
def test_repairable_text_is_repaired_and_marked(
    text: str, expected: dict[str, Any], repairs: tuple[str, ...]
) -> None:
    """Each repair rule fixes its mistake, and the result names the repairs applied."""
    parsed = parse_arguments(text)
    assert isinstance(parsed, ParsedArguments)
    assert parsed.value == expected
    assert parsed.repaired is True
    assert parsed.repairs == repairs
    assert parsed.text is not None
    assert json.loads(parsed.text) == expected


@pytest.mark.parametrize(("text", "expected", "repairs"), REPAIRS)
def test_repair_can_be_switched_off(
    text: str, expected: dict[str, Any], repairs: tuple[str, ...]
) -> None:
    """With repair off, the same texts are rejected at the parse stage."""
    rejection = parse_arguments(text, repair=False)
    assert isinstance(rejection, Rejection)
    assert rejection.problems[0].rule == "json_syntax"


NOT_REPAIRED = [
    # Text that stops before its braces close may have been cut off: closing it would
    # run a shorter call than the one meant (a public benchmark's calls cut in half
    # ran with the rest defaulted), so none of these is repaired.
    pytest.param('{"a": {"b": "c"', id="unclosed-braces-at-end"),
    pytest.param('{"a": ["x", "y"', id="unclosed-bracket-at-end"),
    pytest.param('{"ok": true', id="unclosed-after-literal"),
    pytest.param('{"location": "Mississippi river"', id="cut-after-a-complete-field"),
    pytest.param("{'a': [1, 2,], 'b': {'c': 'd'", id="repairable-but-unclosed"),
    pytest.param('{"a": 1,', id="comma-at-end-means-cut-off"),
    pytest.param('{"a": "Par', id="cut-inside-string"),
    pytest.param('{"amount": 12', id="number-at-end-may-be-cut"),
    pytest.param('{"a": [', id="open-bracket-at-end"),
    pytest.param('{"a":', id="colon-at-end"),
    pytest.param('{"a": 1, "b"', id="key-without-value"),
    pytest.param('Sure: {"amount": 5} * 100', id="object-in-an-expression"),
    pytest.param('Total = 2 * {"amount": 5}', id="expression-before-the-object"),
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
    assert "at line 1, column 18 (character 17)" in message
    assert '«{"city": "Paris" "days": 3}»' in message


def test_rejection_of_an_unterminated_string_reads_as_a_sentence() -> None:
    """Python's "Unterminated string starting at" does not become "starting at at line"."""
    rejection = parse_arguments('{"q": "red', repair=False)
    assert isinstance(rejection, Rejection)
    assert "Unterminated string at line 1, column 7 (character 6)" in rejection.message
    assert "at at" not in rejection.message


def test_rejection_does_not_echo_a_credential_the_model_wrote() -> None:
    """The quoted text around a syntax error has credential-shaped strings redacted."""
    key = "sk-live" + "A1b2C3d4E5f6G7h8I9j0"
    rejection = parse_arguments('{"api_key": "' + key + '" "x": 1}', repair=False)
    assert isinstance(rejection, Rejection)
    assert key not in rejection.message
    assert "[redacted]" in rejection.message


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
        assert isinstance(json.loads(fixed[0]), dict)
        assert fixed[1]


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
    assert obs.stage is Stage.VALIDATE
    assert obs.repaired is True


def test_gate_with_repair_off_rejects_the_same_call_at_parse() -> None:
    """``Gate(repair=False)`` sends the model the position of its mistake instead."""
    run = _gate(repair=False).run(authority=AUTHORITY)
    [obs] = run.submit([ToolCall(id="c1", name="get_weather", arguments='{"city": "Oslo",}')])
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.PARSE
    assert "character 16" in obs.content
    assert obs.repaired is False


def test_valid_call_is_not_marked_repaired() -> None:
    """Only calls that needed a repair carry the mark."""
    run = _gate(repair=True).run(authority=AUTHORITY)
    [obs] = run.submit([ToolCall(id="c1", name="get_weather", arguments='{"city": "Oslo"}')])
    assert obs.status is Status.OK
    assert obs.repaired is False


# -- the boundary: what any text must be to be decoded --------------------------------

_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, categories=["Cs"])


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("digits", [4301, 5000, 100_000])
def test_an_integer_beyond_pythons_digit_limit_is_a_parse_rejection(digits: int) -> None:
    """``int()`` refuses more than 4,300 digits with a ValueError; the model gets a sentence."""
    rejection = parse_arguments('{"limit": ' + "7" * digits + "}")
    assert isinstance(rejection, Rejection)
    assert rejection.stage is Stage.PARSE
    assert rejection.problems[0].rule == "json_number"
    assert "more than 4,300 digits" in rejection.message


def test_an_integer_of_4300_digits_is_still_decoded() -> None:
    """A 4,300-digit integer in argument text decodes to that exact int."""
    parsed = parse_arguments('{"limit": ' + "7" * 4300 + "}")
    assert isinstance(parsed, ParsedArguments)
    assert parsed.value["limit"] == int("7" * 4300)


def test_a_decoded_mapping_with_a_huge_integer_is_rejected() -> None:
    """A 5,001-digit int inside a decoded mapping is a json_number rejection naming outer.limit."""
    rejection = parse_arguments({"outer": {"limit": 10**5000}})
    assert isinstance(rejection, Rejection)
    assert rejection.problems[0].rule == "json_number"
    assert rejection.problems[0].field == "outer.limit"


@pytest.mark.parametrize("form", ["text", "mapping"])
def test_nesting_is_bounded_at_the_same_depth_as_pydantics_parser(form: str) -> None:
    """``MAX_DEPTH`` levels inside the arguments object pass, one more is rejected, whether
    the arguments come as text or decoded; the limit is Pydantic's own (checked below)."""

    def parse(depth: int) -> ParsedArguments | Rejection:
        value = {"data": _nested(depth)}
        return parse_arguments(json.dumps(value) if form == "text" else value)

    assert isinstance(parse(MAX_DEPTH), ParsedArguments)
    deeper = parse(MAX_DEPTH + 1)
    assert isinstance(deeper, Rejection)
    assert deeper.problems[0].rule == "json_depth"
    assert f"nested more than {MAX_DEPTH} levels" in deeper.message


def test_pydantics_json_parser_reads_whatever_the_parse_stage_passes() -> None:
    """The validator reads arguments with Pydantic's JSON parser, whose own limit is
    higher than ``MAX_DEPTH`` in every shape (arrays, objects, with a scalar inside)."""
    from pydantic import BaseModel

    class Model(BaseModel):
        data: Any = None

    for inner in ([], {}, [1]):
        value: Any = inner
        for _ in range(MAX_DEPTH - 1):
            value = [value] if isinstance(inner, list) else {"a": value}
        Model.model_validate_json(json.dumps({"data": value}))


@pytest.mark.parametrize("depth", [MAX_DEPTH, MAX_DEPTH + 1, 200, 300])
def test_the_gate_judges_depth_the_same_whichever_way_arguments_arrive(depth: int) -> None:
    """Text (valid, so Pydantic's fast path could take it) and a decoded mapping (as
    Anthropic and Gemini deliver) get the same answer at every depth."""
    registry = Registry()

    @registry.tool(effects="read:x", risk="read")
    def keep(data: Any = None) -> str:
        """Keep data."""
        return "kept"

    run = Gate(registry).run(authority=Authority(principal="p", grants=["read:x"]))
    value = {"data": _nested(depth)}
    as_text = run.submit([ToolCall(id="t", name="keep", arguments=json.dumps(value))])[0]
    as_mapping = run.submit([ToolCall(id="m", name="keep", arguments=value)])[0]
    expected = Status.OK if depth <= MAX_DEPTH else Status.REJECTED
    assert (as_text.status, as_mapping.status) == (expected, expected)
    if expected is Status.REJECTED:
        assert as_text.stage is as_mapping.stage is Stage.PARSE
        assert as_text.details[0]["rule"] == as_mapping.details[0]["rule"] == "json_depth"


@pytest.mark.parametrize(
    "arguments",
    [
        '{"amount": NaN}',
        '{"amount": Infinity}',
        '{"amount": -Infinity}',
        '{"amount": 1e999}',
        '{"amount": ' + "1" * 4301 + ".0}",
        '{"extra": NaN}',
        {"amount": float("nan")},
        {"extra": [float("inf")]},
    ],
)
def test_a_number_that_is_not_finite_never_reaches_a_handler(arguments: Any) -> None:
    """NaN and Infinity are not JSON; 1e999 is infinite as a float. Rejected at parse, so
    neither a policy predicate nor a handler ever compares against NaN."""
    ran: list[Any] = []
    registry = Registry()

    @registry.tool(effects="spend:USD")
    def refund(amount: float = 1.0, extra: Any = None) -> str:
        """Refund."""
        ran.append(amount)
        return "refunded"

    run = Gate(registry).run(authority=Authority(principal="p", grants=["spend:USD"]))
    [obs] = run.submit([ToolCall(id="c1", name="refund", arguments=arguments)])
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.PARSE
    assert obs.details[0]["rule"] == "json_number"
    assert "not finite" in obs.content
    assert ran == []


def test_a_decoded_mapping_nested_thousands_deep_is_rejected_without_recursion() -> None:
    """A mapping nested 50,000 deep is a json_depth rejection, not a RecursionError."""
    rejection = parse_arguments({"data": _nested(50_000)})
    assert isinstance(rejection, Rejection)
    assert rejection.problems[0].rule == "json_depth"


def test_argument_text_over_the_size_bound_is_refused_unread() -> None:
    """Text longer than MAX_ARGUMENT_CHARS is an arguments_size rejection stating its length."""
    text = '{"q": "' + "x" * MAX_ARGUMENT_CHARS + '"}'
    rejection = parse_arguments(text)
    assert isinstance(rejection, Rejection)
    assert rejection.problems[0].rule == "arguments_size"
    assert f"{len(text):,} characters long" in rejection.message


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ('{"q": "a\\ud800b"}', "q"),  # the JSON escape of a lone surrogate
        ({"q": "a\ud800b"}, "q"),
        ({"outer": [{"q": "\udfff"}]}, "outer[0].q"),
    ],
)
def test_a_lone_surrogate_in_a_value_is_a_parse_rejection(arguments: Any, field: str) -> None:
    """A lone surrogate in a value (text or decoded) is invalid_text naming the field."""
    rejection = parse_arguments(arguments)
    assert isinstance(rejection, Rejection)
    problem = rejection.problems[0]
    assert problem.rule == "invalid_text"
    assert problem.field == field
    assert "lone UTF-16 surrogate" in rejection.message
    rejection.message.encode("utf-8")  # the message itself is valid text


def test_a_lone_surrogate_in_a_key_is_a_parse_rejection() -> None:
    """A lone surrogate in a key is an invalid_text rejection naming that key."""
    rejection = parse_arguments('{"q\\ud800": 1}')
    assert isinstance(rejection, Rejection)
    assert rejection.problems[0].rule == "invalid_text"
    assert rejection.problems[0].field == "q\\ud800"


def test_a_surrogate_pair_is_a_character_and_is_kept() -> None:
    """An escaped surrogate pair decodes to its one astral character."""
    parsed = parse_arguments('{"q": "\\ud83d\\ude00"}')
    assert isinstance(parsed, ParsedArguments)
    assert parsed.value == {"q": "\U0001f600"}


@given(st.text(st.characters(codec=None) | _SURROGATES, max_size=200))
def test_parse_never_raises_and_never_passes_unencodable_text(text: str) -> None:
    """Any text, lone surrogates included: a rejection or arguments that encode as UTF-8."""
    for candidate in (text, '{"q": "' + text + '"}', "{'q': '" + text + "',}"):
        result = parse_arguments(candidate)
        if isinstance(result, ParsedArguments):
            json.dumps(result.value, ensure_ascii=False).encode("utf-8")
        else:
            result.message.encode("utf-8")


@given(st.recursive(st.integers() | st.text(max_size=5), lambda v: st.lists(v, max_size=2)))
def test_repair_never_closes_what_the_model_left_open(value: Any) -> None:
    """Any object cut anywhere before its last brace is rejected, never repaired shorter."""
    text = json.dumps({"a": value, "b": 1})
    for cut in range(1, len(text) - 1):
        result = parse_arguments(text[:cut])
        assert isinstance(result, Rejection) or result.value == {}, text[:cut]


def test_gate_records_which_repairs_it_applied() -> None:
    """Each repair the gate applies is named in the ledger (``parse.repaired``)."""
    gate = _gate(repair=True)
    run = gate.run(authority=AUTHORITY)
    [obs] = run.submit([ToolCall(id="c1", name="get_weather", arguments="{'city': 'Oslo',}")])
    assert obs.status is Status.OK
    [event] = [r for r in gate.ledger.audit() if r.kind == "parse.repaired"]
    assert event.call_id == "c1"
    assert event.data == {"tool": "get_weather", "repairs": ["single_quotes", "trailing_comma"]}


def test_gate_never_runs_a_call_cut_off_after_a_complete_field() -> None:
    """``{"city": "Oslo"`` may have been ``{"city": "Oslo", "days": 5}``: rejected, not run."""
    run = _gate(repair=True).run(authority=AUTHORITY)
    [obs] = run.submit([ToolCall(id="c1", name="get_weather", arguments='{"city": "Oslo"')])
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.PARSE
    assert obs.repaired is False


def test_a_call_written_as_text_is_named_with_one_article() -> None:
    """The subject of a text-format call is "the tool call": never "of the the tool call"."""
    from callgate.parse import decode_object

    problem = decode_object('{"name": "x", "arguments": {"q": "\\ud800"}}', subject="the tool call")
    assert not isinstance(problem, ParsedArguments)
    assert "field 'arguments.q' of the tool call holds" in problem.message

"""`callgate.render`: the model-facing text, built from facts and bounded.

Every rejection names its rule, field, expected and actual value; text that came from the
model (values, field names) is shown visibly (no control or bidirectional characters) and
cut to a bound, however long or hostile it is.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from callgate.calls import Stage
from callgate.definitions.explain import schema_error_problem
from callgate.render import (
    MAX_MESSAGE_CHARS,
    Problem,
    Rejection,
    bounded,
    describe_value,
    render_json,
)
from callgate.validate.explain import schema_problems

# -- bounded ---------------------------------------------------------------------------------


def test_short_text_is_left_as_it_is() -> None:
    """Text within the limit comes back unchanged, including text exactly at the limit."""
    assert bounded("hello") == "hello"
    exact = "x" * MAX_MESSAGE_CHARS
    assert bounded(exact) == exact


def test_long_text_is_cut_with_a_visible_marker() -> None:
    """Text over the limit is cut to at most the limit and says it was cut."""
    cut = bounded("y" * 5000, 100)
    assert len(cut) <= 100
    assert cut.startswith("y" * 50)
    assert cut.endswith("[message cut]")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000), st.integers(min_value=20, max_value=2000))
def test_bounded_text_never_exceeds_its_limit(text: str, limit: int) -> None:
    """For any text and any limit of 20 or more, the result fits and is a prefix or is marked."""
    out = bounded(text, limit)
    assert len(out) <= limit
    assert out == text or out.endswith(" ... [message cut]")


# -- render_json and describe_value ----------------------------------------------------------


def test_render_json_keeps_non_ascii_and_escapes_what_cannot_be_seen() -> None:
    """Korean stays readable; a bidi override, a NUL and an astral tag char become escapes."""
    text = render_json("a\u202eb\x00 거대한 \U000e0001")
    assert "거대한" in text
    assert "\u202e" not in text
    assert "\x00" not in text
    assert "\U000e0001" not in text
    assert "\\u202e" in text
    assert "\\u0000" in text
    assert "\\udb40\\udc01" in text


def test_render_json_cuts_long_values() -> None:
    """A rendering over its limit is cut to the limit and ends in '...'."""
    text = render_json("x" * 100, 20)
    assert len(text) == 20
    assert text.endswith("...")


def test_render_json_never_fails_on_values_json_cannot_hold() -> None:
    """An arbitrary object shows as its type name; a cyclic list shows as its JSON type."""
    assert render_json(object()) == '"<object>"'
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert render_json(cyclic) == "array"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=500), st.integers(min_value=4, max_value=200))
def test_rendered_model_text_is_visible_and_bounded(text: str, limit: int) -> None:
    """Whatever string a model sends, its rendering is printable and within the limit."""
    out = render_json(text, limit)
    assert len(out) <= limit
    assert out.isprintable(), out


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "null"),
        ("abc", 'string "abc"'),
        (5, "integer 5"),
        (1.5, "number 1.5"),
        (True, "boolean true"),
        ([1, 2], "array [1, 2]"),
        ({"a": 1}, 'object {"a": 1}'),
    ],
)
def test_describe_value_names_the_json_type(value: Any, shown: str) -> None:
    """A value a model sent is shown with its JSON type (a bool is not an integer)."""
    assert describe_value(value) == shown


# -- Problem and Rejection -------------------------------------------------------------------


def test_a_problem_as_dict_leaves_out_empty_fields() -> None:
    """`as_dict` carries the facts that are set, and only those."""
    problem = Problem(rule="required", field="to", message="missing required field 'to'.")
    assert problem.as_dict() == {
        "rule": "required",
        "field": "to",
        "message": "missing required field 'to'.",
    }


def test_a_rejection_lists_its_problems_then_the_advice() -> None:
    """The message names the stage, one line per problem, and ends with what to do."""
    rejection = Rejection(
        stage=Stage.VALIDATE,
        problems=(Problem(rule="a", message="first"), Problem(rule="b", message="second")),
        advice="Fix the arguments and call again.",
    )
    assert rejection.message.splitlines() == [
        "Rejected at the validate stage:",
        "- first",
        "- second",
        "Fix the arguments and call again.",
    ]


def test_a_rejection_shows_six_problems_and_counts_the_rest() -> None:
    """Past six problems, the message says how many more there are instead of listing them."""
    problems = tuple(Problem(rule="r", message=f"problem {i}") for i in range(10))
    message = Rejection(stage=Stage.AUTHORIZE, problems=problems, advice="advice").message
    assert "- problem 5" in message
    assert "- problem 6" not in message
    assert "- ... and 4 more problem(s)." in message


def test_a_rejection_of_hostile_length_is_bounded() -> None:
    """Huge problem texts and advice still give a message of at most MAX_MESSAGE_CHARS."""
    problems = tuple(Problem(rule="r", message="z" * 5000) for _ in range(3))
    message = Rejection(stage=Stage.VALIDATE, problems=problems, advice="a" * 5000).message
    assert len(message) <= MAX_MESSAGE_CHARS
    assert message.startswith("Rejected at the validate stage:")


# -- Pydantic errors -------------------------------------------------------------------------


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int = Field(ge=1, le=10)
    mode: Literal["fast", "slow"]
    name: str = Field(max_length=5)


def _problems(arguments: dict[str, Any]) -> dict[str, Problem]:
    with pytest.raises(ValidationError) as caught:
        _Args.model_validate(arguments)
    found = schema_problems(caught.value, _Args.model_json_schema(), arguments)
    return {p.field or "": p for p in found}


def test_pydantic_errors_name_rule_field_expected_and_actual() -> None:
    """Out of range, not allowed and too long: each problem carries all four facts."""
    found = _problems({"count": 0, "mode": "warp", "name": "abcdefgh"})
    count, mode, name = found["count"], found["mode"], found["name"]
    assert (count.rule, count.expected, count.actual) == (
        "greater_than_equal",
        "integer (>= 1, <= 10)",
        "integer 0",
    )
    assert (mode.rule, mode.expected, mode.actual) == (
        "literal_error",
        'one of "fast", "slow"',
        'string "warp"',
    )
    assert name.rule == "string_too_long"
    assert name.actual == 'string "abcdefgh"'
    for problem in (count, mode, name):
        assert problem.field is not None
        assert f"'{problem.field}'" in problem.message
        assert problem.expected is not None
        assert problem.expected in problem.message
        assert problem.actual is not None
        assert problem.actual in problem.message


def test_missing_fields_are_required_problems_with_their_type() -> None:
    """A missing field is rule 'required', names the field and the type it should have."""
    found = _problems({"mode": "fast", "name": "a"})
    assert found["count"].rule == "required"
    assert found["count"].message == (
        "missing required field 'count' (expected integer (>= 1, <= 10))."
    )


def test_an_unexpected_field_with_a_hostile_name_is_shown_visibly_and_bounded() -> None:
    """An extra field named with a bidi override and 500 characters is escaped and cut."""
    hostile = "evil\u202e" + "k" * 500
    found = _problems({"count": 2, "mode": "fast", "name": "a", hostile: "x"})
    (problem,) = [p for p in found.values() if p.rule == "no_extra_fields"]
    assert "\u202e" not in problem.message
    assert "\\u202e" in problem.message
    assert "k" * 100 not in problem.message
    assert "allowed fields: count, mode, name." in problem.message
    assert problem.actual == 'string "x"'


# -- JSON Schema errors ----------------------------------------------------------------------

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "minimum": 3},
        "s": {"type": "string", "pattern": "^a+$"},
        "e": {"enum": ["x", "y"]},
    },
    "required": ["n"],
    "additionalProperties": False,
    "dependentRequired": {"s": ["e"]},
}


def _json_problems(instance: dict[str, Any]) -> list[Problem]:
    errors = list(Draft202012Validator(_SCHEMA).iter_errors(instance))
    assert errors, "the instance was meant to be invalid"
    return [schema_error_problem(e) for e in errors]


@pytest.mark.parametrize(
    ("instance", "rule", "field", "expected", "actual"),
    [
        ({"n": "5"}, "type", "n", "integer", 'string "5"'),
        ({"n": 1}, "minimum", "n", "integer (>= 3)", "integer 1"),
        ({}, "required", "n", "integer (>= 3)", None),
        ({"n": 4, "z": 1}, "no_extra_fields", "z", None, "integer 1"),
        ({"n": 4, "e": "q"}, "enum", "e", 'one of "x", "y"', 'string "q"'),
        ({"n": 4, "s": "a"}, "required", "e", None, None),
    ],
)
def test_json_schema_errors_become_problems_with_the_facts(
    instance: dict[str, Any], rule: str, field: str, expected: str | None, actual: str | None
) -> None:
    """Each JSON Schema keyword gives its rule, the field, and expected/actual where they apply."""
    (problem,) = _json_problems(instance)
    assert (problem.rule, problem.field, problem.expected, problem.actual) == (
        rule,
        field,
        expected,
        actual,
    )
    assert f"'{field}'" in problem.message
    assert "Validation" not in problem.message
    assert "{" not in problem.message


def test_json_schema_problems_carry_a_prefix_into_the_field() -> None:
    """With a prefix, the field is named where it sits in the arguments."""
    (error,) = Draft202012Validator({"type": "integer"}).iter_errors("no")
    problem = schema_error_problem(error, ("limits", 0))
    assert problem.field == "limits[0]"
    assert (
        problem.message
        == "field 'limits[0]' has the wrong type: expected integer, got string \"no\"."
    )


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=400))
def test_a_hostile_extra_field_name_never_reaches_the_message_raw(key: str) -> None:
    """Whatever key a model invents, the problem's text is printable and of bounded size."""
    schema = {"type": "object", "properties": {"n": {}}, "additionalProperties": False}
    errors = list(Draft202012Validator(schema).iter_errors({key: "v"})) if key != "n" else []
    for error in errors:
        problem = schema_error_problem(error)
        assert problem.message.isprintable(), problem.message
        assert len(problem.message) < 300

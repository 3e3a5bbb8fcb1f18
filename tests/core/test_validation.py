"""Stages ``parse`` and ``schema``: the seed's tool test matrix on the grocery domain.

Each malformed call is rejected before anything runs, at the stage that
caught it, with a message that names the field, what was expected and what
was sent.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, model_validator

from callgate import Gate, Stage, Status, ToolCall, tool
from callgate.render import Rejection
from callgate.validate import validate_arguments

from .domains import ALLOW_ALL, GroceryStore, grocery_registry


def submit_one(name: str, arguments: Any) -> tuple[Any, GroceryStore]:
    """Submit one call to a fresh grocery gate with every effect granted."""
    store = GroceryStore()
    run = Gate(grocery_registry(store)).run(authority=ALLOW_ALL)
    [obs] = run.submit([ToolCall(id="call-1", name=name, arguments=arguments)])
    return obs, store


SCHEMA_CASES = [
    pytest.param(
        "search_products",
        {"limit": 5},
        "query",
        "missing",
        ["string"],
        id="missing-field",
    ),
    pytest.param(
        "search_products",
        {"query": 42},
        "query",
        "string",
        ["integer 42"],
        id="wrong-type",
    ),
    pytest.param(
        "create_grocery_cart",
        {"store_id": "north", "skus": "sku-milk"},
        "skus",
        "array",
        ['string "sku-milk"'],
        id="wrong-type-array",
    ),
    pytest.param(
        "search_products",
        {"query": "milk", "colour": "red"},
        "colour",
        "query, limit",
        ["unexpected field"],
        id="extra-field",
    ),
    pytest.param(
        "create_grocery_cart",
        {"store_id": "west", "skus": []},
        "store_id",
        '"north", "south"',
        ['string "west"'],
        id="enum-violation",
    ),
    pytest.param(
        "place_order",
        {"cart_id": "cart-1", "total": 20, "currency": "GBP"},
        "currency",
        '"USD", "EUR"',
        ['string "GBP"'],
        id="enum-class-violation",
    ),
    pytest.param(
        "search_products",
        {"query": "milk", "limit": 500},
        "limit",
        "<= 50",
        ["integer 500"],
        id="range-violation-above",
    ),
    pytest.param(
        "search_products",
        {"query": "milk", "limit": 0},
        "limit",
        ">= 1",
        ["integer 0"],
        id="range-violation-below",
    ),
    pytest.param(
        "place_order",
        {"cart_id": "cart-1", "total": -5, "currency": "USD"},
        "total",
        "> 0",
        ["integer -5"],
        id="exclusive-range-violation",
    ),
    pytest.param(
        "search_products",
        {"query": "milk", "limit": "5"},
        "limit",
        "integer",
        ['string "5"'],
        id="number-as-string-not-coerced",
    ),
    pytest.param(
        "search_products",
        {"query": "milk", "limit": True},
        "limit",
        "integer",
        ["boolean true"],
        id="boolean-is-not-an-integer",
    ),
]


@pytest.mark.parametrize(("tool", "arguments", "field", "expected", "actual"), SCHEMA_CASES)
def test_malformed_arguments_are_rejected_at_schema_naming_field_expected_and_actual(
    tool: str, arguments: dict[str, Any], field: str, expected: str, actual: list[str]
) -> None:
    """Missing, mistyped, extra, out-of-enum and out-of-range fields: rejected at ``schema``."""
    obs, _ = submit_one(tool, arguments)
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.VALIDATE
    assert f"'{field}'" in obs.content
    assert expected in obs.content
    for text in actual:
        assert text in obs.content


@pytest.mark.parametrize(("tool", "arguments", "field", "expected", "actual"), SCHEMA_CASES)
def test_malformed_arguments_run_nothing(
    tool: str, arguments: dict[str, Any], field: str, expected: str, actual: list[str]
) -> None:
    """A schema rejection leaves the back end untouched: no handler ran."""
    obs, store = submit_one(tool, arguments)
    assert obs.status is Status.REJECTED
    assert not store.touched


def test_schema_rejection_is_retryable_and_comes_from_the_gate() -> None:
    """The model may fix and resend; the text is the gate's, not tool output."""
    obs, _ = submit_one("search_products", {})
    assert obs.retryable is True
    assert obs.provenance.value == "gate"
    assert obs.is_error


def test_every_problem_of_a_call_is_reported_at_once() -> None:
    """Several wrong fields are all named, so the model can fix them in one turn."""
    obs, _ = submit_one("place_order", {"cart_id": 7, "total": "a lot", "currency": "YEN"})
    assert obs.stage is Stage.VALIDATE
    for name in ("cart_id", "total", "currency"):
        assert f"'{name}'" in obs.content
    assert {d.get("field") for d in obs.details} >= {"cart_id", "total", "currency"}


def test_schema_rejection_details_carry_field_expected_and_actual() -> None:
    """The structured details name field, expected and actual for the application."""
    obs, _ = submit_one("search_products", {"query": "milk", "limit": 500})
    [detail] = obs.details
    assert detail["field"] == "limit"
    assert "50" in detail["expected"]
    assert detail["actual"] == "integer 500"


def test_well_formed_arguments_are_admitted() -> None:
    """The control case: the same tool with good arguments runs."""
    obs, store = submit_one("search_products", {"query": "milk", "limit": 5})
    assert obs.status is Status.OK
    assert store.calls["search_products"] == 1
    assert obs.result == [{"sku": "sku-milk", "name": "whole milk 1l", "price": 1.25}]


# -- unknown tool --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "suggested"),
    [
        ("serch_products", "search_products"),
        ("search_product", "search_products"),
        ("create_cart", "create_grocery_cart"),
        ("placeorder", "place_order"),
    ],
)
def test_unknown_tool_is_rejected_at_schema_naming_the_closest_tools(
    name: str, suggested: str
) -> None:
    """A misspelt tool name is rejected at ``schema`` with 'did you mean' the closest names."""
    obs, store = submit_one(name, {"query": "milk"})
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.VALIDATE
    assert name in obs.content
    assert f"'{suggested}'" in obs.content
    assert obs.tool == name
    assert not store.touched


def test_unknown_tool_with_no_close_name_suggests_nothing() -> None:
    """A name like nothing registered gets no made-up suggestion."""
    obs, _ = submit_one("translate_text", {})
    assert obs.stage is Stage.VALIDATE
    assert "did you mean" not in obs.content


def test_empty_tool_name_is_rejected_at_schema() -> None:
    """A call without a tool name is rejected, not run and not raised."""
    obs, store = submit_one("", {"query": "milk"})
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.VALIDATE
    assert not store.touched


# -- parse --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("not json at all", id="prose"),
        pytest.param('{"query": ', id="cut-after-colon"),
        pytest.param('{"query": "milk",', id="cut-after-comma"),
        pytest.param('{"query": "mi', id="cut-inside-string"),
        pytest.param("{query: milk}", id="unquoted"),
        pytest.param('{"query": "milk"} {"query": "eggs"}', id="two-objects"),
    ],
)
def test_argument_text_that_is_not_json_is_rejected_at_parse(text: str) -> None:
    """Text that is not JSON (and not safely repairable) is rejected at ``parse``."""
    obs, store = submit_one("search_products", text)
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.PARSE
    assert "not valid JSON" in obs.content
    assert not store.touched


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('["milk"]', "array"),
        ('"milk"', "string"),
        ("42", "integer"),
        ("null", "null"),
        ("true", "boolean"),
    ],
)
def test_json_that_is_not_an_object_is_rejected_at_parse(text: str, kind: str) -> None:
    """Arguments must be one JSON object; any other JSON value is rejected at ``parse``."""
    obs, store = submit_one("search_products", text)
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.PARSE
    assert "must be a JSON object" in obs.content
    assert kind in obs.content
    assert not store.touched


@pytest.mark.parametrize("value", [["milk"], 42, None, "milk"])
def test_decoded_arguments_that_are_not_a_mapping_are_rejected_at_parse(value: Any) -> None:
    """Already decoded arguments that are not an object are rejected, not raised."""
    obs, _ = submit_one("search_products", value)
    assert obs.status is Status.REJECTED
    assert obs.stage in (Stage.PARSE,)


def test_parse_rejection_quotes_where_the_text_went_wrong() -> None:
    """The message points at the offending position so the model can fix it."""
    obs, _ = submit_one("search_products", '{"query": milk}')
    assert obs.stage is Stage.PARSE
    assert "column" in obs.content
    assert "milk" in obs.content


def test_repaired_arguments_run_and_say_so() -> None:
    """A trailing comma is repaired conservatively, and the observation says it was."""
    obs, store = submit_one("search_products", '{"query": "milk", "limit": 2,}')
    assert obs.status is Status.OK
    assert obs.repaired is True
    assert store.calls["search_products"] == 1


def test_empty_argument_text_means_no_arguments() -> None:
    """``""`` is read as ``{}`` (several providers send it), then validated as such."""
    obs, _ = submit_one("search_products", "")
    assert obs.stage is Stage.VALIDATE
    assert "'query'" in obs.content


@pytest.mark.parametrize("text", ["", "  ", "\n"])
def test_empty_argument_text_calls_a_tool_without_parameters(text: str) -> None:
    """A parameterless tool called with blank argument text runs (providers send ``""``)."""
    from callgate import Authority, Registry, tool

    @tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    run = Gate(Registry([ping])).run(authority=Authority(principal="p", grants=["call:ping"]))
    [obs] = run.submit([ToolCall(id="c1", name="ping", arguments=text)])
    assert obs.status is Status.OK
    assert obs.content == "pong"


def test_deeply_nested_arguments_are_rejected_not_raised() -> None:
    """Nesting deep enough to exhaust a recursive decoder is a rejection, not a crash."""
    text = '{"query": ' + "[" * 50_000 + "]" * 50_000 + "}"
    obs, store = submit_one("search_products", text)
    assert obs.status is Status.REJECTED
    assert obs.stage in (Stage.PARSE, Stage.VALIDATE)
    assert not store.touched


def test_rejection_messages_are_bounded_in_length() -> None:
    """A huge wrong value does not make a huge message."""
    obs, _ = submit_one("search_products", {"query": "x" * 100_000, "limit": "y" * 100_000})
    assert obs.status is Status.REJECTED
    assert len(obs.content) <= 1200


# -- messages a model can act on (issue 12, item 7) --------------------------------------------


def _message(spec: Any, arguments: dict[str, Any]) -> str:
    rejection = validate_arguments(spec, arguments)
    assert isinstance(rejection, Rejection)
    return rejection.message


def test_a_null_is_shown_once_as_null() -> None:
    """Not "got null null": the value's rendering is the type name alone."""
    obs, _ = submit_one("search_products", {"query": None})
    assert "got null." in obs.content
    assert "null null" not in obs.content


@tool
def pick(size: Literal["거대한", "작은"]) -> None:
    """Pick a size."""


class Window(BaseModel):
    start: int
    end: int

    @model_validator(mode="after")
    def ordered(self) -> Window:
        if self.end < self.start:
            raise ValueError("end must not come before start")
        return self


@tool
def book(window: Window) -> None:
    """Book a window."""


def test_non_ascii_allowed_values_are_shown_as_written() -> None:
    """Enum values read as the model must send them, not as ``\\uac70...`` escapes."""
    message = _message(pick, {"size": "huge"})
    assert 'expected one of "거대한", "작은", got string "huge"' in message
    assert "\\uac70" not in message
    assert "Input should" not in message


@pytest.mark.parametrize("hidden", ["\u202e", "\x00", "\u2028", "\ud800", "\x1b[31m"])
def test_invisible_characters_in_values_and_names_are_escaped(hidden: str) -> None:
    """Control and format characters never reach the model's text raw; the message stays short."""
    obs, _ = submit_one("search_products", {"query": 5, f"x{hidden}" * 50: hidden * 500})
    text = obs.content
    assert hidden not in text
    assert all(c.isprintable() or c == "\n" for c in text)
    text.encode("utf-8")  # a lone surrogate would not encode
    assert len(text) <= 1200


def test_a_value_of_the_right_type_rejected_for_another_reason_says_the_reason() -> None:
    """Not "expected object, got object {...}": the nested type's own check is named."""
    message = _message(book, {"window": {"start": 5, "end": 1}})
    assert "end must not come before start" in message
    assert "expected object, got object" not in message


@pytest.mark.parametrize(
    ("arguments", "sentence"),
    [
        pytest.param(
            {"query": "milk", "limit": 500},
            "field 'limit' is out of range: expected integer (>= 1, <= 50), got integer 500.",
            id="range",
        ),
        pytest.param(
            {"query": 42},
            "field 'query' has the wrong type: expected string, got integer 42.",
            id="type",
        ),
        pytest.param(
            {"query": "milk", "colour": "red"},
            "unexpected field 'colour': this tool has no such field; allowed fields: query, limit.",
            id="extra",
        ),
        pytest.param({}, "missing required field 'query' (expected string).", id="missing"),
    ],
)
def test_each_problem_is_one_sentence_naming_field_expected_and_actual(
    arguments: dict[str, Any], sentence: str
) -> None:
    """The lines a model reads are plain sentences ending with a full stop."""
    obs, _ = submit_one("search_products", arguments)
    assert f"- {sentence}" in obs.content.splitlines()


_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(
    spec=st.sampled_from([pick, book]),
    arguments=st.dictionaries(
        st.sampled_from(["size", "window", "x"]) | st.text(max_size=8), _ANY_JSON
    ),
)
def test_every_rejection_is_visible_bounded_text(spec: Any, arguments: dict[str, Any]) -> None:
    """Whatever a model sends, the message is short, printable, encodable, and has no repr."""
    result = validate_arguments(spec, arguments)
    if not isinstance(result, Rejection):
        return
    text = result.message
    assert len(text) <= 1200
    assert all(c.isprintable() for line in text.splitlines() for c in line)
    text.encode("utf-8")
    assert "Input should" not in text
    for line in text.splitlines()[1:]:
        assert line.endswith(".")

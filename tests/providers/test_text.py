"""Plain-text tool calls from open models: Hermes tags, fenced JSON, bare JSON objects."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate import Stage, Status, ToolCall
from callgate.providers import Extraction, text

from .support import payload, sdk_accepts, shop_run

ASSIGNED_ID = re.compile(r"^call_[0-9a-f]{24}$")


def _named(ex: Extraction) -> list[tuple[str, Any]]:
    return [(c.name, c.arguments) for c in ex.calls]


def test_hermes_tags_give_the_calls_and_the_prose_around_them() -> None:
    """Each ``<tool_call>`` holds one call; the sentence before them is the prose."""
    ex = text.extract(payload("hermes.txt"))
    assert _named(ex) == [
        ("get_weather", {"city": "Paris"}),
        ("add_to_cart", {"cart_id": "cart-17", "sku": "sku-oats", "quantity": 2}),
    ]
    assert ex.text == "I'll check the weather in Paris and add the oats to your cart."
    assert all(ASSIGNED_ID.match(c.id) for c in ex.calls)
    assert ex.calls[0].id != ex.calls[1].id
    assert text.extract(payload("hermes.txt")) == ex


def test_identical_calls_in_one_text_get_distinct_ids() -> None:
    """Two identical calls are two calls: the position is part of the id."""
    one = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    ex = text.extract(one + "\n" + one)
    assert len(ex.calls) == 2
    assert ex.calls[0].id != ex.calls[1].id


def test_a_call_object_may_carry_its_own_id() -> None:
    """An ``id`` the model wrote is used as it is."""
    ex = text.extract(
        '<tool_call>{"id": "c-1", "name": "get_weather", "arguments": {}}</tool_call>'
    )
    assert [c.id for c in ex.calls] == ["c-1"]


def test_a_tag_may_hold_a_list_of_calls() -> None:
    """Some models put several calls in one tag as a JSON list."""
    body = json.dumps(
        [
            {"name": "get_weather", "arguments": {"city": "A"}},
            {"name": "get_weather", "arguments": {"city": "B"}},
        ]
    )
    ex = text.extract(f"<tool_call>{body}</tool_call>")
    assert _named(ex) == [("get_weather", {"city": "A"}), ("get_weather", {"city": "B"})]


def test_fenced_json_call_is_extracted_and_the_fence_removed() -> None:
    """A call in a fenced ``json`` block counts; the prose keeps what is outside the fence."""
    reply = (
        "Sure, calling the tool now:\n```json\n"
        '{"name": "get_weather", "arguments": {"city": "Rome", "unit": "f"}}\n'
        "```\nI'll report back."
    )
    ex = text.extract(reply)
    assert _named(ex) == [("get_weather", {"city": "Rome", "unit": "f"})]
    assert ex.text == "Sure, calling the tool now:\n\nI'll report back."


def test_fenced_list_of_calls_gives_several_calls() -> None:
    """A fenced JSON list of call objects is several calls, in order."""
    reply = (
        "```json\n["
        '{"name": "get_weather", "parameters": {"city": "A"}}, '
        '{"name": "cancel_order", "parameters": {"order_id": "o-1"}}'
        "]\n```"
    )
    ex = text.extract(reply)
    assert _named(ex) == [("get_weather", {"city": "A"}), ("cancel_order", {"order_id": "o-1"})]
    assert ex.text == ""


def test_fenced_json_that_is_not_a_call_stays_prose() -> None:
    """Example data in a code block is not a call."""
    reply = 'Here is the schema:\n```json\n{"name": "Bob", "age": 31}\n```'
    ex = text.extract(reply)
    assert ex.items == ()
    assert ex.text == reply


def test_bare_json_calls_with_parameters_or_arguments_are_found_in_prose() -> None:
    """Llama-style ``{"name", "parameters"}`` and ``{"name", "arguments"}`` objects count."""
    reply = (
        'First {"name": "get_weather", "parameters": {"city": "Lima"}} and then '
        '{"type": "function", "name": "cancel_order", "arguments": {"order_id": "o-9"}}.'
    )
    ex = text.extract(reply)
    assert _named(ex) == [("get_weather", {"city": "Lima"}), ("cancel_order", {"order_id": "o-9"})]
    assert ex.text == "First  and then ."


def test_bare_json_that_only_looks_like_data_is_not_a_call() -> None:
    """An object with a name but other keys, or without arguments, is data."""
    reply = (
        'The user is {"name": "Ann", "age": 3}; the tool is {"name": "get_weather"}; '
        'the record is {"name": "x", "arguments": {}, "owner": "me"}.'
    )
    ex = text.extract(reply)
    assert ex.items == ()
    assert ex.text == reply


def test_a_call_nested_inside_other_json_data_is_not_a_call() -> None:
    """JSON that is data as a whole is skipped as a whole."""
    reply = 'Log: {"events": [{"name": "get_weather", "arguments": {"city": "X"}}]}'
    assert text.extract(reply).items == ()


def test_arguments_given_as_a_json_string_are_passed_as_text() -> None:
    """``"arguments": "{...}"`` (OpenAI style) reaches the gate as argument text."""
    ex = text.extract(
        '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}</tool_call>'
    )
    assert _named(ex) == [("get_weather", '{"city": "Oslo"}')]


def test_broken_json_in_a_tag_is_repaired_and_marked() -> None:
    """Single quotes and a trailing comma in a tag: repaired, and the call says so."""
    ex = text.extract(
        "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Nice',}}</tool_call>"
    )
    [call] = ex.calls
    assert (call.name, call.arguments, call.repaired) == ("get_weather", {"city": "Nice"}, True)


def test_broken_json_in_a_tag_with_repair_off_is_rejected_with_its_position() -> None:
    """``repair=False``: a parse rejection quoting where the JSON went wrong."""
    ex = text.extract(
        "Let me see. <tool_call>{'name': 'get_weather', 'arguments': {}}</tool_call>",
        repair=False,
    )
    assert ex.calls == []
    [rejected] = ex.rejected
    assert rejected.stage is Stage.PARSE
    assert rejected.tool == "get_weather"
    assert "the tool call is not valid JSON" in rejected.content
    assert "(character 1)" in rejected.content
    assert "<tool_call>" in rejected.content  # the advice shows the expected form
    assert ex.text == "Let me see."


def test_a_closed_tag_whose_braces_are_left_open_is_rejected_never_closed() -> None:
    """Braces left open may be a cut: never closed into a shorter call, even with repair on."""
    ex = text.extract(
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"</tool_call>'
    )
    assert ex.calls == []
    [rejected] = ex.rejected
    assert rejected.details[0]["rule"] == "json_syntax"
    assert rejected.tool == "get_weather"


def test_unrepairable_json_in_a_tag_is_rejected() -> None:
    """Text no rule can fix is answered with a rejection, not dropped."""
    ex = text.extract('<tool_call>{"name": "get_weather", "arguments": {city: Paris}}</tool_call>')
    [rejected] = ex.rejected
    assert rejected.details[0]["rule"] == "json_syntax"
    assert "near «" in rejected.content


def test_open_tag_at_the_end_with_complete_json_is_a_call() -> None:
    """A stop sequence on ``</tool_call>`` leaves the tag open; complete JSON still counts."""
    ex = text.extract(
        'Calling.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Bern"}}'
    )
    assert _named(ex) == [("get_weather", {"city": "Bern"})]
    assert ex.truncated is False


def test_open_tag_with_cut_json_is_rejected_never_repaired() -> None:
    """Text that ends mid-call was cut off: rejected even though repair could close it."""
    ex = text.extract(
        '<tool_call>{"name": "add_to_cart", "arguments": {"cart_id": "c", "sku": "s"}'
    )
    assert ex.calls == []
    [cut] = ex.rejected
    assert cut.tool == "add_to_cart"
    assert cut.details[0]["rule"] == "incomplete_call"
    assert ex.truncated is True


def test_both_arguments_and_parameters_is_ambiguous_and_rejected() -> None:
    """The call does not say which object holds its arguments."""
    ex = text.extract(
        '<tool_call>{"name": "get_weather", "arguments": {"city": "A"}, '
        '"parameters": {"city": "B"}}</tool_call>'
    )
    assert ex.calls == []
    assert ex.rejected[0].details[0]["rule"] == "ambiguous_arguments"


def test_gate_rejects_missing_names_and_unknown_tools_each_clearly() -> None:
    """A tag without a name and a misspelt tool are each their own schema rejection."""
    ex = text.extract(
        '<tool_call>{"arguments": {"city": "A"}}</tool_call>'
        '<tool_call>{"name": "get_wether", "arguments": {"city": "B"}}</tool_call>'
        '<tool_call>{"name": "get_weather", "arguments": ["B"]}</tool_call>'
    )
    observations = ex.merge(shop_run().submit(ex.calls))
    assert [o.stage for o in observations] == [Stage.VALIDATE, Stage.VALIDATE, Stage.PARSE]
    assert "the call has an empty tool name" in observations[0].content
    assert "did you mean 'get_weather'" in observations[1].content
    assert "'arguments' must be a JSON object" in observations[2].content


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "Just prose, no calls.",
        "<tool_call></tool_call>",
        "<tool_call>",
        "</tool_call> stray closer",
        "```json\n{broken\n```",
        "{" * 500,
        "[" * 5000 + '"name"',
    ],
)
def test_odd_texts_give_an_extraction(reply: str) -> None:
    """Edge cases are answered or left as prose; nothing raises."""
    assert isinstance(text.extract(reply), Extraction)


@settings(max_examples=300)
@given(st.text(max_size=400))
def test_extract_never_raises_on_arbitrary_text(reply: str) -> None:
    """Whatever the model writes, extraction returns an `Extraction`."""
    assert isinstance(text.extract(reply), Extraction)


_prose = st.text(
    st.characters(exclude_characters="{}[]<>`\"'\\", exclude_categories=("Cs",)), max_size=30
)
_calls = st.lists(
    st.tuples(
        st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
        st.dictionaries(st.text(max_size=6), st.integers() | st.text(max_size=8), max_size=3),
    ),
    min_size=1,
    max_size=4,
)


@given(_calls, st.lists(_prose, min_size=5, max_size=5), st.sampled_from(["tag", "fence", "bare"]))
def test_calls_written_between_prose_are_all_recovered(
    calls: list[tuple[str, dict[str, Any]]], prose: list[str], style: str
) -> None:
    """Any calls in any of the three styles, between any prose, come back in order."""
    pieces = []
    for i, (name, arguments) in enumerate(calls):
        body = json.dumps({"name": name, "arguments": arguments})
        wrapped = {
            "tag": f"<tool_call>{body}</tool_call>",
            "fence": f"\n```json\n{body}\n```\n",
            "bare": f" {body} ",
        }[style]
        pieces += [prose[i % 5], wrapped]
    pieces.append(prose[4])
    ex = text.extract("".join(pieces))
    assert _named(ex) == [(name, arguments) for name, arguments in calls]
    assert ex.rejected == []


# -- render and round trip ---------------------------------------------------------


def test_round_trip_renders_tool_responses_in_one_user_message() -> None:
    """extract → submit → render: ``<tool_response>`` blocks with id, name, status, content."""
    from openai.types.chat import ChatCompletionUserMessageParam

    ex = text.extract(payload("hermes.txt"))
    observations = ex.merge(shop_run().submit(ex.calls))
    assert [o.status for o in observations] == [Status.OK, Status.OK]
    [message] = text.render(observations)
    assert message["role"] == "user"
    bodies = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", message["content"])
    assert [json.loads(b) for b in bodies] == [
        {
            "id": ex.calls[0].id,
            "name": "get_weather",
            "status": "ok",
            "content": '{"city":"Paris","temperature":21,"unit":"c"}',
        },
        {
            "id": ex.calls[1].id,
            "name": "add_to_cart",
            "status": "ok",
            "content": "added 2 x sku-oats to cart-17",
        },
    ]
    sdk_accepts(ChatCompletionUserMessageParam, message)


def test_render_reports_the_status_of_a_rejected_call() -> None:
    """The model reads ``rejected`` and the reason in the response body."""
    ex = text.extract(
        '<tool_call>{"name": "add_to_cart", "arguments": {"cart_id": "c"}}</tool_call>'
    )
    [message] = text.render(ex.merge(shop_run().submit(ex.calls)))
    body = json.loads(message["content"].split("\n")[1])
    assert body["status"] == "rejected"
    assert "missing required field 'sku'" in body["content"]


def test_a_call_from_text_reaches_the_gate_with_its_assigned_id() -> None:
    """The id given to a call is the id its observation answers."""
    ex = text.extract(payload("hermes.txt"))
    [first, _] = shop_run().submit(ex.calls)
    assert first.call_id == ex.calls[0].id
    assert ex.calls[0] == ToolCall(
        id=first.call_id, name="get_weather", arguments={"city": "Paris"}
    )

"""OpenAI Chat Completions: extraction, rendering, streaming, and the SDK's own types."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionFunctionMessageParam,
    ChatCompletionToolMessageParam,
)
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

from callgate import Observation, Stage, Status, ToolCall
from callgate.parse import parse_arguments
from callgate.providers import Extraction, openai_chat

from .support import json_values, payload, sdk_accepts, shop_registry, shop_run, split_at

PARALLEL_CALLS = [
    ToolCall(
        id="call_Wq3cV8nF2pLk7Hs1Jd9TzR0a",
        name="get_weather",
        arguments='{"city": "Paris", "unit": "c"}',
    ),
    ToolCall(
        id="call_Xy4dB1mG6qNh2Kt8Le5UvS3b",
        name="add_to_cart",
        arguments='{"cart_id": "cart-17", "sku": "sku-oats", "quantity": 0}',
    ),
    ToolCall(
        id="call_Zt9eC2nH7rPj3Lu4Mf6WwT1c",
        name="cancel_order",
        arguments='{"order_id": "ord-881"}',
    ),
    ToolCall(
        id="call_Ab1fD3oJ8sQk4Mv5Ng7XxU2d",
        name="charge_card",
        arguments='{"amount_cents": 1299}',
    ),
]


# -- extract -------------------------------------------------------------------


def test_parallel_tool_calls_are_extracted_in_order_with_the_prose() -> None:
    """Every tool call keeps its id, name and argument text; the content is the prose."""
    ex = openai_chat.extract(payload("openai_chat_parallel.json"))
    assert ex.calls == PARALLEL_CALLS
    assert ex.rejected == []
    assert ex.text == "Let me check the weather and sort out your order."
    assert ex.stop_reason == "tool_calls"
    assert ex.truncated is False
    assert ex.refusal is None


def test_sdk_object_gives_the_same_extraction_as_the_json() -> None:
    """A ``ChatCompletion`` built by the SDK extracts exactly like the decoded JSON."""
    data = payload("openai_chat_parallel.json")
    from_sdk = openai_chat.extract(ChatCompletion.model_validate(data))
    assert from_sdk == openai_chat.extract(data)
    assert from_sdk.calls == PARALLEL_CALLS


def test_a_choice_or_a_message_can_be_passed_instead_of_the_completion() -> None:
    """Callers that keep only the choice or the message get the same calls."""
    data = payload("openai_chat_parallel.json")
    choice = data["choices"][0]
    assert openai_chat.extract(choice).calls == PARALLEL_CALLS
    assert openai_chat.extract(choice["message"]).calls == PARALLEL_CALLS


def test_refusal_is_reported_and_no_call_is_made() -> None:
    """A refusal is its own field, not prose and not a call."""
    ex = openai_chat.extract(payload("openai_chat_refusal.json"))
    assert ex.calls == []
    assert ex.refusal == (
        "I'm sorry, I can't help with charging a card without the customer's consent."
    )
    assert ex.text == ""


def test_legacy_function_call_is_extracted_with_an_id_from_the_completion() -> None:
    """The deprecated ``function_call`` field has no id: the completion id stands in."""
    data = payload("openai_chat_legacy.json")
    ex = openai_chat.extract(data)
    assert ex.calls == [
        ToolCall(
            id="function_call-chatcmpl-8Pq2LmNo3pQr4sTu5vWx6yZa7bCd",
            name="get_weather",
            arguments='{\n  "city": "Lisbon"\n}',
        )
    ]
    assert openai_chat.extract(ChatCompletion.model_validate(data)) == ex


def test_call_cut_off_by_the_token_limit_is_rejected_not_repaired() -> None:
    """``finish_reason: length``: complete calls stand, the cut one is a parse rejection."""
    ex = openai_chat.extract(payload("openai_chat_truncated.json"))
    assert ex.truncated is True
    assert ex.calls == [
        ToolCall(
            id="call_Cd2gE4pK9tRl5Nw6Oh8YyV3e", name="get_weather", arguments='{"city": "Oslo"}'
        )
    ]
    [cut] = ex.rejected
    assert cut.call_id == "call_Ef3hF5qL0uSm6Ox7Pi9ZzW4f"
    assert cut.tool == "add_to_cart"
    assert cut.status is Status.REJECTED
    assert cut.stage is Stage.PARSE
    assert cut.details[0]["rule"] == "incomplete_call"
    assert "output token limit" in cut.content


@pytest.mark.parametrize(
    ("finish_reason", "why"),
    [
        ("length", "the response reached the output token limit"),
        ("content_filter", "the response stopped early (content_filter)"),
    ],
)
def test_any_abnormal_finish_rejects_calls_whose_arguments_are_incomplete(
    finish_reason: str, why: str
) -> None:
    """A filter can cut a response as surely as the token limit; the cut call never runs."""
    data = copy.deepcopy(payload("openai_chat_truncated.json"))
    data["choices"][0]["finish_reason"] = finish_reason
    ex = openai_chat.extract(data)
    assert ex.truncated is True
    assert [c.name for c in ex.calls] == ["get_weather"]
    assert why in ex.rejected[0].content


def test_a_normal_finish_leaves_broken_arguments_to_the_gate() -> None:
    """With ``tool_calls`` as finish reason, broken JSON is the model's slip: the gate parses it."""
    data = copy.deepcopy(payload("openai_chat_truncated.json"))
    data["choices"][0]["finish_reason"] = "tool_calls"
    ex = openai_chat.extract(data)
    assert ex.truncated is False
    assert [c.name for c in ex.calls] == ["get_weather", "add_to_cart"]


def test_duplicate_call_ids_are_each_rejected() -> None:
    """Two calls sharing an id cannot be answered apart: neither runs, the others do."""
    data = copy.deepcopy(payload("openai_chat_parallel.json"))
    calls = data["choices"][0]["message"]["tool_calls"]
    calls[2]["id"] = calls[0]["id"]
    ex = openai_chat.extract(data)
    assert [c.id for c in ex.calls] == [PARALLEL_CALLS[1].id, PARALLEL_CALLS[3].id]
    assert [(o.call_id, o.tool) for o in ex.rejected] == [
        (PARALLEL_CALLS[0].id, "get_weather"),
        (PARALLEL_CALLS[0].id, "cancel_order"),
    ]
    assert all(o.details[0]["rule"] == "call_id" for o in ex.rejected)
    assert "appears 2 times in this response" in ex.rejected[0].content


def test_malformed_tool_call_entries_become_rejections() -> None:
    """Entries that cannot be read are answered, not dropped and not raised."""
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            "call_x",
            {"id": "call_a"},
            {"id": "call_b", "type": "custom", "custom": {"name": "grep", "input": "x"}},
            {
                "id": "call_c",
                "type": "function",
                "function": {"name": "get_weather", "arguments": 5},
            },
        ],
    }
    ex = openai_chat.extract(message)
    assert ex.calls == []
    assert [o.call_id for o in ex.rejected] == ["", "call_a", "call_b", "call_c"]
    assert all(o.details[0]["rule"] == "malformed_call" for o in ex.rejected)
    assert "of type 'custom' are not supported" in ex.rejected[2].content


def test_arguments_sent_as_an_object_are_accepted() -> None:
    """Some OpenAI-compatible servers send decoded arguments; they pass through as a mapping."""
    message = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Rome"}},
            }
        ],
    }
    assert openai_chat.extract(message).calls == [
        ToolCall(id="c1", name="get_weather", arguments={"city": "Rome"})
    ]


@given(json_values())
def test_extract_never_raises_on_arbitrary_json(value: Any) -> None:
    """Any JSON object gives an `Extraction`; a value of another kind is a TypeError."""
    if isinstance(value, dict):
        assert isinstance(openai_chat.extract(value), Extraction)
    else:
        with pytest.raises(TypeError):
            openai_chat.extract(value)


@given(st.lists(json_values(), max_size=6))
def test_extract_never_raises_on_arbitrary_tool_call_entries(entries: list[Any]) -> None:
    """Arbitrary entries in ``tool_calls`` are each answered: a call or a rejection."""
    ex = openai_chat.extract({"choices": [{"message": {"tool_calls": entries}}]})
    assert len(ex.items) == len(entries)


# -- render and round trip ---------------------------------------------------------


def test_round_trip_renders_one_tool_message_per_call_accepted_by_the_sdk() -> None:
    """extract → submit → render: the next request validates against the SDK's own types."""
    data = payload("openai_chat_parallel.json")
    ex = openai_chat.extract(ChatCompletion.model_validate(data))
    observations = ex.merge(shop_run().submit(ex.calls))
    assert [o.status for o in observations] == [
        Status.OK,
        Status.REJECTED,
        Status.ERROR,
        Status.UNKNOWN,
    ]
    messages = openai_chat.render(observations)
    assert messages[0] == {
        "role": "tool",
        "tool_call_id": "call_Wq3cV8nF2pLk7Hs1Jd9TzR0a",
        "content": '{"city":"Paris","temperature":21,"unit":"c"}',
    }
    assert [m["tool_call_id"] for m in messages] == [c.id for c in PARALLEL_CALLS]
    assert messages[1]["content"].startswith("[rejected] Rejected at the validate stage:")
    assert messages[2]["content"] == (
        "[error] order ord-881 has already shipped and cannot be cancelled"
    )
    assert messages[3]["content"].startswith("[unknown] the payment service did not answer.")
    for message in messages:
        sdk_accepts(ChatCompletionToolMessageParam, message)
    sdk_message = data["choices"][0]["message"]
    request = {
        "model": "gpt-4.1",
        "messages": [
            {"role": "user", "content": "Weather in Paris, oats in my cart, cancel ord-881, pay."},
            {
                "role": "assistant",
                "content": sdk_message["content"],
                "tool_calls": sdk_message["tool_calls"],
            },
            *messages,
        ],
        "tools": openai_chat.tool_definitions(shop_registry()),
    }
    sdk_accepts(CompletionCreateParamsNonStreaming, request)


def test_cut_off_call_is_answered_in_its_place() -> None:
    """The rejection of a cut call is rendered between the gate's answers, in call order."""
    ex = openai_chat.extract(payload("openai_chat_truncated.json"))
    observations = ex.merge(shop_run().submit(ex.calls))
    messages = openai_chat.render(observations)
    assert [m["tool_call_id"] for m in messages] == [
        "call_Cd2gE4pK9tRl5Nw6Oh8YyV3e",
        "call_Ef3hF5qL0uSm6Ox7Pi9ZzW4f",
    ]
    assert messages[1]["content"].startswith("[rejected] Rejected at the parse stage:")


def test_legacy_function_call_is_answered_with_a_function_message() -> None:
    """A legacy call gets the ``role: function`` message that API expects."""
    ex = openai_chat.extract(payload("openai_chat_legacy.json"))
    [message] = openai_chat.render(ex.merge(shop_run().submit(ex.calls)))
    assert message == {
        "role": "function",
        "name": "get_weather",
        "content": '{"city":"Lisbon","temperature":21,"unit":"c"}',
    }
    sdk_accepts(ChatCompletionFunctionMessageParam, message)


# -- streaming ---------------------------------------------------------------------

STREAM_CALLS = [
    ToolCall(id="call_Gh4iG6rM1vTn7Py8Qj0AaX5g", name="get_weather", arguments='{"city": "Paris"}'),
    ToolCall(
        id="call_Ij5jH7sN2wUo8Qz9Rk1BbY6h",
        name="get_weather",
        arguments='{"city": "Rome", "unit": "f"}',
    ),
]


def _assemble(chunks: list[Any]) -> Extraction:
    assembler = openai_chat.StreamAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    return assembler.extraction()


def test_stream_assembles_calls_by_index_and_the_prose() -> None:
    """Argument fragments are joined per index; content deltas make the prose."""
    ex = _assemble(payload("openai_chat_stream.jsonl"))
    assert ex.calls == STREAM_CALLS
    assert ex.text == "Checking both cities."
    assert ex.stop_reason == "tool_calls"
    assert ex.truncated is False


def test_stream_of_sdk_chunks_gives_the_same_extraction() -> None:
    """``ChatCompletionChunk`` objects assemble exactly like their JSON."""
    chunks = payload("openai_chat_stream.jsonl")
    sdk_chunks = [ChatCompletionChunk.model_validate(c) for c in chunks]
    assert _assemble(sdk_chunks) == _assemble(chunks)


def test_stream_cut_mid_arguments_rejects_that_call_and_keeps_the_complete_one() -> None:
    """No finish_reason and half the arguments: a parse rejection, never a shorter call."""
    chunks = payload("openai_chat_stream.jsonl")[:10]  # ends inside the second call
    ex = _assemble(chunks)
    assert ex.truncated is True
    assert ex.stop_reason is None
    assert ex.calls == STREAM_CALLS[:1]
    [cut] = ex.rejected
    assert cut.call_id == STREAM_CALLS[1].id
    assert "the stream ended before the response was complete" in cut.content


def _chunks_for(parts: list[list[str]], content: list[str], finish: bool) -> list[dict[str, Any]]:
    """A stream whose calls' arguments arrive as the given fragments."""
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
        for piece in content
    ]
    for index, fragments in enumerate(parts):
        call = STREAM_CALLS[index]
        head = {"index": index, "id": call.id, "type": "function"}
        head["function"] = {"name": call.name, "arguments": ""}
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [head]}}]})
        for fragment in fragments:
            delta = {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}
            chunks.append({"choices": [{"index": 0, "delta": delta}]})
    if finish:
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return chunks


@pytest.mark.parametrize("call", [0, 1])
def test_every_single_split_of_the_arguments_gives_the_same_calls(call: int) -> None:
    """Splitting one call's arguments at each boundary changes nothing."""
    texts = [str(c.arguments) for c in STREAM_CALLS]
    whole = _assemble(_chunks_for([[t] for t in texts], ["Checking."], finish=True))
    assert whole.calls == STREAM_CALLS
    for k in range(len(texts[call]) + 1):
        parts = [[t] for t in texts]
        parts[call] = [texts[call][:k], texts[call][k:]]
        assert _assemble(_chunks_for(parts, ["Checking."], finish=True)) == whole


@settings(max_examples=200)
@given(st.data())
def test_arbitrary_chunkings_of_the_stream_give_the_same_calls(data: st.DataObject) -> None:
    """However the fragments are cut, the assembled calls and prose are the same."""
    texts = [str(c.arguments) for c in STREAM_CALLS]
    cuts = st.lists(st.integers(min_value=0, max_value=100), max_size=12)
    parts = [split_at(t, data.draw(cuts)) for t in texts]
    content = split_at("Checking both cities.", data.draw(cuts))
    ex = _assemble(_chunks_for(parts, content, finish=True))
    assert ex.calls == STREAM_CALLS
    assert ex.text == "Checking both cities."


@pytest.mark.parametrize("call", [0, 1])
def test_a_stream_cut_at_any_point_of_the_arguments_never_yields_a_partial_call(
    call: int,
) -> None:
    """Cut anywhere inside the arguments, the call is rejected, even where repair could help."""
    texts = [str(c.arguments) for c in STREAM_CALLS]
    for k in range(1, len(texts[call])):
        parts = [[t] for t in texts[: call + 1]]
        parts[call] = [texts[call][:k]]
        ex = _assemble(_chunks_for(parts, [], finish=False))
        assert ex.calls == STREAM_CALLS[:call]
        [cut] = ex.rejected
        assert cut.call_id == STREAM_CALLS[call].id
        assert cut.details[0]["rule"] == "incomplete_call"


def test_a_stream_cut_after_complete_arguments_keeps_the_calls_but_says_truncated() -> None:
    """Arguments that are complete JSON were fully sent; the stream end is still reported."""
    texts = [[str(c.arguments)] for c in STREAM_CALLS]
    ex = _assemble(_chunks_for(texts, [], finish=False))
    assert ex.calls == STREAM_CALLS
    assert ex.truncated is True


def test_streamed_and_whole_responses_decode_to_the_same_arguments() -> None:
    """The stream's argument text parses to what a non-streamed call would carry."""
    ex = _assemble(payload("openai_chat_stream.jsonl"))
    decoded = [parse_arguments(c.arguments) for c in ex.calls]
    assert [getattr(d, "value", None) for d in decoded] == [
        {"city": "Paris"},
        {"city": "Rome", "unit": "f"},
    ]


@given(st.lists(json_values(), max_size=8))
def test_stream_assembler_never_raises_on_arbitrary_chunks(chunks: list[Any]) -> None:
    """Odd chunks are ignored or answered; feeding and assembling never raise."""
    assert isinstance(_assemble(chunks), Extraction)


def test_merge_refuses_observations_of_another_batch() -> None:
    """Pairing answers with calls by id: a foreign list is a developer error, said clearly."""
    ex = openai_chat.extract(payload("openai_chat_parallel.json"))
    other = [
        Observation(
            call_id="call_other",
            tool="get_weather",
            status=Status.OK,
            stage=Stage.EXECUTE,
            content="{}",
            retryable=True,
        )
    ]
    with pytest.raises(ValueError, match="one observation per extracted call"):
        ex.merge(other)


def test_render_keeps_content_text_intact() -> None:
    """Tool output with quotes and newlines goes through unchanged."""
    obs = Observation(
        call_id="c1",
        tool="get_weather",
        status=Status.OK,
        stage=Stage.EXECUTE,
        content=json.dumps({"note": 'say "hi"\nbye'}),
        retryable=True,
    )
    assert openai_chat.render([obs])[0]["content"] == '{"note": "say \\"hi\\"\\nbye"}'

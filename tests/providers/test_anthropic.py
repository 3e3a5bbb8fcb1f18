"""Anthropic Messages: ``tool_use`` blocks in, one ``user`` message of ``tool_result`` out."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from callgate import Stage, Status, ToolCall
from callgate.providers import Extraction, anthropic

from .support import json_values, payload, sdk_accepts, shop_registry, shop_run, split_at

CALLS = [
    ToolCall(
        id="toolu_01A09q90qw90lq917835lq9",
        name="get_weather",
        arguments={"city": "San Francisco", "unit": "f"},
    ),
    ToolCall(
        id="toolu_01B18r81rx81mr826944mr8", name="cancel_order", arguments={"order_id": "ord-77"}
    ),
    ToolCall(
        id="toolu_01C27s72sy72ns735053ns7",
        name="add_to_cart",
        arguments={"cart_id": "cart-2", "sku": "sku-eggs", "colour": "brown"},
    ),
]


def test_tool_use_blocks_are_extracted_in_order_with_the_text() -> None:
    """Each ``tool_use`` block is a call with its decoded input; text blocks are the prose."""
    ex = anthropic.extract(payload("anthropic_message.json"))
    assert ex.calls == CALLS
    assert ex.text == "I'll look up the weather and cancel the order."
    assert ex.stop_reason == "tool_use"
    assert ex.truncated is False


def test_sdk_message_gives_the_same_extraction_as_the_json() -> None:
    """An ``anthropic.types.Message`` extracts exactly like the decoded JSON."""
    from anthropic.types import Message

    data = payload("anthropic_message.json")
    assert anthropic.extract(Message.model_validate(data)) == anthropic.extract(data)


@pytest.mark.parametrize(
    ("stop_reason", "why"),
    [
        ("max_tokens", "the response reached the output token limit"),
        ("refusal", "the response stopped early (refusal)"),
    ],
)
def test_tool_use_ending_an_abnormally_stopped_message_is_rejected(
    stop_reason: str, why: str
) -> None:
    """At ``max_tokens`` or a refusal the final ``tool_use`` may be incomplete: it does not run."""
    data = copy.deepcopy(payload("anthropic_message.json"))
    data["stop_reason"] = stop_reason
    data["content"][3]["input"] = {"cart_id": "cart-2"}
    ex = anthropic.extract(data)
    assert ex.truncated is True
    assert ex.calls == CALLS[:2]
    [cut] = ex.rejected
    assert (cut.call_id, cut.tool, cut.stage) == (CALLS[2].id, "add_to_cart", Stage.PARSE)
    assert why in cut.content


def test_server_tools_and_thinking_are_not_calls() -> None:
    """Blocks the API ran itself, and thinking, never reach the gate."""
    message = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "...", "signature": "sig"},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
            {"type": "text", "text": "Found it."},
        ],
        "stop_reason": "end_turn",
    }
    ex = anthropic.extract(message)
    assert ex.items == ()
    assert ex.text == "Found it."


def test_refusal_stop_reason_is_reported() -> None:
    """``stop_reason: refusal`` fills the refusal with the text the model gave."""
    message = {"content": [{"type": "text", "text": "I can't help."}], "stop_reason": "refusal"}
    assert anthropic.extract(message).refusal == "I can't help."


def test_duplicate_tool_use_ids_are_rejected() -> None:
    """Two blocks with one id: neither runs."""
    data = copy.deepcopy(payload("anthropic_message.json"))
    data["content"][2]["id"] = data["content"][1]["id"]
    ex = anthropic.extract(data)
    assert ex.calls == [CALLS[2]]
    assert [o.details[0]["rule"] for o in ex.rejected] == ["call_id", "call_id"]


@given(json_values())
def test_extract_never_raises_on_arbitrary_json(value: Any) -> None:
    """Any JSON object gives an `Extraction`; a value of another kind is a TypeError."""
    if isinstance(value, dict):
        assert isinstance(anthropic.extract(value), Extraction)
    else:
        with pytest.raises(TypeError):
            anthropic.extract(value)


# -- render and round trip ---------------------------------------------------------


def test_round_trip_renders_one_user_message_of_tool_results_in_call_order() -> None:
    """extract → submit → render; ``is_error`` for all but ok; the SDK accepts the request."""
    from anthropic.types import Message, MessageParam, ToolResultBlockParam
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    data = payload("anthropic_message.json")
    ex = anthropic.extract(Message.model_validate(data))
    observations = ex.merge(shop_run().submit(ex.calls))
    assert [o.status for o in observations] == [Status.OK, Status.ERROR, Status.REJECTED]
    [message] = anthropic.render(observations)
    assert message["role"] == "user"
    blocks = message["content"]
    assert blocks[0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
        "content": '{"city":"San Francisco","temperature":70,"unit":"f"}',
        "is_error": False,
    }
    assert blocks[1] == {
        "type": "tool_result",
        "tool_use_id": "toolu_01B18r81rx81mr826944mr8",
        "content": "[error] order ord-77 has already shipped and cannot be cancelled",
        "is_error": True,
    }
    assert blocks[2]["tool_use_id"] == "toolu_01C27s72sy72ns735053ns7"
    assert blocks[2]["is_error"] is True
    assert "unexpected field 'colour'" in blocks[2]["content"]
    for block in blocks:
        sdk_accepts(ToolResultBlockParam, block)
    sdk_accepts(MessageParam, message)
    assistant = {
        "role": "assistant",
        "content": [
            {k: v for k, v in block.items() if k in ("type", "text", "id", "name", "input")}
            for block in data["content"]
        ],
    }
    request = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [
            {"role": "user", "content": "Weather in SF, cancel ord-77, add brown eggs."},
            assistant,
            message,
        ],
        "tools": anthropic.tool_definitions(shop_registry()),
    }
    sdk_accepts(MessageCreateParamsNonStreaming, request)


@pytest.mark.parametrize("status", list(Status))
def test_is_error_is_true_for_every_status_but_ok(status: Status) -> None:
    """The one flag Anthropic reads: ok is not an error, everything else is."""
    from callgate import Observation

    obs = Observation(
        call_id="toolu_1",
        tool="get_weather",
        status=status,
        stage=Stage.EXECUTE,
        content="x",
        retryable=True,
    )
    [message] = anthropic.render([obs])
    assert message["content"][0]["is_error"] is (status is not Status.OK)


def test_no_observations_render_no_message() -> None:
    """An empty user message would be rejected by the API; none is produced."""
    assert anthropic.render([]) == []


# -- streaming ---------------------------------------------------------------------

STREAM_CALLS = [
    ToolCall(
        id="toolu_01T1x1fJ34qAmk2tNTrN7Up6",
        name="get_weather",
        arguments='{"city": "San Francisco, CA", "unit": "f"}',
    ),
    ToolCall(
        id="toolu_01U2y2gK45rBnl3uOUsO8Vq7",
        name="add_to_cart",
        arguments='{"cart_id": "cart-9", "sku": "sku-milk", "quantity": 3}',
    ),
]


def _assemble(events: list[Any]) -> Extraction:
    assembler = anthropic.StreamAssembler()
    for event in events:
        assembler.feed(event)
    return assembler.extraction()


def test_stream_assembles_tool_use_input_from_json_deltas() -> None:
    """``input_json_delta`` fragments are joined per block; text deltas make the prose."""
    ex = _assemble(payload("anthropic_stream.jsonl"))
    assert ex.calls == STREAM_CALLS
    assert ex.text == "Okay, let's check both."
    assert ex.stop_reason == "tool_use"
    assert ex.truncated is False


def test_stream_of_sdk_events_gives_the_same_extraction() -> None:
    """``RawMessageStreamEvent`` objects assemble exactly like their JSON."""
    from anthropic.types import RawMessageStreamEvent

    events = [e for e in payload("anthropic_stream.jsonl") if e["type"] != "ping"]
    adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)  # ping is not one of them
    sdk_events = [adapter.validate_python(e) for e in events]
    assert (
        _assemble(sdk_events) == _assemble(events) == _assemble(payload("anthropic_stream.jsonl"))
    )


def test_stream_and_message_decode_to_the_same_arguments() -> None:
    """The streamed input text decodes to the object a whole message would carry."""
    ex = _assemble(payload("anthropic_stream.jsonl"))
    assert [json.loads(str(c.arguments)) for c in ex.calls] == [
        {"city": "San Francisco, CA", "unit": "f"},
        {"cart_id": "cart-9", "sku": "sku-milk", "quantity": 3},
    ]


def test_a_tool_use_without_input_deltas_takes_its_start_input() -> None:
    """A tool with no arguments streams no JSON: its input is the start block's ``{}``."""
    events = [
        {"type": "message_start", "message": {"id": "msg_1", "content": []}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_9", "name": "get_time", "input": {}},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]
    assert _assemble(events).calls == [ToolCall(id="toolu_9", name="get_time", arguments={})]


def test_a_stream_cut_before_content_block_stop_rejects_that_block() -> None:
    """A block that never stopped was cut off, even if its JSON happens to look complete."""
    events = payload("anthropic_stream.jsonl")
    stop_of_second = max(
        i for i, e in enumerate(events) if e["type"] == "content_block_stop" and e["index"] == 2
    )
    ex = _assemble(events[:stop_of_second])
    assert ex.truncated is True
    assert ex.calls == STREAM_CALLS[:1]
    [cut] = ex.rejected
    assert cut.call_id == STREAM_CALLS[1].id
    assert "content_block_stop" not in cut.content
    assert "stream ended before this tool_use block was complete" in cut.content


def _events_for(fragments: list[list[str]], text: list[str]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "msg_x", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    events += [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}
        for t in text
    ]
    events.append({"type": "content_block_stop", "index": 0})
    for n, parts in enumerate(fragments, start=1):
        call = STREAM_CALLS[n - 1]
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        events.append({"type": "content_block_start", "index": n, "content_block": block})
        events += [
            {
                "type": "content_block_delta",
                "index": n,
                "delta": {"type": "input_json_delta", "partial_json": p},
            }
            for p in parts
        ]
        events.append({"type": "content_block_stop", "index": n})
    events.append({"type": "message_delta", "delta": {"stop_reason": "tool_use"}})
    events.append({"type": "message_stop"})
    return events


def test_every_single_split_of_the_input_json_gives_the_same_calls() -> None:
    """Splitting the second call's JSON at each boundary changes nothing."""
    texts = [str(c.arguments) for c in STREAM_CALLS]
    whole = _assemble(_events_for([[t] for t in texts], ["Okay."]))
    assert whole.calls == STREAM_CALLS
    for k in range(len(texts[1]) + 1):
        parts = [[texts[0]], [texts[1][:k], texts[1][k:]]]
        assert _assemble(_events_for(parts, ["Okay."])) == whole


@settings(max_examples=200)
@given(st.data())
def test_arbitrary_chunkings_of_the_stream_give_the_same_calls(data: st.DataObject) -> None:
    """However the deltas are cut, the assembled calls and prose are the same."""
    cuts = st.lists(st.integers(min_value=0, max_value=100), max_size=12)
    parts = [split_at(str(c.arguments), data.draw(cuts)) for c in STREAM_CALLS]
    text = split_at("Okay, let's check both.", data.draw(cuts))
    ex = _assemble(_events_for(parts, text))
    assert ex.calls == STREAM_CALLS
    assert ex.text == "Okay, let's check both."


def test_a_stream_cut_at_any_point_never_yields_a_partial_call() -> None:
    """Cut after any event, no call carries input it did not fully receive."""
    events = payload("anthropic_stream.jsonl")
    for k in range(len(events)):
        ex = _assemble(events[:k])
        for call in ex.calls:
            assert call in STREAM_CALLS
        stopped = sum(1 for e in events[:k] if e["type"] == "content_block_stop") - 1
        assert len(ex.calls) == max(stopped, 0)


@given(st.lists(json_values(), max_size=8))
def test_stream_assembler_never_raises_on_arbitrary_events(events: list[Any]) -> None:
    """Odd events are ignored; feeding and assembling never raise."""
    assert isinstance(_assemble(events), Extraction)

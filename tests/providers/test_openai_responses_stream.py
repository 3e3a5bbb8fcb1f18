"""OpenAI Responses streaming: ``StreamAssembler`` assembles what ``extract`` reads at the end."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseReasoningSummaryPartAddedEvent,
    ResponseReasoningSummaryPartDoneEvent,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningSummaryTextDoneEvent,
    ResponseRefusalDeltaEvent,
    ResponseRefusalDoneEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
    ResponseWebSearchCallCompletedEvent,
    ResponseWebSearchCallInProgressEvent,
    ResponseWebSearchCallSearchingEvent,
)
from pydantic import BaseModel, TypeAdapter

from callgate import Stage, Status, ToolCall
from callgate.providers import Extraction, openai_responses

from .support import json_values, payload, split_at

EVENT_CLASSES: dict[str, type[BaseModel]] = {
    "response.created": ResponseCreatedEvent,
    "response.in_progress": ResponseInProgressEvent,
    "response.completed": ResponseCompletedEvent,
    "response.incomplete": ResponseIncompleteEvent,
    "response.output_item.added": ResponseOutputItemAddedEvent,
    "response.output_item.done": ResponseOutputItemDoneEvent,
    "response.content_part.added": ResponseContentPartAddedEvent,
    "response.content_part.done": ResponseContentPartDoneEvent,
    "response.output_text.delta": ResponseTextDeltaEvent,
    "response.output_text.done": ResponseTextDoneEvent,
    "response.refusal.delta": ResponseRefusalDeltaEvent,
    "response.refusal.done": ResponseRefusalDoneEvent,
    "response.function_call_arguments.delta": ResponseFunctionCallArgumentsDeltaEvent,
    "response.function_call_arguments.done": ResponseFunctionCallArgumentsDoneEvent,
    "response.reasoning_summary_part.added": ResponseReasoningSummaryPartAddedEvent,
    "response.reasoning_summary_part.done": ResponseReasoningSummaryPartDoneEvent,
    "response.reasoning_summary_text.delta": ResponseReasoningSummaryTextDeltaEvent,
    "response.reasoning_summary_text.done": ResponseReasoningSummaryTextDoneEvent,
    "response.web_search_call.in_progress": ResponseWebSearchCallInProgressEvent,
    "response.web_search_call.searching": ResponseWebSearchCallSearchingEvent,
    "response.web_search_call.completed": ResponseWebSearchCallCompletedEvent,
}

CALLS = [
    ToolCall(
        id="call_Q1rT5vX8zB2dF4hJ6kM9nP3s",
        name="get_weather",
        arguments='{"city":"Paris","unit":"c"}',
    ),
    ToolCall(
        id="call_W7eR2tY5uI8oP1aS4dF6gH9j",
        name="add_to_cart",
        arguments='{"cart_id":"cart-17","sku":"sku-oats","quantity":2}',
    ),
]


def _function_call(call: ToolCall, item_id: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "function_call",
        "status": "completed",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
    }


def _message(text: str, item_id: str, *, kind: str = "output_text") -> dict[str, Any]:
    part: dict[str, Any] = {"type": "refusal", "refusal": text}
    if kind == "output_text":
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [part],
    }


def _reasoning(summary: str, item_id: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": summary}],
    }


WEB_SEARCH = {
    "id": "ws_68b2a1d0c3e48190a1b2c3d4e5f60718",
    "type": "web_search_call",
    "status": "completed",
    "action": {"type": "search", "query": "weather Paris today"},
}

# Two calls interleaved with reasoning and text, as a reasoning model streams them.
INTERLEAVED = [
    _reasoning("The user wants the weather, then oats.", "rs_68b2a1d1a2b38190c4d5e6f708192a3b"),
    _message("I'll check the weather first. ", "msg_68b2a1d2b3c48190d5e6f708192a3b4c"),
    _function_call(CALLS[0], "fc_68b2a1d3c4d58190e6f708192a3b4c5d"),
    _reasoning("Now the cart.", "rs_68b2a1d4d5e68190f708192a3b4c5d6e"),
    _message("Then I'll add the oats.", "msg_68b2a1d5e6f78190a192a3b4c5d6e7f8"),
    _function_call(CALLS[1], "fc_68b2a1d6f7a88190b2a3b4c5d6e7f809"),
]


def _response(output: list[dict[str, Any]], status: str, reason: str | None) -> dict[str, Any]:
    data: dict[str, Any] = copy.deepcopy(payload("openai_responses.json"))
    data["id"] = "resp_68b2a1cf9d8e8190b1c2d3e4f5061728"
    data["output"] = copy.deepcopy(output)
    data["status"] = status
    data["incomplete_details"] = {"reason": reason} if reason else None
    return data


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _item_events(
    index: int, item: dict[str, Any], fragments: list[str] | None
) -> list[dict[str, Any]]:
    """The events that stream one output item, from ``output_item.added`` to ``.done``."""
    kind, item_id = item["type"], item["id"]
    at = {"item_id": item_id, "output_index": index}
    added = {**item, "status": "in_progress"}
    events: list[dict[str, Any]] = []
    if kind == "function_call":
        added["arguments"] = ""
        args = item["arguments"]
        events += [
            {"type": "response.function_call_arguments.delta", **at, "delta": piece}
            for piece in (_pieces(args) if fragments is None else fragments)
        ]
        events.append({"type": "response.function_call_arguments.done", **at, "arguments": args})
    elif kind == "message":
        added["content"] = []
        [part] = item["content"]
        field = "text" if part["type"] == "output_text" else "refusal"
        text = part[field]
        empty = {**part, field: ""}
        prefix = "response.output_text" if field == "text" else "response.refusal"
        extra: dict[str, Any] = {"logprobs": []} if field == "text" else {}
        events.append(
            {"type": "response.content_part.added", **at, "content_index": 0, "part": empty}
        )
        events += [
            {"type": f"{prefix}.delta", **at, "content_index": 0, "delta": piece, **extra}
            for piece in (_pieces(text, 9) if fragments is None else fragments)
        ]
        events.append({"type": f"{prefix}.done", **at, "content_index": 0, field: text, **extra})
        events.append(
            {"type": "response.content_part.done", **at, "content_index": 0, "part": part}
        )
    elif kind == "reasoning":
        added = {"id": item_id, "type": "reasoning", "summary": []}
        text = item["summary"][0]["text"]
        sums = {**at, "summary_index": 0}
        empty = {"type": "summary_text", "text": ""}
        events.append({"type": "response.reasoning_summary_part.added", **sums, "part": empty})
        events += [
            {"type": "response.reasoning_summary_text.delta", **sums, "delta": piece}
            for piece in _pieces(text, 11)
        ]
        events.append({"type": "response.reasoning_summary_text.done", **sums, "text": text})
        events.append(
            {"type": "response.reasoning_summary_part.done", **sums, "part": item["summary"][0]}
        )
    elif kind == "web_search_call":
        events += [
            {"type": f"response.web_search_call.{step}", **at}
            for step in ("in_progress", "searching", "completed")
        ]
    head = {"type": "response.output_item.added", "output_index": index, "item": added}
    tail = {"type": "response.output_item.done", "output_index": index, "item": item}
    return [head, *events, tail]


def _stream(
    output: list[dict[str, Any]],
    *,
    fragments: dict[int, list[str]] | None = None,
    status: str | None = "completed",
    reason: str | None = None,
) -> list[dict[str, Any]]:
    """The decoded events of a stream that produces ``output`` (no terminal event if no status)."""
    start = _response([], "in_progress", None)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
    ]
    for index, item in enumerate(output):
        events += _item_events(index, item, (fragments or {}).get(index))
    if status is not None:
        final = _response(output, status, reason)
        events.append({"type": f"response.{status}", "response": final})
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def _sdk(events: list[dict[str, Any]]) -> list[BaseModel]:
    """The events as the SDK yields them: its own event model classes."""
    return [EVENT_CLASSES[event["type"]].model_validate(event) for event in events]


def _assemble(events: list[Any]) -> Extraction:
    assembler = openai_responses.StreamAssembler()
    for event in events:
        assembler.feed(event)
    return assembler.extraction()


def _final(events: list[dict[str, Any]]) -> Extraction:
    """``extract`` of the stream's final ``Response``, as an SDK object."""
    return openai_responses.extract(Response.model_validate(events[-1]["response"]))


def test_one_call() -> None:
    """A single streamed ``function_call`` is the call ``extract`` reads from the final response."""
    events = _stream([_function_call(CALLS[0], "fc_68b2a1d3c4d58190e6f708192a3b4c5d")])
    ex = _assemble(_sdk(events))
    assert ex.calls == [CALLS[0]]
    assert (ex.stop_reason, ex.truncated, ex.text, ex.rejected) == ("completed", False, "", [])
    assert ex == _final(events)


def test_two_calls_interleaved_with_text_and_reasoning() -> None:
    """Reasoning and message items are not calls; the calls keep output order, the text joins."""
    events = _stream(INTERLEAVED)
    ex = _assemble(_sdk(events))
    assert ex.calls == CALLS
    assert ex.text == "I'll check the weather first. Then I'll add the oats."
    assert ex.truncated is False
    assert ex == _final(events)


def test_the_same_events_as_plain_dicts_give_identical_results() -> None:
    """``model_dump()`` of each SDK event, python or JSON mode, assembles identically."""
    for events in (
        _stream(INTERLEAVED),
        _stream(INTERLEAVED[:4], status=None),
        _stream(INTERLEAVED, status="incomplete", reason="max_output_tokens"),
    ):
        sdk = _sdk(events)
        expected = _assemble(sdk)
        assert _assemble([e.model_dump() for e in sdk]) == expected
        assert _assemble([e.model_dump(mode="json", by_alias=True) for e in sdk]) == expected
        assert _assemble(events) == expected


@pytest.mark.parametrize("arguments", ["{}", ""])
def test_a_call_with_empty_arguments(arguments: str) -> None:
    """A tool without parameters: ``{}`` in one delta, or no delta at all."""
    call = ToolCall(id="call_E3mpty0Args1Xy2Zw3Vu4Ts5", name="get_time", arguments=arguments)
    events = _stream([_function_call(call, "fc_68b2a1d7a8b98190c3b4c5d6e7f8091a")])
    assert sum(e["type"] == "response.function_call_arguments.delta" for e in events) == (
        1 if arguments else 0
    )
    ex = _assemble(_sdk(events))
    assert ex.calls == [call]
    assert ex == _final(events)


def _cut_inside_second_call(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events up to the third argument delta of the second call (no done, no end)."""
    deltas = [
        n
        for n, e in enumerate(events)
        if e["type"] == "response.function_call_arguments.delta" and e["output_index"] == 5
    ]
    return events[: deltas[2] + 1]


def test_a_stream_cut_mid_arguments_rejects_that_call_and_loses_nothing_else() -> None:
    """No ``done`` for the second call: a parse rejection in its place; the rest is kept."""
    ex = _assemble(_sdk(_cut_inside_second_call(_stream(INTERLEAVED))))
    assert ex.truncated is True
    assert ex.stop_reason is None
    assert ex.calls == CALLS[:1]
    assert ex.text == "I'll check the weather first. Then I'll add the oats."
    assert [type(item).__name__ for item in ex.items] == ["ToolCall", "Observation"]
    [cut] = ex.rejected
    assert (cut.call_id, cut.tool, cut.stage, cut.status) == (
        CALLS[1].id,
        "add_to_cart",
        Stage.PARSE,
        Status.REJECTED,
    )
    assert cut.details[0]["rule"] == "incomplete_call"
    assert "the stream ended before this function_call was complete" in cut.content


def test_a_call_without_done_is_rejected_even_if_its_json_looks_complete() -> None:
    """Every delta arrived but no ``done``: the stream was still cut, the call is not run."""
    events = _stream(INTERLEAVED[:3], status=None)
    last_delta = max(
        n for n, e in enumerate(events) if e["type"] == "response.function_call_arguments.delta"
    )
    ex = _assemble(_sdk(events[: last_delta + 1]))
    assert ex.calls == []
    assert [o.call_id for o in ex.rejected] == [CALLS[0].id]


def test_a_stream_cut_after_any_event_never_yields_a_partial_call() -> None:
    """Cut anywhere: a call runs only once its arguments are final, else it is rejected."""
    events = _stream(INTERLEAVED)
    for k in range(len(events)):
        head = events[:k]
        ex = _assemble(_sdk(head))
        added = sum(
            e["type"] == "response.output_item.added" and e["item"]["type"] == "function_call"
            for e in head
        )
        finished = sum(e["type"] == "response.function_call_arguments.done" for e in head)
        assert ex.calls == CALLS[:finished]
        assert [o.call_id for o in ex.rejected] == [c.id for c in CALLS[finished:added]]
        assert ex.truncated is True


def test_a_stream_that_ends_without_its_terminal_event_keeps_finished_calls() -> None:
    """Every item done but no ``response.completed``: the calls stand, the end is reported."""
    ex = _assemble(_sdk(_stream(INTERLEAVED, status=None)))
    assert ex.calls == CALLS
    assert (ex.truncated, ex.stop_reason) == (True, None)


def _cut_by_token_limit(*, item_done: bool) -> list[dict[str, Any]]:
    """The second call's arguments cut at 20 characters by ``max_output_tokens``."""
    cut_item = {**INTERLEAVED[5], "status": "incomplete", "arguments": str(CALLS[1].arguments)[:20]}
    events = _stream([*INTERLEAVED[:5], cut_item], status="incomplete", reason="max_output_tokens")
    dropped = {"response.function_call_arguments.done"}
    if not item_done:
        dropped.add("response.output_item.done")
    return [e for e in events if not (e["type"] in dropped and e.get("output_index") == 5)]


@pytest.mark.parametrize("item_done", [True, False])
def test_an_incomplete_response_rejects_the_call_the_token_limit_cut(item_done: bool) -> None:
    """``response.incomplete`` (max_output_tokens): the cut call is rejected, as by ``extract``."""
    events = _cut_by_token_limit(item_done=item_done)
    ex = _assemble(_sdk(events))
    assert ex.truncated is True
    assert ex.stop_reason == "max_output_tokens"
    assert ex.calls == CALLS[:1]
    [cut] = ex.rejected
    assert (cut.call_id, cut.stage) == (CALLS[1].id, Stage.PARSE)
    assert "the response reached the output token limit" in cut.content
    assert ex == _final(events)


def test_an_incomplete_response_without_the_cut_item_still_rejects_it() -> None:
    """The final output lacks the cut call and no ``done`` came: rejected, for the token limit."""
    events = _cut_inside_second_call(_stream(INTERLEAVED))
    final = _response(INTERLEAVED[:5], "incomplete", "max_output_tokens")
    events.append({"type": "response.incomplete", "response": final, "sequence_number": 999})
    ex = _assemble(_sdk(events))
    assert (ex.truncated, ex.stop_reason) == (True, "max_output_tokens")
    assert ex.calls == CALLS[:1]
    [cut] = ex.rejected
    assert cut.call_id == CALLS[1].id
    assert "the response reached the output token limit" in cut.content


def test_built_in_tools_and_a_refusal_are_not_calls() -> None:
    """A web search item is skipped like ``extract`` skips it; refusal deltas make the refusal."""
    output = [WEB_SEARCH, _message("I can't help with that.", "msg_1", kind="refusal")]
    events = _stream(output)
    ex = _assemble(_sdk(events))
    assert ex.items == ()
    assert ex.refusal == "I can't help with that."
    assert ex == _final(events)


def test_a_custom_tool_call_is_answered_as_extract_answers_it() -> None:
    """Custom tools are not run: a ``parse`` rejection, as for the final response."""
    item = {
        "id": "ctc_68b2a1d8b9ca8190d4c5d6e7f8091a2b",
        "type": "custom_tool_call",
        "call_id": "call_Cu5tom6Tool7Call8Xy9Zw0V",
        "name": "run_sql",
        "input": "SELECT 1",
    }
    events = _stream([item])
    ex = _assemble(events)
    assert [o.details[0]["rule"] for o in ex.rejected] == ["malformed_call"]
    assert ex == _final(events)


@pytest.mark.parametrize(
    "dropped",
    [
        (),
        ("response.function_call_arguments.done",),
        ("response.output_item.done", "response.completed"),
    ],
)
def test_the_final_text_is_preferred_to_the_deltas(dropped: tuple[str, ...]) -> None:
    """Either ``done`` event carries the arguments as sent; deltas are only a fallback."""
    events = _stream(INTERLEAVED[2:3], fragments={0: ['{"city":"Lyon"}']})
    events = [e for e in events if e["type"] not in dropped]
    assert _assemble(_sdk(events)).calls == [CALLS[0]]


@pytest.mark.parametrize("kind", ["output_text", "refusal"])
def test_a_message_cut_before_its_item_done_keeps_its_text(kind: str) -> None:
    """Text and refusal come from their own events: the ``.done`` text, else the deltas."""
    message = _message("I can't help with that.", "msg_2", kind=kind)
    events = _stream([message], fragments={0: ["I can", "'t"]}, status=None)[:-1]
    assert events[-1]["type"] == "response.content_part.done"
    ex = _assemble(_sdk(events))
    assert (ex.text, ex.refusal) == (
        ("I can't help with that.", None)
        if kind == "output_text"
        else ("", "I can't help with that.")
    )
    without_done = [
        e for e in events if not e["type"].endswith((".output_text.done", ".refusal.done"))
    ]
    ex = _assemble(_sdk(without_done))
    assert (ex.text or ex.refusal) == "I can't"
    assert ex.truncated is True


def test_the_final_response_completes_items_whose_done_events_were_not_seen() -> None:
    """``response.completed`` carries the whole output: it is the final word on every item."""
    events = [
        e
        for e in _stream(INTERLEAVED)
        if e["type"] not in ("response.output_item.done", "response.function_call_arguments.done")
    ]
    ex = _assemble(_sdk(events))
    assert ex.calls == CALLS
    assert ex == _final(events)


def _without_final_text(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events with the final argument and message texts removed: only the deltas tell."""
    out = copy.deepcopy(events)
    for event in out:
        event.pop("arguments", None)
        event.pop("text", None)
        if event["type"] == "response.output_item.done":
            event["item"].pop("arguments", None)
            event["item"].pop("content", None)
        if event["type"] == "response.completed":
            event["response"]["output"] = []
    return out


def test_without_final_texts_the_deltas_are_joined() -> None:
    """Dicts whose ``done`` events carry no text assemble from the deltas alone."""
    events = _stream(INTERLEAVED)
    ex = _assemble(_without_final_text(events))
    assert ex == _final(events)


def test_an_item_can_be_found_by_its_item_id() -> None:
    """Deltas that give only ``item_id`` still reach their item."""
    events = _without_final_text(_stream(INTERLEAVED))
    for event in events:
        if event["type"] == "response.function_call_arguments.delta":
            del event["output_index"]
    assert _assemble(events).calls == CALLS


def _split_stream(parts: list[list[str]], final_text: bool) -> Extraction:
    events = _stream(INTERLEAVED, fragments={2: parts[0], 5: parts[1]})
    return _assemble(_sdk(events) if final_text else _without_final_text(events))


@pytest.mark.parametrize("final_text", [True, False])
@pytest.mark.parametrize("call", [0, 1])
def test_every_single_split_of_the_arguments_gives_the_same_calls(
    call: int, final_text: bool
) -> None:
    """Splitting one call's argument text at each boundary changes nothing."""
    texts = [str(c.arguments) for c in CALLS]
    whole = _split_stream([[t] for t in texts], final_text)
    assert whole.calls == CALLS
    for k in range(len(texts[call]) + 1):
        parts = [[t] for t in texts]
        parts[call] = [texts[call][:k], texts[call][k:]]
        assert _split_stream(parts, final_text) == whole


@settings(max_examples=200)
@given(st.data(), st.booleans())
def test_arbitrary_chunkings_of_the_arguments_give_the_same_calls(
    data: st.DataObject, final_text: bool
) -> None:
    """However the deltas are cut (empty ones included), the calls are the unsplit ones."""
    cuts = st.lists(st.integers(min_value=0, max_value=100), max_size=12)
    parts = [split_at(str(c.arguments), data.draw(cuts)) for c in CALLS]
    parts = [p + [""] * data.draw(st.integers(0, 2)) for p in parts]
    ex = _split_stream(parts, final_text)
    assert ex.calls == CALLS
    assert ex == _final(_stream(INTERLEAVED))


EVENT_TYPES = [*EVENT_CLASSES, "error", "response.failed", "response.custom_tool_call_input.delta"]


def _junk_events() -> Any:
    fields = st.sampled_from(
        [
            "item",
            "output_index",
            "item_id",
            "delta",
            "arguments",
            "text",
            "refusal",
            "content_index",
            "response",
            "type",
        ]
    )
    shaped = st.builds(
        lambda kind, rest: {**rest, "type": kind},
        st.sampled_from(EVENT_TYPES),
        st.dictionaries(fields, json_values() | st.integers(0, 6), max_size=5),
    )
    return st.lists(shaped | json_values(), max_size=10)


@settings(max_examples=300)
@given(_junk_events(), st.integers(min_value=0, max_value=80))
def test_junk_events_never_make_the_assembler_raise(junk: list[Any], at: int) -> None:
    """Arbitrary events, alone or in the middle of a real stream, are ignored or answered."""
    assert isinstance(_assemble(junk), Extraction)
    events: list[Any] = _stream(INTERLEAVED)
    events[at:at] = junk
    assert isinstance(_assemble(events), Extraction)


# tests/providers/payloads/openai_responses_stream.jsonl is hand-written, not recorded: the
# `data:` of each server-sent event of a Responses stream (reasoning, text, two calls), one a line.


def test_a_recorded_shape_stream_assembles_like_its_final_response() -> None:
    """The JSONL stream, as dicts and as ``ResponseStreamEvent``s, gives ``extract`` of its end."""
    events = payload("openai_responses_stream.jsonl")
    adapter: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
    sdk_events = [adapter.validate_python(e) for e in events]
    ex = _assemble(events)
    assert ex == _assemble(sdk_events) == _final(events)
    assert [(c.name, json.loads(str(c.arguments))) for c in ex.calls] == [
        ("get_weather", {"city": "Berlin", "unit": "c"}),
        ("add_to_cart", {"cart_id": "cart-17", "sku": "sku-oats", "quantity": 2}),
    ]
    assert ex.text == "Checking the weather, then adding the oats."

"""OpenAI Responses API: ``function_call`` items in, ``function_call_output`` items out."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from openai.types.responses import Response, ResponseInputItemParam
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

from callgate import Stage, Status, ToolCall
from callgate.providers import Extraction, openai_responses

from .support import json_values, payload, sdk_accepts, shop_registry, shop_run, without_none

CALLS = [
    ToolCall(
        id="call_Kl6kI8tO3xVp9Ra0Sl2CcZ7i",
        name="add_to_cart",
        arguments='{"cart_id":"cart-17","sku":"sku-oats","quantity":2}',
    ),
    ToolCall(
        id="call_Mn7lJ9uP4yWq0Sb1Tm3DdA8j",
        name="get_weather",
        arguments='{"city":"Berlin","unit":"kelvin"}',
    ),
    ToolCall(
        id="call_Op8mK0vQ5zXr1Tc2Un4EeB9k",
        name="cancel_order",
        arguments='{"order_id":"ord-4410"}',
    ),
]


def test_function_call_items_are_extracted_by_call_id_with_the_message_text() -> None:
    """Each ``function_call`` item is a call keyed by ``call_id``; output_text is the prose."""
    ex = openai_responses.extract(payload("openai_responses.json"))
    assert ex.calls == CALLS
    assert ex.text == "I'll add the oats and check the weather."
    assert ex.stop_reason == "completed"
    assert ex.truncated is False


def test_sdk_response_gives_the_same_extraction_as_the_json() -> None:
    """A ``Response`` built by the SDK extracts exactly like the decoded JSON."""
    data = payload("openai_responses.json")
    assert openai_responses.extract(Response.model_validate(data)) == (
        openai_responses.extract(data)
    )


def test_the_output_list_alone_can_be_passed() -> None:
    """``response.output`` is enough: the calls are the same."""
    data = payload("openai_responses.json")
    assert openai_responses.extract(data["output"]).calls == CALLS
    sdk_output = Response.model_validate(data).output
    assert openai_responses.extract(sdk_output).calls == CALLS


def test_incomplete_response_rejects_the_cut_call() -> None:
    """``status: incomplete`` at the token limit: arguments that are not JSON are rejected."""
    data = copy.deepcopy(payload("openai_responses.json"))
    data["status"] = "incomplete"
    data["incomplete_details"] = {"reason": "max_output_tokens"}
    data["output"][3]["status"] = "incomplete"
    data["output"][3]["arguments"] = '{"order_id":"ord-44'
    ex = openai_responses.extract(data)
    assert ex.truncated is True
    assert ex.stop_reason == "max_output_tokens"
    assert ex.calls == CALLS[:2]
    [cut] = ex.rejected
    assert (cut.call_id, cut.tool, cut.stage) == (CALLS[2].id, "cancel_order", Stage.PARSE)
    assert cut.details[0]["rule"] == "incomplete_call"


def test_refusal_and_non_call_items_are_not_calls() -> None:
    """Reasoning and built-in tool items are skipped; a refusal part is the refusal."""
    output = [
        {"id": "rs_1", "type": "reasoning", "summary": []},
        {"id": "ws_1", "type": "web_search_call", "status": "completed"},
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "refusal", "refusal": "I can't do that."}],
        },
    ]
    ex = openai_responses.extract({"status": "completed", "output": output})
    assert ex.items == ()
    assert ex.refusal == "I can't do that."


def test_duplicate_call_ids_are_rejected() -> None:
    """Two ``function_call`` items with one ``call_id``: neither runs."""
    data = copy.deepcopy(payload("openai_responses.json"))
    data["output"][2]["call_id"] = data["output"][1]["call_id"]
    ex = openai_responses.extract(data)
    assert ex.calls == [CALLS[2]]
    assert [o.details[0]["rule"] for o in ex.rejected] == ["call_id", "call_id"]


@given(json_values())
def test_extract_never_raises_on_arbitrary_json(value: Any) -> None:
    """Any JSON object gives an `Extraction`; a value of another kind is a TypeError."""
    if isinstance(value, dict | list):
        assert isinstance(openai_responses.extract(value), Extraction)
    else:
        with pytest.raises(TypeError):
            openai_responses.extract(value)


def test_round_trip_renders_function_call_outputs_accepted_by_the_sdk() -> None:
    """extract → submit → render; the next request's ``input`` validates with the SDK types."""
    data = payload("openai_responses.json")
    ex = openai_responses.extract(Response.model_validate(data))
    observations = ex.merge(shop_run().submit(ex.calls))
    assert [o.status for o in observations] == [Status.OK, Status.REJECTED, Status.ERROR]
    items = openai_responses.render(observations)
    assert items[0] == {
        "type": "function_call_output",
        "call_id": "call_Kl6kI8tO3xVp9Ra0Sl2CcZ7i",
        "output": "added 2 x sku-oats to cart-17",
    }
    assert [i["call_id"] for i in items] == [c.id for c in CALLS]
    assert items[1]["output"].startswith("[rejected] Rejected at the validate stage:")
    assert "'unit'" in items[1]["output"]
    for item in items:
        sdk_accepts(ResponseInputItemParam, item)
    function_calls = [without_none(i) for i in data["output"] if i["type"] == "function_call"]
    request = {
        "model": "gpt-4.1",
        "input": [
            {"role": "user", "content": "Add two oats, weather in Berlin, cancel ord-4410."},
            *function_calls,
            *items,
        ],
        "tools": openai_responses.tool_definitions(shop_registry()),
    }
    sdk_accepts(ResponseCreateParamsNonStreaming, request)

"""Gemini: ``functionCall`` parts in (ids assigned when absent), ``functionResponse`` parts out."""

from __future__ import annotations

import copy
import re
from typing import Any

import jsonschema
import pytest
from hypothesis import given

from callgate import Status
from callgate.providers import Extraction, gemini

from .support import json_values, payload, shop_run

# The request ``Content`` shape from the Gemini REST reference (v1beta ``Content``,
# ``Part.functionResponse``), written out by hand: no SDK for Gemini is installed.
FUNCTION_RESPONSE_CONTENT = {
    "type": "object",
    "required": ["role", "parts"],
    "additionalProperties": False,
    "properties": {
        "role": {"enum": ["user"]},
        "parts": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["functionResponse"],
                "additionalProperties": False,
                "properties": {
                    "functionResponse": {
                        "type": "object",
                        "required": ["name", "response"],
                        "additionalProperties": False,
                        "properties": {
                            "id": {"type": "string"},
                            "name": {
                                "type": "string",
                                "pattern": "^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$",
                            },
                            "response": {"type": "object"},
                        },
                    }
                },
            },
        },
    },
}
ASSIGNED_ID = re.compile(r"^call_[0-9a-f]{24}$")


def test_function_calls_are_extracted_with_assigned_ids_and_the_text() -> None:
    """Calls without ids get ``call_<hex>`` ids, distinct per position; text parts are the prose."""
    ex = gemini.extract(payload("gemini_response.json"))
    assert [(c.name, c.arguments) for c in ex.calls] == [
        ("get_weather", {"city": "Tokyo"}),
        ("get_weather", {"city": "Kyoto", "unit": "f"}),
        ("cancel_order", {"order_id": "ord-5"}),
    ]
    ids = [c.id for c in ex.calls]
    assert all(ASSIGNED_ID.match(i) for i in ids)
    assert len(set(ids)) == 3
    assert ex.text == "Let me check the weather in both cities."
    assert ex.stop_reason == "STOP"


def test_assigned_ids_are_stable_for_the_same_response() -> None:
    """Extracting the same response twice gives the same ids, so answers pair up."""
    data = payload("gemini_response.json")
    assert gemini.extract(data) == gemini.extract(copy.deepcopy(data))


def test_assigned_ids_differ_between_responses() -> None:
    """Another response (another ``responseId``) gets other ids for the same calls."""
    data = payload("gemini_response.json")
    other = copy.deepcopy(data)
    other["responseId"] = "pQ2cTn8vJ4-Kx3HNs9aBmAw"
    first, second = gemini.extract(data), gemini.extract(other)
    assert [c.name for c in first.calls] == [c.name for c in second.calls]
    assert not {c.id for c in first.calls} & {c.id for c in second.calls}


def test_responses_without_response_id_are_told_apart_by_content() -> None:
    """Without ``responseId`` the ids come from the parts themselves."""
    data = payload("gemini_response.json")
    del data["responseId"]
    other = copy.deepcopy(data)
    other["candidates"][0]["content"]["parts"][1]["functionCall"]["args"]["city"] = "Osaka"
    assert gemini.extract(data).calls[0].id != gemini.extract(other).calls[0].id
    assert gemini.extract(data) == gemini.extract(copy.deepcopy(data))


def test_snake_case_dump_of_the_sdk_gives_the_same_calls() -> None:
    """``google-genai`` objects dump with snake_case keys; they read the same."""
    data = payload("gemini_response.json")
    snake = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": part["text"]}
                        if "text" in part
                        else {"function_call": part["functionCall"]}
                        for part in data["candidates"][0]["content"]["parts"]
                    ],
                },
                "finish_reason": "STOP",
            }
        ],
        "response_id": data["responseId"],
    }
    assert gemini.extract(snake) == gemini.extract(data)


def test_the_models_own_ids_are_kept_and_echoed() -> None:
    """When Gemini sends ``functionCall.id``, it is the call id and goes back in the response."""
    content = {
        "role": "model",
        "parts": [
            {"functionCall": {"id": "fc-7f3a", "name": "get_weather", "args": {"city": "Oslo"}}}
        ],
    }
    ex = gemini.extract(content)
    assert [c.id for c in ex.calls] == ["fc-7f3a"]
    [rendered] = gemini.render(shop_run().submit(ex.calls))
    assert rendered["parts"][0]["functionResponse"]["id"] == "fc-7f3a"


def test_call_cut_by_max_tokens_is_rejected() -> None:
    """``finishReason: MAX_TOKENS``: the call that ends the response does not run."""
    data = copy.deepcopy(payload("gemini_response.json"))
    data["candidates"][0]["finishReason"] = "MAX_TOKENS"
    ex = gemini.extract(data)
    assert ex.truncated is True
    assert [c.name for c in ex.calls] == ["get_weather", "get_weather"]
    [cut] = ex.rejected
    assert cut.tool == "cancel_order"
    assert cut.details[0]["rule"] == "incomplete_call"


def test_call_cut_by_max_tokens_is_rejected_behind_an_empty_trailing_part() -> None:
    """Gemini 2.5 may end a response with an empty text part that only carries a thought
    signature; the call before it is still the one the limit cut."""
    data = copy.deepcopy(payload("gemini_response.json"))
    data["candidates"][0]["finishReason"] = "MAX_TOKENS"
    data["candidates"][0]["content"]["parts"].append({"text": "", "thoughtSignature": "c2ln"})
    ex = gemini.extract(data)
    [cut] = ex.rejected
    assert cut.tool == "cancel_order"
    assert [c.name for c in ex.calls] == ["get_weather", "get_weather"]


def test_thought_parts_are_not_prose() -> None:
    """Thought summaries (``thought: true``) are not the answer's text."""
    content = {"parts": [{"text": "thinking...", "thought": True}, {"text": "Done."}]}
    assert gemini.extract(content).text == "Done."


@given(json_values())
def test_extract_never_raises_on_arbitrary_json(value: Any) -> None:
    """Any JSON object gives an `Extraction`; a value of another kind is a TypeError."""
    if isinstance(value, dict):
        assert isinstance(gemini.extract(value), Extraction)
    else:
        with pytest.raises(TypeError):
            gemini.extract(value)


def test_round_trip_renders_function_responses_paired_in_call_order() -> None:
    """extract → submit → render: one ``user`` content, a part per call, output or error."""
    ex = gemini.extract(payload("gemini_response.json"))
    observations = ex.merge(shop_run().submit(ex.calls))
    assert [o.status for o in observations] == [Status.OK, Status.OK, Status.ERROR]
    [content] = gemini.render(observations)
    jsonschema.validate(content, FUNCTION_RESPONSE_CONTENT)
    assert content == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "name": "get_weather",
                    "response": {"output": '{"city":"Tokyo","temperature":21,"unit":"c"}'},
                }
            },
            {
                "functionResponse": {
                    "name": "get_weather",
                    "response": {"output": '{"city":"Kyoto","temperature":70,"unit":"f"}'},
                }
            },
            {
                "functionResponse": {
                    "name": "cancel_order",
                    "response": {
                        "error": "[error] order ord-5 has already shipped and cannot be cancelled"
                    },
                }
            },
        ],
    }


def test_no_observations_render_no_content() -> None:
    """Nothing to answer, nothing to send."""
    assert gemini.render([]) == []

"""Gemini streaming: ``StreamAssembler`` gives what ``extract`` gives for the joined response."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from callgate import Stage, Status, ToolCall
from callgate.providers import Extraction, gemini

from .support import json_values, payload, shop_run, split_at

# tests/providers/payloads/gemini_stream.jsonl is hand-written from the Gemini REST reference
# (``models.streamGenerateContent`` with ``alt=sse``: each line is the ``data:`` of one event, a
# ``GenerateContentResponse``), not recorded: no SDK for Gemini is installed. Text in three
# pieces, a call in the chunk that ends the text, the second call with ``finishReason: STOP``.
STREAM = "gemini_stream.jsonl"
RESPONSE_ID = "kY3SaO2aBp-Nz7IP8pDXyQ4"
ASSIGNED_ID = re.compile(r"^call_[0-9a-f]{24}$")
TEXT = "Let me check the weather in Tokyo, then add the oats to your cart."
CALLS = [
    ("get_weather", {"city": "Tokyo"}),
    ("add_to_cart", {"cart_id": "cart-17", "sku": "sku-oats", "quantity": 2}),
]


def _assemble(chunks: list[Any]) -> Extraction:
    assembler = gemini.StreamAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    return assembler.extraction()


def _merged(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The one non-streamed response the chunks add up to: parts joined, last finishReason."""
    parts: list[Any] = []
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    response: dict[str, Any] = {"candidates": [candidate]}
    for chunk in chunks:
        [first] = chunk.get("candidates") or [{}]
        parts += first.get("content", {}).get("parts", [])
        if "finishReason" in first:
            candidate["finishReason"] = first["finishReason"]
        for key in ("responseId", "modelVersion", "usageMetadata"):
            if key in chunk:
                response.setdefault(key, chunk[key])
    return copy.deepcopy(response)


def _chunk(parts: list[dict[str, Any]], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "responseId": RESPONSE_ID, **extra}


def _function_call(name: str, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"functionCall": {"name": name, "args": args, **extra}}


def _ending(chunks: list[dict[str, Any]], reason: str) -> list[dict[str, Any]]:
    out = copy.deepcopy(chunks)
    out[-1]["candidates"][0]["finishReason"] = reason
    return out


def test_one_call_in_one_chunk() -> None:
    """A single chunk holding the call and ``STOP`` is that call, as ``extract`` reads it."""
    chunk = _chunk([_function_call("get_weather", {"city": "Oslo"}, id="fc-9d2e")], "STOP")
    ex = _assemble([chunk])
    assert ex.calls == [ToolCall(id="fc-9d2e", name="get_weather", arguments={"city": "Oslo"})]
    assert (ex.text, ex.stop_reason, ex.truncated) == ("", "STOP", False)
    assert ex == gemini.extract(chunk)


def test_text_and_two_calls_spread_over_several_chunks() -> None:
    """Text pieces are joined, the calls come in part order, the last chunk's reason is the stop."""
    chunks = payload(STREAM)
    ex = _assemble(chunks)
    assert [(c.name, c.arguments) for c in ex.calls] == CALLS
    assert ex.text == TEXT
    assert (ex.stop_reason, ex.truncated, ex.rejected) == ("STOP", False, [])
    assert ex == gemini.extract(_merged(chunks))


def test_calls_without_ids_get_the_ids_extract_assigns() -> None:
    """Assigned ids are ``call_<hex>``, distinct, the same on every assembly, and extract's own."""
    chunks = payload(STREAM)
    ids = [c.id for c in _assemble(chunks).calls]
    assert all(ASSIGNED_ID.match(i) for i in ids)
    assert len(set(ids)) == len(ids) == 2
    assert ids == [c.id for c in _assemble(copy.deepcopy(chunks)).calls]
    assert ids == [c.id for c in gemini.extract(_merged(chunks)).calls]
    other = [{**chunk, "responseId": "pQ2cTn8vJ4-Kx3HNs9aBmAw"} for chunk in chunks]
    assert not set(ids) & {c.id for c in _assemble(other).calls}


def test_without_a_response_id_the_ids_come_from_the_parts() -> None:
    """No ``responseId``: the ids are extract's, from the joined parts, still distinct."""
    chunks = [{k: v for k, v in c.items() if k != "responseId"} for c in payload(STREAM)]
    ex = _assemble(chunks)
    assert len({c.id for c in ex.calls}) == 2
    assert ex == gemini.extract(_merged(chunks))
    assert {c.id for c in ex.calls}.isdisjoint(c.id for c in _assemble(payload(STREAM)).calls)


def test_the_models_own_ids_are_kept_and_echoed() -> None:
    """A streamed ``functionCall.id`` is the call id and goes back in ``functionResponse``."""
    chunks = [
        _chunk([{"text": "Checking."}]),
        _chunk([_function_call("get_weather", {"city": "Oslo"}, id="fc-7f3a")], "STOP"),
    ]
    ex = _assemble(chunks)
    assert [c.id for c in ex.calls] == ["fc-7f3a"]
    [content] = gemini.render(ex.merge(shop_run().submit(ex.calls)))
    assert content["parts"][0]["functionResponse"]["id"] == "fc-7f3a"


def test_a_stream_cut_before_finish_reason_rejects_the_call_it_ends_with() -> None:
    """No ``finishReason``: truncated, and the call the stream stopped on does not run."""
    chunks = payload(STREAM)
    full = _assemble(chunks)
    last = copy.deepcopy(chunks[-1])
    del last["candidates"][0]["finishReason"]
    ex = _assemble([*chunks[:-1], last])
    assert (ex.truncated, ex.stop_reason) == (True, None)
    assert ex.calls == full.calls[:1]
    [cut] = ex.rejected
    assert (cut.call_id, cut.tool, cut.stage) == (full.calls[1].id, "add_to_cart", Stage.PARSE)
    assert (cut.status, cut.details[0]["rule"]) == (Status.REJECTED, "incomplete_call")
    assert "the stream ended before the response was complete" in cut.content
    assert ex.text == TEXT


def test_a_stream_cut_at_any_chunk_never_runs_the_call_it_stopped_on() -> None:
    """Cut after any chunk: what runs is a call of the whole stream that text followed."""
    chunks = [
        *payload(STREAM)[:3],
        _chunk([{"text": "Now the cart."}]),
        *payload(STREAM)[3:],
    ]
    full = _assemble(chunks)
    for k in range(len(chunks)):
        ex = _assemble(chunks[:k])
        assert (ex.truncated, ex.stop_reason) == (True, None)
        assert all(call in full.calls for call in ex.calls)
        ends_with_call = k == 3
        assert len(ex.rejected) == (1 if ends_with_call else 0)
        assert len(ex.calls) == (1 if k > 3 else 0)


@pytest.mark.parametrize(
    ("reason", "why"),
    [
        ("MAX_TOKENS", "the response reached the output token limit"),
        ("MALFORMED_FUNCTION_CALL", "the response stopped early (MALFORMED_FUNCTION_CALL)"),
        ("SAFETY", "the response stopped early (SAFETY)"),
    ],
)
def test_an_abnormal_finish_rejects_the_call_that_ends_the_response(reason: str, why: str) -> None:
    """``MAX_TOKENS``, ``MALFORMED_FUNCTION_CALL``, ...: the last call is cut, as in extract."""
    chunks = _ending(payload(STREAM), reason)
    ex = _assemble(chunks)
    assert (ex.truncated, ex.stop_reason) == (True, reason)
    assert [(c.name, c.arguments) for c in ex.calls] == CALLS[:1]
    [cut] = ex.rejected
    assert (cut.tool, cut.details[0]["rule"]) == ("add_to_cart", "incomplete_call")
    assert why in cut.content
    assert ex == gemini.extract(_merged(chunks))


def test_a_finish_reason_in_its_own_last_chunk_is_the_stop_reason() -> None:
    """``MALFORMED_FUNCTION_CALL`` often comes alone, with no content: it still ends the stream."""
    ok = payload(STREAM)
    del ok[-1]["candidates"][0]["finishReason"]
    ending = {
        "candidates": [
            {
                "finishReason": "MALFORMED_FUNCTION_CALL",
                "finishMessage": "Malformed function call: add_to_cart(quantity=)",
                "index": 0,
            }
        ],
        "responseId": RESPONSE_ID,
    }
    ex = _assemble([*ok, ending])
    assert (ex.truncated, ex.stop_reason) == (True, "MALFORMED_FUNCTION_CALL")
    assert [o.tool for o in ex.rejected] == ["add_to_cart"]
    assert ex == gemini.extract(_merged([*ok, ending]))
    # A malformed call with nothing else streamed: no call at all, and the stream is not cut.
    alone = _assemble([ending])
    assert (alone.items, alone.truncated, alone.stop_reason) == (
        (),
        True,
        "MALFORMED_FUNCTION_CALL",
    )
    assert alone == gemini.extract(ending)


def test_the_last_finish_reason_wins_and_trailing_chunks_keep_it() -> None:
    """A usage-only chunk after the end changes nothing; a later reason replaces an earlier one."""
    chunks = payload(STREAM)
    usage = {"usageMetadata": {"promptTokenCount": 233, "totalTokenCount": 285}}
    assert _assemble([*chunks, usage]) == _assemble(chunks)
    early = _ending(chunks, "STOP")
    early[0]["candidates"][0]["finishReason"] = "MAX_TOKENS"
    assert _assemble(early).stop_reason == "STOP"


def _snake_key(key: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()


def _snake(value: Any, *, under_args: bool = False) -> Any:
    """A REST chunk as ``google-genai`` ``model_dump()`` gives it: snake_case keys, nulls kept."""
    if isinstance(value, list):
        return [_snake(v, under_args=under_args) for v in value]
    if not isinstance(value, dict) or under_args:
        return value
    out = {_snake_key(k): _snake(v, under_args=k == "args") for k, v in value.items()}
    if "function_call" in out or "text" in out:  # a Part: the fields it did not set are null
        out = {"thought": None, "thought_signature": None, "function_response": None, **out}
        out.setdefault("text", None)
        out.setdefault("function_call", None)
    return out


def test_snake_case_dumps_give_the_same_extraction() -> None:
    """``model_dump()`` of SDK chunks (snake_case, nulls) and REST JSON (camelCase) agree."""
    for chunks in (payload(STREAM), _ending(payload(STREAM), "MAX_TOKENS")):
        snake = [_snake(chunk) for chunk in chunks]
        assert "function_call" in snake[2]["candidates"][0]["content"]["parts"][1]
        assert "finish_reason" in snake[-1]["candidates"][0]
        assert "response_id" in snake[0]
        assert _assemble(snake) == _assemble(chunks)
        mixed = [s if n % 2 else c for n, (s, c) in enumerate(zip(snake, chunks, strict=True))]
        assert _assemble(mixed) == _assemble(chunks)


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class _FunctionCall(_Model):
    id: str | None = None
    name: str | None = None
    args: dict[str, Any] | None = None


class _Part(_Model):
    text: str | None = None
    thought: bool | None = None
    function_call: _FunctionCall | None = None


class _Content(_Model):
    role: str | None = None
    parts: list[_Part] | None = None


class _Candidate(_Model):
    content: _Content | None = None
    finish_reason: str | None = None
    index: int | None = None


class _Chunk(_Model):
    """The shape of ``google.genai.types.GenerateContentResponse``: camelCase aliases."""

    candidates: list[_Candidate] | None = None
    response_id: str | None = None
    model_version: str | None = None


def test_sdk_like_objects_are_dumped_and_read_like_their_json() -> None:
    """Pydantic chunks (``model_dump`` by alias, as callgate dumps SDK objects) read the same."""
    chunks = payload(STREAM)
    objects = [_Chunk.model_validate(chunk) for chunk in chunks]
    assert _assemble(objects) == _assemble(chunks)


# -- properties ----------------------------------------------------------------

_NAMES = st.sampled_from(["get_weather", "add_to_cart", "cancel_order", ""])
_ARGS = st.dictionaries(st.sampled_from(["city", "unit", "sku", "quantity"]), json_values())
_PARTS = st.one_of(
    st.builds(lambda t: {"text": t}, st.text(max_size=12)),
    st.builds(lambda t: {"text": t, "thought": True}, st.text(max_size=12)),
    st.builds(lambda n, a: _function_call(n, a), _NAMES, _ARGS),
    st.builds(lambda n, a, i: _function_call(n, a, id=i), _NAMES, _ARGS, st.sampled_from("ab")),
)
_REASONS = st.sampled_from(["STOP", "MAX_TOKENS", "MALFORMED_FUNCTION_CALL", "SAFETY", "OTHER"])


def _split(parts: list[Any], cuts: list[int], reason: str, with_id: bool) -> list[Any]:
    """The parts in consecutive chunks, cut at ``cuts``; the reason rides on the last chunk."""
    indices = split_at("x" * len(parts), cuts)
    chunks, start = [], 0
    for piece in indices or [""]:
        chunks.append(_chunk(parts[start : start + len(piece)]))
        start += len(piece)
    chunks[-1]["candidates"][0]["finishReason"] = reason
    if not with_id:
        for chunk in chunks:
            del chunk["responseId"]
    return chunks


@settings(max_examples=300)
@given(
    st.lists(_PARTS, max_size=8),
    st.lists(st.integers(0, 20), max_size=8),
    _REASONS,
    st.booleans(),
    st.data(),
)
def test_any_split_of_the_parts_gives_the_unsplit_extraction(
    parts: list[Any], cuts: list[int], reason: str, with_id: bool, data: st.DataObject
) -> None:
    """However the parts are grouped into chunks (empty ones too), the extraction is the same."""
    whole = _split(parts, [], reason, with_id)
    chunks = _split(parts, cuts, reason, with_id)
    empties = data.draw(st.lists(st.integers(0, len(chunks) - 1), max_size=3))
    for at in sorted(empties, reverse=True):
        chunks.insert(at, _chunk([]) if with_id else {"candidates": [{"content": {"parts": []}}]})
    assert len(whole) == 1
    expected = gemini.extract(whole[0])
    assert _assemble(chunks) == _assemble(whole) == expected
    if with_id:  # without one, ids hash the parts as given: their keys' case counts, as in extract
        assert _assemble([_snake(c) for c in chunks]) == expected


def _junk_chunks() -> Any:
    keys = st.sampled_from(
        ["candidates", "content", "parts", "finishReason", "finish_reason", "responseId", "index"]
    )
    junk_part = st.dictionaries(
        st.sampled_from(["text", "functionCall", "function_call", "thought", "args", "id"]),
        json_values(),
        max_size=3,
    )
    shaped = st.builds(
        lambda parts, rest: {"candidates": [{"content": {"parts": parts}, **rest}]},
        st.lists(junk_part | json_values(), max_size=3),
        st.dictionaries(keys, json_values(), max_size=3),
    )
    chunk = shaped | st.dictionaries(keys, json_values(), max_size=4) | json_values()
    return st.lists(chunk, max_size=8)


@settings(max_examples=300)
@given(_junk_chunks(), st.integers(0, 6))
def test_junk_chunks_never_make_the_assembler_raise(junk: list[Any], at: int) -> None:
    """Arbitrary chunks, alone or in the middle of a real stream, are ignored or answered."""
    assert isinstance(_assemble(junk), Extraction)
    chunks: list[Any] = payload(STREAM)
    chunks[at:at] = junk
    assert isinstance(_assemble(chunks), Extraction)

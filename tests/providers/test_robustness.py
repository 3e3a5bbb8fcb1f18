"""Issue 12, provider side: no model output breaks an extractor, and a cut-off call never runs.

One section per promise of ``docs/providers.md``: the one contract for a value
that is not a response at all; lone surrogates anywhere; linear work (shown
by counting the decoder's and the hash's work as the input doubles, never by
timing); the size bounds; and cut-off calls in every format and stream.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate import Observation, ToolCall
from callgate.providers import (
    Extraction,
    anthropic,
    base,
    gemini,
    openai_chat,
    openai_responses,
    text,
)
from callgate.providers.base import MAX_CALLS, MAX_RESPONSE_CHARS

from .support import json_values

STRUCTURED = [openai_chat, openai_responses, anthropic, gemini]
FORMATS = [*STRUCTURED, text]


def _name(module: Any) -> str:
    return str(module.__name__).rsplit(".", 1)[-1]


def _assemble(module: Any, events: list[Any]) -> Extraction:
    assembler = module.StreamAssembler()
    for event in events:
        assembler.feed(event)
    result: Extraction = assembler.extraction()
    return result


def _rules(ex: Extraction) -> list[str]:
    return [str(obs.details[0]["rule"]) for obs in ex.rejected]


# -- responses in each format, built from (id, name, arguments text) ------------------


def chat(calls: list[tuple[str, str, str]], finish: str | None = "tool_calls") -> dict[str, Any]:
    tool_calls = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
    ]
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "tool_calls": tool_calls},
    }
    choice["finish_reason"] = finish
    return {"id": "chatcmpl-1", "choices": [choice]}


def responses(
    calls: list[tuple[str, str, str]],
    status: str | None = "completed",
    item_status: str = "completed",
) -> dict[str, Any]:
    output = [
        {"type": "function_call", "call_id": i, "name": n, "arguments": a, "status": item_status}
        for i, n, a in calls
    ]
    data: dict[str, Any] = {"id": "resp_1", "output": output}
    if status is not None:
        data["status"] = status
    return data


def anthropic_message(
    calls: list[tuple[str, str, Any]], stop: str | None = "tool_use"
) -> dict[str, Any]:
    content = [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": stop,
    }


def gemini_response(
    calls: list[tuple[str, str, Any]], finish: str | None = "STOP", response_id: str | None = None
) -> dict[str, Any]:
    parts = [
        {"functionCall": {"name": n, "args": a} | ({"id": i} if i else {})} for i, n, a in calls
    ]
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if finish is not None:
        candidate["finishReason"] = finish
    data: dict[str, Any] = {"candidates": [candidate]}
    if response_id is not None:
        data["responseId"] = response_id
    return data


def chat_stream(calls: list[tuple[str, str, str]], finish: str | None) -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = []
    for index, (i, n, a) in enumerate(calls):
        head = {
            "index": index,
            "id": i,
            "type": "function",
            "function": {"name": n, "arguments": ""},
        }
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [head]}}]})
        if a:
            delta = {"tool_calls": [{"index": index, "function": {"arguments": a}}]}
            chunks.append({"choices": [{"index": 0, "delta": delta}]})
    if finish is not None:
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return chunks


def responses_stream(calls: list[tuple[str, str, str]], ending: str | None) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for index, (i, n, a) in enumerate(calls):
        item = {
            "type": "function_call",
            "id": f"fc_{index}",
            "call_id": i,
            "name": n,
            "arguments": "",
        }
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        if a:
            delta = {"type": "response.function_call_arguments.delta", "output_index": index}
            events.append(delta | {"delta": a})
        done = {"type": "response.function_call_arguments.done", "output_index": index}
        events.append(done | {"arguments": a})
    if ending is not None:
        status = ending.removeprefix("response.")
        events.append({"type": ending, "response": {"id": "resp_1", "status": status}})
    return events


def anthropic_stream(calls: list[tuple[str, str, str]], stop: str | None) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {"id": "msg_1"}}]
    for index, (i, n, a) in enumerate(calls):
        block = {"type": "tool_use", "id": i, "name": n, "input": {}}
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        if a:
            delta = {"type": "input_json_delta", "partial_json": a}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    if stop is not None:
        events.append({"type": "message_delta", "delta": {"stop_reason": stop}})
        events.append({"type": "message_stop"})
    return events


def gemini_stream(calls: list[tuple[str, str, Any]], finish: str | None) -> list[dict[str, Any]]:
    chunks = [gemini_response([call], finish=None) for call in calls]
    if finish is not None:
        chunks.append(gemini_response([], finish=finish))
    return chunks


# -- one contract for "this is not a response at all" -----------------------------------

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=30),
    st.binary(max_size=30),
    st.lists(json_values(), max_size=4),
)


@pytest.mark.parametrize("module", STRUCTURED, ids=_name)
@given(value=JUNK)
def test_a_structured_format_raises_type_error_for_a_value_that_is_not_a_response(
    module: Any, value: Any
) -> None:
    """None, numbers, text, bytes (and lists, but for the Responses output list) are the caller's
    mistake: TypeError, at once, naming what the format takes."""
    if module is openai_responses and isinstance(value, list):
        assert isinstance(module.extract(value), Extraction)
        return
    with pytest.raises(TypeError, match=r"extract\(\) takes"):
        module.extract(value)


@given(value=st.one_of(st.none(), st.integers(), st.binary(max_size=30), json_values()))
def test_text_raises_type_error_for_anything_but_a_str(value: Any) -> None:
    """The text format takes the model's text: any other kind is a TypeError."""
    if isinstance(value, str):
        assert isinstance(text.extract(value), Extraction)
        return
    with pytest.raises(TypeError, match=r"text.extract\(\) takes the model's text"):
        text.extract(value)


@pytest.mark.parametrize("module", STRUCTURED, ids=_name)
@given(value=st.dictionaries(st.text(max_size=8), json_values(), max_size=5))
def test_any_mapping_gives_an_extraction(module: Any, value: dict[str, Any]) -> None:
    """Whatever a response of the right kind holds, extract answers with an `Extraction`."""
    assert isinstance(module.extract(value), Extraction)


# -- lone surrogates never raise -------------------------------------------------------


def test_a_lone_surrogate_before_a_tag_does_not_raise() -> None:
    """``text.extract("\\ud800<tool_call>")`` raised UnicodeEncodeError while hashing the text."""
    ex = text.extract("\ud800<tool_call>")
    assert _rules(ex) == ["incomplete_call"]


def test_a_lone_surrogate_in_gemini_response_id_does_not_raise() -> None:
    """The response id seeds the assigned ids; a surrogate in it is hashed, not encoded strictly."""
    ex = gemini.extract(
        gemini_response([("", "get_weather", {"city": "Paris"})], response_id="\ud800")
    )
    [call] = ex.calls
    assert call.id.startswith("call_")
    assert call.arguments == {"city": "Paris"}


SURROGATE = st.sampled_from(["\ud800", "\udfff", "a\udc00b", "\ud83d"])
WITH_SURROGATE = st.builds(
    lambda a, s, b: a + s + b, st.text(max_size=5), SURROGATE, st.text(max_size=5)
)


@given(call_id=WITH_SURROGATE, name=WITH_SURROGATE, value=WITH_SURROGATE, prose=WITH_SURROGATE)
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
def test_surrogates_in_ids_names_arguments_and_prose_pass_through_every_format(
    call_id: str, name: str, value: str, prose: str
) -> None:
    """Extractors pass surrogates through unchanged (the gate's parse stage judges them)."""
    arguments = json.dumps({"q": value})  # \\udXXX escapes: valid JSON for a lone surrogate
    call = (call_id, name, arguments)
    data = chat([call])
    data["choices"][0]["message"]["content"] = prose
    extractions = [
        openai_chat.extract(data),
        openai_responses.extract(responses([call])),
        _assemble(openai_chat, chat_stream([call], "tool_calls")),
        _assemble(openai_responses, responses_stream([call], "response.completed")),
        _assemble(anthropic, anthropic_stream([call], "end_turn")),
    ]
    for ex in extractions:
        assert ex.calls == [ToolCall(id=call_id, name=name, arguments=arguments)]
    decoded = {"q": value}
    for ex in [
        anthropic.extract(anthropic_message([(call_id, name, decoded)])),
        gemini.extract(gemini_response([(call_id, name, decoded)], response_id=prose)),
        gemini.extract(gemini_response([("", name, decoded)])),  # assigned id: hashes the parts
        _assemble(gemini, gemini_stream([("", name, decoded)], "STOP")),
    ]:
        [got] = ex.calls
        assert (got.name, got.arguments) == (name, decoded)
    tagged = text.extract(
        f'{prose}<tool_call>{{"id": {json.dumps(call_id)}, "name": '
        f'{json.dumps(name)}, "arguments": {arguments}}}</tool_call>{prose}'
    )
    # Tag bodies are decoded by the parse stage's `decode_object`, which judges surrogates.
    assert len(tagged.items) == 1


# -- arbitrary, deep, huge: never raises -------------------------------------------------


def _deep(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for n in range(depth):
        value = [value] if n % 2 else {"k": value}
    return value


HUGE_INT_TEXT = "1" * 5000  # past Python's 4,300-digit limit for int <-> str


@pytest.mark.parametrize(
    "arguments",
    [_deep(2000), 10**5000, {"n": 10**5000}, {"s": "x" * 100_000}, {"k": _deep(3000)}],
    ids=["deep-2000", "huge-int", "huge-int-field", "huge-string", "deep-3000-field"],
)
def test_decoded_arguments_deep_huge_or_odd_never_make_an_extractor_raise(arguments: Any) -> None:
    """Deep nesting, a 5,000-digit integer and a long string, as decoded args, in every format."""
    call = ("c1", "get_weather", arguments)
    for ex in [
        anthropic.extract(anthropic_message([call])),
        gemini.extract(gemini_response([("", "get_weather", arguments)])),
        gemini.extract(gemini_response([call], finish="MAX_TOKENS")),
        openai_chat.extract(chat([("c1", "get_weather", arguments)])),  # type: ignore[list-item]
        openai_chat.extract(
            {"choices": [{"message": {"function_call": {"arguments": arguments}}}]}
        ),
    ]:
        assert isinstance(ex, Extraction)
        assert len(ex.items) == 1


@pytest.mark.parametrize(
    "body",
    [
        "[" * 2000 + "]" * 2000,
        '{"a":' * 2000 + "1" + "}" * 2000,
        HUGE_INT_TEXT,
        '{"limit": ' + HUGE_INT_TEXT + "}",
        '{"s": "' + "x" * 200_000 + '"}',
    ],
    ids=["deep-array", "deep-object", "huge-int", "huge-int-field", "huge-string"],
)
def test_argument_text_deep_or_huge_never_makes_an_extractor_raise(body: str) -> None:
    """The same as text, also under a cut-off ending where completeness is checked."""
    call = ("c1", "get_weather", body)
    for ex in [
        openai_chat.extract(chat([call])),
        openai_chat.extract(chat([call], finish="length")),
        openai_responses.extract(responses([call], status="incomplete")),
        _assemble(openai_chat, chat_stream([call], None)),
        _assemble(anthropic, anthropic_stream([call], "max_tokens")),
        _assemble(openai_responses, responses_stream([call], None)),
        text.extract(f'<tool_call>{{"name": "get_weather", "arguments": {body}}}</tool_call>'),
        text.extract(f'"name" {body} {{"name": "f", "arguments": {body}}}'),
    ]:
        assert isinstance(ex, Extraction)


@pytest.mark.parametrize("module", STRUCTURED, ids=_name)
@given(value=json_values())
@settings(max_examples=50)
def test_arbitrary_stream_events_never_make_an_assembler_raise(module: Any, value: Any) -> None:
    """A stream assembler ignores what carries nothing for it, whatever its kind."""
    events = value if isinstance(value, list) else [value]
    assert isinstance(_assemble(module, events), Extraction)


# -- linear work -------------------------------------------------------------------------


class Counter:
    """Counts the characters a wrapped function is given (its work), and its calls."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.chars = 0
        self.calls = 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        self.chars += sum(len(a) for a in args if isinstance(a, str))
        return self.function(*args)


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Every character the providers hash for ids."""
    counter = Counter(base.digest)
    monkeypatch.setattr(base, "digest", counter)
    return counter


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Every character the text format hands to the JSON decoder for bare JSON."""
    counter = Counter(text._decoder.raw_decode)
    monkeypatch.setattr(text, "_decoder", type("D", (), {"raw_decode": staticmethod(counter)}))
    return counter


def _grows_linearly(work: Callable[[int], int], n: int = 500) -> None:
    """Doubling the input at most doubles the work (plus a little), twice over."""
    w1, w2, w4 = work(n), work(2 * n), work(4 * n)
    assert w2 <= 2.2 * w1 + 1000, (w1, w2)
    assert w4 <= 2.2 * w2 + 1000, (w2, w4)


def test_ids_for_many_tags_hash_the_text_once_not_once_per_call(hashed: Counter) -> None:
    """8,000 tags took 7.8 s: each call's id hashed the whole text."""
    tag = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n'

    def work(n: int) -> int:
        hashed.chars = 0
        ex = text.extract(tag * n)
        assert len(ex.calls) == n
        return hashed.chars

    _grows_linearly(work, n=200)


def test_ids_for_many_gemini_parts_hash_the_parts_once(hashed: Counter) -> None:
    """8,000 parts without a responseId took 3.9 s: each id hashed all the parts."""

    def work(n: int) -> int:
        hashed.chars = 0
        calls = [("", "get_weather", {"city": f"c{i}"}) for i in range(n)]
        assert len(gemini.extract(gemini_response(calls)).calls) == n
        return hashed.chars

    _grows_linearly(work, n=200)


@pytest.mark.parametrize(
    "shape",
    [
        lambda n: '"name" ' + "[" * n,
        lambda n: '"name" ' + "{" * n,
        lambda n: '"name" ' + '{"a":' * n,
        lambda n: '"name" ' + '["' * n,
        lambda n: '"name" ' + "[1, " * n + "x",
        lambda n: '"name" ' + ('{"name": "f", "arguments": {}} [' * n),
    ],
    ids=["open-arrays", "open-braces", "open-objects", "strings", "broken-array", "calls-and-junk"],
)
def test_the_bare_json_search_reads_the_text_a_bounded_number_of_times(
    decoded: Counter, shape: Callable[[int], str]
) -> None:
    """``'"name" ' + '[' * 20000`` took 5.1 s: JSON was decoded again from every bracket."""

    def work(n: int) -> int:
        decoded.chars = 0
        text.extract(shape(n))
        return decoded.chars

    _grows_linearly(work, n=2000)
    assert work(8000) <= 20 * len(shape(8000)) + 4096


def test_the_bare_json_search_still_finds_calls_after_broken_json() -> None:
    """The bound on the search does not lose calls in ordinary prose with broken JSON in it."""
    reply = (
        'Try {"a": 1, oops} or [1, 2 then: {"name": "get_weather", "arguments": {"city": "Oslo"}}'
    )
    assert text.extract(reply).calls[0].arguments == {"city": "Oslo"}


@pytest.mark.timeout(20)
def test_a_fence_opener_with_a_long_run_of_blanks_is_read_once() -> None:
    """The fence pattern backtracked over blanks after ``` quadratically (a backstop timeout)."""
    ex = text.extract("```" + " \t" * 200_000 + "x\n")
    assert ex.items == ()


def test_index_less_stream_fragments_join_onto_the_last_call() -> None:
    """Fragments without an index belong to the call with the highest index seen (not a max()
    over all calls per fragment) and names arrive in pieces."""
    head = {
        "index": 0,
        "id": "c1",
        "type": "function",
        "function": {"name": "get_", "arguments": ""},
    }
    chunks: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {"tool_calls": [head]}}]}]
    for piece in ["weather", "", '{"city": ', '"Rome"}']:
        fragment = {"function": {"name": piece if piece == "weather" else "", "arguments": ""}}
        if piece != "weather":
            fragment["function"]["arguments"] = piece
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]})
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    ex = _assemble(openai_chat, chunks)
    assert ex.calls == [ToolCall(id="c1", name="get_weather", arguments='{"city": "Rome"}')]


# -- size bounds -------------------------------------------------------------------------


def test_text_over_the_bound_is_rejected_unread() -> None:
    """Text longer than MAX_RESPONSE_CHARS gets one rejection saying so; nothing is parsed."""
    tag = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    reply = tag + " " * MAX_RESPONSE_CHARS
    ex = text.extract(reply)
    assert ex.calls == []
    assert ex.text == ""
    [rejection] = ex.rejected
    assert rejection.details[0]["rule"] == "response_too_large"
    assert f"{len(reply):,} characters" in rejection.content
    assert f"at most {MAX_RESPONSE_CHARS:,}" in rejection.content
    assert "Propose fewer calls per response" in rejection.content
    assert text.extract(reply[:MAX_RESPONSE_CHARS]).calls  # at the bound, it is read


@pytest.mark.parametrize(
    "extract",
    [
        lambda calls: openai_chat.extract(chat(calls)),
        lambda calls: openai_responses.extract(responses(calls)),
        lambda calls: anthropic.extract(
            anthropic_message([(i, n, json.loads(a)) for i, n, a in calls])
        ),
        lambda calls: gemini.extract(gemini_response([(i, n, json.loads(a)) for i, n, a in calls])),
        lambda calls: _assemble(openai_chat, chat_stream(calls, "tool_calls")),
        lambda calls: _assemble(anthropic, anthropic_stream(calls, "tool_use")),
        lambda calls: text.extract(
            "".join(
                f'<tool_call>{{"id": "{i}", "name": "{n}", "arguments": {a}}}</tool_call>'
                for i, n, a in calls
            )
        ),
    ],
    ids=["chat", "responses", "anthropic", "gemini", "chat-stream", "anthropic-stream", "text"],
)
def test_more_calls_than_the_bound_are_all_rejected_each_under_its_own_id(
    extract: Callable[[list[tuple[str, str, str]]], Extraction],
) -> None:
    """MAX_CALLS + 1 calls: none runs; every call is answered, under its id, saying why."""
    calls = [(f"c{k}", "get_weather", '{"city": "Paris"}') for k in range(MAX_CALLS + 1)]
    ex = extract(calls)
    assert ex.calls == []
    ids = [o.call_id for o in ex.rejected]
    own = [i for i, _, _ in calls]
    # Text over the bound is not read, so its calls get assigned ids, one per tag.
    assert ids == own or (len(set(ids)) == len(own) and all(i.startswith("call_") for i in ids))
    assert set(_rules(ex)) == {"too_many_calls"}
    assert f"{MAX_CALLS + 1:,} calls" in ex.rejected[0].content
    assert len(extract(calls[:MAX_CALLS]).calls) == MAX_CALLS


@pytest.mark.parametrize(
    "build",
    [
        lambda a: openai_chat.extract(chat([("c1", "f", a), ("c2", "f", "{}")])),
        lambda a: openai_responses.extract(responses([("c1", "f", a), ("c2", "f", "{}")])),
        lambda a: anthropic.extract(
            anthropic_message([("c1", "f", json.loads(a)), ("c2", "f", {})])
        ),
        lambda a: gemini.extract(gemini_response([("c1", "f", json.loads(a)), ("c2", "f", {})])),
    ],
    ids=["chat", "responses", "anthropic", "gemini"],
)
def test_arguments_over_the_bound_reject_every_call_of_the_response(
    build: Callable[[str], Extraction],
) -> None:
    """One call with arguments over MAX_RESPONSE_CHARS: the whole response is not run."""
    ex = build(json.dumps({"s": "x" * MAX_RESPONSE_CHARS}))
    assert ex.calls == []
    assert [o.call_id for o in ex.rejected] == ["c1", "c2"]
    assert set(_rules(ex)) == {"response_too_large"}
    assert len(build(json.dumps({"s": "x" * 1000})).calls) == 2


# -- cut-off calls never run ---------------------------------------------------------------

CUT = [("c1", "search", "")]
HALF = [("c1", "search", '{"query": "red"')]
WHOLE = [("c1", "search", '{"query": "red"}')]


@pytest.mark.parametrize(
    "ex",
    [
        pytest.param(
            lambda: _assemble(openai_chat, chat_stream(CUT, None)),
            id="chat-stream-ends-after-header",
        ),
        pytest.param(lambda: openai_chat.extract(chat(CUT, "length")), id="chat-length-empty"),
        pytest.param(lambda: openai_chat.extract(chat(HALF, "")), id="chat-empty-reason-half"),
        pytest.param(lambda: openai_chat.extract(chat(CUT, "")), id="chat-empty-reason-empty"),
        pytest.param(lambda: openai_chat.extract(chat(CUT, None)), id="chat-null-reason"),
        pytest.param(lambda: openai_chat.extract(chat(HALF, "weird")), id="chat-unknown-reason"),
        pytest.param(
            lambda: _assemble(openai_chat, chat_stream(CUT, "length")), id="chat-stream-length"
        ),
        pytest.param(
            lambda: _assemble(openai_chat, chat_stream(HALF, "")), id="chat-stream-empty-reason"
        ),
        pytest.param(
            lambda: openai_responses.extract(responses(CUT, "incomplete", "incomplete")),
            id="responses-incomplete-empty",
        ),
        pytest.param(
            lambda: openai_responses.extract(responses(HALF, "")), id="responses-empty-status"
        ),
        pytest.param(
            lambda: openai_responses.extract(responses(CUT, None)), id="responses-no-status"
        ),
        pytest.param(
            lambda: _assemble(openai_responses, responses_stream(CUT, None)),
            id="responses-stream-no-end",
        ),
        pytest.param(
            lambda: _assemble(openai_responses, responses_stream(CUT, "response.incomplete")),
            id="responses-stream-incomplete",
        ),
        pytest.param(
            lambda: anthropic.extract(anthropic_message([("c1", "search", {})], "")),
            id="anthropic-empty-reason",
        ),
        pytest.param(
            lambda: anthropic.extract(anthropic_message([("c1", "search", {"query": "r"})], None)),
            id="anthropic-no-reason",
        ),
        pytest.param(
            lambda: _assemble(anthropic, anthropic_stream(CUT, "max_tokens")),
            id="anthropic-stream-empty",
        ),
        pytest.param(
            lambda: _assemble(anthropic, anthropic_stream(HALF, "")),
            id="anthropic-stream-empty-reason",
        ),
        pytest.param(
            lambda: _assemble(anthropic, anthropic_stream(CUT, None)), id="anthropic-stream-no-end"
        ),
        pytest.param(
            lambda: gemini.extract(gemini_response([("", "search", {})], "")),
            id="gemini-empty-reason",
        ),
        pytest.param(
            lambda: gemini.extract(gemini_response([("", "search", {})], None)),
            id="gemini-no-reason",
        ),
        pytest.param(
            lambda: _assemble(gemini, gemini_stream([("", "search", {})], "")),
            id="gemini-stream-empty",
        ),
        pytest.param(
            lambda: _assemble(gemini, gemini_stream([("", "search", {})], None)),
            id="gemini-stream-no-end",
        ),
        pytest.param(
            lambda: text.extract('<tool_call>{"name": "search", "arguments": {"query": "red"'),
            id="text-open-tag",
        ),
        pytest.param(lambda: text.extract("<tool_call>"), id="text-empty-open-tag"),
    ],
)
def test_a_call_that_may_have_been_cut_is_rejected_and_never_runs(
    ex: Callable[[], Extraction],
) -> None:
    """Under any ending that is not a normal one, empty or incomplete arguments are a cut-off."""
    result = ex()
    assert result.calls == []
    assert _rules(result) == ["incomplete_call"]
    assert result.truncated is True
    assert "cut off" in result.rejected[0].content


def test_a_responses_item_that_is_not_completed_is_cut_off_in_a_completed_response() -> None:
    """A ``function_call`` item's own ``status: "incomplete"`` is enough: "" never runs as {}."""
    ex = openai_responses.extract(responses(CUT, "completed", "incomplete"))
    assert ex.calls == []
    assert _rules(ex) == ["incomplete_call"]


@pytest.mark.parametrize(
    "ex",
    [
        pytest.param(lambda: openai_chat.extract(chat(WHOLE, "length")), id="chat"),
        pytest.param(lambda: openai_chat.extract(chat(WHOLE, "")), id="chat-empty-reason"),
        pytest.param(lambda: _assemble(openai_chat, chat_stream(WHOLE, None)), id="chat-stream"),
        pytest.param(
            lambda: openai_responses.extract(responses(WHOLE, "incomplete")), id="responses"
        ),
        pytest.param(
            lambda: _assemble(openai_responses, responses_stream(WHOLE, None)),
            id="responses-stream",
        ),
        pytest.param(
            lambda: _assemble(anthropic, anthropic_stream(WHOLE, "max_tokens")),
            id="anthropic-stream",
        ),
    ],
)
def test_complete_arguments_stand_even_when_the_response_was_cut(
    ex: Callable[[], Extraction],
) -> None:
    """Complete JSON as it stands is a whole call, whatever came after it."""
    result = ex()
    assert [c.arguments for c in result.calls] == ['{"query": "red"}']
    assert result.truncated is True


@pytest.mark.parametrize(
    "ex",
    [
        pytest.param(lambda: openai_chat.extract(chat(CUT, "tool_calls")), id="chat"),
        pytest.param(
            lambda: openai_chat.extract(chat(CUT)["choices"][0]["message"]), id="chat-message-alone"
        ),
        pytest.param(
            lambda: _assemble(openai_chat, chat_stream(CUT, "tool_calls")), id="chat-stream"
        ),
        pytest.param(lambda: openai_responses.extract(responses(CUT)), id="responses"),
        pytest.param(
            lambda: openai_responses.extract(responses(CUT)["output"]), id="responses-output-alone"
        ),
        pytest.param(
            lambda: _assemble(openai_responses, responses_stream(CUT, "response.completed")),
            id="responses-stream",
        ),
        pytest.param(
            lambda: _assemble(anthropic, anthropic_stream(CUT, "tool_use")), id="anthropic-stream"
        ),
    ],
)
def test_empty_arguments_in_a_normally_ended_response_still_mean_no_arguments(
    ex: Callable[[], Extraction],
) -> None:
    """``""`` after a normal end is a call without arguments, as before."""
    result = ex()
    [call] = result.calls
    assert call.arguments in ("", {})
    assert result.truncated is False


def test_a_cut_call_rejection_names_the_rule_the_field_and_what_to_do() -> None:
    """The model reads a sentence: what happened, which rule, and to send the whole call again."""
    [obs] = openai_chat.extract(chat(CUT, "")).rejected
    assert isinstance(obs, Observation)
    detail = obs.details[0]
    assert (detail["rule"], detail["field"]) == ("incomplete_call", "arguments")
    assert "the response gave no reason for stopping" in obs.content
    assert "Send the whole call again" in obs.content
    assert "()" not in obs.content


def test_an_sdk_response_nested_past_pydantics_dump_depth_is_still_read() -> None:
    """``model_dump`` refuses data this deep ("Maximum serialization depth exceeded"):
    the response is converted without recursion, its call read, then judged by the gate."""
    from anthropic.types import Message

    from callgate.providers import anthropic

    deep: dict[str, object] = {}
    node = deep
    for _ in range(3000):
        node["a"] = {}
        node = node["a"]  # type: ignore[assignment]
    message = Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": deep}],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    extraction = anthropic.extract(message)
    [call] = extraction.calls
    assert call.id == "toolu_1"


@pytest.mark.parametrize("stop", ["max_tokens", ""])
def test_an_anthropic_tool_use_with_empty_text_input_under_an_abnormal_stop_is_cut(
    stop: str,
) -> None:
    """Found by the fuzz tier: not the last block, but its input is text that is empty
    (not an object, as Anthropic sends): under an abnormal stop it may have been cut."""
    from callgate.providers import anthropic

    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "stop_reason": stop,
        "content": [
            {"type": "tool_use", "name": "ping", "id": "t0", "input": ""},
            {"type": "tool_use", "name": "add", "id": "t1", "input": {"sku": "x"}},
        ],
    }
    extraction = anthropic.extract(message)
    assert [c.id for c in extraction.calls] == []
    assert [o.details[0]["rule"] for o in extraction.rejected] == [
        "incomplete_call",
        "incomplete_call",
    ]

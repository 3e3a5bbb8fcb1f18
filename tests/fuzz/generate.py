"""Fuzz inputs: model outputs in all five provider formats, each knowing which calls it cut.

`generate(seed, index)` builds one `Case` from its own random stream, so
any input can be rebuilt from ``(seed, index)`` alone. Sources:

* ``synth``: a response built from a model of its calls (ids, names,
  argument text) and rendered in the provider's format, as one response or
  as its stream chunks, on the recorded payloads' envelopes; argument and
  value mutations (truncation, finish reasons, lone surrogates, numbers of
  thousands of digits, deep nesting, long strings, many calls) are applied
  while the model still knows what it did;
* ``recorded``: a payload of ``tests/providers/payloads`` as it is;
* then, for both, structural mutations of the JSON (drop, duplicate and
  reorder keys and items, change types), or cuts of the chunk sequence;
* ``random_json`` and ``random_text``: values drawn from the provider key
  vocabulary, and text made of prose, ``<tool_call>`` fragments and fences.

The oracle: ``Case.cut_ids`` holds the ids of calls whose arguments the
generator cut (strictly shorter text than the call it modelled) and that
must never reach a handler: every such call whose delivered text is not a
complete JSON object, and every cut call in a response that did not end
normally. One exception: a call cut to empty argument text in a response
that ended normally is not counted (providers send "" for a call without
arguments). For formats whose arguments are objects (Anthropic, Gemini) a
cut shows only by the ending: the last call of a response that did not end
normally. A call a structural mutation touched is left out (the generator
no longer knows what it is), as are calls without an id.
"""

from __future__ import annotations

import copy
import functools
import json
import random
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .registry import TOOL_NAMES

PAYLOADS = Path(__file__).parent.parent / "providers" / "payloads"
PROVIDERS = ("openai_chat", "openai_responses", "anthropic", "gemini", "text")
SURROGATE = "\ud800"

Path_ = tuple[Any, ...]


@dataclass(slots=True)
class Case:
    """One fuzz input and what the generator knows about it."""

    seed: int
    index: int
    provider: str
    stream: bool
    source: str
    payload: Any
    """A response (decoded JSON or an SDK object), a list of stream chunks, or text."""
    mutations: list[str] = field(default_factory=list)
    cut_ids: set[str] = field(default_factory=set)
    """Ids of calls that must never reach a handler."""

    @property
    def label(self) -> str:
        return f"{self.provider}{'/stream' if self.stream else ''}"


@dataclass(slots=True)
class Settings:
    """How often the expensive kinds of input are drawn, and how large they get."""

    huge_rate: float = 0.004
    """Share of inputs that are huge (many calls, long text, deep nesting)."""
    max_calls: int = 8000
    max_chars: int = 600_000
    max_depth: int = 5000


DEFAULT_SETTINGS = Settings()


# -- values ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Special:
    """A value with no cheap Python form in the generator: huge numbers and deep nesting.

    It is written as text into argument strings, and built (without
    recursion) into an object where a format carries arguments as objects.
    """

    kind: str  # "digits", "float_digits", "deep_list", "deep_object"
    size: int

    def text(self) -> str:
        if self.kind == "digits":
            return "1" * self.size
        if self.kind == "float_digits":
            return "1." + "2" * self.size
        if self.kind == "deep_list":
            return "[" * self.size + "]" * self.size
        return '{"a":' * self.size + "1" + "}" * self.size

    def value(self) -> Any:
        if self.kind == "digits":
            return (10**self.size - 1) // 9
        if self.kind == "float_digits":
            return 1.2222222222222223
        node: Any = [] if self.kind == "deep_list" else 1
        for _ in range(self.size - (1 if self.kind == "deep_list" else 0)):
            node = [node] if self.kind == "deep_list" else {"a": node}
        return node


WORDS = (
    "Paris",
    "Tokyo",
    "Kyoto",
    "Berlin",
    "Oslo",
    "red",
    "milk",
    "oats",
    "eggs",
    "cart",
    "order",
    "ship",
    "fast",
    "please",
    "the",
    "weather",
    "add",
    "to",
    "now",
    "check",
    "São",
    "Paulo",
    "Zürich",
    "東京",
    "😀",
    "naïve",
)
ODD_STRINGS = (
    "",
    " ",
    "\x00",
    "\n\t",
    SURROGATE,
    "\udfff",
    "a" + SURROGATE + "b",
    "\u2028",
    "'",
    '"',
    "\\",
    "{",
    "}",
    "[",
    "<tool_call>",
    "</tool_call>",
    "```json\n",
    "```",
    "null",
    "ünïcödé",
    "🙂" * 3,
    "%s%n{0}",
    "a" * 300,
)


def words(rng: random.Random, low: int = 1, high: int = 6) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def odd_string(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.4:
        return rng.choice(ODD_STRINGS)
    if roll < 0.7:
        return "".join(rng.choice(string.printable) for _ in range(rng.randint(0, 30)))
    return "".join(chr(rng.randint(0, 0x10FFFF)) for _ in range(rng.randint(1, 8)))


def random_json(rng: random.Random, depth: int = 0, keys: tuple[str, ...] = ()) -> Any:
    """A random JSON value; with ``keys``, objects mostly use that vocabulary."""
    roll = rng.random()
    if depth > 4 or roll < 0.45:
        return rng.choice(
            [
                None,
                True,
                False,
                0,
                -1,
                rng.randint(-(10**12), 10**12),
                rng.random() * 1e6,
                1e308,
                -0.0,
                5.0,
                words(rng),
                odd_string(rng),
            ]
        )
    if roll < 0.7:
        return [random_json(rng, depth + 1, keys) for _ in range(rng.randint(0, 4))]
    out: dict[str, Any] = {}
    for _ in range(rng.randint(0, 5)):
        key = rng.choice(keys) if keys and rng.random() < 0.8 else odd_string(rng)
        out[key] = random_json(rng, depth + 1, keys)
    return out


# -- argument serialization ---------------------------------------------------------


def dumps(value: Any, ascii_only: bool, compact: bool) -> str:
    """JSON text of ``value`` with `Special` values written out as text."""
    item_sep, key_sep = (",", ":") if compact else (", ", ": ")
    if isinstance(value, Special):
        return value.text()
    if isinstance(value, dict):
        return (
            "{"
            + item_sep.join(
                json.dumps(str(k), ensure_ascii=ascii_only)
                + key_sep
                + dumps(v, ascii_only, compact)
                for k, v in value.items()
            )
            + "}"
        )
    if isinstance(value, list):
        return "[" + item_sep.join(dumps(v, ascii_only, compact) for v in value) + "]"
    return json.dumps(value, ensure_ascii=ascii_only)


def materialize(value: Any) -> Any:
    """``value`` with `Special` values built into objects (for formats with object arguments)."""
    if isinstance(value, Special):
        return value.value()
    if isinstance(value, dict):
        return {k: materialize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [materialize(v) for v in value]
    return value


def complete_object(text: str) -> bool:
    """Whether ``text`` is, as it stands, one complete JSON object."""
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False


# -- calls -------------------------------------------------------------------------


def valid_arguments(rng: random.Random, name: str) -> dict[str, Any]:
    """Arguments the tool accepts (mostly)."""
    if name == "get_weather":
        args: dict[str, Any] = {"city": rng.choice(WORDS)}
        if rng.random() < 0.5:
            args["unit"] = rng.choice("cf")
        return args
    if name == "search_products":
        args = {"query": words(rng)}
        if rng.random() < 0.5:
            args["limit"] = rng.randint(1, 50)
        if rng.random() < 0.3:
            args["tags"] = [rng.choice(WORDS) for _ in range(rng.randint(0, 3))]
        return args
    if name == "ping":
        return {}
    if name == "add_to_cart":
        args = {"cart_id": f"cart-{rng.randint(1, 99)}", "sku": f"sku-{rng.choice(WORDS)}"}
        if rng.random() < 0.6:
            args["quantity"] = rng.randint(1, 10)
        return args
    if name == "place_order":
        lines = []
        for _ in range(rng.randint(1, 3)):
            line: dict[str, Any] = {"sku": f"sku-{rng.randint(1, 9)}"}
            if rng.random() < 0.5:
                line["quantity"] = rng.randint(1, 99)
            if rng.random() < 0.3:
                line["gift"] = rng.choice([True, False, None])
            lines.append(line)
        args = {
            "order_id": f"o-{rng.randint(1, 10**6)}",
            "lines": lines,
            "currency": rng.choice(["USD", "EUR", "JPY"]),
            "address": {"street": "1 Main St", "city": rng.choice(WORDS), "country": "FR"},
        }
        if rng.random() < 0.3:
            args["note"] = rng.choice([None, words(rng)])
        if rng.random() < 0.3:
            args["priority"] = rng.choice(["low", "normal", "high"])
        return args
    if name == "cancel_order":
        return {"order_id": f"o-{rng.randint(1, 99)}", "reason": words(rng)}
    return {"amount_cents": rng.randint(1, 10**6)}


def _paths(value: Any, prefix: Path_ = (), depth: int = 0) -> Iterator[Path_]:
    """Every path in a (shallow) JSON value, containers and leaves."""
    yield prefix
    if depth > 12:
        return
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from _paths(sub, (*prefix, key), depth + 1)
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield from _paths(sub, (*prefix, i), depth + 1)


def _set(root: Any, path: Path_, value: Any) -> Any:
    if not path:
        return value
    node = root
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return root


def _get(root: Any, path: Path_) -> Any:
    for key in path:
        root = root[key]
    return root


def wild_arguments(
    rng: random.Random, name: str, settings: Settings, huge: bool, tags: list[str]
) -> Any:
    """Arguments with one or more value mutations; `Special` values allowed."""
    args: Any = valid_arguments(rng, name)
    for _ in range(rng.randint(1, 3)):
        paths = list(_paths(args))
        path = rng.choice(paths)
        roll = rng.random()
        if roll < 0.15:
            tags.append("arg:type")
            args = _set(args, path, random_json(rng))
        elif roll < 0.25:
            tags.append("arg:null")
            args = _set(args, path, None)
        elif roll < 0.35 and isinstance(args, dict):
            tags.append("arg:unknown_key")
            target = _get(args, path)
            if isinstance(target, dict):
                target[rng.choice(["colour", "_from", "_class", "extra", SURROGATE])] = 1
            else:
                args["unexpected"] = random_json(rng)
        elif roll < 0.42 and isinstance(args, dict) and args:
            tags.append("arg:drop_required")
            del args[rng.choice(list(args))]
        elif roll < 0.55:
            tags.append("arg:surrogate")
            target = _get(args, path)
            value = (target if isinstance(target, str) else "x") + SURROGATE
            args = _set(args, path, value)
            if isinstance(args, dict) and rng.random() < 0.3:
                args[SURROGATE + "k"] = "v"
        elif roll < 0.62:
            tags.append("arg:float_for_int")
            args = _set(args, path, rng.choice([5.0, 1e308, 2.5, -0.0]))
        elif roll < 0.72:
            tags.append("arg:huge_number")
            size = rng.choice([4300, 4301, 5000]) if not huge else rng.randint(4301, 50_000)
            args = _set(args, path, Special(rng.choice(["digits", "float_digits"]), size))
        elif roll < 0.82:
            tags.append("arg:deep")
            depth = rng.randint(900, settings.max_depth if huge else 1200)
            if not huge and rng.random() < 0.7:
                depth = rng.randint(900, 1100)
            args = _set(args, path, Special(rng.choice(["deep_list", "deep_object"]), depth))
        elif roll < 0.9:
            tags.append("arg:long_string")
            size = rng.randint(10_000, settings.max_chars if huge else 40_000)
            args = _set(args, path, rng.choice("ab€\u0000") * size)
        else:
            tags.append("arg:not_object")
            args = rng.choice([[], [args], "text", 7, None, True])
    return args


@dataclass(slots=True)
class Call:
    """One call of a synthesized response: what the model meant and what was delivered."""

    id: str | None
    name: str
    args: Any
    """The intended arguments (may hold `Special` values)."""
    full: str
    """The intended argument text."""
    delivered: str
    """The argument text that was sent (a prefix of ``full`` when cut)."""
    truncated: bool = False
    sent_text: bool = False
    """A format with object arguments was sent ``delivered`` as text instead."""
    partial_args: Any = None
    """For formats with object arguments: what a cut call was sent instead of ``args``."""

    def cut_text(self, rng: random.Random) -> None:
        point = rng.randrange(len(self.full)) if self.full else 0
        self.delivered = self.full[:point]
        self.truncated = len(self.delivered) < len(self.full) or not self.full
        if isinstance(self.args, dict) and self.args:
            keep = rng.randrange(len(self.args))
            self.partial_args = dict(list(self.args.items())[:keep])
        else:
            self.partial_args = {}


def make_calls(rng: random.Random, case: Case, settings: Settings, huge: bool) -> list[Call]:
    roll = rng.random()
    if huge and roll < 0.5:
        count = rng.randint(64, settings.max_calls)
        case.mutations.append("many_calls")
    elif roll < 0.08:
        count = 0
    elif roll < 0.97:
        count = rng.choice([1, 1, 1, 2, 2, 3, 4])
    else:
        count = rng.randint(5, 80)
        case.mutations.append("many_calls")
    calls = []
    ascii_only = rng.random() < 0.5
    compact = rng.random() < 0.5
    for k in range(count):
        name = rng.choice(TOOL_NAMES)
        call_id: str | None = f"fz{case.index}_{k}"
        if rng.random() < 0.03:
            name = rng.choice(["unknown_tool", "", name + SURROGATE, name.upper(), " " + name])
            case.mutations.append("name")
        if rng.random() < 0.03:
            call_id = call_id + SURROGATE
            case.mutations.append("id:surrogate")
        if count < 64 and rng.random() < 0.25:
            args = wild_arguments(rng, name, settings, huge, case.mutations)
        else:
            args = valid_arguments(rng, name)
        full = dumps(args, ascii_only, compact) if not isinstance(args, str) else args
        if rng.random() < 0.02:
            case.mutations.append("args:text_garbage")
            full = rng.choice(["", " ", "{'city': 'Paris'}", '{"city": "Paris",}', "city=Paris"])
        calls.append(Call(id=call_id, name=name, args=args, full=full, delivered=full))
    return calls


def prose(rng: random.Random, huge: bool, settings: Settings, case: Case) -> str:
    roll = rng.random()
    if roll < 0.3:
        return ""
    text = words(rng, 1, 20)
    if rng.random() < 0.05:
        text += SURROGATE
        case.mutations.append("prose:surrogate")
    if huge and rng.random() < 0.3:
        text *= max(1, settings.max_chars // max(1, len(text)))
        case.mutations.append("prose:long")
    return text


# -- the recorded envelopes --------------------------------------------------------


def _load(name: str) -> Any:
    text = (PAYLOADS / name).read_text(encoding="utf-8")
    if name.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if name.endswith(".json"):
        return json.loads(text)
    return text


RECORDED: dict[str, list[tuple[bool, Any]]] = {
    "openai_chat": [
        (False, _load("openai_chat_parallel.json")),
        (False, _load("openai_chat_truncated.json")),
        (False, _load("openai_chat_legacy.json")),
        (False, _load("openai_chat_refusal.json")),
        (True, _load("openai_chat_stream.jsonl")),
    ],
    "openai_responses": [
        (False, _load("openai_responses.json")),
        (True, _load("openai_responses_stream.jsonl")),
    ],
    "anthropic": [
        (False, _load("anthropic_message.json")),
        (True, _load("anthropic_stream.jsonl")),
    ],
    "gemini": [
        (False, _load("gemini_response.json")),
        (True, _load("gemini_stream.jsonl")),
    ],
    "text": [(False, _load("hermes.txt"))],
}


def _vocabulary() -> tuple[str, ...]:
    keys: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            keys.update(node)
            for sub in node.values():
                walk(sub)
        elif isinstance(node, list):
            for sub in node:
                walk(sub)

    for entries in RECORDED.values():
        for _, value in entries:
            walk(value)
    return tuple(sorted(keys))


KEYS = _vocabulary()


# -- rendering: one response -------------------------------------------------------
#
# Each renderer returns (payload, call paths, ending paths): where each call
# and the response's ending live in the payload, so that a later structural
# mutation knows which calls it touched.

Rendered = tuple[Any, dict[int, list[Path_]], list[Path_]]

CHAT_ABNORMAL = ("length", "", "content_filter", "unknown_reason", "max_tokens")
RESPONSES_ABNORMAL = ("max_output_tokens", "content_filter", "", "weird")
ANTHROPIC_ABNORMAL = ("max_tokens", "", "refusal", "model_context_window_exceeded", "other")
GEMINI_ABNORMAL = ("MAX_TOKENS", "SAFETY", "", "MALFORMED_FUNCTION_CALL", "OTHER", "RECITATION")


def render_chat(rng: random.Random, calls: list[Call], text: str, ending: str | None) -> Rendered:
    template = RECORDED["openai_chat"][0][1]
    data = {k: copy.deepcopy(v) for k, v in template.items() if k != "choices"}
    data["id"] = f"chatcmpl-{rng.getrandbits(64):x}"
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    paths: dict[int, list[Path_]] = {}
    base = ("choices", 0, "message")
    if len(calls) == 1 and rng.random() < 0.08:
        call = calls[0]
        call.id = "function_call-" + data["id"]
        message["function_call"] = {"name": call.name, "arguments": call.delivered}
        paths[0] = [(*base, "function_call")]
    elif calls:
        entries = []
        for k, call in enumerate(calls):
            arguments: Any = call.delivered
            if not call.truncated and isinstance(call.args, dict) and rng.random() < 0.03:
                arguments = materialize(call.args)
            entry: dict[str, Any] = {
                "type": "function",
                "function": {"name": call.name, "arguments": arguments},
            }
            if call.id is not None:
                entry["id"] = call.id
            entries.append(entry)
            paths[k] = [(*base, "tool_calls", k)]
        message["tool_calls"] = entries
    finish = ending if ending is not None else ("tool_calls" if calls else "stop")
    data["choices"] = [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}]
    return data, paths, [("choices", 0, "finish_reason")]


def _responses_envelope(rng: random.Random, status: str, reason: str | None) -> dict[str, Any]:
    template = RECORDED["openai_responses"][0][1]
    data = {k: copy.deepcopy(v) for k, v in template.items() if k != "output"}
    data["id"] = f"resp_{rng.getrandbits(64):x}"
    data["status"] = status
    data["incomplete_details"] = {"reason": reason} if reason is not None else None
    return data


def _responses_items(rng: random.Random, calls: list[Call], text: str, final: bool) -> list[Any]:
    items: list[Any] = []
    if text:
        items.append(
            {
                "id": f"msg_{rng.getrandbits(48):x}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    for call in calls:
        item: dict[str, Any] = {
            "id": f"fc_{rng.getrandbits(48):x}",
            "type": "function_call",
            "status": "incomplete" if call.truncated else "completed",
            "name": call.name,
            "arguments": call.delivered if final else "",
        }
        if call.id is not None:
            item["call_id"] = call.id
        items.append(item)
    return items


def _responses_ending(ending: str | None) -> tuple[str, str | None]:
    if ending is None:
        return "completed", None
    if ending == "failed":
        return "failed", None
    return "incomplete", ending


def render_responses(
    rng: random.Random, calls: list[Call], text: str, ending: str | None
) -> Rendered:
    status, reason = _responses_ending(ending)
    data = _responses_envelope(rng, status, reason)
    data["output"] = _responses_items(rng, calls, text, final=True)
    offset = 1 if text else 0
    paths = {k: [("output", k + offset)] for k in range(len(calls))}
    if ending is None and rng.random() < 0.05:
        return data["output"], {k: [(v[0][1],)] for k, v in paths.items()}, []
    return data, paths, [("status",), ("incomplete_details",)]


def render_anthropic(
    rng: random.Random, calls: list[Call], text: str, ending: str | None
) -> Rendered:
    template = RECORDED["anthropic"][0][1]
    data = {k: copy.deepcopy(v) for k, v in template.items() if k != "content"}
    data["id"] = f"msg_{rng.getrandbits(64):x}"
    content: list[Any] = [{"type": "text", "text": text}] if text else []
    paths: dict[int, list[Path_]] = {}
    for k, call in enumerate(calls):
        block: dict[str, Any] = {"type": "tool_use", "name": call.name}
        if call.id is not None:
            block["id"] = call.id
        if call.truncated and rng.random() < 0.7:
            block["input"] = materialize(call.partial_args)
        elif call.truncated or rng.random() < 0.05:
            block["input"] = call.delivered
            call.sent_text = True
        else:
            block["input"] = materialize(call.args)
        paths[k] = [("content", len(content))]
        content.append(block)
    data["content"] = content
    data["stop_reason"] = ending if ending is not None else ("tool_use" if calls else "end_turn")
    return data, paths, [("stop_reason",)]


def _gemini_part(rng: random.Random, call: Call) -> dict[str, Any]:
    function: dict[str, Any] = {"name": call.name}
    if call.id is not None:
        function["id"] = call.id
    args = call.partial_args if call.truncated else call.args
    if not (args == {} and rng.random() < 0.5):
        function["args"] = materialize(args)
    key = "function_call" if rng.random() < 0.1 else "functionCall"
    return {key: function}


def render_gemini(rng: random.Random, calls: list[Call], text: str, ending: str | None) -> Rendered:
    template = RECORDED["gemini"][0][1]
    data = {k: copy.deepcopy(v) for k, v in template.items() if k != "candidates"}
    if rng.random() < 0.5:
        data["responseId"] = f"r{rng.getrandbits(64):x}"
    else:
        data.pop("responseId", None)
    parts: list[Any] = [{"text": text}] if text else []
    paths: dict[int, list[Path_]] = {}
    for k, call in enumerate(calls):
        paths[k] = [("candidates", 0, "content", "parts", len(parts))]
        parts.append(_gemini_part(rng, call))
    if rng.random() < 0.1:
        parts.append({"text": "", "thoughtSignature": "c2ln"})
    candidate = {
        "content": {"role": "model", "parts": parts},
        "finishReason": ending if ending is not None else "STOP",
    }
    data["candidates"] = [candidate]
    return data, paths, [("candidates", 0, "finishReason")]


# -- rendering: streams ---------------------------------------------------------------
#
# A stream is a list of (chunk, tags); a tag says what the chunk delivers:
# ("frag", k, text) a fragment of call k's arguments, ("full", k) all of
# them, ("call", k) the call's identity, ("end",) the normal ending.

Tag = tuple[Any, ...]
Stream = list[tuple[Any, list[Tag]]]


def _split(rng: random.Random, text: str) -> list[str]:
    if not text:
        return [""]
    pieces = []
    pos = 0
    limit = max(1, len(text) // 2000)
    while pos < len(text):
        step = rng.randint(1, 12) * limit
        pieces.append(text[pos : pos + step])
        pos += step
    return pieces


def stream_chat(rng: random.Random, calls: list[Call], text: str, ending: str | None) -> Stream:
    completion = f"chatcmpl-{rng.getrandbits(64):x}"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": completion,
            "object": "chat.completion.chunk",
            "created": 1764400180,
            "model": "gpt-4.1",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    out: Stream = [(chunk({"role": "assistant", "content": ""}), [])]
    out += [(chunk({"content": piece}), []) for piece in _split(rng, text) if text]
    for k, call in enumerate(calls):
        header: dict[str, Any] = {
            "index": k,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        if call.id is not None:
            header["id"] = call.id
        out.append((chunk({"tool_calls": [header]}), [("call", k)]))
        for piece in _split(rng, call.delivered):
            frag = {"index": k, "function": {"arguments": piece}}
            out.append((chunk({"tool_calls": [frag]}), [("frag", k, piece)]))
    finish = ending if ending is not None else ("tool_calls" if calls else "stop")
    out.append((chunk({}, finish), [("end",)] if ending is None else [("end_abnormal",)]))
    if rng.random() < 0.3:
        out.append(({"id": completion, "choices": [], "usage": {"total_tokens": 9}}, []))
    return out


def stream_responses(
    rng: random.Random, calls: list[Call], text: str, ending: str | None
) -> Stream:
    status, reason = _responses_ending(ending)
    envelope = _responses_envelope(rng, "in_progress", None)
    out: Stream = [({"type": "response.created", "response": dict(envelope)}, [])]
    items = _responses_items(rng, calls, text, final=False)
    offset = 1 if text else 0
    if text:
        item = items[0]
        added = {**item, "status": "in_progress", "content": []}
        out.append(({"type": "response.output_item.added", "output_index": 0, "item": added}, []))
        for piece in _split(rng, text):
            out.append(
                (
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": 0,
                        "content_index": 0,
                        "delta": piece,
                    },
                    [],
                )
            )
        out.append(({"type": "response.output_item.done", "output_index": 0, "item": item}, []))
    for k, call in enumerate(calls):
        index = k + offset
        item = items[index]
        added = {**item, "status": "in_progress", "arguments": ""}
        event = {"type": "response.output_item.added", "output_index": index, "item": added}
        out.append((event, [("call", k)]))
        for piece in _split(rng, call.delivered):
            delta = {
                "type": "response.function_call_arguments.delta",
                "item_id": item["id"],
                "output_index": index,
                "delta": piece,
            }
            out.append((delta, [("frag", k, piece)]))
        if call.truncated:
            continue  # the response was cut inside this call: no done events
        done = {
            "type": "response.function_call_arguments.done",
            "item_id": item["id"],
            "output_index": index,
            "arguments": call.delivered,
        }
        out.append((done, [("full", k)]))
        final = {**item, "arguments": call.delivered, "status": "completed"}
        event = {"type": "response.output_item.done", "output_index": index, "item": final}
        out.append((event, [("full", k)]))
    response = _responses_envelope(rng, status, reason)
    response["id"] = envelope["id"]
    response["output"] = _responses_items(rng, calls, text, final=True)
    terminal = "response.completed" if status == "completed" else f"response.{status}"
    tags: list[Tag] = [("full", k) for k in range(len(calls))]
    tags.append(("end",) if ending is None else ("end_abnormal",))
    out.append(({"type": terminal, "response": response}, tags))
    return out


def stream_anthropic(
    rng: random.Random, calls: list[Call], text: str, ending: str | None
) -> Stream:
    start = {
        "type": "message_start",
        "message": {
            "id": f"msg_{rng.getrandbits(64):x}",
            "type": "message",
            "role": "assistant",
            "content": [],
            "stop_reason": None,
        },
    }
    out: Stream = [(start, [])]
    index = 0
    if text:
        block = {"type": "text", "text": ""}
        out.append(({"type": "content_block_start", "index": 0, "content_block": block}, []))
        for piece in _split(rng, text):
            delta = {"type": "text_delta", "text": piece}
            out.append(({"type": "content_block_delta", "index": 0, "delta": delta}, []))
        out.append(({"type": "content_block_stop", "index": 0}, []))
        index = 1
    if rng.random() < 0.2:
        out.append(({"type": "ping"}, []))
    for k, call in enumerate(calls):
        block = {"type": "tool_use", "name": call.name, "input": {}}
        if call.id is not None:
            block["id"] = call.id
        event = {"type": "content_block_start", "index": index, "content_block": block}
        out.append((event, [("call", k)]))
        for piece in _split(rng, call.delivered):
            delta = {"type": "input_json_delta", "partial_json": piece}
            event = {"type": "content_block_delta", "index": index, "delta": delta}
            out.append((event, [("frag", k, piece)]))
        out.append(({"type": "content_block_stop", "index": index}, []))
        index += 1
    stop = ending if ending is not None else ("tool_use" if calls else "end_turn")
    tag: list[Tag] = [("end",) if ending is None else ("end_abnormal",)]
    delta_event = {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": {"output_tokens": 9},
    }
    out.append((delta_event, tag))
    out.append(({"type": "message_stop"}, tag))
    return out


def stream_gemini(rng: random.Random, calls: list[Call], text: str, ending: str | None) -> Stream:
    response_id = f"r{rng.getrandbits(64):x}" if rng.random() < 0.7 else None
    pieces: list[tuple[Any, list[Tag]]] = [({"text": p}, []) for p in _split(rng, text) if text]
    for k, call in enumerate(calls):
        tags: list[Tag] = [("call", k), ("full", k)]
        if call.truncated:
            tags = [("call", k), ("frag", k, "")]
        pieces.append((_gemini_part(rng, call), tags))
    out: Stream = []
    pos = 0
    while pos < len(pieces) or not out:
        size = rng.randint(1, 3)
        group = pieces[pos : pos + size]
        pos += size
        candidate: dict[str, Any] = {
            "content": {"role": "model", "parts": [part for part, _ in group]},
            "index": 0,
        }
        chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-2.5-flash"}
        if response_id is not None:
            chunk["responseId"] = response_id
        tags = [tag for _, part_tags in group for tag in part_tags]
        if pos >= len(pieces):
            candidate["finishReason"] = ending if ending is not None else "STOP"
            tags.append(("end",) if ending is None else ("end_abnormal",))
        out.append((chunk, tags))
    return out


RENDER: dict[str, Callable[[random.Random, list[Call], str, str | None], Rendered]] = {
    "openai_chat": render_chat,
    "openai_responses": render_responses,
    "anthropic": render_anthropic,
    "gemini": render_gemini,
}
STREAM: dict[str, Callable[[random.Random, list[Call], str, str | None], Stream]] = {
    "openai_chat": stream_chat,
    "openai_responses": stream_responses,
    "anthropic": stream_anthropic,
    "gemini": stream_gemini,
}
ABNORMAL = {
    "openai_chat": CHAT_ABNORMAL,
    "openai_responses": (*RESPONSES_ABNORMAL, "failed"),
    "anthropic": ANTHROPIC_ABNORMAL,
    "gemini": GEMINI_ABNORMAL,
}
TEXT_ARGUMENTS = frozenset({"openai_chat", "openai_responses"})


# -- structural mutation ---------------------------------------------------------------


def _containers(value: Any, limit: int = 40) -> list[Path_]:
    """Paths of the dicts and lists in ``value`` (not inside argument values too deep)."""
    found: list[Path_] = []
    stack: list[tuple[Path_, Any]] = [((), value)]
    while stack and len(found) < 400:
        path, node = stack.pop()
        if len(path) > limit:
            continue
        if isinstance(node, dict):
            found.append(path)
            stack.extend(((*path, k), v) for k, v in node.items())
        elif isinstance(node, list):
            found.append(path)
            stack.extend(((*path, i), v) for i, v in enumerate(node))
    return found


def mutate_structure(rng: random.Random, value: Any, tags: list[str]) -> tuple[Any, list[Path_]]:
    """One structural mutation of ``value``; the paths it touched."""
    containers = _containers(value)
    if not containers:
        return random_json(rng, keys=KEYS), [()]
    path = rng.choice(containers)
    node = _get(value, path)
    roll = rng.random()
    if isinstance(node, dict) and node:
        key = rng.choice(list(node))
        if roll < 0.3:
            tags.append("struct:drop_key")
            del node[key]
        elif roll < 0.45:
            tags.append("struct:reorder_keys")
            items = list(node.items())
            rng.shuffle(items)
            node.clear()
            node.update(items)
            return value, []
        elif roll < 0.75:
            tags.append("struct:change_type")
            node[key] = rng.choice([None, 0, "", [], {}, True, random_json(rng, keys=KEYS)])
        elif roll < 0.85:
            tags.append("struct:truncate_string")
            if isinstance(node[key], str):
                node[key] = node[key][: rng.randrange(len(node[key]) + 1)]
        else:
            tags.append("struct:add_key")
            node[rng.choice(KEYS)] = random_json(rng, keys=KEYS)
        return value, [(*path, key)]
    if isinstance(node, list) and node:
        i = rng.randrange(len(node))
        if roll < 0.3:
            tags.append("struct:drop_item")
            del node[i]
        elif roll < 0.6:
            tags.append("struct:dup_item")
            node.insert(i, node[i])  # shared, not copied: it may be nested thousands deep
        elif roll < 0.8:
            tags.append("struct:reorder_items")
            rng.shuffle(node)
        else:
            tags.append("struct:change_type")
            node[i] = random_json(rng, keys=KEYS)
        return value, [path]
    tags.append("struct:change_type")
    return _set(value, path, random_json(rng, keys=KEYS)), [path]


def _touches(touched: list[Path_], paths: list[Path_]) -> bool:
    for t in touched:
        for p in paths:
            n = min(len(t), len(p))
            if t[:n] == p[:n]:
                return True
    return False


# -- oracle -------------------------------------------------------------------------------


def _is_cut(call: Call, delivered: str, truncated: bool, abnormal: bool | None) -> bool:
    """Whether a call must not reach a handler (see the module docstring)."""
    if call.id is None or not truncated:
        return False
    if not delivered.strip():
        # "" is how several providers send a call without arguments: cut only if
        # the response did not end normally
        return bool(abnormal)
    if not complete_object(delivered):
        return True
    return bool(abnormal)


# -- the cases ----------------------------------------------------------------------------


def _synth_response(rng: random.Random, case: Case, settings: Settings, huge: bool) -> None:
    calls = make_calls(rng, case, settings, huge)
    text = prose(rng, huge, settings, case)
    provider = case.provider
    ending: str | None = None
    if rng.random() < 0.25:
        ending = rng.choice(ABNORMAL[provider])
        case.mutations.append(f"ending:{ending or 'empty'}")
    # which calls get cut: under an abnormal ending mostly the last one (as a
    # token limit does), sometimes another; under a normal one, rarely
    if calls and (ending is not None or rng.random() < 0.08):
        victims = [calls[-1]] if rng.random() < 0.8 else [rng.choice(calls)]
        for call in victims:
            call.cut_text(rng)
        case.mutations.append("cut:arguments")
    if case.stream:
        stream = STREAM[provider](rng, calls, text, ending)
        _finish_stream(rng, case, calls, stream, ending is not None)
        return
    payload, paths, end_paths = RENDER[provider](rng, calls, text, ending)
    touched: list[Path_] = []
    if rng.random() < 0.3:
        for _ in range(rng.randint(1, 3)):
            payload, more = mutate_structure(rng, payload, case.mutations)
            touched += more
    ending_known = not _touches(touched, end_paths)
    for k, call in enumerate(calls):
        if _touches(touched, paths.get(k, [()])):
            continue
        if provider in TEXT_ARGUMENTS or call.sent_text:
            cut = _is_cut(call, call.delivered, call.truncated, ending is not None and ending_known)
        else:
            # object arguments: only the ending tells that the call was cut
            cut = call.truncated and call.id is not None and ending is not None and ending_known
            cut = cut and _last_call_position(calls, call)
        if cut:
            assert call.id is not None
            case.cut_ids.add(call.id)
    case.payload = payload


def _last_call_position(calls: list[Call], call: Call) -> bool:
    return call is calls[-1]


def _finish_stream(
    rng: random.Random, case: Case, calls: list[Call], stream: Stream, abnormal: bool
) -> None:
    """Cut the stream, mutate it, and work out which calls were cut."""
    if rng.random() < 0.3:
        keep = rng.randrange(len(stream) + 1)
        stream = stream[:keep]
        case.mutations.append("stream:cut")
    elif rng.random() < 0.1:
        stream = [entry for entry in stream if not any(t[0].startswith("end") for t in entry[1])]
        case.mutations.append("stream:no_completion")
    chunks = [chunk for chunk, _ in stream]
    ended = any(t[0] == "end" for _, tags in stream for t in tags)
    ended_abnormally = any(t[0] == "end_abnormal" for _, tags in stream for t in tags)
    abnormal = abnormal or not ended or ended_abnormally
    touched: set[int] = set()
    weak = False
    if rng.random() < 0.25:
        for _ in range(rng.randint(1, 3)):
            if not isinstance(chunks, list):
                break  # a mutation of the whole sequence made it something else
            if chunks and rng.random() < 0.7:
                i = rng.randrange(len(chunks))
                chunks[i], _ = mutate_structure(rng, chunks[i], case.mutations)
                touched.add(i)
            else:
                chunks, _ = mutate_structure(rng, chunks, case.mutations)
                weak = True
    if not weak:
        ending_known = not any(
            t[0].startswith("end") for i in touched for t in stream[i][1]
        ) and not (abnormal and not ended and touched)
        chunks_of: dict[int, list[int]] = {}
        frags: dict[int, list[str]] = {}
        headers: set[int] = set()
        fulls: set[int] = set()
        for i, (_, tags) in enumerate(stream):
            for t in tags:
                if t[0] in ("call", "frag", "full"):
                    chunks_of.setdefault(t[1], []).append(i)
                if t[0] == "call":
                    headers.add(t[1])
                elif t[0] == "full":
                    fulls.add(t[1])
                elif t[0] == "frag":
                    frags.setdefault(t[1], []).append(t[2])
        last_header = max(headers, default=-1)
        for k, call in enumerate(calls):
            if k not in headers or any(i in touched for i in chunks_of.get(k, ())):
                continue  # its header never arrived (no call), or a mutation touched it
            if case.provider == "gemini":
                cut = call.truncated and call.id is not None and ending_known and abnormal
                cut = cut and k == last_header
            else:
                delivered = call.delivered if k in fulls else "".join(frags.get(k, ()))
                truncated = call.truncated or delivered != call.full
                cut = _is_cut(call, delivered, truncated, abnormal and ending_known)
            if cut:
                assert call.id is not None
                case.cut_ids.add(call.id)
    case.payload = chunks


def _synth_text(rng: random.Random, case: Case, settings: Settings, huge: bool) -> None:
    calls = make_calls(rng, case, settings, huge)
    pieces: list[str] = []
    spans: dict[int, tuple[int, int]] = {}
    pos = 0

    def add(piece: str) -> None:
        nonlocal pos
        pieces.append(piece)
        pos += len(piece)

    text = prose(rng, huge, settings, case)
    add(text + ("\n" if text else ""))
    style = rng.random()
    for k, call in enumerate(calls):
        obj_text = _text_call(rng, call)
        kind = "tag" if style < 0.6 else ("fence" if style < 0.8 else "bare")
        if kind == "tag":
            add("<tool_call>\n")
        elif kind == "fence":
            add("```json\n")
        else:
            add("\n")
        spans[k] = (pos, pos + len(obj_text))
        add(obj_text)
        add({"tag": "\n</tool_call>\n", "fence": "\n```\n", "bare": "\n"}[kind])
        if rng.random() < 0.2:
            add(words(rng) + "\n")
    whole = "".join(pieces)
    if rng.random() < 0.05:
        whole = SURROGATE + whole
        spans = {k: (a + 1, b + 1) for k, (a, b) in spans.items()}
        case.mutations.append("text:surrogate")
    touched: list[int] = []
    if rng.random() < 0.15:
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(whole) + 1)
            fragment = rng.choice(
                ["<tool_call>", "</tool_call>", "```", "```json\n", "{", "[", '"name"', SURROGATE]
            )
            whole = whole[:at] + fragment + whole[at:]
            spans = {
                k: (a + len(fragment) if a >= at else a, b + len(fragment) if b > at else b)
                for k, (a, b) in spans.items()
            }
            touched.append(at)
            case.mutations.append("text:insert")
    cut_at = len(whole)
    if calls and rng.random() < 0.3:
        cut_at = rng.randrange(len(whole) + 1)
        case.mutations.append("text:cut")
    for k, call in enumerate(calls):
        start, end = spans[k]
        if any(at <= end for at in touched):
            continue  # an inserted fragment before or inside it may change how it reads
        if start < cut_at < end and call.id is not None:
            delivered = whole[start:cut_at]
            if not complete_object(delivered):
                case.cut_ids.add(call.id)
    case.payload = whole[:cut_at]


def _text_call(rng: random.Random, call: Call) -> str:
    """A call object as text, id first so that a cut never changes which call it is."""
    head: list[str] = []
    if call.id is not None and rng.random() < 0.9:
        head.append('"id": ' + json.dumps(call.id))
    else:
        call.id = None
    head.append('"name": ' + json.dumps(call.name))
    arguments = call.full if call.full.strip() else "{}"
    key = "arguments" if rng.random() < 0.85 else "parameters"
    return "{" + ", ".join([*head, f'"{key}": {arguments}']) + "}"


def _recorded(rng: random.Random, case: Case) -> None:
    options = RECORDED[case.provider]
    stream, payload = rng.choice(options)
    payload = copy.deepcopy(payload)
    case.stream = stream
    if case.provider == "text":
        text = payload
        for _ in range(rng.randint(0, 3)):
            at = rng.randrange(len(text) + 1)
            text = text[:at] + odd_string(rng) + text[at:]
        if rng.random() < 0.5:
            text = text[: rng.randrange(len(text) + 1)]
        case.payload = text
        case.mutations.append("recorded:text")
        return
    for _ in range(rng.randint(0, 4)):
        payload, _ = mutate_structure(rng, payload, case.mutations)
    if stream and rng.random() < 0.4:
        payload = payload[: rng.randrange(len(payload) + 1)]
        case.mutations.append("stream:cut")
    case.payload = payload


def _random_text(rng: random.Random, settings: Settings, huge: bool) -> str:
    fragments = [
        "<tool_call>",
        "</tool_call>",
        "```json\n",
        "```",
        "\n",
        '{"name": "ping", "arguments": {}}',
        '{"name": "get_weather", "arguments": {"city": "Paris"',
        '"name"',
        '"arguments"',
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        '"',
        "'",
        SURROGATE,
        '{"id": "x", "name": "add_to_cart", "arguments": "{\\"cart_id\\": \\"c\\"}"}',
    ]
    parts = []
    for _ in range(rng.randint(0, 30)):
        parts.append(rng.choice(fragments) if rng.random() < 0.6 else words(rng))
    text = "".join(parts)
    if huge:
        roll = rng.random()
        n = rng.randint(1000, settings.max_chars)
        if roll < 0.25:
            text = "{" * n
        elif roll < 0.5:
            text = '"name" ' + "[" * min(n, 40_000)
        elif roll < 0.75:
            count = min(settings.max_calls, n // 60)
            text = '<tool_call>{"name": "ping", "arguments": {}}</tool_call>\n' * count
        else:
            text = text * max(1, n // max(1, len(text)))
    return text


def generate(seed: int, index: int, settings: Settings = DEFAULT_SETTINGS) -> Case:
    """The fuzz input number ``index`` of the run seeded ``seed``."""
    rng = random.Random(f"{seed}:{index}")
    provider = rng.choice(PROVIDERS)
    case = Case(seed=seed, index=index, provider=provider, stream=False, source="", payload=None)
    huge = rng.random() < settings.huge_rate
    if huge:
        case.mutations.append("huge")
    roll = rng.random()
    if roll < 0.7:
        case.source = "synth"
        if provider == "text":
            _synth_text(rng, case, settings, huge)
        else:
            case.stream = rng.random() < 0.5
            _synth_response(rng, case, settings, huge)
    elif roll < 0.82:
        case.source = "recorded"
        _recorded(rng, case)
    elif roll < 0.91 or provider == "text":
        case.source = "random_text"
        text = _random_text(rng, settings, huge)
        case.payload = text
        if provider != "text":
            # prose where a response object was expected, or inside one
            case.stream = rng.random() < 0.3
            wrapped = {"content": text}
            case.payload = [text] if case.stream else rng.choice([text, wrapped, wrapped])
    else:
        case.source = "random_json"
        case.stream = rng.random() < 0.4
        if case.stream:
            case.payload = [random_json(rng, keys=KEYS) for _ in range(rng.randint(0, 8))]
        else:
            case.payload = random_json(rng, keys=KEYS)
    if provider != "text" and case.source in ("synth", "recorded") and rng.random() < 0.08:
        _as_sdk(case)
    return case


def _as_sdk(case: Case) -> None:
    """The payload as the provider's SDK objects, when the SDK accepts it."""
    from pydantic import ValidationError

    adapter = _sdk_adapter(case.provider, case.stream)
    if adapter is None:
        return
    try:
        if case.stream:
            case.payload = [adapter.validate_python(chunk) for chunk in case.payload]
        else:
            case.payload = adapter.validate_python(case.payload)
    except (ValidationError, TypeError, ValueError, RecursionError):
        return
    case.mutations.append("sdk")


@functools.cache
def _sdk_adapter(provider: str, stream: bool) -> Any:
    """The SDK type of a provider's response or stream event, as a TypeAdapter (or None)."""
    from pydantic import TypeAdapter

    if provider == "openai_chat":
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        kind: Any = ChatCompletionChunk if stream else ChatCompletion
    elif provider == "openai_responses":
        from openai.types.responses import Response, ResponseStreamEvent

        kind = ResponseStreamEvent if stream else Response
    elif provider == "anthropic":
        from anthropic.types import Message, RawMessageStreamEvent

        kind = RawMessageStreamEvent if stream else Message
    else:
        return None
    return TypeAdapter(kind)

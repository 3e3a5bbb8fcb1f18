"""Extraction time against input size, per adversarial shape and per provider (run by hand).

For each shape the input doubles up to the documented bound
(`MAX_RESPONSE_CHARS` characters, or `MAX_CALLS` calls for shapes that grow
by calls); each size is timed as the median of several runs. Printed per
shape: the time at the largest size, the log-log slope fitted over all sizes
(1.0 is linear, 2.0 quadratic) and the median ratio time(2n)/time(n) (2.0 is
linear). Usage::

    .venv/bin/python benchmarks/extraction_scaling.py [--runs 5] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from callgate.parse import MAX_ARGUMENT_CHARS, parse_arguments
from callgate.providers import anthropic, gemini, openai_chat, openai_responses, text
from callgate.providers.base import MAX_CALLS, MAX_RESPONSE_CHARS

TAG = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n'
BARE = 'Calling {"name": "get_weather", "arguments": {"city": "Paris"}} now.\n'


def _repeat(unit: str, chars: int) -> str:
    return unit * max(1, chars // len(unit))


def _calls(n: int, args: str = '{"city": "Paris"}') -> list[tuple[str, str, str]]:
    return [(f"c{k}", "get_weather", args) for k in range(n)]


def _chat(n: int) -> Any:
    calls = [
        {"id": i, "type": "function", "function": {"name": m, "arguments": a}}
        for i, m, a in _calls(n)
    ]
    message = {"role": "assistant", "tool_calls": calls}
    return {"choices": [{"message": message, "finish_reason": "length"}]}


def _chat_stream(chars: int) -> list[Any]:
    head = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}
    chunks: list[Any] = [{"choices": [{"index": 0, "delta": {"tool_calls": [head]}}]}]
    piece = '"xxxxxxxxxx",'
    chunks.append(
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"a": ['}}]},
                }
            ]
        }
    )
    for _ in range(chars // len(piece)):
        frag = {"function": {"name": "", "arguments": piece}}  # no index: joins the last call
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [frag]}}]})
    return chunks  # no finish_reason: cut, so completeness is checked


def _responses(n: int) -> Any:
    output = [
        {"type": "function_call", "call_id": i, "name": m, "arguments": a, "status": "incomplete"}
        for i, m, a in _calls(n)
    ]
    return {"status": "incomplete", "output": output}


def _responses_stream(chars: int) -> list[Any]:
    item = {"type": "function_call", "id": "fc", "call_id": "c1", "name": "f", "arguments": ""}
    events: list[Any] = [{"type": "response.output_item.added", "output_index": 0, "item": item}]
    piece = '"xxxxxxxxxx",'
    for _ in range(chars // len(piece)):
        events.append(
            {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": piece}
        )
    return events


def _anthropic(n: int) -> Any:
    content = [
        {"type": "tool_use", "id": i, "name": m, "input": {"city": "Paris"}}
        for i, m, _ in _calls(n)
    ]
    return {"content": content, "stop_reason": "max_tokens"}


def _anthropic_stream(chars: int) -> list[Any]:
    block = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
    events: list[Any] = [{"type": "content_block_start", "index": 0, "content_block": block}]
    piece = '"xxxxxxxxxx",'
    for _ in range(chars // len(piece)):
        delta = {"type": "input_json_delta", "partial_json": piece}
        events.append({"type": "content_block_delta", "index": 0, "delta": delta})
    events.append({"type": "content_block_stop", "index": 0})
    events.append({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}})
    return events


def _gemini(n: int) -> Any:
    parts = [{"functionCall": {"name": "get_weather", "args": {"city": f"c{k}"}}} for k in range(n)]
    return {"candidates": [{"content": {"parts": parts}, "finishReason": "STOP"}]}


def _gemini_stream(n: int) -> list[Any]:
    return [
        {
            "candidates": [
                {"content": {"parts": [{"functionCall": {"name": "f", "args": {"k": k}}}]}}
            ]
        }
        for k in range(n)
    ] + [{"candidates": [{"finishReason": "STOP"}]}]


def _feed(module: Any, events: list[Any]) -> None:
    assembler = module.StreamAssembler()
    for event in events:
        assembler.feed(event)
    assembler.extraction()


# name -> (build input of size n, run extraction, sizes grow by "chars" or "calls")
Shape = tuple[Callable[[int], Any], Callable[[Any], Any], str]
SHAPES: dict[str, Shape] = {
    "text: <tool_call> tags": (lambda n: _repeat(TAG, n), text.extract, "chars"),
    "text: bare calls in prose": (lambda n: _repeat(BARE, n), text.extract, "chars"),
    'text: "name" + [[[[': (lambda n: '"name" ' + "[" * n, text.extract, "chars"),
    'text: "name" + {{{{': (lambda n: '"name" ' + "{" * n, text.extract, "chars"),
    "text: {{{{ (no name)": (lambda n: "{" * n, text.extract, "chars"),
    'text: {"a":{"a":... open': (lambda n: '"name" ' + _repeat('{"a":', n), text.extract, "chars"),
    "text: ``` + blanks": (lambda n: "```" + " " * n + "x", text.extract, "chars"),
    "openai_chat: calls, length": (_chat, openai_chat.extract, "calls"),
    "openai_chat stream: index-less fragments": (
        _chat_stream,
        lambda e: _feed(openai_chat, e),
        "chars",
    ),
    "openai_responses: calls, incomplete": (_responses, openai_responses.extract, "calls"),
    "openai_responses stream: deltas": (
        _responses_stream,
        lambda e: _feed(openai_responses, e),
        "chars",
    ),
    "anthropic: tool_use, max_tokens": (_anthropic, anthropic.extract, "calls"),
    "anthropic stream: input_json deltas": (
        _anthropic_stream,
        lambda e: _feed(anthropic, e),
        "chars",
    ),
    "gemini: parts without responseId": (_gemini, gemini.extract, "calls"),
    "gemini stream: parts": (_gemini_stream, lambda e: _feed(gemini, e), "calls"),
    # The parse stage, up to its own bound (MAX_ARGUMENT_CHARS, the same size as
    # MAX_RESPONSE_CHARS): valid text, text one repair fixes, text no repair fixes,
    # text left open (never closed), and a decoded mapping's boundary walk.
    "parse: valid object, many fields": (
        lambda n: "{" + ",".join(f'"k{i}": "v"' for i in range(n // 16)) + "}",
        parse_arguments,
        "chars",
    ),
    "parse: single quotes + trailing comma": (
        lambda n: "{" + ",".join(f"'k{i}': 'v'" for i in range(n // 16)) + ",}",
        parse_arguments,
        "chars",
    ),
    "parse: cut off, left open": (
        lambda n: '{"a": [' + ", ".join('"x"' for _ in range(n // 5)),
        parse_arguments,
        "chars",
    ),
    "parse: {{{{": (lambda n: "{" * n, parse_arguments, "chars"),
    "parse: decoded mapping, boundary walk": (
        lambda n: {f"k{i}": ["v", {"w": 1}] for i in range(n // 24)},
        parse_arguments,
        "chars",
    ),
}


def _time(run: Callable[[Any], Any], value: Any, runs: int) -> float:
    times = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        run(value)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _slope(sizes: list[int], times: list[float]) -> float:
    xs = [math.log(s) for s in sizes]
    ys = [math.log(max(t, 1e-9)) for t in times]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="stop at 1/8 of each bound")
    args = parser.parse_args()
    print(f"bounds: MAX_RESPONSE_CHARS={MAX_RESPONSE_CHARS:,}  MAX_CALLS={MAX_CALLS:,}")
    print(f"{'shape':44} {'largest n':>10} {'time':>9} {'slope':>6} {'t(2n)/t(n)':>10}")
    for name, (build, run, unit) in SHAPES.items():
        top = min(MAX_RESPONSE_CHARS, MAX_ARGUMENT_CHARS) - 64 if unit == "chars" else MAX_CALLS
        if args.quick:
            top //= 8
        sizes = [top >> k for k in range(6, -1, -1)]
        times = [_time(run, build(n), args.runs) for n in sizes]
        ratios = [b / a for a, b in itertools.pairwise(times) if a > 0]
        print(
            f"{name:44} {sizes[-1]:>10,} {times[-1] * 1000:>7.1f}ms {_slope(sizes, times):>6.2f} "
            f"{statistics.median(ratios):>10.2f}"
        )


if __name__ == "__main__":
    main()

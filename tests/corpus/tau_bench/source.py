"""tau-bench's customer-service tools (airline, retail) and the calls its tasks expect.

``tau_bench.json.gz`` holds the 30 tool definitions (OpenAI's function shape, JSON Schema
parameters) and every ``Action`` of the task files (see ``extract.py``). The run
registers each tool with `Registry.add_schema_tool` (a no-op handler), runs the corpus
checks, and replays the distinct expected actions: each one its schema allows must be
accepted, each one it forbids rejected.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from callgate import Gate, MemoryLedger, Registry

from .._checks import check_expected_call, check_registry, crash_text, register, timed
from .._report import SourceReport

DATA = Path(__file__).with_name("tau_bench.json.gz")
SAMPLE_ACTIONS = 60
"""Distinct expected actions per domain the fast sample replays (``full``: all 1,196)."""


def _noop(**arguments: Any) -> str:
    return "ok"


def run(full: bool) -> SourceReport:
    """Register both domains' tools, check them, replay the expected actions."""
    report = SourceReport(source="tau-bench")
    with timed(report):
        data: dict[str, Any] = json.loads(gzip.decompress(DATA.read_bytes()))
        for domain, definitions in data["tools"].items():
            registry = Registry()
            schemas: dict[str, dict[str, Any]] = {}
            for definition in definitions:
                function = definition.get("function", {})
                name = str(function.get("name", ""))

                def add(
                    function: dict[str, Any] = function,
                    name: str = name,
                    registry: Registry = registry,
                ) -> str:
                    return registry.add_schema_tool(
                        name, function.get("description", ""), function["parameters"], _noop
                    ).name

                local = register(report, f"{domain}/{name}", add)
                if local is not None:
                    schemas[name] = function["parameters"]
            check_registry(registry, report)
            gate = Gate(registry, ledger=MemoryLedger())
            seen: set[str] = set()
            for action in data["actions"][domain]:
                key = json.dumps([action["name"], action["kwargs"]], sort_keys=True)
                if key in seen or (not full and len(seen) >= SAMPLE_ACTIONS):
                    continue
                seen.add(key)
                if action["name"] not in schemas:
                    report.checked["expected call: tool not defined or refused"] += 1
                    continue
                try:
                    check_expected_call(
                        gate,
                        action["name"],
                        schemas[action["name"]],
                        action["kwargs"],
                        report,
                        f"{domain} {action['file']}",
                    )
                except Exception as exc:
                    report.crashes.append(f"{domain} {action['name']}: {crash_text(exc)}")
    return report

"""A public function-calling data set: Glaive's tool-calling conversations (the
English and Chinese samples LLaMA-Factory ships, Apache-2.0).

Each row holds the tools offered (``tools``: OpenAI-style function definitions with a
JSON Schema ``parameters``) and a conversation whose ``function_call`` turns are the
calls the data set expects. The run registers every distinct definition with
`Registry.add_schema_tool` (a no-op handler: nothing runs), runs the corpus checks, and
then replays the data set's own expected calls through a gate: a call its schema allows
(by ``jsonschema``, Draft 2020-12, formats asserted) must be accepted, and a call its
schema forbids must be rejected; either disagreement is a failed check.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from callgate import Gate, MemoryLedger, Registry

from .._checks import check_expected_call, check_registry, crash_text, register, timed
from .._report import SourceReport

HERE = Path(__file__).parent
FILES = ("glaive_toolcall_en_demo.json.gz", "glaive_toolcall_zh_demo.json.gz")
SAMPLE_ROWS = 80
"""Rows of the English file the fast sample takes (``full=True``: both files, 600 rows)."""


def rows(full: bool) -> list[dict[str, Any]]:
    """The data set's rows, as stored."""
    taken: list[dict[str, Any]] = []
    for name in FILES if full else FILES[:1]:
        data = json.loads(gzip.decompress((HERE / name).read_bytes()))
        taken += data if full else data[:SAMPLE_ROWS]
    return taken


def _key(definition: dict[str, Any]) -> str:
    return json.dumps(definition, sort_keys=True, ensure_ascii=False)


def _noop(**arguments: Any) -> str:
    return "ok"


class _Tools:
    """Distinct definitions spread over registries so that no registry holds one name twice
    (the data set reuses a name with different schemas across rows)."""

    def __init__(self) -> None:
        self.registries: list[Registry] = []
        self.where: dict[str, tuple[Registry, str]] = {}

    def add(self, report: SourceReport, definition: Any) -> None:
        if not isinstance(definition, dict):
            report.definitions += 1
            report.refused["not a function definition (no object)"] += 1
            return
        key = _key(definition)
        if key in self.where:
            return
        name = str(definition.get("name", ""))
        registry = next((r for r in self.registries if name not in r), None)
        if registry is None:
            registry = Registry()
            self.registries.append(registry)

        def add() -> str:
            spec = registry.add_schema_tool(
                name,
                str(definition.get("description", "")),
                definition.get("parameters") or {"type": "object", "properties": {}},
                _noop,
            )
            return spec.name

        local = register(report, f"{name}", add)
        if local is not None:
            self.where[key] = (registry, local)


def _expected_calls(data: list[dict[str, Any]], tools: _Tools, report: SourceReport) -> None:
    """Replay every ``function_call`` turn against the definition its row offered."""
    gates = {id(r): Gate(r, ledger=MemoryLedger()) for r in tools.registries}
    for index, row in enumerate(data):
        offered = {
            d.get("name"): d for d in json.loads(row.get("tools") or "[]") if isinstance(d, dict)
        }
        for turn in row.get("conversations", []):
            if turn.get("from") != "function_call":
                continue
            try:
                call = json.loads(turn["value"])
            except (ValueError, TypeError):
                report.checked["expected call: not JSON"] += 1
                continue
            definition = offered.get(call.get("name"))
            if definition is None or _key(definition) not in tools.where:
                report.checked["expected call: tool not offered or refused"] += 1
                continue
            registry, local = tools.where[_key(definition)]
            arguments = call.get("arguments")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    report.checked["expected call: arguments not JSON"] += 1
                    continue
            if not isinstance(arguments, dict):
                report.checked["expected call: arguments not an object"] += 1
                continue
            schema = definition.get("parameters") or {"type": "object", "properties": {}}
            gate = gates[id(registry)]
            check_expected_call(gate, local, schema, arguments, report, f"row {index}")


def run(full: bool) -> SourceReport:
    """Register every distinct definition, check them, replay the expected calls."""
    report = SourceReport(source="glaive-toolcall")
    with timed(report):
        data = rows(full)
        tools = _Tools()
        for row in data:
            try:
                definitions = json.loads(row.get("tools") or "[]")
            except ValueError:
                report.definitions += 1
                report.refused["tools field is not JSON"] += 1
                continue
            for definition in definitions if isinstance(definitions, list) else [definitions]:
                tools.add(report, definition)
        for registry in tools.registries:
            check_registry(registry, report)
        try:
            _expected_calls(data, tools, report)
        except Exception as exc:
            report.crashes.append(f"expected calls: {crash_text(exc)}")
    return report

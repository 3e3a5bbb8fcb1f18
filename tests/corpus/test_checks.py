"""The corpus checks themselves: they find what they claim to find, and run nothing real."""

from __future__ import annotations

import dataclasses
from typing import Any

import jsonschema
import pytest

from callgate import DefinitionError, Gate, MemoryLedger, Registry

from ._checks import (
    _inert,
    call_failures,
    check_expected_call,
    check_registry,
    export_failures,
    refusal_reason,
    register,
)
from ._generate import NoInstance, instance
from ._report import SourceReport

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 3}}},
    {
        "type": "object",
        "properties": {"n": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5}},
    },
    {
        "type": "object",
        "properties": {"s": {"type": "string", "pattern": r"^[A-Z]{2}-\d{3}(x|y)?$"}},
    },
    {"type": "object", "properties": {"s": {"type": "string", "minLength": 12, "maxLength": 12}}},
    {
        "type": "object",
        "properties": {"s": {"type": "string", "pattern": "^[a-z]+$", "minLength": 5}},
    },
    {"type": "object", "properties": {"e": {"type": "string", "format": "email"}}},
    {"type": "object", "properties": {"d": {"type": "string", "format": "date-time"}}},
    {"type": "object", "properties": {"k": {"enum": ["b", "a"]}, "c": {"const": 7}}},
    {"type": "object", "properties": {"u": {"oneOf": [{"type": "integer"}, {"type": "string"}]}}},
    {
        "type": "object",
        "$defs": {
            "P": {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"]}
        },
        "properties": {
            "p": {"$ref": "#/$defs/P"},
            "ps": {"type": "array", "items": {"$ref": "#/$defs/P"}, "minItems": 2},
        },
        "required": ["p"],
    },
    {
        "type": "object",
        "properties": {
            "t": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}
        },
    },
    {"type": "object", "minProperties": 2, "additionalProperties": {"type": "string"}},
    {
        "type": "object",
        "properties": {
            "m": {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}},
                    {"required": ["a"]},
                ]
            }
        },
    },
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
@pytest.mark.parametrize("fill", [True, False])
def test_the_generator_builds_an_instance_jsonschema_accepts(
    schema: dict[str, Any], fill: bool
) -> None:
    """Each generated instance is valid by jsonschema (Draft 2020-12, formats asserted)."""
    value = instance(schema, fill_optional=fill)
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    jsonschema.Draft202012Validator(schema, format_checker=checker).validate(value)
    assert instance(schema, fill_optional=fill) == value  # deterministic


def test_the_generator_says_when_it_cannot() -> None:
    """An unsatisfiable schema raises NoInstance rather than returning a wrong value."""
    with pytest.raises(NoInstance):
        instance({"type": "integer", "minimum": 5, "maximum": 4})
    with pytest.raises(NoInstance):
        instance(False)


def _registry(calls: list[dict[str, Any]]) -> Registry:
    registry = Registry()
    registry.add_schema_tool(
        "refund",
        "Refund an order.",
        {
            "type": "object",
            "properties": {
                "order": {"type": "string", "pattern": "^o-[0-9]+$"},
                "cents": {"type": "integer", "minimum": 1},
            },
            "required": ["order"],
        },
        lambda **arguments: calls.append(arguments),
        effects="spend:USD",
    )
    return registry


def test_valid_generated_calls_pass_and_never_run_the_handler() -> None:
    """Both generated calls are accepted through the gate; the real handler never runs."""
    ran: list[dict[str, Any]] = []
    tally = call_failures(_registry(ran))
    assert tally.failures == []
    assert tally.counts["calls ok"] == 2  # all properties, then the required one only
    assert ran == []


def test_a_tool_that_refuses_valid_calls_is_a_failed_check() -> None:
    """A spec whose advertised schema allows more than its validator takes is caught."""
    registry = _registry([])
    spec = registry.get("refund")
    assert spec is not None
    widened = dict(
        spec.input_schema,
        properties={**spec.input_schema["properties"], "note": {"type": "string"}},
    )
    broken = Registry([dataclasses.replace(spec, input_schema=widened)])
    tally = call_failures(broken)
    assert len(tally.failures) == 1
    assert tally.failures[0].startswith("refund: valid call")
    assert "rejected at validate" in tally.failures[0]


def test_an_export_that_breaks_a_metaschema_is_a_failed_check() -> None:
    """A parameters schema with a non-schema ``type`` fails the 2020-12 metaschema, per format."""
    spec = _registry([]).get("refund")
    assert spec is not None
    bad = dict(spec.input_schema, properties={"order": {"type": "text"}})
    failures = export_failures(Registry([dataclasses.replace(spec, input_schema=bad)]))
    formats = {f.split(": ")[1] for f in failures}
    assert {"openai_chat", "anthropic", "mcp", "text", "gemini"} <= formats


def test_register_counts_refusals_by_reason_and_crashes_apart() -> None:
    """DefinitionError is a refusal with a stable reason; anything else is a crash."""
    report = SourceReport(source="t")

    def refuse() -> None:
        raise DefinitionError("tool 'x1' has 3 problems: write it again")

    def crash() -> None:
        raise KeyError("boom")

    register(report, "a", refuse)
    register(report, "b", crash)
    register(report, "c", lambda: 1)
    assert (report.definitions, report.imported) == (3, 1)
    assert report.refused == {"DefinitionError: tool … has N problems": 1}
    assert report.crashes[0].startswith("b: KeyError")
    assert refusal_reason(DefinitionError("name 'a' bad")) == refusal_reason(
        DefinitionError("name 'b' bad")
    )


def test_the_checks_never_fall_back_to_the_default_sqlite_ledger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gate given no ledger writes ./callgate.db; the corpus gates are given memory ones
    (``python -m tests.corpus`` runs outside pytest's fixtures, from the repository root)."""
    import callgate.gate.gate

    def refuse() -> None:
        raise AssertionError("a corpus gate fell back to the default SQLite ledger")

    monkeypatch.setattr(callgate.gate.gate, "default_ledger", refuse)
    registry = _registry([])
    assert call_failures(registry).failures == []
    spec = registry.get("refund")
    assert spec is not None
    report = SourceReport(source="t")
    gate = Gate(Registry([_inert(spec)]), ledger=MemoryLedger())
    check_expected_call(gate, "refund", spec.input_schema, {"order": "o-1"}, report, "t")
    assert report.checked == {"expected call: valid, accepted": 1}


def test_strict_rules_read_property_names_as_names() -> None:
    """A property named ``properties`` is not an object schema the strict rules apply to."""
    registry = Registry()
    registry.add_schema_tool(
        "describe",
        "Describe a thing.",
        {
            "type": "object",
            "properties": {"properties": {"type": "string"}, "required": {"type": "boolean"}},
            "required": ["properties", "required"],
        },
        lambda **arguments: "ok",
    )
    assert export_failures(registry) == []


def test_an_export_a_format_declines_with_a_reason_is_counted_not_failed() -> None:
    """A recursive schema Gemini's subset cannot express: Gemini's export raises a
    DefinitionError; check_registry counts it under ``checked``, the other formats pass."""
    registry = Registry()
    registry.add_schema_tool(
        "walk",
        "Walk a tree.",
        {
            "type": "object",
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
                }
            },
            "properties": {"root": {"$ref": "#/$defs/Node"}},
        },
        lambda **arguments: "ok",
    )
    assert [f.split(": ")[1] for f in export_failures(registry)] == ["gemini"]
    report = SourceReport(source="t")
    check_registry(registry, report)
    assert report.checks_failed == []
    [refusal] = [k for k in report.checked if k.startswith("export refused")]
    assert refusal.startswith("export refused: gemini: DefinitionError: ")

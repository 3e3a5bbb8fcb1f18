"""Tools defined by a JSON Schema (`Registry.add_schema_tool`): validation with the schema's
own semantics, the contract options of `@tool`, names mapped reversibly, refusals."""

from __future__ import annotations

import json
from typing import Any

import pytest

from callgate import (
    Authority,
    CallContext,
    DefinitionError,
    Gate,
    MemoryLedger,
    Registry,
    Status,
    ToolCall,
)
from callgate.definitions import UnenforceableSchema
from callgate.render import Rejection
from callgate.validate import validate_arguments, validate_text_fast

ORDER = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "pattern": "^ord_[0-9]{4}$"},
        "placed": {"type": "string", "format": "date"},
        "contact": {"type": "string", "format": "email"},
        "tracking": {"type": "string", "format": "uuid"},
        "quantity": {"type": "integer", "minimum": 1, "format": "int32"},
        "address": {"$ref": "#/$defs/Address"},
        "payment": {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"card": {"type": "string", "minLength": 4}},
                    "required": ["card"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {"iban": {"type": "string"}},
                    "required": ["iban"],
                    "additionalProperties": False,
                },
            ]
        },
        "note": {"anyOf": [{"type": "string", "maxLength": 20}, {"type": "null"}]},
    },
    "required": ["order_id"],
    "$defs": {
        "Address": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        }
    },
}


def _noop(**arguments: Any) -> dict[str, Any]:
    return arguments


def _order_tool() -> Any:
    registry = Registry()
    return registry.add_schema_tool("update_order", "Update an order.", ORDER, _noop)


def _accepts(spec: Any, value: dict[str, Any]) -> bool:
    verdict = validate_arguments(spec, value)
    fast = validate_text_fast(spec, json.dumps(value))
    assert (fast is not None) == (not isinstance(verdict, Rejection)) or any(
        v is None for v in value.values()
    )
    return not isinstance(verdict, Rejection)


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ({"order_id": "ord_1234"}, True),
        ({"order_id": "ord_12345"}, False),  # pattern
        ({"order_id": "ord_1234", "placed": "2026-02-28"}, True),
        ({"order_id": "ord_1234", "placed": "2026-02-30"}, False),  # format date
        ({"order_id": "ord_1234", "placed": "28/02/2026"}, False),
        ({"order_id": "ord_1234", "contact": "ana@example.org"}, True),
        ({"order_id": "ord_1234", "contact": "ana at example"}, False),  # format email
        ({"order_id": "ord_1234", "tracking": "123e4567-e89b-12d3-a456-426614174000"}, True),
        ({"order_id": "ord_1234", "tracking": "123e4567e89b12d3a456426614174000"}, False),
        ({"order_id": "ord_1234", "quantity": 2}, True),
        ({"order_id": "ord_1234", "quantity": 2**31}, False),  # format int32
        ({"order_id": "ord_1234", "quantity": 2.0}, False),  # an integer has no fraction
        ({"order_id": "ord_1234", "address": {"city": "Oslo"}}, True),
        ({"order_id": "ord_1234", "address": {"zip": "0150"}}, False),  # $ref: required
        ({"order_id": "ord_1234", "address": {"city": "Oslo", "x": 1}}, False),  # closed
        ({"order_id": "ord_1234", "payment": {"card": "4242"}}, True),
        ({"order_id": "ord_1234", "payment": {"iban": "NO93"}}, True),
        ({"order_id": "ord_1234", "payment": {"card": "42"}}, False),  # oneOf: no branch
        ({"order_id": "ord_1234", "payment": {"card": "4242", "iban": "NO"}}, False),
        ({"order_id": "ord_1234", "note": None}, True),
        ({"order_id": "ord_1234", "note": "x" * 21}, False),  # anyOf: no branch
        ({"order_id": "ord_1234", "unknown": 1}, False),  # declared arguments only
        ({}, False),
    ],
)
def test_arguments_are_validated_with_the_schemas_own_semantics(
    value: dict[str, Any], accepted: bool
) -> None:
    """Formats, patterns, $ref/$defs, oneOf/anyOf, nested additionalProperties, integers."""
    assert _accepts(_order_tool(), value) is accepted


def test_a_rejection_names_the_field_rule_and_expected_value() -> None:
    """A format failure tells the model which field, which rule and what was expected."""
    verdict = validate_arguments(_order_tool(), {"order_id": "ord_1234", "placed": "soon"})
    assert isinstance(verdict, Rejection)
    (problem,) = verdict.problems
    assert problem.field == "placed"
    assert problem.rule == "format"
    assert problem.expected == 'a valid "date"'


def test_a_pattern_with_a_backreference_is_refused_not_run() -> None:
    """A pattern RE2 cannot run (exponential on hostile values) is refused at definition."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": r"^(a+)\1$"}}}
    with pytest.raises(UnenforceableSchema, match="backreference"):
        Registry().add_schema_tool("t", "d", schema, _noop)


def test_a_hostile_value_against_a_pattern_is_checked_in_linear_time() -> None:
    """A pattern that backtracks exponentially in Python runs on RE2: the call is answered."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a|a)*$"}}}
    spec = Registry().add_schema_tool("t", "d", schema, _noop)
    assert not _accepts(spec, {"s": "a" * 5000 + "b"})


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        (
            {"type": "object", "properties": {"p": {"type": "string", "format": "phone"}}},
            ["format", "phone", "formats="],
        ),
        (
            {"type": "object", "properties": {"p": {"$ref": "https://x.example/s.json"}}},
            ["other documents", "$defs"],
        ),
        ({"type": "object", "properties": {"p": {"$ref": "#/$defs/Gone"}}}, ["#/$defs/Gone"]),
        (
            {"type": "object", "properties": {}, "additionalProperties": True},
            ["additionalProperties", "Declare each argument"],
        ),
        ({"type": "array", "items": {"type": "string"}}, ["type", "object"]),
        (
            {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
            ["draft-07", "2020-12"],
        ),
        (
            {"type": "object", "properties": {"p": {"type": "strin"}}},
            ["not valid JSON Schema"],
        ),
        ({"type": "object", "properties": {"a": {}}, "required": ["b"]}, ["'b'", "required"]),
    ],
)
def test_a_schema_callgate_cannot_enforce_is_refused_with_the_reason(
    schema: dict[str, Any], words: list[str]
) -> None:
    """Never silently loosened: the refusal names what cannot be enforced and what to do."""
    with pytest.raises(DefinitionError) as caught:
        Registry().add_schema_tool("lookup", "Look something up.", schema, _noop)
    for word in words:
        assert word in str(caught.value)
    assert "'lookup'" in str(caught.value)


def test_a_format_of_your_own_is_checked_by_your_function() -> None:
    """``formats={name: check}`` adds a checker; ``{name: None}`` declares an annotation."""
    schema = {
        "type": "object",
        "properties": {
            "sku": {"type": "string", "format": "sku"},
            "phone": {"type": "string", "format": "phone"},
        },
    }
    spec = Registry().add_schema_tool(
        "t", "d", schema, _noop, formats={"sku": lambda v: v.startswith("SKU-"), "phone": None}
    )
    assert _accepts(spec, {"sku": "SKU-1", "phone": "anything"})
    assert not _accepts(spec, {"sku": "1"})


def test_the_openapi_3_0_dialect_is_read_as_openapi_means_it() -> None:
    """``nullable`` admits null; a boolean ``exclusiveMinimum`` excludes its ``minimum``."""
    schema = {
        "type": "object",
        "properties": {
            "price": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
            "coupon": {"type": "string", "nullable": True, "example": "SPRING"},
        },
        "required": ["price", "coupon"],
    }
    spec = Registry().add_schema_tool("t", "d", schema, _noop, dialect="openapi-3.0")
    assert _accepts(spec, {"price": 0.5, "coupon": None})
    assert not _accepts(spec, {"price": 0, "coupon": "A"})
    assert spec.input_schema["properties"]["price"] == {"type": "number", "exclusiveMinimum": 0}
    assert spec.input_schema["properties"]["coupon"]["type"] == ["string", "null"]


def test_without_the_dialect_nullable_is_not_taken_to_allow_null() -> None:
    """2020-12 has no ``nullable``: the same schema read as 2020-12 refuses null."""
    schema = {
        "type": "object",
        "properties": {"coupon": {"type": "string", "nullable": True}},
        "required": ["coupon"],
    }
    spec = Registry().add_schema_tool("t", "d", schema, _noop)
    assert not _accepts(spec, {"coupon": None})


@pytest.mark.parametrize("name", ["billing.refund", "crm/contacts:search", "a b"])
def test_a_name_providers_refuse_is_mapped_and_reported(name: str) -> None:
    """Dots, slashes and spaces become ``_``; the original is kept and listed."""
    registry = Registry()
    spec = registry.add_schema_tool(name, "d", {"type": "object"}, _noop)
    assert spec.name == name.replace(".", "_").replace("/", "_").replace(":", "_").replace(" ", "_")
    assert spec.external_name == name
    assert registry.renamed() == {spec.name: name}


def test_two_names_that_map_alike_stay_distinct() -> None:
    """``a.b`` after ``a_b`` gets a hash suffix: the mapping stays reversible."""
    registry = Registry()
    registry.add_schema_tool("a_b", "d", {"type": "object"}, _noop)
    spec = registry.add_schema_tool("a.b", "d", {"type": "object"}, _noop)
    assert spec.name.startswith("a_b_")
    assert len(spec.name) == len("a_b_") + 8
    assert registry.renamed() == {spec.name: "a.b"}


def test_a_long_name_is_cut_to_64_characters_with_a_hash() -> None:
    """Names over 64 characters are shortened, and two such names do not collide."""
    registry = Registry()
    first = registry.add_schema_tool("x" * 70 + ".one", "d", {"type": "object"}, _noop)
    second = registry.add_schema_tool("x" * 70 + ".two", "d", {"type": "object"}, _noop)
    assert len(first.name) == 64
    assert len(second.name) == 64
    assert first.name != second.name


def _gate(registry: Registry) -> Gate:
    return Gate(registry, ledger=MemoryLedger())


def test_arguments_named_from_and_class_reach_the_handler_by_their_names() -> None:
    """``_from``, ``_class`` and ``class`` work: the handler gets them as the schema names them."""
    seen: list[dict[str, Any]] = []

    def transfer(_from: str, _class: str = "std", **rest: Any) -> str:
        seen.append({"_from": _from, "_class": _class, **rest})
        return "done"

    schema = {
        "type": "object",
        "properties": {
            "_from": {"type": "string"},
            "_class": {"type": "string", "enum": ["std", "express"]},
            "class": {"type": "integer"},
            "to": {"type": "string"},
        },
        "required": ["_from", "to"],
    }
    registry = Registry()
    registry.add_schema_tool("transfer", "Move money.", schema, transfer, effects="write:ledger")
    run = _gate(registry).run(authority=Authority(principal="p", grants=["write:ledger"]))
    call = {"_from": "A", "_class": "express", "class": 2, "to": "B"}
    (obs,) = run.submit([ToolCall(id="c1", name="transfer", arguments=call)])
    assert obs.status is Status.OK, obs.content
    assert seen == [call]


def test_optional_arguments_not_given_are_left_to_the_handlers_defaults() -> None:
    """An absent optional argument, or one sent as null meaning absent, is not passed."""
    seen: list[dict[str, Any]] = []

    def handler(**arguments: Any) -> None:
        seen.append(arguments)

    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "required": ["a"],
    }
    registry = Registry()
    registry.add_schema_tool("t", "d", schema, handler, effects="read:x")
    run = _gate(registry).run(authority=Authority(principal="p", grants=["read:x"]))
    run.submit([ToolCall(id="1", name="t", arguments={"a": "x"})])
    run.submit([ToolCall(id="2", name="t", arguments={"a": "y", "b": None})])
    assert seen == [{"a": "x"}, {"a": "y"}]


def test_effects_templated_on_a_schema_name_are_authorized() -> None:
    """``write:account:{_from}`` expands on the call: another account is not granted."""
    registry = Registry()
    schema = {"type": "object", "properties": {"_from": {"type": "string"}}, "required": ["_from"]}
    registry.add_schema_tool(
        "drain", "Empty an account.", schema, _noop, effects="write:account:{_from}"
    )
    run = _gate(registry).run(authority=Authority(principal="p", grants=["write:account:A"]))
    ok, denied = run.submit(
        [
            ToolCall(id="1", name="drain", arguments={"_from": "A"}),
            ToolCall(id="2", name="drain", arguments={"_from": "B"}),
        ]
    )
    assert ok.status is Status.OK
    assert denied.status is Status.REJECTED
    assert denied.stage.value == "authorize"


def test_the_handler_receives_the_trusted_context_never_from_arguments() -> None:
    """A `CallContext` parameter gets the run's context; a 'tenant' argument is refused."""
    tenants: list[str] = []

    def whoami(ctx: CallContext) -> None:
        tenants.append(ctx.context["tenant"])

    registry = Registry()
    registry.add_schema_tool("whoami", "d", {"type": "object"}, whoami, effects="read:me")
    run = _gate(registry).run(
        authority=Authority(principal="p", grants=["read:me"], context={"tenant": "t1"})
    )
    (ok,) = run.submit([ToolCall(id="1", name="whoami", arguments={})])
    (bad,) = run.submit([ToolCall(id="2", name="whoami", arguments={"tenant": "t2"})])
    assert ok.status is Status.OK
    assert tenants == ["t1"]
    assert bad.status is Status.REJECTED


def test_secret_fields_named_by_the_schema_are_kept_out_of_the_ledger() -> None:
    """``secret_fields=["_token"]`` redacts the value in what the ledger records."""
    registry = Registry()
    schema = {"type": "object", "properties": {"_token": {"type": "string"}}}
    registry.add_schema_tool(
        "login", "d", schema, _noop, effects="read:x", secret_fields=["_token"]
    )
    ledger = MemoryLedger()
    run = Gate(registry, ledger=ledger).run(authority=Authority(principal="p", grants=["read:x"]))
    run.submit([ToolCall(id="1", name="login", arguments={"_token": "hunter2-very-secret"})])
    recorded = repr(list(ledger.calls(run_id=run.id))) + repr(list(ledger.audit()))
    assert "hunter2-very-secret" not in recorded
    assert "_token" in recorded


def test_a_misspelt_contract_option_names_the_closest() -> None:
    """``effect=`` is refused at once, suggesting ``effects``."""
    with pytest.raises(DefinitionError, match="did you mean 'effects'"):
        Registry().add_schema_tool("t", "d", {"type": "object"}, _noop, effect="read:x")  # type: ignore[call-arg]


def test_a_handler_without_a_declared_argument_is_refused() -> None:
    """A handler that could not receive an argument the schema declares is a definition error."""

    def handler(a: str) -> None:
        return None

    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    with pytest.raises(DefinitionError, match="no parameter 'b'"):
        Registry().add_schema_tool("t", "d", schema, handler)


async def _async_handler(**arguments: Any) -> str:
    return "async:" + arguments["a"]


def test_an_async_handler_is_awaited() -> None:
    """An async handler is marked async and its result is the observation's."""
    registry = Registry()
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    spec = registry.add_schema_tool("t", "d", schema, _async_handler, effects="read:x")
    assert spec.is_async
    run = _gate(registry).run(authority=Authority(principal="p", grants=["read:x"]))
    (obs,) = run.submit([ToolCall(id="1", name="t", arguments={"a": "z"})])
    assert obs.result == "async:z"


def test_the_version_changes_with_the_schema() -> None:
    """A changed schema is a changed contract: its version differs."""
    one = Registry().add_schema_tool("t", "d", {"type": "object"}, _noop)
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    two = Registry().add_schema_tool("t", "d", schema, _noop)
    assert one.version != two.version


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("time", "23:59:60Z", "24:00:00Z"),
        ("date-time", "2026-11-30T18:30:00+01:00", "2026-11-30 18:30:00"),
        ("duration", "P1DT2H", "P"),
        ("hostname", "shop.example.org", "shop..example"),
        ("uri", "https://shop.example/a?b=c", "/relative/only"),
        ("uri-reference", "/relative/only", "has space"),
        ("byte", "aGVsbG8=", "not base64!"),
        ("regex", "^[a-z]+$", "(a"),
        ("int64", 2**63 - 1, 2**63),
        ("password", "anything at all", 5),
        ("double", 1.5, "1.5"),
    ],
)
def test_each_format_callgate_knows_is_checked_or_constrains_only_the_type(
    fmt: str, good: Any, bad: Any
) -> None:
    """The documented formats: checked ones refuse a malformed value; annotations only type."""
    kind = "integer" if fmt == "int64" else "number" if fmt == "double" else "string"
    schema = {"type": "object", "properties": {"v": {"type": kind, "format": fmt}}}
    spec = Registry().add_schema_tool("t", "d", schema, _noop)
    assert _accepts(spec, {"v": good})
    assert not _accepts(spec, {"v": bad})


def test_unevaluated_properties_beside_pattern_properties_is_refused() -> None:
    """That pair would be checked with Python's backtracking regex engine: refused."""
    schema = {
        "type": "object",
        "properties": {
            "tags": {
                "type": "object",
                "patternProperties": {"^x-": {"type": "string"}},
                "unevaluatedProperties": False,
            }
        },
    }
    with pytest.raises(UnenforceableSchema, match="unevaluatedProperties"):
        Registry().add_schema_tool("t", "d", schema, _noop)

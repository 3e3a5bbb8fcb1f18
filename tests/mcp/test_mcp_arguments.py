"""Arguments models built from a remote server's JSON Schema.

The property that matters: whatever the model accepts, the server's own schema accepts
(callgate never forwards a call the server's schema rejects).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from callgate.mcp import UnsupportedSchema, remote_arguments

pytestmark = pytest.mark.timeout(30)

SCHEMAS: dict[str, dict[str, Any]] = {
    "simple": {
        "type": "object",
        "properties": {
            "to": {"type": "string", "minLength": 3, "description": "recipient"},
            "count": {"type": "integer", "minimum": 0, "maximum": 10},
            "urgent": {"type": "boolean", "default": False},
            "mode": {"enum": ["draft", "send"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        },
        "required": ["to"],
    },
    "rich": {
        "type": "object",
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            }
        },
        "properties": {
            "address": {"$ref": "#/$defs/Address"},
            "amount": {"type": "number", "exclusiveMinimum": 0},
            "note": {"type": ["string", "null"]},
            "email": {"type": "string", "pattern": "^[^@ ]+@[^@ ]+$"},
            "ids": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
        },
        "required": ["amount"],
        "anyOf": [{"required": ["address"]}, {"required": ["email"]}],
    },
}


@pytest.mark.parametrize(
    ("schema", "arguments", "problem"),
    [
        ("simple", {"to": "bob"}, None),
        ("simple", {"to": "bo"}, "at least 3 characters"),
        ("simple", {"to": "bob", "count": 11}, "less than or equal to 10"),
        ("simple", {"to": "bob", "count": "3"}, "valid integer"),
        ("simple", {"to": "bob", "mode": "publish"}, "'draft' or 'send'"),
        ("simple", {"to": "bob", "tags": ["a", "b", "c", "d"]}, "at most 3 items"),
        ("simple", {"to": "bob", "bcc": "x"}, "Extra inputs"),
        ("simple", {}, "Field required"),
        ("rich", {"amount": 1.5, "email": "a@b.c"}, None),
        ("rich", {"amount": 2, "address": {"city": "Oslo"}}, None),
        ("rich", {"amount": 2, "address": {"zip": "0150"}}, "'city' is a required property"),
        ("rich", {"amount": 0, "email": "a@b.c"}, "less than or equal to the minimum"),
        ("rich", {"amount": 1, "email": "not an email"}, "does not match"),
        ("rich", {"amount": 1}, "is not valid under any of the given schemas"),
        ("rich", {"amount": 1, "email": "a@b.c", "ids": [1, 1]}, "non-unique elements"),
        ("rich", {"amount": 1, "email": "a@b.c", "note": None}, None),
    ],
)
def test_the_model_accepts_and_rejects_what_the_schema_does(
    schema: str, arguments: dict[str, Any], problem: str | None
) -> None:
    model = remote_arguments("t", SCHEMAS[schema]).model
    if problem is None:
        model.model_validate_json(json.dumps(arguments))
        return
    with pytest.raises(ValidationError) as caught:
        model.model_validate_json(json.dumps(arguments))
    assert problem in str(caught.value)


def test_only_given_arguments_are_sent() -> None:
    """Optional arguments left out (or null where null is not allowed) are not forwarded."""
    arguments = remote_arguments("t", SCHEMAS["rich"])
    model = arguments.model.model_validate_json('{"amount": 3, "email": "a@b.c", "note": null}')
    assert arguments.payload(model.__dict__) == {"amount": 3, "email": "a@b.c"}
    assert "address" in arguments.null_means_default
    assert "note" not in arguments.null_means_default


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "array"}, "not 'object'"),
        ({"type": "object", "properties": {"_private": {}}}, "cannot be represented"),
        ({"type": "object", "properties": {"model_dump": {}}}, "cannot be represented"),
        ({"type": "object", "properties": {}, "required": ["x"]}, "not declared"),
        ({"type": "object", "properties": {"x": {"type": "strng"}}}, "not valid JSON Schema"),
    ],
)
def test_schemas_that_cannot_be_checked_are_refused(schema: dict[str, Any], reason: str) -> None:
    with pytest.raises(UnsupportedSchema, match=reason):
        remote_arguments("t", schema)


def test_references_never_leave_the_schema() -> None:
    """A $ref to another document is refused when the tool is imported, never fetched."""
    schema = {"type": "object", "properties": {"x": {"$ref": "http://127.0.0.1:9/evil.json"}}}
    with pytest.raises(UnsupportedSchema, match="never fetches"):
        remote_arguments("t", schema)


def test_a_dangling_local_reference_rejects_the_call_instead_of_raising() -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/Missing"}}}
    model = remote_arguments("t", schema).model
    with pytest.raises(ValidationError, match="cannot resolve"):
        model.model_validate_json('{"x": 1}')


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-20, 20) | st.floats(-5, 5) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=8,
)
KEYS = st.sampled_from(
    ["to", "count", "urgent", "mode", "tags", "address", "amount", "note", "email", "ids", "zz"]
)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(SCHEMAS)), arguments=st.dictionaries(KEYS, JSON_VALUES))
def test_whatever_the_model_accepts_the_servers_schema_accepts(
    name: str, arguments: dict[str, Any]
) -> None:
    schema = SCHEMAS[name]
    remote = remote_arguments("t", schema)
    try:
        model = remote.model.model_validate_json(json.dumps(arguments))
    except ValidationError:
        return
    jsonschema.validate(remote.payload(model.__dict__), schema)

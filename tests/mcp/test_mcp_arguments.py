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
        (
            "rich",
            {"amount": 2, "address": {"zip": "0150"}},
            "missing required field 'address.city'",
        ),
        ("rich", {"amount": 0, "email": "a@b.c"}, "expected number (> 0), got integer 0"),
        ("rich", {"amount": 1, "email": "not an email"}, "does not match"),
        ("rich", {"amount": 1}, "an object with 'address' or an object with 'email'"),
        ("rich", {"amount": 1, "email": "a@b.c", "ids": [1, 1]}, "has repeated items"),
        ("rich", {"amount": 1, "email": "a@b.c", "note": None}, None),
    ],
)
def test_the_model_accepts_and_rejects_what_the_schema_does(
    schema: str, arguments: dict[str, Any], problem: str | None
) -> None:
    """A remote schema's model accepts valid arguments and rejects each violation, saying why."""
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
        ({"type": "array"}, "type is 'array'; tool arguments are an object"),
        ({"type": "object", "properties": {"": {}}}, "cannot be represented"),
        ({"type": "object", "properties": {}, "required": ["x"]}, "not declared"),
        ({"type": "object", "properties": {"x": {"type": "strng"}}}, "not valid JSON Schema"),
    ],
)
def test_schemas_that_cannot_be_checked_are_refused(schema: dict[str, Any], reason: str) -> None:
    """Non-object, unrepresentable, undeclared-required or invalid schemas are UnsupportedSchema."""
    with pytest.raises(UnsupportedSchema, match=reason):
        remote_arguments("t", schema)


def test_references_never_leave_the_schema() -> None:
    """A $ref to another document is refused when the tool is imported, never fetched."""
    schema = {"type": "object", "properties": {"x": {"$ref": "http://127.0.0.1:9/evil.json"}}}
    with pytest.raises(UnsupportedSchema, match="never fetches"):
        remote_arguments("t", schema)


def test_a_dangling_local_reference_leaves_the_tool_out_at_import() -> None:
    """A local $ref to nothing is refused at import, naming it (as for a schema-defined tool)."""
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/Missing"}}}
    with pytest.raises(UnsupportedSchema, match="refers to #/\\$defs/Missing, which is not in"):
        remote_arguments("t", schema)


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
    """Arguments the generated model accepts always pass jsonschema against the server's schema."""
    schema = SCHEMAS[name]
    remote = remote_arguments("t", schema)
    try:
        model = remote.model.model_validate_json(json.dumps(arguments))
    except ValidationError:
        return
    jsonschema.validate(remote.payload(model.__dict__), schema)


# -- issue 12, items 6 and 7 ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["_from", "_class", "__x", "model_dump"])
def test_names_pydantic_cannot_use_are_imported_under_an_alias(name: str) -> None:
    """``_from`` is importable: the model sends and sees ``_from``, and the server gets it."""
    schema = {
        "type": "object",
        "properties": {name: {"type": "string"}, "to": {"type": "string"}},
        "required": [name],
    }
    arguments = remote_arguments("t", schema)
    model = arguments.model.model_validate_json(json.dumps({name: "a@b.c", "to": "d"}))
    assert arguments.payload(model.__dict__) == {name: "a@b.c", "to": "d"}
    assert model.model_dump(mode="json") == {name: "a@b.c", "to": "d"}
    with pytest.raises(ValidationError, match=r"missing required field|Field required"):
        arguments.model.model_validate_json('{"to": "d"}')


def test_a_missing_underscore_argument_is_named_as_the_model_knows_it() -> None:
    """The message names ``_from``, never the internal field name ``from_``."""
    schema = {"type": "object", "properties": {"_from": {"type": "string"}}, "required": ["_from"]}
    model = remote_arguments("t", schema).model
    with pytest.raises(ValidationError) as caught:
        model.model_validate_json("{}")
    [error] = caught.value.errors()
    assert error["loc"] == ("_from",)


def test_an_underscore_name_does_not_collide_with_a_declared_one() -> None:
    """``_from`` and ``from_`` both declared: each keeps its own value."""
    schema = {
        "type": "object",
        "properties": {"_from": {"type": "string"}, "from_": {"type": "string"}},
    }
    arguments = remote_arguments("t", schema)
    model = arguments.model.model_validate_json('{"_from": "a", "from_": "b"}')
    assert arguments.payload(model.__dict__) == {"_from": "a", "from_": "b"}


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "integer"},
        {"type": "integer", "x-unit": "seconds"},
        {"type": "integer", "x-anything": {"nested": True}, "title": "Count"},
        {"anyOf": [{"type": "integer"}]},
    ],
    ids=["plain", "x-key", "x-key-and-title", "through-jsonschema"],
)
def test_an_integer_is_never_a_float_whichever_keys_sit_beside_it(prop: dict[str, Any]) -> None:
    """``5.0`` is refused and ``5`` arrives as an int, with or without an ``x-`` key."""
    model = remote_arguments("t", {"type": "object", "properties": {"n": prop}}).model
    with pytest.raises(ValidationError):
        model.model_validate_json('{"n": 5.0}')
    value = model.model_validate_json('{"n": 5}').n  # type: ignore[attr-defined]
    assert value == 5
    assert type(value) is int


def test_unknown_keys_beside_a_simple_type_do_not_change_how_it_is_checked() -> None:
    """An ``x-`` key is an annotation: the property is still a typed field."""
    with_key = remote_arguments(
        "t", {"type": "object", "properties": {"n": {"type": "integer", "x-u": 1}}}
    )
    without = remote_arguments("t", {"type": "object", "properties": {"n": {"type": "integer"}}})
    assert with_key.model.model_fields["n"].annotation is without.model.model_fields["n"].annotation


NESTED = {
    "type": "object",
    "properties": {
        "open": {"type": "object", "properties": {"a": {"type": "integer"}}},
        "closed": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "required": ["a"],
            "additionalProperties": False,
        },
        "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
    },
    "$defs": {
        "Item": {
            "type": "object",
            "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
            "required": ["sku"],
            "additionalProperties": False,
        }
    },
}


def test_nested_objects_follow_the_servers_schema_open_or_closed() -> None:
    """Open stays open (as JSON Schema says); closed refuses unknown fields."""
    arguments = remote_arguments("t", NESTED)
    arguments.model.model_validate_json('{"open": {"a": 1, "zz": 2}}')
    with pytest.raises(ValidationError, match=r"unexpected field 'closed\.zz'"):
        arguments.model.model_validate_json('{"closed": {"a": 1, "zz": 2}}')


def test_a_nested_null_for_an_optional_property_is_not_sent() -> None:
    """Null means "not given" at every depth: the server's schema never sees it."""
    arguments = remote_arguments("t", NESTED)
    text = '{"closed": {"a": 1, "b": null}, "items": [{"sku": "x", "qty": null}]}'
    model = arguments.model.model_validate_json(text)
    payload = arguments.payload(model.__dict__)
    assert payload == {"closed": {"a": 1}, "items": [{"sku": "x"}]}
    jsonschema.validate(payload, NESTED)


def test_a_null_for_a_required_nested_property_is_still_refused() -> None:
    """null for a required nested property is refused as the wrong type."""
    arguments = remote_arguments("t", NESTED)
    with pytest.raises(ValidationError, match=r"'closed\.a' has the wrong type"):
        arguments.model.model_validate_json('{"closed": {"a": null}}')


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {"amount": True, "email": "a@b.c"},
            "field 'amount' has the wrong type: expected number, got boolean true.",
        ),
        ({"amount": 1, "address": {}}, "missing required field 'address.city' (expected string)."),
        ({"amount": 1, "address": {"city": "Oslo", "k": 1}}, "unexpected field 'address.k'"),
        (
            {"amount": 1, "email": "a@b.c", "ids": ["k"]},
            "field 'ids[0]' has the wrong type: expected integer, got string \"k\".",
        ),
    ],
)
def test_schema_errors_are_our_own_sentences_without_python_reprs(
    arguments: dict[str, Any], expected: str
) -> None:
    """``True is not of type 'number'`` and ``['k']`` become sentences with JSON values."""
    model = remote_arguments("t", SCHEMAS["rich"]).model
    with pytest.raises(ValidationError) as caught:
        model.model_validate_json(json.dumps(arguments))
    [error] = caught.value.errors()
    message = error["msg"]
    assert message == expected or message.startswith(expected)
    for python in ("True", "'k'", "['", "is not of type", "is a required property", "{}"):
        assert python not in message


# -- issue 12, item 4: the server's patterns run on RE2 ---------------------------------------

HOSTILE = "a" * 10_000 + "!"
"""A model value that makes ``^(a+)+$`` try every way of splitting the ``a``s in a
backtracking engine (22 characters took 0.5 s, doubling with each one)."""


@pytest.mark.timeout(20)
def test_a_backtracking_pattern_checks_a_hostile_value_in_linear_time() -> None:
    """The server's ``pattern`` is searched with RE2: 10,000 characters are decided at once."""
    schema = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}}}
    model = remote_arguments("t", schema).model
    with pytest.raises(ValidationError, match="does not match its pattern"):
        model.model_validate_json(json.dumps({"name": HOSTILE}))
    assert model.model_validate_json(json.dumps({"name": "a" * 10_000})).name == "a" * 10_000  # type: ignore[attr-defined]


@pytest.mark.timeout(20)
def test_pattern_properties_read_hostile_keys_in_linear_time() -> None:
    """Keys the model chose are matched against ``patternProperties`` (and named in the
    rejection) with RE2 too."""
    schema = {
        "type": "object",
        "properties": {
            "meta": {
                "type": "object",
                "patternProperties": {"^(a+)+$": {"type": "integer"}},
                "additionalProperties": False,
            }
        },
    }
    model = remote_arguments("t", schema).model
    with pytest.raises(ValidationError) as caught:
        model.model_validate_json(json.dumps({"meta": {HOSTILE: 1}}))
    assert "unexpected field 'meta." in caught.value.errors()[0]["msg"]
    with pytest.raises(ValidationError, match="wrong type"):
        model.model_validate_json(json.dumps({"meta": {"a" * 10_000: "x"}}))
    model.model_validate_json(json.dumps({"meta": {"a" * 10_000: 1}}))


@pytest.mark.parametrize(
    ("prop", "construct"),
    [
        ({"type": "string", "pattern": "^(a)\\1$"}, "a backreference"),
        ({"type": "string", "pattern": "^(?!admin).*$"}, "a lookahead or lookbehind"),
        ({"type": "object", "patternProperties": {"(?<=x)y": {}}}, "a lookahead or lookbehind"),
        ({"type": "array", "items": {"type": "string", "pattern": "a{1001}"}}, "1000"),
    ],
)
def test_a_pattern_re2_cannot_run_is_refused_at_import_with_its_reason(
    prop: dict[str, Any], construct: str
) -> None:
    """A schema pattern RE2 cannot run is UnsupportedSchema naming the construct and place."""
    schema = {"type": "object", "properties": {"x": prop}}
    with pytest.raises(UnsupportedSchema) as caught:
        remote_arguments("t", schema)
    message = str(caught.value)
    assert construct in message
    assert "the input schema's pattern" in message
    assert "RE2" in message
    assert "(at /properties/x/" in message


def test_unevaluated_properties_beside_pattern_properties_is_refused() -> None:
    """``jsonschema`` would run those patterns with Python's ``re``: the tool is left out."""
    prop = {"type": "object", "patternProperties": {"^x": {}}, "unevaluatedProperties": False}
    with pytest.raises(UnsupportedSchema, match="unevaluatedProperties beside patternProperties"):
        remote_arguments("t", {"type": "object", "properties": {"x": prop}})


ECMA_AGREES = [
    "^[a-z]+$",
    "^(a+)+$",
    "ab*c",
    "^\\d{2,4}-x$",
    "[^@ ]+@[^@ ]+",
    "^(?:foo|bar)?baz",
    "\\w\\W\\w",
    "^.{0,3}$",
    "\\bword\\b",
    "[\\]\\-a]",
    "x{2}",
    "\\u0041\\x42",
]
"""Patterns whose ECMA-262 and Python meanings agree on ASCII text without a newline."""


@settings(max_examples=300, deadline=None)
@given(pattern=st.sampled_from(ECMA_AGREES), text=st.text("abcxyzAB019@ -_!word]", max_size=12))
def test_patterns_match_as_json_schema_says(pattern: str, text: str) -> None:
    """Where the dialects agree, a value matches exactly when Python's ``re.search`` says."""
    import re

    schema = {"type": "object", "properties": {"v": {"type": "string", "pattern": pattern}}}
    model = remote_arguments("t", schema).model
    try:
        model.model_validate_json(json.dumps({"v": text}))
        accepted = True
    except ValidationError:
        accepted = False
    assert accepted == (re.search(pattern, text) is not None)


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("^.$", "\r", False),  # ECMA's . stops at every line terminator
        ("^\\s$", "\u3000", True),  # ECMA's \s knows Unicode spaces
        ("^\\d$", "\u0663", False),  # ECMA's \d is ASCII
        ("^[^]$", "\n", True),  # [^] is any character
        ("^a$", "a\n", False),  # $ is the end of the text, never before a final newline
        ("^\\uD83D\\uDE00$", "\U0001f600", True),  # a surrogate pair is one character
        ("^x{,2}$", "x{,2}", True),  # a brace that is no count is literal
    ],
)
def test_ecma_262_readings_where_python_differs(pattern: str, text: str, matches: bool) -> None:
    """Schema patterns match as ECMA-262 reads them where Python's re would differ."""
    schema = {"type": "object", "properties": {"v": {"type": "string", "pattern": pattern}}}
    model = remote_arguments("t", schema).model
    try:
        model.model_validate_json(json.dumps({"v": text}))
        accepted = True
    except ValidationError:
        accepted = False
    assert accepted is matches


# -- issue 17 follow-up: one arguments machinery with callgate.definitions; formats -----------


def test_an_unknown_format_is_an_annotation_recorded_with_its_place() -> None:
    """A format callgate does not know does not refuse the remote tool: any string passes,
    and the format is listed in ``unchecked_formats``."""
    schema = {
        "type": "object",
        "properties": {
            "repo": {"type": "string", "format": "github-repo"},
            "meta": {"type": "object", "properties": {"k": {"format": "x-sku"}}},
        },
    }
    arguments = remote_arguments("t", schema)
    assert sorted(arguments.unchecked_formats) == [
        ("github-repo", "/properties/repo/format"),
        ("x-sku", "/properties/meta/properties/k/format"),
    ]
    arguments.model.model_validate_json('{"repo": "any text at all", "meta": {"k": "?"}}')


@pytest.mark.parametrize(
    ("prop", "bad", "good"),
    [
        ({"type": "string", "format": "date"}, "tomorrow", "2026-11-30"),
        ({"type": "string", "format": "email"}, "not an email", "a@b.org"),
        ({"type": "string", "format": "uuid"}, "1234", "6f1c2a8e-1b7d-4c2e-9f3a-0d5e6b7c8a9f"),
        ({"type": "object", "properties": {"at": {"format": "date-time"}}}, {"at": "x"}, {}),
    ],
    ids=["date", "email", "uuid", "nested-date-time"],
)
def test_a_format_callgate_checks_is_asserted_for_remote_tools(
    prop: dict[str, Any], bad: Any, good: Any
) -> None:
    """A known format is never loosened: a malformed value is refused before anything is sent."""
    model = remote_arguments("t", {"type": "object", "properties": {"v": prop}}).model
    model.model_validate_json(json.dumps({"v": good}))
    with pytest.raises(ValidationError, match="format"):
        model.model_validate_json(json.dumps({"v": bad}))


def test_an_unknown_format_beside_a_pattern_and_bounds_loosens_neither() -> None:
    """The pattern and length beside an unknown format still reject what they reject."""
    prop = {"type": "string", "format": "x-code", "pattern": "^[A-Z]+$", "maxLength": 4}
    model = remote_arguments("t", {"type": "object", "properties": {"c": prop}}).model
    model.model_validate_json('{"c": "ABC"}')
    for bad in ("abc", "ABCDE"):
        with pytest.raises(ValidationError):
            model.model_validate_json(json.dumps({"c": bad}))


def test_a_remote_server_cannot_redefine_a_format_callgate_checks() -> None:
    """Only unknown names become annotations: ``date`` beside ``x-`` formats stays asserted."""
    schema = {
        "type": "object",
        "properties": {
            "d": {"type": "string", "format": "date"},
            "x": {"type": "string", "format": "x-anything"},
        },
    }
    arguments = remote_arguments("t", schema)
    assert [name for name, _ in arguments.unchecked_formats] == ["x-anything"]
    with pytest.raises(ValidationError, match="format"):
        arguments.model.model_validate_json('{"d": "2026-02-30", "x": "y"}')


def test_unsupported_schema_is_the_definitions_error_too() -> None:
    """Code catching `UnenforceableSchema` (or ValueError, as before) catches a remote refusal."""
    from callgate.definitions import UnenforceableSchema

    with pytest.raises(UnenforceableSchema, match="type is 'array'"):
        remote_arguments("t", {"type": "array"})
    with pytest.raises(ValueError, match="type is 'array'"):
        remote_arguments("t", {"type": "array"})


DATED = {
    "type": "object",
    "properties": {
        "on": {"type": "string", "format": "date"},
        "ref": {"type": "string", "format": "x-ticket", "maxLength": 6},
    },
    "required": ["on"],
}


@settings(max_examples=300, deadline=None)
@given(
    on=st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\Z") | st.text("0123456789-T:", max_size=12),
    ref=st.text(max_size=8),
)
def test_whatever_the_model_accepts_passes_the_servers_schema_with_formats_asserted(
    on: str, ref: str
) -> None:
    """Accepted arguments pass jsonschema with its own format checker (dates asserted there too);
    the unknown format constrains nothing, the length beside it still does."""
    model = remote_arguments("t", DATED).model
    try:
        model.model_validate_json(json.dumps({"on": on, "ref": ref}))
    except ValidationError:
        accepted = False
    else:
        accepted = True
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    valid = jsonschema.Draft202012Validator(DATED, format_checker=checker).is_valid(
        {"on": on, "ref": ref}
    )
    assert accepted == valid

"""OpenAPI requests as real APIs write them, against a real service on 127.0.0.1.

Form-urlencoded bodies with Stripe's nested ``a[b]`` / ``a[0]`` style, ``deepObject``,
object and delimited query parameters, multipart with a file (and its size bound),
array path and header values, and the checks on keys the model chooses. The service
(`shop_recorder`) records the raw query string and body of every request, so each test
checks what really went over the wire.
"""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate import Authority, Gate, MemoryLedger, Registry, Status, ToolCall
from callgate.openapi import import_openapi
from callgate.openapi.encoding import form_pairs

from .shop_recorder import SEEN, call, pairs, recording, with_servers

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    """The recording service, one for the module."""
    with recording() as url:
        yield url


STRIPE_LIKE: dict[str, Any] = {
    "openapi": "3.0.0",
    "info": {"title": "payments", "version": "1"},
    "paths": {
        "/v1/customers": {
            "post": {
                "operationId": "PostCustomers",
                "requestBody": {
                    "required": False,
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "encoding": {
                                "address": {"explode": True, "style": "deepObject"},
                                "items": {"explode": True, "style": "deepObject"},
                                "metadata": {"explode": True, "style": "deepObject"},
                                "expand": {"explode": True, "style": "deepObject"},
                            },
                            "schema": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {
                                    "email": {"type": "string", "maxLength": 512},
                                    "balance": {"type": "integer"},
                                    "address": {
                                        "type": "object",
                                        "properties": {
                                            "city": {"type": "string"},
                                            "line1": {"type": "string"},
                                        },
                                    },
                                    "items": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "properties": {
                                                "price": {"type": "string"},
                                                "quantity": {"type": "integer"},
                                            },
                                        },
                                    },
                                    "metadata": {
                                        "anyOf": [
                                            {
                                                "type": "object",
                                                "additionalProperties": {"type": "string"},
                                            },
                                            {"type": "string", "enum": [""]},
                                        ]
                                    },
                                    "expand": {"type": "array", "items": {"type": "string"}},
                                    "tags": {"type": "array", "items": {"type": "string"}},
                                },
                            },
                        }
                    },
                },
            }
        },
        "/v1/charges": {
            "get": {
                "operationId": "GetCharges",
                "parameters": [
                    {
                        "name": "created",
                        "in": "query",
                        "style": "deepObject",
                        "explode": True,
                        "schema": {
                            "anyOf": [
                                {
                                    "type": "object",
                                    "properties": {
                                        "gte": {"type": "integer"},
                                        "lt": {"type": "integer"},
                                    },
                                },
                                {"type": "integer"},
                            ]
                        },
                    },
                    {
                        "name": "expand",
                        "in": "query",
                        "style": "deepObject",
                        "explode": True,
                        "schema": {"type": "array", "items": {"type": "string"}},
                    },
                    {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                ],
            }
        },
        "/v1/products": {
            "get": {
                "operationId": "GetProducts",
                "parameters": [
                    {
                        "name": "filter",
                        "in": "query",
                        "schema": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "color": {"type": "string"},
                                "size": {"type": "string"},
                            },
                        },
                    },
                    {
                        "name": "ids",
                        "in": "query",
                        "explode": False,
                        "schema": {"type": "array", "items": {"type": "string"}},
                    },
                    {
                        "name": "tags",
                        "in": "query",
                        "style": "pipeDelimited",
                        "explode": False,
                        "schema": {"type": "array", "items": {"type": "string"}},
                    },
                ],
            }
        },
    },
}


def test_a_form_body_sends_nested_objects_and_arrays_as_stripe_does(service: str) -> None:
    """``address[city]``, ``items[0][price]``, ``metadata[k]``, ``expand[0]``; scalars as they
    are; an array without an encoding entry repeats its key (OpenAPI's form, explode)."""
    api = import_openapi(STRIPE_LIKE, api="pay", base_url=service)
    assert "PostCustomers" in {t.name for t in api.tools}, api.skipped
    SEEN.clear()
    obs = call(
        api,
        "PostCustomers",
        {
            "email": "ana@example.com",
            "balance": -5,
            "address": {"city": "Paris", "line1": "1 rue & co"},
            "items": [{"price": "p_1", "quantity": 2}, {"price": "p_2", "quantity": 1}],
            "metadata": {"order": "o-9"},
            "expand": ["customer"],
            "tags": ["a", "b"],
        },
    )
    assert obs.status is Status.OK, obs.content
    (seen,) = SEEN
    assert seen["content_type"] == "application/x-www-form-urlencoded"
    assert pairs(seen["body"]) == [
        ("email", "ana@example.com"),
        ("balance", "-5"),
        ("address[city]", "Paris"),
        ("address[line1]", "1 rue & co"),
        ("items[0][price]", "p_1"),
        ("items[0][quantity]", "2"),
        ("items[1][price]", "p_2"),
        ("items[1][quantity]", "1"),
        ("metadata[order]", "o-9"),
        ("expand[0]", "customer"),
        ("tags", "a"),
        ("tags", "b"),
    ]


def test_an_empty_string_unsets_a_form_field(service: str) -> None:
    """Stripe unsets metadata with ``metadata=``: the value the schema allows is sent as is."""
    api = import_openapi(STRIPE_LIKE, api="pay", base_url=service)
    SEEN.clear()
    obs = call(api, "PostCustomers", {"metadata": ""})
    assert obs.status is Status.OK, obs.content
    assert pairs(SEEN[0]["body"]) == [("metadata", "")]


def test_a_form_key_with_brackets_is_rejected_before_any_request(service: str) -> None:
    """A key ``a][b`` would forge another nested field (``metadata[a][b]``): refused at the
    semantic stage, nothing is sent."""
    api = import_openapi(STRIPE_LIKE, api="pay", base_url=service)
    SEEN.clear()
    obs = call(api, "PostCustomers", {"metadata": {"a][admin": "1"}})
    assert obs.status is Status.REJECTED
    assert obs.stage == "validate"
    assert SEEN == []


def test_deep_object_query_parameters_are_sent_with_brackets(service: str) -> None:
    """``created[gte]=…``, ``expand[0]=…``; the anyOf's integer form is sent plain."""
    api = import_openapi(STRIPE_LIKE, api="pay", base_url=service)
    SEEN.clear()
    obs = call(api, "GetCharges", {"created": {"gte": 10, "lt": 20}, "expand": ["data.customer"]})
    assert obs.status is Status.OK, obs.content
    assert pairs(SEEN[0]["query"]) == [
        ("created[gte]", "10"),
        ("created[lt]", "20"),
        ("expand[0]", "data.customer"),
    ]
    obs = call(api, "GetCharges", {"created": 5, "limit": 3})
    assert obs.status is Status.OK, obs.content
    assert pairs(SEEN[1]["query"]) == [("created", "5"), ("limit", "3")]


def test_object_and_delimited_query_parameters_follow_their_style(service: str) -> None:
    """An object (form, explode) is one key per property; ``explode: false`` joins with
    commas, ``pipeDelimited`` with ``|``."""
    api = import_openapi(STRIPE_LIKE, api="pay", base_url=service)
    SEEN.clear()
    obs = call(
        api,
        "GetProducts",
        {"filter": {"color": "red", "size": "m"}, "ids": ["1", "2"], "tags": ["x", "y"]},
    )
    assert obs.status is Status.OK, obs.content
    assert pairs(SEEN[0]["query"]) == [
        ("color", "red"),
        ("size", "m"),
        ("ids", "1,2"),
        ("tags", "x|y"),
    ]


_KEYS = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="[]"), min_size=1, max_size=8
)
_LEAVES = st.one_of(st.text(max_size=8), st.integers(-1000, 1000), st.booleans())


def _unbracket(pairs: list[tuple[str, str]]) -> Any:
    """Rebuild a nested value from ``a[b][0]=v`` pairs (the service side, written here)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        head, _, rest = key.partition("[")
        parts = [head, *(rest[:-1].split("][") if rest else [])]
        node: Any = out
        for part, following in zip(parts, [*parts[1:], None], strict=True):
            if following is None:
                node[part] = value
            else:
                node = node.setdefault(part, {})
    return out


def _textual(value: Any) -> Any:
    """A value as the form carries it: lists become index-keyed objects, leaves text."""
    if isinstance(value, dict):
        return {k: _textual(v) for k, v in value.items()}
    if isinstance(value, list):
        return {str(i): _textual(v) for i, v in enumerate(value)}
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    metadata=st.dictionaries(_KEYS, st.text(max_size=10), max_size=4),
    items=st.lists(st.fixed_dictionaries({"price": st.text(max_size=6)}), max_size=3),
)
def test_any_nested_form_value_round_trips_through_the_bracket_encoding(
    metadata: dict[str, str], items: list[dict[str, str]]
) -> None:
    """Whatever keys and values the model sends (no brackets in keys), the service rebuilds
    exactly the same nested value from the body."""

    api = import_openapi(STRIPE_LIKE, api="pay", base_url="http://127.0.0.1:9")
    (op,) = [o for o in api.operations if o.tool == "PostCustomers"]
    values = {"metadata": metadata, "items": items}
    body = urllib.parse.urlencode(form_pairs(op, values))
    rebuilt = _unbracket(pairs(body))
    expected = {k: _textual(v) for k, v in values.items() if v}
    assert rebuilt == expected


UPLOAD: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "files", "version": "1"},
    "paths": {
        "/files": {
            "post": {
                "operationId": "uploadFile",
                "requestBody": {
                    "required": True,
                    "content": {
                        "multipart/form-data": {
                            "schema": {
                                "type": "object",
                                "required": ["file", "purpose"],
                                "properties": {
                                    "file": {"type": "string", "format": "binary"},
                                    "purpose": {"type": "string", "enum": ["fine-tune", "batch"]},
                                    "labels": {"type": "object"},
                                },
                            }
                        }
                    },
                },
            }
        }
    },
}


def test_a_multipart_upload_sends_the_file_bytes_and_the_other_fields(service: str) -> None:
    """The file argument is base64 text; the service receives the decoded bytes as a file
    part, and the other fields as text parts (an object as JSON)."""
    api = import_openapi(UPLOAD, api="files", base_url=service)
    assert [t.name for t in api.tools] == ["uploadFile"], api.skipped
    data = bytes(range(256)) * 3
    SEEN.clear()
    obs = call(
        api,
        "uploadFile",
        {
            "file": base64.b64encode(data).decode(),
            "purpose": "batch",
            "labels": {"team": "x"},
        },
    )
    assert obs.status is Status.OK, obs.content
    (seen,) = SEEN
    assert seen["content_type"].startswith("multipart/form-data; boundary=")
    assert seen["parts"]["file"] == [{"filename": "file", "data": data}]
    assert seen["parts"]["purpose"] == ["batch"]
    assert seen["parts"]["labels"] == ['{"team":"x"}']


def test_a_file_over_the_bound_is_rejected_and_nothing_is_sent(service: str) -> None:
    """``max_file_bytes`` bounds each file: one byte over is a schema rejection."""
    api = import_openapi(UPLOAD, api="files", base_url=service, max_file_bytes=300)
    SEEN.clear()
    fits = call(
        api, "uploadFile", {"file": base64.b64encode(b"x" * 300).decode(), "purpose": "batch"}
    )
    assert fits.status is Status.OK, fits.content
    over = call(
        api, "uploadFile", {"file": base64.b64encode(b"x" * 301).decode(), "purpose": "batch"}
    )
    assert over.status is Status.REJECTED
    assert over.stage == "validate"
    assert len(SEEN) == 1


def test_a_file_that_is_not_base64_is_rejected(service: str) -> None:
    """Text that does not decode as base64 is refused before any request."""
    api = import_openapi(UPLOAD, api="files", base_url=service)
    assert [t.name for t in api.tools] == ["uploadFile"], api.skipped
    SEEN.clear()
    obs = call(api, "uploadFile", {"file": "not base64!", "purpose": "batch"})
    assert obs.status is Status.REJECTED
    assert obs.stage == "validate"
    assert SEEN == []


ARRAYS: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "arrays", "version": "1"},
    "paths": {
        "/items/{ids}": {
            "get": {
                "operationId": "getItems",
                "parameters": [
                    {
                        "name": "ids",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "array", "items": {"type": "string"}},
                    },
                    {
                        "name": "X-Tags",
                        "in": "header",
                        "schema": {"type": "array", "items": {"type": "string"}},
                    },
                ],
            }
        }
    },
}


def test_array_path_and_header_values_are_written_simple_style(service: str) -> None:
    """A path array is ``a,b`` with each part percent-encoded (``/`` too); a header array
    is ``a,b``."""
    api = import_openapi(ARRAYS, api="arr", base_url=service)
    SEEN.clear()
    obs = call(api, "getItems", {"ids": ["a/1", "b"], "X-Tags": ["x", "y"]})
    assert obs.status is Status.OK, obs.content
    assert SEEN[0]["path"] == "/items/a/1,b"  # the service decodes %2F; the raw path kept it


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"ids": [".."]}, "ids"),
        ({"ids": []}, "ids"),
        ({"ids": ["a"], "X-Tags": ["ok", "x\r\nX-Admin: yes"]}, "X-Tags"),
    ],
)
def test_an_array_cannot_smuggle_a_dot_segment_or_a_header(
    service: str, arguments: dict[str, Any], field: str
) -> None:
    """Checked as written: a path array ``[".."]`` is the segment ``..``, an empty one is
    empty; a line break inside a header array would add a header. Refused at the semantic
    stage, nothing sent."""
    api = import_openapi(ARRAYS, api="arr", base_url=service)
    SEEN.clear()
    obs = call(api, "getItems", arguments)
    assert obs.status is Status.REJECTED, obs.content
    assert obs.stage == "validate"
    assert field in obs.content
    assert SEEN == []


SPREAD: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "spread", "version": "1"},
    "components": {"securitySchemes": {"key": {"type": "apiKey", "in": "query", "name": "key"}}},
    "security": [{"key": []}],
    "paths": {
        "/search": {
            "get": {
                "operationId": "search",
                "parameters": [
                    {
                        "name": "filter",
                        "in": "query",
                        "schema": {"type": "object", "additionalProperties": {"type": "string"}},
                    },
                    {"name": "limit", "in": "query", "schema": {"type": "string"}},
                ],
            }
        }
    },
}


@pytest.mark.parametrize("key", ["key", "limit"])
def test_a_spread_object_cannot_write_the_credential_or_another_parameter(
    service: str, key: str
) -> None:
    """``filter`` (form, explode) sends each of its keys as a query parameter of its own:
    a key ``key`` would add a second API key beside the configured one (the service may
    take the model's), ``limit`` a second limit. Refused at the validate stage; nothing is
    sent. A key of its own is sent as it is, with the configured credential."""
    api = import_openapi(SPREAD, api="s", base_url=service, credentials={"key": "api_key"})
    run = Gate(api.register(Registry()), ledger=MemoryLedger()).run(
        authority=Authority(
            principal="ana", grants=["read:*", "network:*"], context={"api_key": "k-secret"}
        )
    )
    SEEN.clear()
    (bad,) = run.submit([ToolCall(id="c1", name="search", arguments={"filter": {key: "x"}})])
    assert bad.status is Status.REJECTED, bad.content
    assert bad.stage == "validate"
    assert SEEN == []
    (good,) = run.submit([ToolCall(id="c2", name="search", arguments={"filter": {"q": "x"}})])
    assert good.status is Status.OK, good.content
    assert pairs(SEEN[0]["query"]) == [("q", "x"), ("key", "k-secret")]


def test_openapi_registry_formats_are_checked_not_refused(service: str) -> None:
    """Stripe's ``decimal`` and ``unix-time`` import (they were refused as unknown formats)
    and constrain: ``"12.50"`` and ``1700000000`` pass, ``"twelve"`` does not."""
    document = with_servers(None)
    document["paths"]["/price"] = {
        "post": {
            "operationId": "setPrice",
            "parameters": [
                {
                    "name": "amount",
                    "in": "query",
                    "schema": {"type": "string", "format": "decimal"},
                },
                {"name": "at", "in": "query", "schema": {"type": "integer", "format": "unix-time"}},
            ],
        }
    }
    api = import_openapi(document, api="p", base_url=service)
    assert "setPrice" in {t.name for t in api.tools}, api.skipped
    assert call(api, "setPrice", {"amount": "12.50", "at": 1700000000}).status is Status.OK
    bad = call(api, "setPrice", {"amount": "twelve"})
    assert bad.status is Status.REJECTED
    assert bad.stage == "validate"

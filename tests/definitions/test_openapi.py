"""OpenAPI import (`callgate.openapi`) against a real shop service on 127.0.0.1.

The spec (tests/definitions/shop/openapi.yaml) has a bearer scheme, a public
paginated listing with an enum, a nested body with a read-only id, a header
parameter, a path/body name collision, a multipart upload, and endpoints
that fail: each test drives calls through a real `Gate` and checks what the
service received.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from callgate import Authority, DefinitionError, Gate, MemoryLedger, Registry, Status, ToolCall
from callgate.openapi import OpenAPIImport, OperationConfig, import_openapi, load_document

from .shop_app import PARTNER_KEY, SPEC, TOKEN, Shop, serve

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def shop() -> Iterator[tuple[Shop, str]]:
    """One shop service for the module (its state is reset by each test that needs it)."""
    state = Shop()
    with serve(state) as url:
        yield state, url


def _import(url: str, **options: Any) -> OpenAPIImport:
    return import_openapi(
        SPEC,
        api="shop",
        base_url=url + "/api",
        credentials={"bearerAuth": "shop_token", "partnerKey": "partner_key"},
        **options,
    )


def _run(api: OpenAPIImport, grants: list[str] | None = None, token: str = TOKEN) -> Any:
    registry = api.register(Registry())
    gate = Gate(registry, ledger=MemoryLedger())
    context = {"shop_token": token, "partner_key": PARTNER_KEY} if token else {}
    return gate.run(
        authority=Authority(
            principal="ana", grants=grants or ["read:*", "write:*", "network:*"], context=context
        )
    )


def _call(run: Any, tool: str, arguments: dict[str, Any], call_id: str = "c1") -> Any:
    (obs,) = run.submit([ToolCall(id=call_id, name=tool, arguments=arguments)])
    return obs


def test_each_operation_becomes_a_tool_with_effects_from_its_method(shop: tuple[Shop, str]) -> None:
    """GET → read:shop:<path>, others → write:shop:<path>, network:<host> always."""
    _, url = shop
    api = _import(url)
    tools = {t.name: t for t in api.tools}
    host = "127.0.0.1"  # the host alone, as the sandbox names it (no port)
    assert [e.text for e in tools["listProducts"].effects] == [
        "read:shop:/products",
        f"network:{host}",
    ]
    assert next(e.text for e in tools["cancelOrder"].effects) == "write:shop:/orders/{{order_id}}"
    assert tools["listProducts"].risk.value == "read"
    assert tools["createOrder"].risk.value == "write"
    assert api.grants()[:2] == ["read:shop:/products", f"network:{host}"]


def test_arguments_merge_parameters_and_body_without_credentials(shop: tuple[Shop, str]) -> None:
    """Header parameter and body properties are arguments; credentials, the idempotency key
    and the read-only id are not."""
    _, url = shop
    schema = {t.name: t for t in _import(url).tools}["createOrder"].input_schema
    assert set(schema["properties"]) == {"X-Customer-Ref", "customer", "lines", "shipping", "note"}
    assert schema["required"] == ["customer", "lines"]
    assert schema["$defs"]["Customer"]["properties"]["email"]["format"] == "email"


def test_a_name_collision_is_resolved_visibly(shop: tuple[Shop, str]) -> None:
    """The body's ``order_id`` beside the path's becomes ``body_order_id``, and it is reported."""
    _, url = shop
    api = _import(url)
    (op,) = [o for o in api.operations if o.tool == "refundOrder"]
    assert "body_order_id" in {a.name for a in op.arguments}
    assert any("'body_order_id'" in note for note in op.renamed)


def test_an_operation_that_cannot_be_sent_faithfully_is_skipped_with_the_reason(
    shop: tuple[Shop, str],
) -> None:
    """An XML body is not imported; the report says why and where (a JSON pointer). A
    multipart upload is imported, its file a base64 argument."""
    _, url = shop
    api = _import(url)
    assert "replaceSheet" not in {t.name for t in api.tools}
    reason = api.skipped["PUT /products/{product_id}/sheet"]
    assert "application/xml" in reason
    assert "#/paths/~1products~1{product_id}~1sheet/put/requestBody/content" in reason
    upload = {t.name: t for t in api.tools}["uploadImage"]
    assert upload.input_schema["properties"]["file"]["contentEncoding"] == "base64"


def test_a_paginated_read_goes_through_the_gate(shop: tuple[Shop, str]) -> None:
    """Query parameters are sent; the answer is the decoded JSON body."""
    state, url = shop
    run = _run(_import(url))
    first = _call(run, "listProducts", {"category": "books", "limit": 5})
    assert first.status is Status.OK, first.content
    assert len(first.result["items"]) == 5
    second = _call(run, "listProducts", {"category": "books", "cursor": "5"}, "c2")
    assert [p["id"] for p in second.result["items"]] == ["p-6", "p-7"]
    assert state.requests[-1]["query"] == [("cursor", "5"), ("category", "books")]


def test_a_value_outside_the_enum_is_rejected_before_any_request(shop: tuple[Shop, str]) -> None:
    """``category: "toys"`` is refused at the validate stage; the service hears nothing."""
    state, url = shop
    run = _run(_import(url))
    before = len(state.requests)
    obs = _call(run, "listProducts", {"category": "toys"})
    assert obs.status is Status.REJECTED
    assert obs.stage.value == "validate"
    assert len(state.requests) == before


def test_a_nested_body_is_sent_with_the_bearer_token_from_the_context(
    shop: tuple[Shop, str],
) -> None:
    """The token comes from Authority.context; the body is the arguments' JSON."""
    state, url = shop
    run = _run(_import(url))
    order = {
        "customer": {"email": "ana@example.org", "name": "Ana"},
        "lines": [{"product_id": "p-1", "quantity": 2}],
        "X-Customer-Ref": "PO-77",
    }
    obs = _call(run, "createOrder", order)
    assert obs.status is Status.OK, obs.content
    sent = state.requests[-1]
    assert sent["headers"]["authorization"] == f"Bearer {TOKEN}"
    assert sent["headers"]["x-customer-ref"] == "PO-77"
    assert json.loads(sent["body"]) == {k: v for k, v in order.items() if k != "X-Customer-Ref"}
    assert TOKEN not in obs.content


@pytest.mark.parametrize(
    "bad",
    [
        {
            "customer": {"email": "not-an-email", "name": "Ana"},
            "lines": [{"product_id": "p-1", "quantity": 1}],
        },
        {"customer": {"email": "a@b.org", "name": "Ana"}, "lines": []},
        {
            "customer": {"email": "a@b.org", "name": "Ana"},
            "lines": [{"product_id": "p-1", "quantity": 11}],
        },
        {
            "customer": {"email": "a@b.org", "name": "Ana", "vip": True},
            "lines": [{"product_id": "p-1", "quantity": 1}],
        },
        {
            "customer": {"email": "a@b.org", "name": "Ana"},
            "lines": [{"product_id": "p-1", "quantity": 1}],
            "id": "o-9",
        },
        {
            "customer": {"email": "a@b.org", "name": "Ana"},
            "lines": [{"product_id": "p-1", "quantity": 1}],
            "Authorization": "Bearer x",
        },
    ],
)
def test_a_body_the_schema_refuses_never_reaches_the_service(
    shop: tuple[Shop, str], bad: dict[str, Any]
) -> None:
    """Format, minItems, maximum, closed nested object, read-only id, a credential argument."""
    state, url = shop
    run = _run(_import(url))
    before = len(state.requests)
    obs = _call(run, "createOrder", bad)
    assert obs.status is Status.REJECTED, obs.content
    assert len(state.requests) == before


def test_without_the_configured_secret_nothing_is_sent(shop: tuple[Shop, str]) -> None:
    """No token in the trusted context: an error naming the missing key, no request."""
    state, url = shop
    run = _run(_import(url), token="")
    before = len(state.requests)
    obs = _call(run, "getOrder", {"order_id": "o-1"})
    assert obs.status is Status.ERROR
    assert "shop_token" in obs.content
    assert len(state.requests) == before


def test_a_refusal_by_the_service_is_an_error(shop: tuple[Shop, str]) -> None:
    """4xx → error: a wrong token (401), an unknown product (404), a shipped order (409)."""
    state, url = shop
    state.orders["o-77"] = {"id": "o-77", "state": "shipped"}
    api = _import(url)
    assert (
        _call(_run(api, token="wrong"), "getProduct", {"product_id": "p-1"}).status is Status.ERROR
    )
    run = _run(api)
    missing = _call(run, "getProduct", {"product_id": "p-999"})
    assert missing.status is Status.ERROR
    assert "404" in missing.content
    assert not missing.retryable
    shipped = _call(run, "cancelOrder", {"order_id": "o-77"}, "c2")
    assert shipped.status is Status.ERROR
    assert "409" in shipped.content
    assert shipped.retryable  # a conflict may clear (408, 409, 425, 429 are retryable)


def test_a_server_failure_is_an_error_on_a_read_and_unknown_after_a_write(
    shop: tuple[Shop, str],
) -> None:
    """5xx on GET → error (retryable); 5xx on POST → unknown: it may have been committed."""
    state, url = shop
    run = _run(_import(url))
    read = _call(run, "dailyReport", {})
    assert read.status is Status.ERROR
    assert read.retryable
    state.recount_fails = True
    try:
        write = _call(run, "recountStock", {}, "c2")
    finally:
        state.recount_fails = False
    assert write.status is Status.UNKNOWN
    assert "may or may not" in write.content


def test_a_write_answered_too_late_is_unknown(shop: tuple[Shop, str]) -> None:
    """The request was sent and the time ran out: unknown, never retried blindly."""
    state, url = shop
    state.slow_seconds = 2.0
    run = _run(_import(url, timeout=0.3))
    before = len(state.requests)
    obs = _call(run, "recountStock", {})
    assert obs.status is Status.UNKNOWN, obs.content
    assert len(state.requests) == before + 1


def test_an_answer_over_the_size_bound_is_cut_and_says_so(shop: tuple[Shop, str]) -> None:
    """A response over ``max_response_bytes`` is not read past the bound."""
    _, url = shop
    run = _run(_import(url, max_response_bytes=2_000))
    obs = _call(run, "exportCatalogue", {})
    assert obs.status is Status.OK
    assert "over 2,000 bytes" in obs.result["truncated"]
    assert len(obs.result["text"]) <= 2_000


def test_a_path_value_cannot_leave_its_segment(shop: tuple[Shop, str]) -> None:
    """``..`` is refused at the validate stage; a ``/`` in a value is escaped, not a new segment."""
    state, url = shop
    run = _run(_import(url))
    dots = _call(run, "refundOrder", {"order_id": "..", "amount": 5})
    assert dots.status is Status.REJECTED
    assert dots.stage.value == "validate"
    _call(run, "refundOrder", {"order_id": "o-1/../../admin", "amount": 5}, "c2")
    assert state.requests[-1]["raw_path"] == "/api/orders/o-1%2F..%2F..%2Fadmin/refunds"


def test_the_openapi_3_0_dialect_reads_exclusive_minimum_and_nullable(
    shop: tuple[Shop, str],
) -> None:
    """``amount`` must be above 0 (boolean exclusiveMinimum); ``reason`` may be null."""
    _, url = shop
    run = _run(_import(url))
    assert _call(run, "refundOrder", {"order_id": "o-1", "amount": 0}).status is Status.REJECTED
    obs = _call(run, "refundOrder", {"order_id": "o-1", "amount": 1, "reason": None}, "c2")
    assert obs.status is Status.OK, obs.content


def test_writes_need_their_own_grant(shop: tuple[Shop, str]) -> None:
    """A run granted reads of the shop cannot place an order."""
    _, url = shop
    host = "127.0.0.1"  # the host alone, as the sandbox names it (no port)
    run = _run(_import(url), grants=["read:shop:*", f"network:{host}"])
    assert _call(run, "getProduct", {"product_id": "p-1"}).status is Status.OK
    order = {
        "customer": {"email": "a@b.org", "name": "A"},
        "lines": [{"product_id": "p-1", "quantity": 1}],
    }
    denied = _call(run, "createOrder", order, "c2")
    assert denied.status is Status.REJECTED
    assert denied.stage.value == "authorize"


def test_per_operation_configuration_overrides_effects_and_leaves_out(
    shop: tuple[Shop, str],
) -> None:
    """``operations_config`` sets effects and risk, or leaves an operation out."""
    _, url = shop
    api = _import(
        url,
        operations_config={
            "cancelOrder": OperationConfig(
                effects=("write:shop:orders:{order_id}",), risk="write_idempotent"
            ),
            "GET /reports/daily": OperationConfig(include=False),
        },
    )
    tools = {t.name: t for t in api.tools}
    assert "dailyReport" not in tools
    cancel = tools["cancelOrder"]
    assert cancel.effects[0].text == "write:shop:orders:{order_id}"
    assert cancel.required_effects({"order_id": "o-5"})[0].name == "write:shop:orders:o-5"
    assert cancel.risk.value == "write_idempotent"


def test_the_document_can_be_read_from_a_url(shop: tuple[Shop, str]) -> None:
    """An http URL the user gives is fetched with a timeout and a size bound."""
    _, url = shop
    document = load_document(url + "/openapi.yaml")
    assert document["info"]["title"] == "Corner Shop"


def test_a_security_scheme_without_a_configured_key_is_a_definition_error() -> None:
    """Forgetting ``credentials=`` fails at import, naming the scheme and the fix."""
    with pytest.raises(DefinitionError, match="bearerAuth"):
        import_openapi(SPEC, api="shop", base_url="http://127.0.0.1:9/api")


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ({"swagger": "2.0", "paths": {}}, "Swagger 2.0"),
        ({"openapi": "4.0.0", "paths": {}}, "4.0.0"),
        ({"openapi": "3.1.0", "paths": []}, "'paths'"),
    ],
)
def test_a_document_that_is_not_openapi_3_is_refused(document: dict[str, Any], words: str) -> None:
    """Only OpenAPI 3.0 and 3.1 are read; the message says what was found."""
    with pytest.raises(DefinitionError, match=words):
        load_document(document)


def test_a_3_1_document_is_read_as_json_schema_2020_12() -> None:
    """OpenAPI 3.1 schemas are 2020-12: ``type: [string, "null"]`` and numeric exclusive bounds."""
    document = {
        "openapi": "3.1.0",
        "paths": {
            "/notes": {
                "post": {
                    "operationId": "addNote",
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "text": {"type": ["string", "null"]},
                                        "stars": {"type": "integer", "exclusiveMinimum": 0},
                                    },
                                }
                            }
                        }
                    },
                }
            }
        },
    }
    api = import_openapi(document, api="notes", base_url="http://127.0.0.1:9")
    (tool,) = api.tools
    assert tool.input_schema["properties"]["stars"] == {"type": "integer", "exclusiveMinimum": 0}
    assert api.operations[0].dialect == "2020-12"


def test_an_api_key_goes_where_its_scheme_says(shop: tuple[Shop, str]) -> None:
    """An apiKey scheme in the query is sent as that query parameter, from the context."""
    state, url = shop
    run = _run(_import(url))
    obs = _call(run, "partnerStock", {})
    assert obs.status is Status.OK, obs.content
    assert ("key", PARTNER_KEY) in state.requests[-1]["query"]
    assert "authorization" not in state.requests[-1]["headers"]


def test_a_redirect_is_not_followed(shop: tuple[Shop, str]) -> None:
    """A 3xx answer is an error: following it could leave network:<host>."""
    state, url = shop
    run = _run(_import(url))
    before = len(state.requests)
    obs = _call(run, "oldCatalogue", {})
    assert obs.status is Status.ERROR
    assert "redirect" in obs.content
    assert len(state.requests) == before + 1


def test_operations_callgate_cannot_send_faithfully_are_listed_not_loosened() -> None:
    """Another document's schema, a matrix path parameter, an XML-described parameter,
    an unknown format; each reason ends with the obstacle's JSON pointer."""

    def op(**parts: Any) -> dict[str, Any]:
        return {"get": {"operationId": parts.pop("name"), **parts}}

    document = {
        "openapi": "3.0.3",
        "paths": {
            "/a": op(
                name="remoteRef",
                parameters=[
                    {"name": "q", "in": "query", "schema": {"$ref": "https://x.example/q.json"}}
                ],
            ),
            "/b/{f}": op(
                name="matrixParam",
                parameters=[
                    {
                        "name": "f",
                        "in": "path",
                        "required": True,
                        "style": "matrix",
                        "schema": {"type": "string"},
                    }
                ],
            ),
            "/c": op(
                name="xmlParam",
                parameters=[
                    {
                        "name": "f",
                        "in": "query",
                        "content": {"application/xml": {"schema": {"type": "string"}}},
                    }
                ],
            ),
            "/d": op(
                name="phone",
                parameters=[
                    {"name": "p", "in": "query", "schema": {"type": "string", "format": "phone"}}
                ],
            ),
            "/e": op(
                name="fine", parameters=[{"name": "p", "in": "query", "schema": {"type": "string"}}]
            ),
        },
    }
    api = import_openapi(document, api="x", base_url="http://127.0.0.1:9")
    assert [t.name for t in api.tools] == ["fine"]
    assert "another document" in api.skipped["GET /a"]
    assert "#/paths/~1a/get/parameters/0" in api.skipped["GET /a"]
    assert "style 'matrix'" in api.skipped["GET /b/{f}"]
    assert "(at #/paths/~1b~1{f}/get/parameters/0)" in api.skipped["GET /b/{f}"]
    assert "application/xml" in api.skipped["GET /c"]
    assert "'phone'" in api.skipped["GET /d"]
    assert "#/paths/~1d/get" in api.skipped["GET /d"]


@pytest.mark.parametrize("value", ["k-1\r\nX-Admin: yes", "clé"])
def test_a_header_value_cannot_smuggle_a_header(shop: tuple[Shop, str], value: str) -> None:
    """A line break or non-ASCII in a header argument is refused before anything is sent."""
    state, url = shop
    run = _run(_import(url))
    before = len(state.requests)
    order = {
        "customer": {"email": "a@b.org", "name": "A"},
        "lines": [{"product_id": "p-1", "quantity": 1}],
        "X-Customer-Ref": value,
    }
    obs = _call(run, "createOrder", order)
    assert obs.status is Status.REJECTED
    assert obs.stage.value == "validate"
    assert len(state.requests) == before


def test_the_idempotency_key_header_carries_the_gates_key(shop: tuple[Shop, str]) -> None:
    """A declared Idempotency-Key is not the model's to choose: each call sends its own key,
    the one the ledger holds for it."""
    state, url = shop
    registry = _import(url).register(Registry())
    ledger = MemoryLedger()
    run = Gate(registry, ledger=ledger).run(
        authority=Authority(
            principal="ana", grants=["write:*", "network:*"], context={"shop_token": TOKEN}
        )
    )
    order = {
        "customer": {"email": "a@b.org", "name": "A"},
        "lines": [{"product_id": "p-1", "quantity": 1}],
    }
    _call(run, "createOrder", order, "c1")
    first = state.requests[-1]["headers"]["idempotency-key"]
    _call(run, "createOrder", order, "c2")
    second = state.requests[-1]["headers"]["idempotency-key"]
    keys = {r.call_id: r.idempotency_key for r in ledger.calls(run_id=run.id)}
    assert first == keys["c1"]
    assert second == keys["c2"]
    assert first != second


def test_the_document_url_is_not_followed_through_a_redirect(shop: tuple[Shop, str]) -> None:
    """A document URL that redirects is refused, naming the status."""
    _, url = shop
    with pytest.raises(DefinitionError, match="HTTP 302"):
        load_document(url + "/api/moved")


@pytest.mark.parametrize(
    ("scheme", "secret", "header"),
    [
        ({"type": "oauth2", "flows": {}}, "tok-oauth", "Bearer tok-oauth"),
        ({"type": "openIdConnect", "openIdConnectUrl": "https://id.example"}, "t", "Bearer t"),
        ({"type": "http", "scheme": "basic"}, "ana:pw", "Basic YW5hOnB3"),
    ],
)
def test_oauth_openid_and_basic_credentials_are_sent_as_their_schemes_say(
    shop: tuple[Shop, str], scheme: dict[str, Any], secret: str, header: str
) -> None:
    """OAuth 2 and OpenID Connect tokens go as bearer; basic as base64 of user:password."""
    state, url = shop
    document = {
        "openapi": "3.1.0",
        "components": {"securitySchemes": {"auth": scheme}},
        "security": [{"auth": []}],
        "paths": {"/catalogue/export": {"get": {"operationId": "export"}}},
    }
    api = import_openapi(
        document, api="shop", base_url=url + "/api", credentials={"auth": "secret"}
    )
    gate = Gate(Registry(api.tools), ledger=MemoryLedger())
    run = gate.run(
        authority=Authority(
            principal="ana", grants=["read:*", "network:*"], context={"secret": secret}
        )
    )
    assert _call(run, "export", {}).status is Status.OK
    assert state.requests[-1]["headers"]["authorization"] == header


def test_documented_error_answers_are_in_the_description(shop: tuple[Shop, str]) -> None:
    """A model reading cancelOrder learns how it fails: the 4xx answers the spec documents."""
    _, url = shop
    tools = {t.name: t for t in _import(url).tools}
    assert tools["cancelOrder"].description.endswith("Fails with: 409 Already shipped.")
    assert "Fails with" not in tools["listProducts"].description

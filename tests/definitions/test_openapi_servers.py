"""Where OpenAPI requests go, against a real service on 127.0.0.1: server variables
(defaults, overrides, enums), documents without ``servers`` (``base_url`` required),
relative server URLs, the ``network:<host>`` effect (the host alone), and operations
left out with the JSON pointer of the obstacle.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from callgate import Authority, DefinitionError, Gate, MemoryLedger, Registry, Status, ToolCall
from callgate.openapi import import_openapi

from .shop_recorder import SEEN, call, recording, with_servers

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    """The recording service, one for the module."""
    with recording() as url:
        yield url


def test_server_variables_take_their_defaults_and_can_be_overridden(service: str) -> None:
    """``{scheme}://{host}:{port}/{version}``: defaults fill the URL; ``server_variables``
    replaces one; the request goes where the resolved URL says."""
    port = service.rsplit(":", 1)[1]
    servers = [
        {
            "url": "http://{host}:{port}/{version}",
            "variables": {
                "host": {"default": "127.0.0.1"},
                "port": {"default": port},
                "version": {"default": "v1", "enum": ["v1", "v2"]},
            },
        }
    ]
    api = import_openapi(with_servers(servers), api="v")
    assert api.base_url == f"http://127.0.0.1:{port}/v1"
    SEEN.clear()
    assert call(api, "ping", {}).status is Status.OK
    other = import_openapi(with_servers(servers), api="v", server_variables={"version": "v2"})
    assert call(other, "ping", {}).status is Status.OK
    assert [s["path"] for s in SEEN] == ["/v1/ping", "/v2/ping"]


def test_a_server_variable_outside_its_enum_or_unknown_is_a_definition_error() -> None:
    """An override must be one of the variable's values, and name a variable that exists."""
    servers = [
        {
            "url": "https://{region}.example.com",
            "variables": {"region": {"default": "eu", "enum": ["eu", "us"]}},
        }
    ]
    with pytest.raises(DefinitionError, match=r"'region'.*'eu', 'us'"):
        import_openapi(with_servers(servers), api="v", server_variables={"region": "mars"})
    with pytest.raises(DefinitionError, match="'zone'"):
        import_openapi(with_servers(servers), api="v", server_variables={"zone": "a"})


def test_a_document_without_servers_needs_a_base_url_and_says_so(service: str) -> None:
    """No ``servers``: the import names ``base_url``; given one, the tools work."""
    with pytest.raises(DefinitionError, match=r"no server.*base_url"):
        import_openapi(with_servers(None), api="v")
    api = import_openapi(with_servers(None), api="v", base_url=service)
    assert call(api, "ping", {}).status is Status.OK


def test_the_network_effect_names_the_host_without_the_port(service: str) -> None:
    """``network:<host>`` is the host alone, as the sandbox's ``network_connect`` grants it:
    a grant of ``network:127.0.0.1`` admits the call whatever the port."""
    api = import_openapi(with_servers(None), api="v", base_url=service)
    assert [e.text for e in api.tools[0].effects] == ["read:v:/ping", "network:127.0.0.1"]
    run = Gate(api.register(Registry()), ledger=MemoryLedger()).run(
        authority=Authority(principal="ana", grants=["read:v:*", "network:127.0.0.1"])
    )
    (obs,) = run.submit([ToolCall(id="c1", name="ping", arguments={})])
    assert obs.status is Status.OK, obs.content


def test_an_operation_left_out_is_listed_with_its_json_pointer() -> None:
    """The reason names where in the document the obstacle is, as a JSON pointer."""
    document = with_servers([{"url": "https://x.example"}])
    document["paths"]["/v1/things/{id}"] = {
        "post": {
            "parameters": [
                {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                {"name": "m", "in": "path", "style": "matrix", "schema": {"type": "string"}},
            ]
        }
    }
    api = import_openapi(document, api="v")
    (op,) = [o for o in api.operations if o.path == "/v1/things/{id}"]
    assert op.pointer == "#/paths/~1v1~1things~1{id}/post"
    reason = api.skipped["POST /v1/things/{id}"]
    assert "#/paths/~1v1~1things~1{id}/post/parameters/1" in reason
    assert "matrix" in reason


def test_a_relative_server_is_resolved_against_the_documents_url(
    service: str, tmp_path: Any
) -> None:
    """``servers: [{url: /v9}]`` read from ``http://host/docs/relative.json`` means
    ``http://host/v9``; read from a file, it names no host and ``base_url`` is required."""
    api = import_openapi(service + "/docs/relative.json", api="rel")
    assert api.base_url == service + "/v9"
    SEEN.clear()
    assert call(api, "ping", {}).status is Status.OK
    assert SEEN[0]["path"] == "/v9/ping"
    local = tmp_path / "relative.json"
    local.write_text(
        '{"openapi": "3.1.0", "info": {"title": "r", "version": "1"}, '
        '"servers": [{"url": "/v9"}], "paths": {}}'
    )
    with pytest.raises(DefinitionError, match=r"relative.*--base-url"):
        import_openapi(local, api="rel")

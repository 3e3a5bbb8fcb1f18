"""`GateServer` in process, with the SDK's own client: every call goes through the gate."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import mcp_app as app
import mcp_types
import pytest
from mcp import Client

from callgate import Gate, MemoryLedger, Policy, allow, ask
from callgate.ledger import CallState
from callgate.mcp import GateServer, credential_patterns
from callgate.providers.mcp import tool_definitions

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(20)]

API_KEY = "canary-upstream-key-7d1f0c"
GRANTS = ("read:*", "spend:USD<=100")
CONTEXT = {"tenant": "acme", "api_key": API_KEY}
MODES = ["legacy", "auto"]
"""'legacy': the initialize handshake over the SDK's memory streams; 'auto': the 2026 per-request
envelope through the SDK's in-process dispatcher."""


def make_server() -> GateServer:
    gate = Gate(
        app.registry,
        ledger=MemoryLedger(),
        policy=Policy([allow(effect="read:*"), ask("refund")]),
        secret_patterns=credential_patterns(CONTEXT),
    )
    return GateServer(gate, principal="alice", grants=GRANTS, context=CONTEXT)


@pytest.fixture(autouse=True)
def clean_calls() -> Iterator[None]:
    app.calls.clear()
    yield
    app.calls.clear()


def text(result: mcp_types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


@pytest.mark.parametrize("mode", MODES)
async def test_tools_are_listed_with_our_schemas_verbatim(mode: str) -> None:
    """tools/list serves each ToolSpec's name, description and input_schema unchanged."""
    server = make_server()
    async with Client(server.server, mode=mode) as client:
        listed = (await client.list_tools()).tools
    assert [t.name for t in listed] == app.registry.names()
    for tool, definition in zip(listed, tool_definitions(app.registry), strict=True):
        assert tool.input_schema == definition["inputSchema"]
        assert tool.description == definition["description"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_good_call_runs_through_the_gate_and_is_recorded(mode: str) -> None:
    """A valid, permitted call runs once and is recorded in the gate's ledger."""
    server = make_server()
    async with Client(server.server, mode=mode) as client:
        result = await client.call_tool("lookup_order", {"order_id": "o-1"})
    assert not result.is_error
    assert json.loads(text(result)) == {
        "order_id": "o-1",
        "tenant": app.seen("acme"),
        "status": "shipped",
    }
    assert result.meta is not None
    assert result.meta["callgate/status"] == "ok"
    assert app.calls == [("lookup_order", {"order_id": "o-1"})]
    [record] = server.gate.ledger.calls()
    assert (record.tool, record.state) == ("lookup_order", CallState.OK)
    # Recorded with its trusted scope (the tenant in the server's context).
    assert record.principal.startswith("alice [scope ")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"order_id": 7}, "field 'order_id'"),
        ({}, "missing required field 'order_id'"),
        ({"order_id": "o-1", "tenant": "other"}, "unexpected field 'tenant'"),
    ],
)
async def test_bad_arguments_are_an_error_result_with_the_gates_message(
    mode: str, arguments: dict[str, Any], expected: str
) -> None:
    """Wrong types, missing or extra fields: isError, the schema-stage message, nothing runs."""
    server = make_server()
    async with Client(server.server, mode=mode) as client:
        result = await client.call_tool("lookup_order", arguments)
    assert result.is_error
    assert text(result).startswith("Rejected at the validate stage:")
    assert expected in text(result)
    assert app.calls == []


async def test_an_effect_the_client_was_not_granted_is_denied() -> None:
    """A call needing an effect outside the grants is rejected at the authorize stage."""
    server = make_server()
    async with Client(server.server) as client:
        wipe = await client.call_tool("wipe_orders", {})
        big = await client.call_tool(
            "refund", {"order_id": "o-1", "amount": 500, "currency": "USD"}
        )
    for result, effect in ((wipe, "write:everything"), (big, "spend:USD=500")):
        assert result.is_error
        assert text(result).startswith("Rejected at the authorize stage:")
        assert f"needs the effect '{effect}'" in text(result)
    assert app.calls == []


async def test_an_unknown_tool_is_an_error_result() -> None:
    """A tool the registry does not have: isError with a 'did you mean'."""
    server = make_server()
    async with Client(server.server) as client:
        result = await client.call_tool("lookup_ordr", {"order_id": "o-1"})
    assert result.is_error
    assert "did you mean 'lookup_order'" in text(result)


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_that_needs_approval_is_pending_then_runs_once(mode: str) -> None:
    """pending names the request and how to resolve it; after approval the same call runs once."""
    server = make_server()
    refund = {"order_id": "o-1", "amount": 20, "currency": "USD"}
    async with Client(server.server, mode=mode) as client:
        pending = await client.call_tool("refund", refund)
        assert pending.is_error
        assert pending.meta is not None
        approval_id = pending.meta["callgate/approval_id"]
        assert f"callgate approvals approve {approval_id}" in text(pending)
        assert app.calls == []
        server.gate.approvals.approve(approval_id, by="bob")
        done = await client.call_tool("refund", refund)
        again = await client.call_tool("refund", refund)
    assert not done.is_error
    assert text(done) == "refunded 20.00 USD on o-1"
    assert again.is_error
    assert again.meta is not None
    assert again.meta["callgate/status"] == "pending"
    assert again.meta["callgate/approval_id"] != approval_id
    assert [name for name, _ in app.calls] == ["refund"]


async def test_an_approval_does_not_cover_changed_arguments() -> None:
    """Approved 20 USD; a call for 30 USD is pending again, not executed."""
    server = make_server()
    async with Client(server.server) as client:
        pending = await client.call_tool(
            "refund", {"order_id": "o-1", "amount": 20, "currency": "USD"}
        )
        assert pending.meta is not None
        server.gate.approvals.approve(pending.meta["callgate/approval_id"], by="bob")
        other = await client.call_tool(
            "refund", {"order_id": "o-1", "amount": 30, "currency": "USD"}
        )
    assert other.is_error
    assert other.meta is not None
    assert other.meta["callgate/status"] == "pending"
    assert app.calls == []


async def test_the_principal_and_tenant_come_from_the_server_not_the_arguments() -> None:
    """The handler sees the configured principal and the context's tenant; arguments cannot
    name another tenant."""
    server = make_server()
    async with Client(server.server) as client:
        me = await client.call_tool("whoami", {})
        spoof = await client.call_tool("whoami", {"tenant": "globex"})
    assert json.loads(text(me)) == {"principal": "alice", "tenant": app.seen("acme")}
    assert spoof.is_error
    assert "unexpected field 'tenant'" in text(spoof)


async def test_credentials_never_reach_schemas_results_or_the_audit() -> None:
    """A credential in the server's context is scrubbed from results, ledger and audit."""
    server = make_server()
    async with Client(server.server) as client:
        listed = await client.list_tools()
        result = await client.call_tool("export_orders", {})
    assert not result.is_error
    assert "[redacted]" in text(result)
    ledger = server.gate.ledger
    everything = [
        listed.model_dump_json(),
        result.model_dump_json(),
        repr(ledger.calls()),
        repr(ledger.audit()),
        *(repr(ledger.attempts(r.run_id, r.call_id)) for r in ledger.calls()),
    ]
    assert not [blob for blob in everything if API_KEY in blob]


async def test_each_principal_and_session_gets_its_own_run() -> None:
    """Runs are keyed by (principal, session): evidence never crosses principals."""
    from callgate.mcp import ClientIdentity

    server = make_server()
    a = server.run_for(ClientIdentity(principal="alice", session="s1"))
    assert server.run_for(ClientIdentity(principal="alice", session="s1")) is a
    assert server.run_for(ClientIdentity(principal="alice", session="s2")) is not a
    b = server.run_for(ClientIdentity(principal="bob", session="s1"))
    assert b is not a
    assert b.authority.principal == "bob"

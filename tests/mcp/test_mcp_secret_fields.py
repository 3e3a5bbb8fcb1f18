"""Secret arguments of imported MCP tools never reach the ledger in clear, whatever their name."""

from __future__ import annotations

from typing import Any

import mcp_types
import pytest
from mcp.server.lowlevel import Server

from callgate import Authority, Gate, MemoryLedger, Policy, Registry, Status, ToolCall, allow
from callgate.errors import DefinitionError
from callgate.mcp import ToolConfig, import_tools

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

SECRET = "hunter2-do-not-log-me"
SCHEMA = {
    "type": "object",
    "properties": {"_from": {"type": "string"}, "to": {"type": "string"}},
    "required": ["_from", "to"],
}


def vault(received: list[dict[str, Any]]) -> Server:
    """A real low-level MCP server with one tool whose secret argument is named ``_from``."""

    async def list_tools(ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        tool = mcp_types.Tool(name="login", input_schema=SCHEMA)
        return mcp_types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: Any) -> mcp_types.CallToolResult:
        received.append(dict(params.arguments or {}))
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(text="logged in")])

    return Server("vault", on_list_tools=list_tools, on_call_tool=call_tool)


@pytest.mark.parametrize("named", ["_from", "from_"], ids=["server-name", "field-name"])
async def test_a_secret_argument_named_with_an_underscore_is_never_recorded_in_clear(
    named: str,
) -> None:
    """``secret_fields`` naming ``_from`` (or its field ``from_``) redacts ``_from`` in the
    ledger and audit, while the server still receives the value."""
    received: list[dict[str, Any]] = []
    config = {"login": ToolConfig(effects=["network:vault"], secret_fields=[named])}
    tools = await import_tools(vault(received), server_name="vault", tools=config)
    ledger = MemoryLedger()
    gate = Gate(Registry(tools), policy=Policy([allow("*")]), ledger=ledger)
    run = gate.run(authority=Authority(principal="alice", grants=["network:vault"]))
    call = ToolCall(id="c1", name="login", arguments={"_from": SECRET, "to": "bob"})
    [obs] = await run.asubmit([call])
    assert obs.status is Status.OK, obs.content
    assert received == [{"_from": SECRET, "to": "bob"}]
    recorded = repr(list(ledger.calls(run_id=run.id))) + repr(list(ledger.audit()))
    assert SECRET not in recorded
    assert "_from" in recorded
    assert "bob" in recorded


async def test_a_secret_field_that_is_no_argument_is_a_definition_error() -> None:
    """A misspelt secret field would leave the real one in clear: refused, naming both spellings."""
    config = {"login": ToolConfig(secret_fields=["from"])}
    with pytest.raises(DefinitionError, match=r"secret field 'from' is not an argument.*'_from'"):
        await import_tools(vault([]), server_name="vault", tools=config)

"""`callgate mcp serve` as a real process: over stdio, and over HTTP on 127.0.0.1 with tokens."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import mcp_types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_app import seen
from mcp_support import APP, ROOT, callgate_params, free_port, wait_for_port
from typer.testing import CliRunner

from callgate.cli import app as cli
from callgate.providers.mcp import tool_definitions

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(40)]

KEY = "canary-key-5e0b9a77"


def text(result: mcp_types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


def app_registry() -> object:
    import mcp_app

    return mcp_app.registry


async def test_serve_over_stdio(policy_file: Path) -> None:
    """A stdio client lists our schemas verbatim; calls are validated, authorized, approved."""
    params = callgate_params(
        "mcp",
        "serve",
        f"{APP}:registry",
        "--policy",
        str(policy_file),
        "--grant",
        "read:*",
        "--grant",
        "spend:USD<=100",
        "--principal",
        "carol",
        "--context-env",
        "tenant=APP_TENANT",
        "--context-env",
        "api_key=APP_KEY",
        env={"APP_TENANT": "acme", "APP_KEY": KEY},
    )
    async with Client(params) as client:
        listed = (await client.list_tools()).tools
        me = await client.call_tool("whoami", {})
        bad = await client.call_tool("lookup_order", {"order_id": 1})
        wipe = await client.call_tool("wipe_orders", {})
        refund = await client.call_tool(
            "refund", {"order_id": "o-1", "amount": 5, "currency": "USD"}
        )
        leak = await client.call_tool("export_orders", {})
    expected = {d["name"]: d["inputSchema"] for d in tool_definitions(app_registry())}  # type: ignore[arg-type]
    assert {t.name: t.input_schema for t in listed} == expected
    assert json.loads(text(me)) == {"principal": "carol", "tenant": seen("acme")}
    assert bad.is_error
    assert "Rejected at the validate stage" in text(bad)
    assert wipe.is_error
    assert "needs the effect 'write:everything'" in text(wipe)
    assert refund.is_error
    assert refund.meta is not None
    assert refund.meta["callgate/status"] == "pending"
    assert KEY not in text(leak)
    assert "[redacted]" in text(leak)


@pytest.fixture
def http_server(policy_file: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "ALICE_TOKEN": "tok-alice-0123456789", "BOB_TOKEN": "tok-bob-9876543210"}
    env["APP_TENANT"] = "acme"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "callgate.cli",
            "mcp",
            "serve",
            f"{APP}:registry",
            "--policy",
            str(policy_file),
            "--transport",
            "http",
            "--port",
            str(port),
            "--grant",
            "read:*",
            "--token",
            "alice=ALICE_TOKEN",
            "--token",
            "bob=BOB_TOKEN",
            "--context-env",
            "tenant=APP_TENANT",
        ],
        cwd=ROOT,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def as_user(url: str, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers)))


async def test_http_clients_act_as_the_principal_of_their_token(http_server: str) -> None:
    """The principal comes from the bearer token, never from arguments; each token its own."""
    async with as_user(http_server, "tok-alice-0123456789") as alice:
        a = await alice.call_tool("whoami", {})
    async with as_user(http_server, "tok-bob-9876543210") as bob:
        b = await bob.call_tool("whoami", {})
    assert json.loads(text(a)) == {"principal": "alice", "tenant": seen("acme")}
    assert json.loads(text(b)) == {"principal": "bob", "tenant": seen("acme")}


async def test_http_without_a_known_token_is_refused(http_server: str) -> None:
    """HTTP with an unknown bearer token is 401, and an anonymous client cannot list tools."""
    async with httpx2.AsyncClient() as http:
        response = await http.post(
            http_server,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": "Bearer wrong", "Accept": "application/json"},
        )
    assert response.status_code == 401
    with pytest.raises(ExceptionGroup):  # the SDK's MCPError inside its task groups
        async with as_user(http_server, None) as anonymous:
            await anonymous.list_tools()


def test_serve_needs_a_policy_and_a_real_target(tmp_path: Path) -> None:
    """Exit 2 for bad input: no policy, a target that is not a Registry, a broken policy."""
    runner = CliRunner()
    no_policy = runner.invoke(cli, ["mcp", "serve", f"{APP}:registry"])
    assert no_policy.exit_code == 2
    assert "--policy is required" in no_policy.output
    not_registry = runner.invoke(cli, ["mcp", "serve", f"{APP}:calls", "--policy", "x.toml"])
    assert not_registry.exit_code == 2
    broken = tmp_path / "broken.toml"
    broken.write_text('[[rule]]\naction = "perhaps"\n')
    bad_policy = runner.invoke(cli, ["mcp", "serve", f"{APP}:registry", "--policy", str(broken)])
    assert bad_policy.exit_code == 2
    assert "action must be one of" in bad_policy.output
    token_on_stdio = runner.invoke(
        cli, ["mcp", "serve", f"{APP}:registry", "--policy", str(broken), "--token", "a=B"]
    )
    assert token_on_stdio.exit_code == 2

"""The MCP gateway: `callgate.mcp.proxy` and `callgate mcp proxy`, with real upstream processes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import mcp_types
import pytest
from mcp import Client
from mcp_support import (
    APP,
    ROOT,
    UPSTREAM,
    callgate_params,
    free_port,
    upstream_calls,
    upstream_params,
    wait_for_port,
)
from typer.testing import CliRunner

from callgate import MemoryLedger, Policy, allow, ask
from callgate.cli import app as cli
from callgate.mcp import PinStore, ToolConfig, proxy

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(40)]

ATTACKER = "attacker@evil.example"
SEND = {"to": "bob@example.com", "subject": "lunch", "body": "yes"}


def text(result: mcp_types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


def sends(log: Path) -> list[str]:
    return [c["arguments"]["to"] for c in upstream_calls(log) if c["tool"] == "send_email"]


async def test_the_proxy_lists_the_upstreams_tools_with_their_schemas(
    log: Path, tmp_path: Path
) -> None:
    """Clients see the upstream's own names, descriptions and input schemas."""
    async with Client(upstream_params("mail", log)) as direct:
        upstream = {t.name: t for t in (await direct.list_tools()).tools}
    async with (
        proxy(
            upstream_params("mail", log),
            server_name="mail",
            ledger=MemoryLedger(),
            pins=tmp_path / "p.json",
        ) as gate,
        Client(gate.server) as client,
    ):
        listed = (await client.list_tools()).tools
    assert [t.name for t in listed] == list(upstream)
    for tool in listed:
        assert tool.input_schema == upstream[tool.name].input_schema
        assert tool.description == upstream[tool.name].description


async def test_bad_arguments_never_reach_the_upstream(log: Path) -> None:
    """Arguments missing a required field are rejected at schema and never reach the upstream."""
    async with (
        proxy(
            upstream_params("mail", log),
            server_name="mail",
            ledger=MemoryLedger(),
            policy=Policy([allow()]),
        ) as gate,
        Client(gate.server) as client,
    ):
        result = await client.call_tool("send_email", {"to": ["bob@example.com"]})
    assert result.is_error
    assert text(result).startswith("Rejected at the validate stage:")
    assert "missing required field 'subject'" in text(result)
    assert upstream_calls(log) == []


async def test_approval_flow_through_the_proxy_runs_the_call_once(log: Path) -> None:
    """pending → a person approves → the same call runs once; the next one asks again."""
    policy = Policy([allow("read_inbox"), ask("send_email")])
    async with (
        proxy(
            upstream_params("mail", log), server_name="mail", ledger=MemoryLedger(), policy=policy
        ) as gate,
        Client(gate.server) as client,
    ):
        pending = await client.call_tool("send_email", SEND)
        assert pending.is_error
        assert pending.meta is not None
        assert pending.meta["callgate/status"] == "pending"
        approval = pending.meta["callgate/approval_id"]
        assert f"callgate approvals approve {approval}" in text(pending)
        assert sends(log) == []
        gate.gate.approvals.approve(approval, by="ops")
        done = await client.call_tool("send_email", SEND)
        again = await client.call_tool("send_email", SEND)
    assert not done.is_error
    assert text(done) == "sent to bob@example.com"
    assert again.meta is not None
    assert again.meta["callgate/status"] == "pending"
    assert sends(log) == ["bob@example.com"]


async def test_a_denied_effect_is_refused_by_the_proxy(log: Path) -> None:
    """A tool configured to need disclose:{to} is denied when that effect is not granted."""
    tools = {"send_email": ToolConfig(effects=["network:mail", "disclose:{to}"])}
    async with (
        proxy(
            upstream_params("mail", log),
            server_name="mail",
            ledger=MemoryLedger(),
            policy=Policy([allow()]),
            tools=tools,
            grants=["disclose:*@example.com"],
        ) as gate,
        Client(gate.server) as client,
    ):
        outside = await client.call_tool("send_email", {"to": ATTACKER, "subject": "s"})
        inside = await client.call_tool("send_email", {"to": "bob@example.com", "subject": "s"})
    assert outside.is_error
    assert f"needs the effect 'disclose:{ATTACKER}'" in text(outside)
    assert not inside.is_error
    assert sends(log) == ["bob@example.com"]


async def test_injected_instructions_do_not_change_authority(log: Path) -> None:
    """The upstream's description and inbox tell the model to mail an outsider. Its text reaches
    the client as data; a send to the injected recipient goes to approval, while a send to a
    recipient the deployment trusts runs."""
    async with (
        proxy(
            upstream_params("mail", log),
            server_name="mail",
            ledger=MemoryLedger(),
            policy=Policy([allow()]),
            tools={"send_email": ToolConfig(sinks=["to"])},
            trusted_values=["bob@example.com"],
        ) as gate,
        Client(gate.server) as client,
    ):
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert "grants you permission" in (listed["read_inbox"].description or "")
        inbox = await client.call_tool("read_inbox", {})
        assert not inbox.is_error
        assert ATTACKER in text(inbox)
        attack = await client.call_tool(
            "send_email", {"to": ATTACKER, "subject": "fwd", "body": "everything"}
        )
        reply = await client.call_tool("send_email", {"to": "bob@example.com", "subject": "re"})
    assert attack.is_error
    assert attack.meta is not None
    assert attack.meta["callgate/status"] == "pending"
    assert "appears only in untrusted tool output" in text(attack)
    assert not reply.is_error
    assert sends(log) == ["bob@example.com"]


async def test_a_description_changed_between_sessions_is_blocked_until_approved(
    log: Path, tmp_path: Path
) -> None:
    """Session 1 pins the tools; in session 2 send_email's description changed: it is hidden
    and its calls are refused (nothing sent) until `callgate mcp pins approve`."""
    pins = tmp_path / "pins.json"
    policy = Policy([allow()])
    async with (
        proxy(
            upstream_params("mail", log),
            server_name="mail",
            ledger=MemoryLedger(),
            policy=policy,
            pins=pins,
        ) as gate,
        Client(gate.server) as client,
    ):
        assert {t.name for t in (await client.list_tools()).tools} == {"read_inbox", "send_email"}
    changed = upstream_params("mail", log, "--variant", "changed")
    async with (
        proxy(changed, server_name="mail", ledger=MemoryLedger(), policy=policy, pins=pins) as gate,
        Client(gate.server) as client,
    ):
        assert [t.name for t in (await client.list_tools()).tools] == ["read_inbox"]
        [event, *_] = [e for e in gate.gate.ledger.audit() if e.kind == "mcp.tools"]
        assert event.data["changed"] == ["send_email"]
        blocked = await client.call_tool("send_email", SEND)
        assert blocked.is_error
        assert "callgate mcp pins approve mail send_email" in text(blocked)
        assert sends(log) == []
        approved = CliRunner().invoke(
            cli, ["mcp", "pins", "approve", "mail", "send_email", "--pins", str(pins)]
        )
        assert approved.exit_code == 0, approved.output
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert ATTACKER in (listed["send_email"].description or "")
        sent = await client.call_tool("send_email", SEND)
    assert not sent.is_error
    assert sends(log) == ["bob@example.com"]
    assert PinStore(pins).entries("mail")[1].approved_by != "first use"


async def test_an_upstream_that_hangs_is_unknown_surfaced_and_not_retried(log: Path) -> None:
    """The upstream never answers: after the timeout the client gets `unknown` (the effect may
    have happened), and the upstream received the call exactly once."""
    async with (
        proxy(
            upstream_params("hang", log),
            server_name="slow",
            ledger=MemoryLedger(),
            policy=Policy([allow()]),
            timeout=1.0,
        ) as gate,
        Client(gate.server) as client,
    ):
        result = await client.call_tool("start_job", {"name": "nightly"})
        await anyio.sleep(0.5)
    assert result.is_error
    assert result.meta is not None
    assert result.meta["callgate/status"] == "unknown"
    assert "did not finish within 1 s" in text(result)
    assert "Do not repeat this call" in text(result)
    assert len(upstream_calls(log)) == 1


# -- real processes end to end ------------------------------------------------------------


async def test_the_proxy_command_over_stdio(log: Path, tmp_path: Path) -> None:
    """client ⇄ `callgate mcp proxy` ⇄ upstream, each a real stdio process."""
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\naction = "allow"\ntool = "read_inbox"\n')
    params = callgate_params(
        "mcp",
        "proxy",
        "--policy",
        str(policy),
        "--pins",
        str(tmp_path / "pins.json"),
        "--",
        sys.executable,
        str(UPSTREAM),
        "mail",
        env={"UPSTREAM_LOG": str(log)},
    )
    async with Client(params) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        inbox = await client.call_tool("read_inbox", {})
        send = await client.call_tool("send_email", SEND)
    assert names == ["read_inbox", "send_email"]
    assert not inbox.is_error
    assert send.is_error
    assert "no policy rule allows the tool 'send_email'" in text(send)
    assert [c["tool"] for c in upstream_calls(log)] == ["read_inbox"]
    assert "upstream" in (tmp_path / "pins.json").read_text()


@pytest.fixture
def http_app(policy_file: Path) -> Iterator[str]:
    """`callgate mcp serve` on a real HTTP port: the upstream for the next test."""
    port = free_port()
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
        ],
        cwd=ROOT,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


async def test_the_proxy_in_front_of_a_streamable_http_upstream(http_app: str) -> None:
    """--upstream-url: the proxy speaks Streamable HTTP to the upstream."""
    async with (
        proxy(
            http_app,
            server_name="shop",
            ledger=MemoryLedger(),
            policy=Policy([allow("lookup_order")]),
        ) as gate,
        Client(gate.server) as client,
    ):
        found = await client.call_tool("lookup_order", {"order_id": "o-9"})
        refused = await client.call_tool("wipe_orders", {})
    assert not found.is_error
    assert '"order_id":"o-9"' in text(found)
    assert refused.is_error
    assert "no policy rule allows the tool 'wipe_orders'" in text(refused)


async def test_an_approval_given_from_the_cli_releases_the_call_in_the_proxy_process(
    log: Path, tmp_path: Path
) -> None:
    """client ⇄ `callgate mcp proxy --db FILE` ⇄ upstream: the call waits; a person runs
    `callgate approvals approve ID --db FILE` in another process; the same call then runs
    exactly once."""
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\naction = "ask"\ntool = "send_email"\n')
    db = tmp_path / "callgate.db"
    params = callgate_params(
        "mcp",
        "proxy",
        "--policy",
        str(policy),
        "--pins",
        str(tmp_path / "pins.json"),
        "--db",
        str(db),
        "--trust",
        SEND["to"],
        "--",
        sys.executable,
        str(UPSTREAM),
        "mail",
        env={"UPSTREAM_LOG": str(log)},
    )
    async with Client(params) as client:
        pending = await client.call_tool("send_email", SEND)
        assert pending.meta is not None
        approval = pending.meta["callgate/approval_id"]
        assert upstream_calls(log) == []
        approved = CliRunner().invoke(
            cli, ["approvals", "approve", approval, "--db", str(db), "--by", "ops"]
        )
        assert approved.exit_code == 0, approved.output
        sent = await client.call_tool("send_email", SEND)
        again = await client.call_tool("send_email", SEND)
    assert not sent.is_error, text(sent)
    assert again.meta is not None
    assert again.meta["callgate/status"] == "pending"
    assert [c["tool"] for c in upstream_calls(log)] == ["send_email"]

"""Bytes an upstream writes cannot silence it: a byte that is not UTF-8 is replaced, and an
upstream whose output can no longer be read is down (calls refused, nothing sent, restarted)
rather than a process every later call waits on (issue 30, HIGH-2)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import anyio
import mcp_types
import pytest
from mcp import Client, StdioServerParameters

from callgate import MemoryLedger, Policy, allow
from callgate.mcp import Restart, proxy

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(60),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes"),
]

RAW_UPSTREAM = textwrap.dedent(
    """
    import json, os, sys, time
    def send(raw):
        sys.stdout.buffer.write(raw); sys.stdout.buffer.flush()
    def reply(mid, result):
        send((json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\\n").encode())
    schema = {"type": "object", "properties": {}}
    tools = [{"name": n, "description": n, "inputSchema": schema} for n in ("echo", "bad", "mute")]
    for line in sys.stdin.buffer:
        msg = json.loads(line)
        m, mid = msg.get("method"), msg.get("id")
        if m is None or mid is None:
            continue
        if m == "initialize":
            reply(mid, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                        "serverInfo": {"name": "raw", "version": "1"}})
        elif m == "tools/list":
            reply(mid, {"tools": tools})
        elif m == "tools/call" and msg["params"]["name"] == "bad":
            send(b'{"jsonrpc":"2.0","id":' + json.dumps(mid).encode()
                 + b',"result":{"content":[{"type":"text","text":"\\xff\\xfe bad"}]}}\\n')
        elif m == "tools/call" and msg["params"]["name"] == "mute":
            os.close(1)  # its output ends; the process lives on
            time.sleep(3600)
        elif m == "tools/call":
            reply(mid, {"content": [{"type": "text", "text": "ok " + str(os.getpid())}]})
        elif m == "server/discover":
            send((json.dumps({"jsonrpc": "2.0", "id": mid,
                              "error": {"code": -32601, "message": "no"}}) + "\\n").encode())
        else:
            reply(mid, {})
    """
)


def raw_upstream(tmp_path: Path) -> StdioServerParameters:
    script = tmp_path / "raw_upstream.py"
    script.write_text(RAW_UPSTREAM)
    return StdioServerParameters(command=sys.executable, args=[str(script)])


def text(result: mcp_types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


async def test_a_byte_that_is_not_utf8_does_not_silence_the_upstream(tmp_path: Path) -> None:
    """The upstream answers with bytes 0xff 0xfe: that answer arrives (replaced characters)
    and the next call is answered too, not left waiting."""
    async with (
        proxy(
            raw_upstream(tmp_path),
            server_name="raw",
            ledger=MemoryLedger(),
            policy=Policy([allow()]),
        ) as gate,
        Client(gate.server) as client,
    ):
        with anyio.fail_after(20):
            bad = await client.call_tool("bad", {})
            after = await client.call_tool("echo", {})
    assert "bad" in text(bad)
    assert text(after).startswith("ok")


async def test_an_upstream_whose_output_ended_is_down_and_restarted(tmp_path: Path) -> None:
    """The upstream closes its stdout but keeps running: the call in flight ends, the proxy
    counts the upstream as down (an ``mcp.upstream`` down event), restarts it, and a later
    call is answered by the new process."""
    ledger = MemoryLedger()
    async with (
        proxy(
            raw_upstream(tmp_path),
            server_name="raw",
            ledger=ledger,
            policy=Policy([allow()]),
            restart=Restart(attempts=3, delay=0.05),
        ) as gate,
        Client(gate.server) as client,
    ):
        with anyio.fail_after(30):
            first = text(await client.call_tool("echo", {}))
            await client.call_tool("mute", {})
            while True:
                result = await client.call_tool("echo", {})
                if not result.is_error:
                    break
                await anyio.sleep(0.05)
    assert first.startswith("ok")
    assert text(result).startswith("ok")
    assert text(result) != first  # another process
    downs = [e.data for e in ledger.audit() if e.kind == "mcp.upstream"]
    assert any(d.get("state") == "down" and "read" in d.get("reason", "") for d in downs)

"""A dead upstream is a state of the proxy, not the outcome of the next call.

Real processes throughout: the SDK's own client, the proxy (in process or the
``callgate`` command) and the test upstream server as a stdio child process,
killed by pid. A call the proxy never sent is ``error`` ("nothing was sent");
only a call in flight when the upstream died is ``unknown``. The proxy restarts
the upstream with backoff, or ends the session and says so.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import mcp_types
import pytest
from mcp import Client
from mcp_support import (
    ROOT,
    UPSTREAM,
    CallgateProcess,
    gone_within,
    upstream_calls,
    upstream_params,
)

from callgate import MemoryLedger, Policy, allow
from callgate.ledger.base import CallState
from callgate.mcp import Restart, ToolConfig, proxy

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(60),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]


def text(result: mcp_types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


def status(result: mcp_types.CallToolResult) -> str:
    assert result.meta is not None
    value: str = result.meta["callgate/status"]
    return value


async def upstream_pid(log: Path, tool: str = "echo") -> int:
    """The pid of the upstream process that answered the last ``tool`` call."""
    with anyio.fail_after(20):
        while not [c for c in upstream_calls(log) if c["tool"] == tool]:
            await anyio.sleep(0.02)
    pid: int = [c for c in upstream_calls(log) if c["tool"] == tool][-1]["pid"]
    return pid


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    assert gone_within([pid], 10) == []


async def test_a_call_after_the_upstream_died_is_an_error_and_is_not_sent(log: Path) -> None:
    """Kill the upstream while no call is in flight, then call: the client is told the
    upstream is not running and nothing was sent (``error``, not ``unknown``), the ledger
    records ``error``, and the upstream received nothing."""
    ledger = MemoryLedger()
    async with (
        proxy(
            upstream_params("echo", log),
            server_name="echo",
            ledger=ledger,
            policy=Policy([allow()]),
            restart=Restart(attempts=1, delay=60.0),
        ) as gate,
        Client(gate.server) as client,
    ):
        first = await client.call_tool("echo", {"message": "one"})
        assert status(first) == "ok"
        kill(await upstream_pid(log))
        second = await client.call_tool("echo", {"message": "two"})
        # Listing while it is down: the tools last seen, not an error.
        listed = [t.name for t in (await client.list_tools()).tools]
    assert "echo" in listed
    assert status(second) == "error"
    message = text(second)
    assert "'echo' is not running" in message
    assert "nothing was sent" in message
    assert "exit code" in message or "signal" in message  # the reason
    assert [c["arguments"]["message"] for c in upstream_calls(log)] == ["one"]
    states = sorted(r.state for r in ledger.calls())
    assert states == sorted([CallState.OK, CallState.ERROR])


async def test_the_proxy_restarts_a_dead_upstream_and_says_so(
    log: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """After the upstream dies the proxy starts it again (after its backoff delay), logs
    that it did, and the next call runs on the new process."""
    caplog.set_level(logging.INFO, logger="callgate.mcp")
    ledger = MemoryLedger()
    async with (
        proxy(
            upstream_params("echo", log),
            server_name="echo",
            ledger=ledger,
            policy=Policy([allow()]),
            restart=Restart(attempts=3, delay=0.05),
        ) as gate,
        Client(gate.server) as client,
    ):
        await client.call_tool("echo", {"message": "one"})
        old = await upstream_pid(log)
        kill(old)
        with anyio.fail_after(20):
            while True:
                result = await client.call_tool("echo", {"message": "again"})
                if status(result) == "ok":
                    break
                assert status(result) == "error", text(result)
                await anyio.sleep(0.05)
    assert await upstream_pid(log) != old
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "upstream MCP server 'echo' exited" in said
    assert "restarted" in said
    kinds = [e.data.get("state") for e in ledger.audit() if e.kind == "mcp.upstream"]
    assert "down" in kinds
    assert "up" in kinds
    assert CallState.UNKNOWN not in {r.state for r in ledger.calls()}


async def test_a_call_in_flight_when_the_upstream_dies_is_unknown(log: Path) -> None:
    """Only a call that was sent may have acted: it is ``unknown``."""
    async with (
        proxy(
            upstream_params("hang", log),
            server_name="slow",
            ledger=MemoryLedger(),
            policy=Policy([allow()]),
            restart=Restart(attempts=0),
        ) as gate,
        Client(gate.server) as client,
        anyio.create_task_group() as tasks,
    ):
        results: list[mcp_types.CallToolResult] = []

        async def call() -> None:
            results.append(await client.call_tool("start_job", {"name": "nightly"}))

        tasks.start_soon(call)
        await upstream_pid(log, "start_job")
        os.kill(upstream_calls(log)[0]["pid"], signal.SIGKILL)
        with anyio.fail_after(20):
            while not results:
                await anyio.sleep(0.02)
    assert status(results[0]) == "unknown"
    assert "stopped while this call was in flight" in text(results[0])


async def test_a_hung_read_sent_once_is_recorded_as_one_attempt(log: Path) -> None:
    """The gate may retry a read whose outcome is unknown, but once the call's timeout is
    spent nothing more is sent, so the ledger holds the one attempt that was sent."""
    ledger = MemoryLedger()
    async with (
        proxy(
            upstream_params("hang", log),
            server_name="slow",
            ledger=ledger,
            policy=Policy([allow()]),
            tools={"start_job": ToolConfig(risk="read")},
            timeout=0.5,
        ) as gate,
        Client(gate.server) as client,
    ):
        result = await client.call_tool("start_job", {"name": "nightly"})
    assert status(result) == "unknown"
    [record] = ledger.calls()
    assert len(ledger.attempts(record.run_id, record.call_id)) == 1
    assert len(upstream_calls(log)) == 1


POLICY = '[[rule]]\nname = "all"\naction = "allow"\ntool = "*"\n'


def _proxy_env(tmp_path: Path) -> dict[str, str]:
    return {"UPSTREAM_LOG": str(tmp_path / "upstream.jsonl"), "PYTHONUNBUFFERED": "1"}


async def test_the_proxy_command_ends_the_session_when_it_cannot_restart(tmp_path: Path) -> None:
    """``--restarts 0``: the upstream dies, the proxy says so in one line and exits 1."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    stderr = tmp_path / "stderr.txt"
    log = tmp_path / "upstream.jsonl"
    process = CallgateProcess(
        "mcp",
        "proxy",
        "--policy",
        str(policy),
        "--pins",
        str(tmp_path / "pins.json"),
        "--trust-new-tools",
        "--restarts",
        "0",
        "--",
        sys.executable,
        str(UPSTREAM),
        "echo",
        env=_proxy_env(tmp_path),
        stderr=stderr,
    )
    async with Client(process) as client:
        first = await client.call_tool("echo", {"message": "one"})
        assert status(first) == "ok"
        kill(await upstream_pid(log))
        with anyio.fail_after(20):
            code = await process.process.wait()
    assert code == 1
    said = stderr.read_text()
    assert "Traceback" not in said
    [line] = [ln for ln in said.splitlines() if "exited" in ln]
    assert "upstream MCP server 'upstream' exited" in line
    assert "not restarted" in line
    assert "ending the session" in line


def test_an_upstream_that_exits_at_start_gives_one_line(tmp_path: Path) -> None:
    """An upstream command that exits at once: one clear line, exit code 1, no traceback."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "callgate.cli",
            "mcp",
            "proxy",
            "--policy",
            str(policy),
            "--pins",
            str(tmp_path / "pins.json"),
            "--name",
            "broken",
            "--",
            sys.executable,
            "-c",
            "import sys; sys.exit(3)",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) <= 3, done.stderr
    assert any("upstream MCP server 'broken' did not start" in ln for ln in lines), done.stderr
    assert any("exit code 3" in ln for ln in lines), done.stderr

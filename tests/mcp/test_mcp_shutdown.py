"""`callgate mcp proxy` ends its upstream's whole process group when it stops.

Each test runs three real processes and one more: an MCP client (the SDK's), the proxy
command, and an upstream server (the SDK's) whose tool hangs after starting a child
process of its own. The proxy is stopped while the call hangs; the upstream and its
child must be gone (checked by pid), not left orphaned.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_support import UPSTREAM, CallgateProcess, alive, gone_within, upstream_calls

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(60),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and process groups"),
]


@pytest.fixture
def started(log: Path) -> Iterator[list[int]]:
    """The pids the upstream reported; any left running after the test are killed."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


async def call_until_cut_off(client: Client) -> None:
    """The call never gets an answer: the proxy goes away while it hangs."""
    with contextlib.suppress(MCPError):
        await client.call_tool("start_job", {"name": "nightly"})


async def hanging_call(log: Path) -> dict[str, Any]:
    """Wait until the upstream received the call (it logs its pids when it does)."""
    with anyio.fail_after(20):
        while not upstream_calls(log):
            await anyio.sleep(0.05)
    return upstream_calls(log)[0]


def send_signal(signum: int) -> Callable[[CallgateProcess], Any]:
    async def stop(proxy: CallgateProcess) -> None:
        proxy.process.send_signal(signum)

    return stop


async def close_stdin(proxy: CallgateProcess) -> None:
    assert proxy.process.stdin is not None
    await proxy.process.stdin.aclose()


@pytest.mark.parametrize(
    "stop",
    [
        send_signal(signal.SIGTERM),
        send_signal(signal.SIGINT),
        send_signal(signal.SIGHUP),
        close_stdin,
    ],
    ids=["SIGTERM", "SIGINT", "SIGHUP", "stdin closed"],
)
async def test_a_stopped_proxy_leaves_no_upstream_process_behind(
    stop: Callable[[CallgateProcess], Any], log: Path, tmp_path: Path, started: list[int]
) -> None:
    """SIGTERM, SIGINT, SIGHUP or the end of its input while an upstream call hangs: the
    proxy exits with code 0, and the upstream and the process the upstream started (which
    ignores SIGTERM, so only the SIGKILL after the grace period ends it) are gone."""
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\naction = "allow"\ntool = "start_job"\n')
    proxy = CallgateProcess(
        "mcp",
        "proxy",
        "--policy",
        str(policy),
        "--pins",
        str(tmp_path / "pins.json"),
        "--timeout",
        "300",
        "--",
        sys.executable,
        str(UPSTREAM),
        "hang",
        "--grandchild",
        env={"UPSTREAM_LOG": str(log)},
        stderr=tmp_path / "proxy.err",
    )
    async with Client(proxy) as client, anyio.create_task_group() as calls:
        calls.start_soon(call_until_cut_off, client)
        call = await hanging_call(log)
        started.extend([call["pid"], call["grandchild"]])
        assert call["ppid"] == proxy.process.pid  # the upstream is the proxy's own child
        assert alive(call["pid"])
        assert alive(call["grandchild"])
        await stop(proxy)
        with anyio.fail_after(30):
            code = await proxy.process.wait()
        calls.cancel_scope.cancel()
    assert code == 0, (tmp_path / "proxy.err").read_text()
    assert gone_within(started, 10) == []

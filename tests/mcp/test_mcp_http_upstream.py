"""A Streamable HTTP upstream's health is a state too: a call made when the server cannot be
reached is not sent (``error``, not ``unknown``), the proxy reconnects with the same backoff as
a restarted process, and calls go through again once the server is back."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp_support import UPSTREAM, free_port, upstream_calls, wait_for_port

from callgate import MemoryLedger, Policy, allow
from callgate.ledger.base import CallState
from callgate.mcp import Restart, proxy

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]


class HttpUpstream:
    """The echo test server over Streamable HTTP on one port, stopped and started at will."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(UPSTREAM), "echo", "--http", str(self.port)],
            env={"UPSTREAM_LOG": str(self.log), "PATH": "/usr/bin:/bin"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


@pytest.fixture
def http_upstream(log: Path) -> Iterator[HttpUpstream]:
    upstream = HttpUpstream(log)
    upstream.start()
    try:
        yield upstream
    finally:
        upstream.kill()


def text(result: object) -> str:
    return str(getattr(result, "content", [None])[0].text)  # type: ignore[index]


async def test_an_unreachable_http_upstream_gets_nothing_and_is_reconnected(
    http_upstream: HttpUpstream, log: Path
) -> None:
    """The server is killed: the next call is an error that says nothing was sent (the ledger
    agrees), not unknown; the server comes back and, after the reconnection, a call runs."""
    ledger = MemoryLedger()
    async with (
        proxy(
            http_upstream.url,
            server_name="echo",
            ledger=ledger,
            policy=Policy([allow()]),
            restart=Restart(attempts=5, delay=0.5, factor=1.0),
        ) as gate,
        Client(gate.server) as client,
    ):
        first = await client.call_tool("echo", {"message": "one"})
        assert not first.is_error
        http_upstream.kill()
        down = await client.call_tool("echo", {"message": "two"})
        assert down.is_error
        assert "cannot be reached" in text(down)
        assert "nothing was sent" in text(down)
        http_upstream.start()
        with anyio.fail_after(30):
            while True:
                again = await client.call_tool("echo", {"message": "three"})
                if not again.is_error:
                    break
                assert "nothing was sent" in text(again)
                await anyio.sleep(0.2)
    states = [record.state for record in ledger.calls()]
    assert states[0] is CallState.OK
    assert states[1] is CallState.ERROR
    assert states[-1] is CallState.OK
    assert CallState.UNKNOWN not in states
    assert [c["arguments"]["message"] for c in upstream_calls(log)] == ["one", "three"]

"""Streamable HTTP toward the upstream, and on both sides at once.

An HTTP upstream's health is a state too: a call made when the server cannot be reached is
not sent (``error``, not ``unknown``), the proxy reconnects with the same backoff as a
restarted process, and calls go through again once the server is back. With HTTP on both
sides, the upstream's requests of the client pass through as over stdio."""

from __future__ import annotations

import os
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


@pytest.fixture
def http_proxy(tmp_path: Path, log: Path) -> Iterator[tuple[str, HttpUpstream]]:
    """`callgate mcp proxy --transport http` in front of the asking test server over HTTP:
    Streamable HTTP on both sides."""
    upstream = HttpUpstream(log)
    upstream.process = subprocess.Popen(
        [sys.executable, str(UPSTREAM), "asker", "--http", str(upstream.port)],
        env={"UPSTREAM_LOG": str(log), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_port(upstream.port)
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\nname = "all"\naction = "allow"\ntool = "*"\n', encoding="utf-8")
    port = free_port()
    process = subprocess.Popen(
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
            "--transport",
            "http",
            "--port",
            str(port),
            "--upstream-url",
            upstream.url,
        ],
        cwd=tmp_path,
        env={**os.environ},
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}/mcp", upstream
    finally:
        process.terminate()
        process.wait(10)
        upstream.kill()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_client_requests_pass_through_http_on_both_sides(
    http_proxy: tuple[str, HttpUpstream], mode: str
) -> None:
    """Client and upstream both over Streamable HTTP: the upstream's sampling, elicitation and
    roots requests reach the client (2025-11-25: over the call's response stream; 2026-07-28:
    as an input-required result and the client's retry)."""
    from test_mcp_client_requests import CALLS, Answers

    url, _ = http_proxy
    answers = Answers()
    async with Client(url, mode=mode, **answers.options()) as client:  # type: ignore[arg-type]
        got = []
        for name, arguments in CALLS:
            result = await client.call_tool(name, arguments)
            got.append((bool(result.is_error), text(result)))
    assert got == [
        (False, "the model said: forty-two"),
        (False, "hello Ada"),
        (False, "file:///srv/projects"),
    ]
    assert answers.asked == ["sampling", "elicitation", "roots"]

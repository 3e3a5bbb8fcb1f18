"""A stdio client's lines are bounded by the argument cap and each bad line is answered:
an overlong line is discarded to its newline (-32600, its id when the line starts with it),
a line that is not JSON-RPC
gets -32700 (id null), each logged in one line, and the session goes on (issue 30, MED-5,
LOW-7)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mcp_support import ROOT, UPSTREAM

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes"),
]


class RawClient:
    """`callgate mcp proxy` as a child process, spoken to line by line."""

    def __init__(self, tmp_path: Path, log: Path) -> None:
        policy = tmp_path / "policy.toml"
        policy.write_text('[[rule]]\naction = "allow"\n')
        self.process = subprocess.Popen(
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
                "--db",
                str(tmp_path / "callgate.db"),
                "--max-argument-chars",
                "1000",
                "--",
                sys.executable,
                str(UPSTREAM),
                "echo",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=(tmp_path / "stderr").open("wb"),
            cwd=tmp_path,
            env={
                "UPSTREAM_LOG": str(log),
                "PYTHONPATH": os.environ.get("CALLGATE_TEST_SRC", str(ROOT / "src")),
            },
        )
        self.stderr = tmp_path / "stderr"
        self.messages: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.messages.append(json.loads(line))

    def send(self, raw: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(raw)
        self.process.stdin.flush()

    def request(self, id_: int, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            message["params"] = params
        self.send((json.dumps(message) + "\n").encode())

    def wait(self, count: int, seconds: float = 30) -> list[dict[str, Any]]:
        end = time.monotonic() + seconds
        while len(self.messages) < count and time.monotonic() < end:
            time.sleep(0.02)
        return self.messages

    def close(self) -> None:
        self.process.kill()
        self.process.wait(10)


def test_an_overlong_line_and_a_bad_line_are_answered_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    """A 3 MB line (cap 1000 characters) is answered -32600 with its id, 100,000 nested
    '[' are answered -32700 with id null, each logged in one line, and the next request is
    answered as usual."""
    client = RawClient(tmp_path, tmp_path / "upstream.log")
    try:
        client.request(
            1,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        )
        assert client.wait(1)[0]["id"] == 1
        client.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        big = {"name": "echo", "arguments": {"message": "A" * 3_000_000}}
        client.request(2, "tools/call", big)
        client.send(b"[" * 100_000 + b"\n")
        client.request(3, "tools/list")
        messages = client.wait(4)
    finally:
        client.close()
    assert [m.get("id") for m in messages] == [1, 2, None, 3], messages
    assert messages[1]["error"]["code"] == -32600
    assert "longer than" in messages[1]["error"]["message"]
    assert messages[2]["error"]["code"] == -32700
    assert "echo" in [t["name"] for t in messages[3]["result"]["tools"]]
    logged = [line for line in client.stderr.read_text().splitlines() if "refused" in line]
    assert len(logged) == 2
    assert "Traceback" not in client.stderr.read_text()


def test_an_overlong_line_without_a_plain_id_is_answered_with_id_null(tmp_path: Path) -> None:
    """An overlong line whose id comes after its params is answered -32600 with id null
    (an id inside the params is never taken for the request's)."""
    client = RawClient(tmp_path, tmp_path / "upstream.log")
    try:
        client.request(
            1,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        )
        assert client.wait(1)[0]["id"] == 1
        params = {"name": "echo", "arguments": {"id": 7, "message": "A" * 3_000_000}}
        line = {"jsonrpc": "2.0", "method": "tools/call", "params": params, "id": 9}
        client.send((json.dumps(line) + "\n").encode())
        messages = client.wait(2)
    finally:
        client.close()
    assert [m.get("id") for m in messages] == [1, None], messages
    assert messages[1]["error"]["code"] == -32600

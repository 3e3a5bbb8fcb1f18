"""Helpers for the MCP tests: upstream servers, the callgate command, ports, logs."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import mcp_types
from anyio.streams.text import TextReceiveStream
from mcp import StdioServerParameters
from mcp.shared.message import SessionMessage

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
UPSTREAM = HERE / "servers" / "upstream.py"
APP = HERE / "mcp_app.py"


def upstream_params(kind: str, log: Path, *extra: str) -> StdioServerParameters:
    """A real stdio subprocess running one of the test upstream servers."""
    return StdioServerParameters(
        command=sys.executable,
        args=[str(UPSTREAM), kind, *extra],
        env={"UPSTREAM_LOG": str(log)},
        cwd=str(ROOT),
    )


def upstream_calls(log: Path) -> list[dict[str, Any]]:
    """The calls an upstream server received (one JSON line each)."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line]


def upstream_module() -> Any:
    """The test upstream script as a module, to run its servers in process."""
    import importlib.util

    name = "mcp_test_upstream"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, UPSTREAM)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def callgate_params(*args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    """The ``callgate`` command as a stdio subprocess."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "callgate.cli", *args],
        env=env or {},
        cwd=str(ROOT),
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, timeout: float = 15.0) -> None:
    """Block until something accepts connections on 127.0.0.1:port."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


class CallgateProcess:
    """The ``callgate`` command as a child process the test controls (its pid, its stdin),
    speaking MCP over its stdin and stdout: a transport for `mcp.Client`.

    Unlike the SDK's own stdio transport it does not end the process when the client
    closes; the test does that, by a signal or by closing the process's stdin.
    """

    def __init__(self, *args: str, env: dict[str, str], stderr: Path) -> None:
        self.args = args
        self.env = env
        self.stderr = stderr
        self._process: anyio.abc.Process | None = None
        self._tasks: anyio.abc.TaskGroup | None = None

    @property
    def process(self) -> anyio.abc.Process:
        assert self._process is not None, "not started"
        return self._process

    async def __aenter__(self) -> tuple[Any, Any]:
        self._process = await anyio.open_process(
            [sys.executable, "-m", "callgate.cli", *self.args],
            env={**os.environ, **self.env},
            cwd=str(ROOT),
            stderr=self.stderr.open("ab"),
        )
        incoming_writer, incoming = anyio.create_memory_object_stream[Any](0)
        outgoing, outgoing_reader = anyio.create_memory_object_stream[SessionMessage](0)
        process = self._process

        async def read() -> None:
            assert process.stdout is not None
            async with incoming_writer:
                buffer = ""
                async for chunk in TextReceiveStream(process.stdout):
                    *lines, buffer = (buffer + chunk).split("\n")
                    for line in lines:
                        message = mcp_types.jsonrpc_message_adapter.validate_json(
                            line, by_name=False
                        )
                        await incoming_writer.send(SessionMessage(message))

        async def write() -> None:
            assert process.stdin is not None
            async with outgoing_reader:
                async for message in outgoing_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    try:
                        await process.stdin.send((data + "\n").encode())
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                        return

        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        self._tasks.start_soon(read)
        self._tasks.start_soon(write)
        return incoming, outgoing

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._tasks is not None
        self._tasks.cancel_scope.cancel()
        await self._tasks.__aexit__(None, None, None)
        if self.process.returncode is None:
            self.process.kill()
        await self.process.aclose()


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def gone_within(pids: list[int], seconds: float) -> list[int]:
    """Poll until none of ``pids`` runs or ``seconds`` pass; the pids still running."""
    deadline = time.monotonic() + seconds
    while True:
        running = [pid for pid in pids if alive(pid)]
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.05)

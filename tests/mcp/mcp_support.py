"""Helpers for the MCP tests: upstream servers, the callgate command, ports, logs."""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

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

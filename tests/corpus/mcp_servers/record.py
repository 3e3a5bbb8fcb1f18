"""Record the MCP reference servers' ``tools/list`` answers into ``tools.json.gz``.

Not run by the tests: the corpus keeps the recorded JSON, never the servers. To record
again, install the servers in temporary folders and run this module::

    python -m venv /tmp/mcprec/venv
    /tmp/mcprec/venv/bin/pip install mcp-server-time mcp-server-git mcp-server-fetch
    (cd /tmp/mcprec/npm && npm install @modelcontextprotocol/server-everything \\
        @modelcontextprotocol/server-filesystem @modelcontextprotocol/server-memory \\
        @modelcontextprotocol/server-sequential-thinking)
    python -m tests.corpus.mcp_servers.record /tmp/mcprec

Each server is started over stdio with the official ``mcp`` client, its tool list read
(every page), and its tools stored as the SDK dumps them (``by_alias``, no nulls), with
the server's own name and version from its ``initialize`` answer.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from callgate.mcp.client import StdioTransport

HERE = Path(__file__).parent


def servers(base: Path, scratch: Path) -> dict[str, StdioServerParameters]:
    """The reference servers and how to start each one from ``base``."""
    npm = base / "npm" / "node_modules" / ".bin"
    py = base / "venv" / "bin"
    repo = scratch / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    allowed = scratch / "allowed"
    allowed.mkdir()
    return {
        "everything": StdioServerParameters(command=str(npm / "mcp-server-everything")),
        "filesystem": StdioServerParameters(
            command=str(npm / "mcp-server-filesystem"), args=[str(allowed)]
        ),
        "memory": StdioServerParameters(
            command=str(npm / "mcp-server-memory"),
            env={"MEMORY_FILE_PATH": str(scratch / "memory.jsonl")},
        ),
        "sequential-thinking": StdioServerParameters(
            command=str(npm / "mcp-server-sequential-thinking")
        ),
        "git": StdioServerParameters(command=str(py / "mcp-server-git"), args=["-r", str(repo)]),
        "fetch": StdioServerParameters(command=str(py / "mcp-server-fetch")),
        "time": StdioServerParameters(
            command=str(py / "mcp-server-time"), args=["--local-timezone", "UTC"]
        ),
    }


async def record_one(params: StdioServerParameters) -> dict[str, Any]:
    """One server's identity and every tool it lists."""
    async with Client(StdioTransport(params)) as client:
        tools: list[Any] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        info = client.server_info if hasattr(client, "server_info") else None
        return {
            "server": info.model_dump(mode="json", exclude_none=True) if info else None,
            "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools],
        }


async def record(base: Path) -> dict[str, Any]:
    """Every server's recording, by the corpus's name for it."""
    recorded: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, params in servers(base, Path(scratch)).items():
            recorded[name] = await record_one(params)
            print(f"{name}: {len(recorded[name]['tools'])} tools", file=sys.stderr)
    return recorded


def main() -> None:
    """Record into ``tools.json.gz`` beside this file."""
    base = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/mcprec")
    recorded = anyio.run(record, base)
    data = json.dumps(recorded, indent=1, sort_keys=True).encode()
    (HERE / "tools.json.gz").write_bytes(gzip.compress(data, mtime=0))


if __name__ == "__main__":
    main()

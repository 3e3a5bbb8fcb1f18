"""The MCP reference servers' tools (modelcontextprotocol/servers), as they list them.

``tools.json.gz`` holds each server's recorded ``tools/list`` answer (see ``record.py``).
Every tool is built into a callgate tool the way `callgate.mcp.import_tools` builds it
(`remote_spec`), one at a time so a refusal is counted with its reason; then each
server's recorded list is served by an in-process MCP server (the SDK's own `Server`)
and imported through `import_tools_sync`, the path users take, which must import the
same tools. The checks run on the imported registry; no call reaches any server.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import mcp_types
from mcp.server.lowlevel import Server

from callgate import Registry
from callgate.mcp import import_tools_sync
from callgate.mcp.client import ToolConfig, remote_spec, tool_definition

from .._checks import check_registry, crash_text, register, timed
from .._report import SourceReport

DATA = Path(__file__).with_name("tools.json.gz")
SAMPLE = ("time", "fetch", "memory")
"""The servers the fast sample takes (``full=False``); ``full=True`` takes all seven."""


def recorded() -> dict[str, Any]:
    """``{server: {"server": info, "tools": [tool, ...]}}`` as recorded."""
    data: dict[str, Any] = json.loads(gzip.decompress(DATA.read_bytes()))
    return data


class _Unreachable:
    """An upstream that is never called: the corpus only builds and checks tools."""

    async def list_tools(self) -> list[mcp_types.Tool]:
        raise AssertionError("the corpus never lists tools from this upstream")

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        raise AssertionError("the corpus never calls an MCP tool")


def _serving(name: str, tools: list[dict[str, Any]]) -> Server[Any]:
    """An in-process MCP server listing ``tools`` exactly as recorded; calls are refused."""
    listed = [mcp_types.Tool.model_validate(t) for t in tools]

    async def list_tools(ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: Any) -> mcp_types.CallToolResult:
        text = mcp_types.TextContent(type="text", text="the corpus runs no tool")
        return mcp_types.CallToolResult(content=[text], is_error=True)

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


def run(full: bool) -> SourceReport:
    """Build every recorded tool, import each server's list, and check the result."""
    report = SourceReport(source="mcp-servers")
    with timed(report):
        servers = recorded()
        registry = Registry()
        for server, entry in servers.items():
            if not full and server not in SAMPLE:
                continue
            built: list[str] = []
            for raw in entry["tools"]:

                def build(server: str = server, raw: dict[str, Any] = raw) -> str:
                    definition = tool_definition(mcp_types.Tool.model_validate(raw))
                    spec = remote_spec(
                        definition,
                        server_name=server,
                        upstream=_Unreachable(),
                        config=ToolConfig(),
                        default_effects=[f"network:{server}"],
                        pins=None,
                        prefix=f"{server}_",
                    )
                    return spec.name

                name = register(report, f"{server}/{raw.get('name')}", build)
                if name is not None:
                    built.append(name)
            try:
                imported = import_tools_sync(
                    _serving(server, entry["tools"]), server_name=server, prefix=f"{server}_"
                )
            except Exception as exc:  # the real import path must not raise on real servers
                report.crashes.append(f"{server}: import_tools_sync: {crash_text(exc)}")
                continue
            names = [spec.name for spec in imported]
            if names != built:
                report.checks_failed.append(
                    f"{server}: import_tools_sync imported {names}, one at a time built {built}"
                )
            for spec in imported:
                registry.add(spec)
        check_registry(registry, report)
    return report

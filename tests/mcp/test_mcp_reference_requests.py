"""The reference servers' requests of the client pass through the proxy: ``server-everything``
shows its sampling, elicitation and roots tools through the proxy as it does to a direct client
that declares them, and they answer the same; ``server-filesystem`` started with no folder takes
its folder from the client's roots through the proxy.

Runs where ``make corpus`` installed the reference servers (``$CALLGATE_MCP_SERVERS``, default
``~/.cache/callgate/mcp-servers``); skipped elsewhere, saying how to install them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client, StdioServerParameters

from callgate import MemoryLedger, Policy, allow
from callgate.ledger.base import CallState
from callgate.mcp import proxy

SERVERS = Path(
    os.environ.get("CALLGATE_MCP_SERVERS") or Path.home() / ".cache" / "callgate" / "mcp-servers"
)
BIN = SERVERS / "npm" / "node_modules" / ".bin"
EVERYTHING = BIN / "mcp-server-everything"
FILESYSTEM = BIN / "mcp-server-filesystem"

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.integration,
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        not (EVERYTHING.exists() and FILESYSTEM.exists()),
        reason="the MCP reference servers are not installed: `python -m "
        "tests.corpus.mcp_conformance.install` (run by `make corpus`) installs them",
    ),
]

ASKING = ("trigger-sampling-request", "trigger-elicitation-request", "get-roots-list")
ARGUMENTS: dict[str, dict[str, Any]] = {
    "trigger-sampling-request": {"prompt": "Say hello", "maxTokens": 20},
    "trigger-elicitation-request": {},
    "get-roots-list": {},
}


class Client_:
    """A client that declares sampling, elicitation and roots (the folder ``root``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.asked: list[str] = []

    async def sampling(self, ctx: Any, params: mcp_types.CreateMessageRequestParams) -> Any:
        self.asked.append("sampling")
        return mcp_types.CreateMessageResult(
            role="assistant", content=mcp_types.TextContent(text="hello there"), model="fixed"
        )

    async def elicitation(self, ctx: Any, params: mcp_types.ElicitRequestParams) -> Any:
        self.asked.append("elicitation")
        return mcp_types.ElicitResult(action="decline")

    async def roots(self, ctx: Any) -> Any:
        self.asked.append("roots")
        return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri=self.root.as_uri())])

    def options(self) -> dict[str, Any]:
        return {
            "sampling_callback": self.sampling,
            "elicitation_callback": self.elicitation,
            "list_roots_callback": self.roots,
        }


def texts(result: mcp_types.CallToolResult) -> tuple[bool, list[str]]:
    return bool(result.is_error), [getattr(b, "text", b.type) for b in result.content]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_everything_shows_and_answers_its_asking_tools_through_the_proxy(
    tmp_path: Path, mode: str
) -> None:
    """A direct client that declares sampling, elicitation and roots sees 17 tools; through the
    proxy the same 17, and the three asking tools answer as they do directly; the sampling
    request is in the audit trail."""
    params = StdioServerParameters(command=str(EVERYTHING))
    direct = Client_(tmp_path)
    async with Client(params, **direct.options()) as client:
        want_tools = sorted(t.name for t in (await client.list_tools()).tools)
        want = {n: texts(await client.call_tool(n, ARGUMENTS[n])) for n in ASKING}
    assert set(ASKING) <= set(want_tools)
    ledger = MemoryLedger()
    through = Client_(tmp_path)
    async with (
        proxy(params, server_name="everything", ledger=ledger, policy=Policy([allow()])) as gate,
        Client(gate.server, mode=mode, **through.options()) as client,  # type: ignore[arg-type]
    ):
        tools = sorted(t.name for t in (await client.list_tools()).tools)
        got = {n: texts(await client.call_tool(n, ARGUMENTS[n])) for n in ASKING}
    assert tools == want_tools
    assert got == want
    assert not any(error for error, _ in got.values())
    # everything asks for the roots when a client connects: through the proxy that request
    # waits for the client's first call, so the order differs.
    assert sorted(through.asked) == sorted(direct.asked) == ["elicitation", "roots", "sampling"]
    assert [r.data["outcome"] for r in ledger.audit() if r.kind == "mcp.sampling"] == ["answered"]


async def test_a_url_elicitation_prerequisite_is_an_error_not_unknown(tmp_path: Path) -> None:
    """``server-everything`` answers a call with JSON-RPC error -32042 (open this URL first):
    the tool did not run, so the ledger records ``error`` (a known failure), not ``unknown``."""
    params = StdioServerParameters(command=str(EVERYTHING))
    ledger = MemoryLedger()
    async with (
        proxy(params, server_name="everything", ledger=ledger, policy=Policy([allow()])) as gate,
        Client(gate.server, **Client_(tmp_path).options()) as client,
    ):
        result = await client.call_tool(
            "trigger-url-elicitation",
            {
                "url": "https://example.com/x",
                "message": "m",
                "elicitationId": "e",
                "errorPath": True,
            },
        )
    assert result.is_error
    assert "-32042" in texts(result)[1][0]
    [record] = ledger.calls()
    assert record.state is CallState.ERROR


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_filesystem_takes_its_folder_from_the_clients_roots(
    tmp_path: Path, mode: str
) -> None:
    """``server-filesystem`` started with no folder asks the client for its roots when it
    starts, before any client is connected to the proxy: the request waits for the client, and
    the client's folder is then the one the server allows."""
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "note.txt").write_text("hello\n", encoding="utf-8")
    params = StdioServerParameters(command=str(FILESYSTEM))
    client_side = Client_(folder.resolve())
    async with (
        proxy(params, server_name="files", ledger=MemoryLedger(), policy=Policy([allow()])) as gate,
        Client(gate.server, mode=mode, **client_side.options()) as client,  # type: ignore[arg-type]
    ):
        with anyio.fail_after(60):
            listed = await client.call_tool("list_directory", {"path": str(folder)})
            read = await client.call_tool("read_text_file", {"path": str(folder / "note.txt")})
    assert texts(listed) == (False, ["[FILE] note.txt"])
    assert texts(read) == (False, ["hello\n"])
    assert client_side.asked == ["roots"]


async def test_a_clients_new_roots_reach_the_filesystem_server(tmp_path: Path) -> None:
    """A 2025-era client whose roots change says so (``notifications/roots/list_changed``):
    the proxy tells the upstream, which asks again through the proxy, and the new folder is
    the one allowed; the old one no longer is."""
    import warnings

    from mcp.shared.exceptions import MCPDeprecationWarning

    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
        (folder / "note.txt").write_text(folder.name, encoding="utf-8")
    client_side = Client_(first.resolve())
    params = StdioServerParameters(command=str(FILESYSTEM))
    async with (
        proxy(params, server_name="files", ledger=MemoryLedger(), policy=Policy([allow()])) as gate,
        Client(gate.server, mode="legacy", **client_side.options()) as client,
    ):
        with anyio.fail_after(60):
            before = await client.call_tool("list_directory", {"path": str(second)})
            client_side.root = second.resolve()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.session.send_roots_list_changed()
            while True:
                after = await client.call_tool("list_directory", {"path": str(second)})
                if not after.is_error:
                    break
                await anyio.sleep(0.2)
            old = await client.call_tool("list_directory", {"path": str(first)})
    assert before.is_error
    assert texts(after) == (False, ["[FILE] note.txt"])
    assert old.is_error
    assert client_side.asked == ["roots", "roots"]

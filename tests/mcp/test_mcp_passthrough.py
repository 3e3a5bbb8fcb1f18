"""The proxy passes the protocol through, not only tools: what a client sees through the proxy
is compared with what the same client sees directly (the SDK's client, a real stdio server)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client
from mcp_support import upstream_params

from callgate import MemoryLedger, Policy, allow
from callgate.mcp import PinStore, proxy

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


class Seen:
    """What a client received besides results: progress updates and log messages."""

    def __init__(self) -> None:
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.logs: list[Any] = []

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    async def on_log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params.data)


async def work(client: Client, seen: Seen) -> mcp_types.CallToolResult:
    return await client.call_tool("work", {"steps": 4}, progress_callback=seen.on_progress)


async def test_progress_and_log_notifications_pass_through(log: Path) -> None:
    """4 progress updates and 4 log messages directly; the same through the proxy."""
    direct = Seen()
    async with Client(
        upstream_params("echo", log), logging_callback=direct.on_log, log_level="info"
    ) as client:
        await work(client, direct)
    assert len(direct.progress) == 4
    assert len(direct.logs) == 4

    proxied = Seen()
    async with (
        proxy(
            upstream_params("echo", log),
            server_name="echo",
            ledger=MemoryLedger(),
            policy=Policy([allow()]),
        ) as gate,
        Client(gate.server, logging_callback=proxied.on_log, log_level="info") as client,
    ):
        result = await work(client, proxied)
    assert not result.is_error
    assert proxied.progress == direct.progress
    assert proxied.logs == direct.logs


async def test_title_annotations_and_output_schema_are_kept(log: Path) -> None:
    """The listing through the proxy keeps the upstream's title, annotations (hints only:
    they never grant anything) and output schema."""
    async with Client(upstream_params("echo", log)) as client:
        [direct] = [t for t in (await client.list_tools()).tools if t.name == "lookup"]
    async with (
        proxy(
            upstream_params("echo", log),
            server_name="echo",
            ledger=MemoryLedger(),
            policy=Policy([allow()]),
        ) as gate,
        Client(gate.server) as client,
    ):
        [proxied] = [t for t in (await client.list_tools()).tools if t.name == "lookup"]
        result = await client.call_tool("lookup", {"word": "gate"})
    assert direct.title == "Look up a word"
    assert proxied.title == direct.title
    assert direct.annotations is not None
    assert proxied.annotations == direct.annotations
    assert direct.output_schema is not None
    assert proxied.output_schema == direct.output_schema
    assert result.structured_content == {"length": 4}


async def test_annotations_grant_nothing(log: Path) -> None:
    """``readOnlyHint`` is shown to the client but never read for authority: under the
    default policy (every call asks a person) the read-only tool still waits for approval."""
    async with (
        proxy(upstream_params("echo", log), server_name="echo", ledger=MemoryLedger()) as gate,
        Client(gate.server) as client,
    ):
        [listed] = [t for t in (await client.list_tools()).tools if t.name == "lookup"]
        result = await client.call_tool("lookup", {"word": "gate"})
    assert listed.annotations is not None
    assert listed.annotations.read_only_hint is True
    assert result.meta is not None
    assert result.meta["callgate/status"] == "pending"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_clients_are_told_when_an_approved_pin_makes_a_tool_visible(
    log: Path, tmp_path: Path, mode: str
) -> None:
    """A tool blocked by its pin is hidden; once a person approves it from another process
    the proxy tells its client the tool list changed (a ``subscriptions/listen`` event on
    the 2026-07-28 protocol, ``notifications/tools/list_changed`` before it), and the
    client that lists again sees the tool, without reconnecting."""
    pins = tmp_path / "pins.json"
    policy = Policy([allow()])
    async with proxy(
        upstream_params("mail", log),
        server_name="mail",
        ledger=MemoryLedger(),
        policy=policy,
        pins=pins,
    ):
        pass
    notified = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            notified.set()

    changed = upstream_params("mail", log, "--variant", "changed")
    async with (
        proxy(
            changed,
            server_name="mail",
            ledger=MemoryLedger(),
            policy=policy,
            pins=pins,
            watch_interval=0.1,
        ) as gate,
        Client(gate.server, mode=mode, message_handler=on_message) as client,  # type: ignore[arg-type]
    ):
        assert gate.server.create_initialization_options  # the SDK server is served
        caps = client.server_capabilities
        assert caps.tools is not None
        assert caps.tools.list_changed is True
        assert [t.name for t in (await client.list_tools()).tools] == ["read_inbox"]
        if mode == "legacy":
            PinStore(pins).approve("mail", "send_email", by="ops")
            with anyio.fail_after(20):
                await notified.wait()
        else:
            async with client.listen(tools_list_changed=True) as events:
                PinStore(pins).approve("mail", "send_email", by="ops")
                with anyio.fail_after(20):
                    event = await events.__anext__()
            assert "ToolsListChanged" in type(event).__name__
        names = [t.name for t in (await client.list_tools()).tools]
    assert names == ["read_inbox", "send_email"]


async def test_a_call_the_client_cancels_is_cancelled_upstream(log: Path) -> None:
    """The client gives up on a hanging call: the upstream is told (its handler is
    cancelled), and the ledger records the call as unknown (it was sent)."""
    from mcp_support import upstream_calls

    from callgate.ledger.base import CallState

    ledger = MemoryLedger()
    async with (
        proxy(
            upstream_params("hang", log, "--log-cancel"),
            server_name="slow",
            ledger=ledger,
            policy=Policy([allow()]),
        ) as gate,
        Client(gate.server) as client,
    ):
        with anyio.move_on_after(30) as scope:
            async with anyio.create_task_group() as tasks:

                async def call() -> None:
                    await client.call_tool("start_job", {"name": "nightly"})

                tasks.start_soon(call)
                while not upstream_calls(log):
                    await anyio.sleep(0.02)
                tasks.cancel_scope.cancel()
        assert not scope.cancelled_caught
        with anyio.fail_after(20):
            while "start_job.cancelled" not in [c["tool"] for c in upstream_calls(log)]:
                await anyio.sleep(0.05)
    [record] = ledger.calls()
    assert record.state is CallState.UNKNOWN


async def test_progress_passes_through_the_proxy_command(log: Path, tmp_path: Path) -> None:
    """4 progress updates through `callgate mcp proxy` over stdio, as through proxy()."""
    from mcp_support import UPSTREAM, callgate_params

    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\naction = "allow"\n')
    params = callgate_params(
        "mcp",
        "proxy",
        "--policy",
        str(policy),
        "--pins",
        str(tmp_path / "pins.json"),
        "--db",
        str(tmp_path / "callgate.db"),
        "--",
        sys.executable,
        str(UPSTREAM),
        "echo",
        env={"UPSTREAM_LOG": str(log)},
    )
    seen = Seen()
    async with Client(params) as client:
        result = await work(client, seen)
    assert not result.is_error
    assert len(seen.progress) == 4

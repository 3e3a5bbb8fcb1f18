"""A policy-enforcing MCP gateway: an MCP server in front of any MCP server.

The proxy connects to one upstream server (a stdio command or a Streamable
HTTP URL), imports its tools as untrusted remote tools (`RemoteToolset`),
and serves them through a `Gate` (`GateServer`). Neither the client (a
desktop app, an IDE) nor the upstream server changes; between them every
call is validated against the upstream's schema, authorized by the policy,
approved by a person when the policy asks, recorded, and bounded by a
timeout. A timeout is reported as ``unknown``; the gate retries only tools
configured as reads, within what is left of the same timeout. A stdio
upstream's whole process group is ended when the proxy closes.

Pins are checked whenever the client lists tools and when the upstream
announces that its tool list changed: a tool whose definition changed is
hidden from listings and its calls are rejected until a person approves it.

The upstream is declared sampling, elicitation and roots, and each such request it
makes goes to the client whose call is in flight (`callgate.mcp.forward`); sampling
and elicitation are written to the audit trail. Resources and prompts are not
forwarded (docs/mcp.md says why).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import anyio
import mcp_types
from mcp import Client, ClientSession

from callgate.approvals import Approvals
from callgate.authorize.policy import Policy
from callgate.errors import ToolFailure
from callgate.gate import Gate
from callgate.ledger.base import Ledger
from callgate.mcp.client import (
    DEFAULT_TIMEOUT,
    ClientUpstream,
    RemoteToolset,
    SessionUpstream,
    ToolConfig,
    UpstreamSource,
    suggested_rules,
)
from callgate.mcp.forward import FORWARDABLE, MAX_REQUESTS_PER_CALL, ClientRequests
from callgate.mcp.pins import PinReport, PinStore
from callgate.mcp.server import DEFAULT_MAX_ARGUMENT_CHARS, GateServer
from callgate.mcp.upstream import Restart, SupervisedUpstream
from callgate.tools import ToolSpec

__all__ = ["ProxyCatalog", "proxy"]

logger = logging.getLogger("callgate.mcp")


class ProxyCatalog:
    """The upstream's tools as a `ToolCatalog`: re-listed (and pin-checked) on every listing,
    and before a call once the upstream said its tool list changed."""

    def __init__(self, toolset: RemoteToolset) -> None:
        self.toolset = toolset
        self.stale = False

    async def listing(self) -> Sequence[ToolSpec]:
        try:
            await self.toolset.refresh()
        except ToolFailure:
            # The upstream is down (restarting): the tools last seen, checked again on
            # the next listing; a call to one is refused until it is back.
            return self.toolset.visible()
        self.stale = False
        return self.toolset.visible()

    def presented(self, spec: ToolSpec) -> dict[str, Any]:
        """The upstream's title, annotations and output schema for one listed tool."""
        return self.toolset.presented(spec)

    async def prepare_call(self, name: str) -> None:
        if self.stale:
            self.stale = False
            await self.toolset.refresh()

    async def on_message(self, message: Any) -> None:
        """The upstream session's message handler: notes a changed tool list."""
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.stale = True


def _audit(gate: Gate, server_name: str) -> Callable[[PinReport], None]:
    """Write each pin report that found something to the gate's audit trail."""

    def record(report: PinReport) -> None:
        if report.differs or report.first_use:
            gate.ledger.record_event(
                "mcp.tools",
                run_id=f"mcp-proxy:{server_name}",
                call_id=None,
                data={
                    "server": server_name,
                    "first_use": report.first_use,
                    "added": list(report.added),
                    "changed": list(report.changed),
                    "removed": list(report.removed),
                    "blocked": list(report.blocked),
                },
            )

    return record


def _upstream_audit(gate: Gate, server_name: str) -> Callable[[str, Mapping[str, Any]], None]:
    """Write each change of the upstream's state (down, up again, failed) to the audit trail."""

    def record(state: str, data: Mapping[str, Any]) -> None:
        gate.ledger.record_event(
            "mcp.upstream", run_id=f"mcp-proxy:{server_name}", call_id=None, data=dict(data)
        )

    return record


def _requests_audit(gate: Gate, server_name: str) -> Callable[[str, Mapping[str, Any]], None]:
    """Write each sampling or elicitation request of the upstream to the audit trail, under the
    run and call it served."""

    def record(kind: str, data: Mapping[str, Any]) -> None:
        gate.ledger.record_event(
            kind,
            run_id=data.get("run_id") or f"mcp-proxy:{server_name}",
            call_id=data.get("call_id"),
            data=dict(data),
        )

    return record


async def _watch_visible(server: GateServer, catalog: ProxyCatalog, interval: float) -> None:
    """Tell the clients when the tools they may see change: a pin approved or forgotten (the
    pin file is re-read when it changed), or the upstream's own list changed."""
    seen = [spec.name for spec in catalog.toolset.visible()]
    while True:
        await anyio.sleep(interval)
        try:
            if catalog.stale:
                await catalog.prepare_call("")
            now = [spec.name for spec in catalog.toolset.visible()]
        except Exception as exc:  # the upstream is down: checked again next time
            logger.debug("tool visibility not checked: %s", type(exc).__name__)
            continue
        if now != seen:
            seen = now
            await server.tools_changed()


@contextlib.asynccontextmanager
async def proxy(
    upstream: UpstreamSource,
    *,
    server_name: str,
    policy: Policy | None = None,
    pins: PinStore | str | os.PathLike[str] | None = None,
    tools: Mapping[str, ToolConfig] | None = None,
    effects: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    ledger: Ledger | None = None,
    approvals: Approvals | None = None,
    grants: Sequence[str] = (),
    principal: str | None = None,
    context: Mapping[str, Any] | None = None,
    trusted_values: Iterable[Any] = (),
    name: str | None = None,
    gate_options: Mapping[str, Any] | None = None,
    restart: Restart | None = None,
    watch_interval: float = 1.0,
    max_argument_chars: int | None = DEFAULT_MAX_ARGUMENT_CHARS,
    forward_requests: Collection[str] = FORWARDABLE,
    max_requests_per_call: int = MAX_REQUESTS_PER_CALL,
) -> AsyncIterator[GateServer]:
    """Connect to ``upstream`` and yield a `GateServer` that serves its tools through a gate.

    Args:
        upstream: `mcp.StdioServerParameters`, a Streamable HTTP URL, an in-process
            server, or an already connected `mcp.Client` / `mcp.ClientSession`.
        server_name: the local name of the upstream (effects, pins). Never taken
            from the upstream itself.
        policy: the policy (default: every call asks a person, `suggested_rules`).
        pins: the pin store or pin file (default: pins kept in memory).
        tools / effects / timeout: local configuration of the upstream's tools.
        grants: effects granted on top of ``network:<server_name>``, which the
            proxy always grants (the policy decides).
        principal / context / trusted_values: see `GateServer`.
        gate_options: extra keyword arguments for `Gate`.
        restart: how an upstream process that exits is restarted (default `Restart()`:
            3 restarts in a row, after 1, 2 and 4 s); when none is left the session
            ends with `UpstreamFailed`. A call made while the upstream is down is an
            ``error`` and is not sent.
        watch_interval: seconds between checks of which tools are visible: when a
            person approves a pin (`callgate mcp pins approve`, another process) or the
            upstream's tool list changed, clients are sent ``tools/list_changed``.
        max_argument_chars: arguments longer than this (compact JSON) are rejected at
            parse, the limit named, and never sent (see `GateServer`).
        forward_requests: which requests the upstream may make of the client are declared
            to it and forwarded to the client whose call is in flight: ``sampling`` (each
            recorded in the audit trail as ``mcp.sampling``), ``elicitation`` (recorded as
            ``mcp.elicitation``), ``roots`` (`callgate.mcp.forward`). Only for upstreams the
            proxy connects to itself (not an already connected client or session).
        max_requests_per_call: requests of the upstream forwarded during one call (16);
            more are refused. A sampling request over 100,000 characters is refused and
            its ``includeContext`` is rewritten to ``"none"`` (`callgate.mcp.forward`).
    """
    store = pins if isinstance(pins, PinStore) else PinStore(pins)
    requests = ClientRequests(
        forward=forward_requests,
        server_name=server_name,
        max_requests_per_call=max_requests_per_call,
    )
    async with contextlib.AsyncExitStack() as stack:
        catalog_box: list[ProxyCatalog] = []

        async def on_message(message: Any) -> None:
            if catalog_box:
                await catalog_box[0].on_message(message)

        if isinstance(upstream, ClientSession):
            connection: Any = SessionUpstream(upstream)
        elif isinstance(upstream, Client):
            connection = ClientUpstream(upstream)
        else:

            async def relist() -> None:
                if catalog_box:
                    await catalog_box[0].toolset.refresh()

            supervised = SupervisedUpstream(
                upstream,
                server_name=server_name,
                restart=restart,
                client_options={"message_handler": on_message, **requests.client_options()},
                forward_logs=True,
                on_restart=relist,
            )
            tasks = await stack.enter_async_context(anyio.create_task_group())
            # Cancelled first on the way out: the upstream ends with the proxy.
            stack.callback(tasks.cancel_scope.cancel)
            await tasks.start(supervised.run)
            connection = supervised
            requests.notify_roots_changed = supervised.roots_changed
        toolset = RemoteToolset(
            upstream=connection,
            server_name=server_name,
            effects=effects,
            tools=dict(tools or {}),
            pins=store,
            timeout=timeout,
        )
        catalog = ProxyCatalog(toolset)
        catalog_box.append(catalog)
        gate = Gate(
            toolset.registry,
            policy=policy if policy is not None else Policy(suggested_rules(server_name)),
            ledger=ledger,
            approvals=approvals,
            **dict(gate_options or {}),
        )
        toolset.on_report = _audit(gate, server_name)
        if isinstance(connection, SupervisedUpstream):
            connection.on_event = _upstream_audit(gate, server_name)
        await toolset.refresh()
        server = GateServer(
            gate,
            name=name or f"callgate-proxy-{server_name}",
            principal=principal,
            grants=(f"network:{server_name}", *grants),
            context=context,
            trusted_values=trusted_values,
            catalog=catalog,
            list_changed=True,
            lasting_runs=server_name,
            max_argument_chars=max_argument_chars,
            client_requests=requests,
        )
        requests.record = _requests_audit(gate, server_name)
        watchers = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(watchers.cancel_scope.cancel)
        requests.tasks = watchers
        watchers.start_soon(_watch_visible, server, catalog, watch_interval)
        yield server

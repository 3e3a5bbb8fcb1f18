"""The proxy's connection to its upstream server, whose health is a state, not an outcome.

A proxy holds one connection to its upstream for the whole session. When the
upstream process exits, that is a fact about the upstream, not about the next
call: a call made while it is down is never sent, so it is a known failure
(``error``: "not running; nothing was sent"), never ``unknown``. Only a call in
flight when the upstream died may have acted, and only that one is ``unknown``.

`SupervisedUpstream` runs the connection in a task of its own. When a stdio
upstream exits it restarts it after a backoff delay (`Restart`), re-lists its
tools (so pins are checked against the new process) and logs what it did; after
``Restart.attempts`` failures in a row it ends the session with `UpstreamFailed`,
whose message is one line for the operator. An upstream that does not start at
all raises `UpstreamFailed` at once, with its exit code.

Streamable HTTP and in-process upstreams have no process to watch: their calls
go through the connection as before (a dropped connection makes the call in
flight ``unknown``).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from callgate.errors import OutcomeUnknown, ToolFailure
from callgate.mcp.client import REQUEST, ClientUpstream, StdioTransport, connectable

__all__ = ["Restart", "SupervisedUpstream", "UpstreamFailed"]

logger = logging.getLogger("callgate.mcp")


@dataclass(frozen=True, slots=True, kw_only=True)
class Restart:
    """How the proxy restarts an upstream that exited.

    Args:
        attempts: restarts in a row before the session ends (0: never restart).
        delay: seconds before the first restart; each further one waits ``factor``
            times longer, at most ``max_delay``.
        stable: an upstream that ran this many seconds starts the count afresh.
        grace: seconds the session lasts after the last failure, so that calls in
            flight are answered before it ends.
    """

    attempts: int = 3
    delay: float = 1.0
    factor: float = 2.0
    max_delay: float = 30.0
    stable: float = 60.0
    grace: float = 0.5

    def __post_init__(self) -> None:
        if self.attempts < 0 or self.delay < 0 or self.factor < 1 or self.max_delay < 0:
            raise ValueError(
                "Restart: attempts and delays must be >= 0 and factor >= 1, got "
                f"attempts={self.attempts}, delay={self.delay}, factor={self.factor}, "
                f"max_delay={self.max_delay}"
            )

    def delay_for(self, restart: int) -> float:
        """Seconds to wait before restart number ``restart`` (from 1)."""
        return float(min(self.delay * self.factor ** max(restart - 1, 0), self.max_delay))


class UpstreamFailed(Exception):
    """The upstream did not start, or exited and was not restarted: the session ends.

    The message is one line for the operator (the upstream's own error output, if
    any, went to stderr before it).
    """


def _reason(returncode: int | None) -> str:
    if returncode is None:
        return "it stopped answering"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return f"killed by signal {name}"
    return f"exit code {returncode}"


def _running(pid: int | None) -> bool:
    """Whether the process runs (a zombie, dead but not yet reaped, does not)."""
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if sys.platform != "linux":
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _refused(exc: BaseException) -> bool:
    """Whether every failure of a Streamable HTTP connection was a connection that could not
    be made (refused, no such host, a failed TLS handshake): then no request was delivered."""
    try:
        import httpx2
    except ImportError:  # pragma: no cover - the SDK's HTTP client is a dependency
        return False
    leaves = _leaves(exc)
    return bool(leaves) and all(isinstance(leaf, httpx2.ConnectError) for leaf in leaves)


def _connection_lost(exc: BaseException) -> bool:
    if isinstance(exc, MCPError):
        return exc.error.code == mcp_types.CONNECTION_CLOSED
    return isinstance(
        exc, anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream
    )


class SupervisedUpstream:
    """One upstream connection kept by a task of its own (`run`), restarted when it exits.

    It is the proxy's `_Upstream`: `list_tools` and `call_tool` go to the current
    connection, or fail with "not running; nothing was sent" while there is none.
    """

    def __init__(
        self,
        target: Any,
        *,
        server_name: str,
        restart: Restart | None = None,
        client_options: Mapping[str, Any] | None = None,
        on_restart: Callable[[], Awaitable[object]] | None = None,
        on_event: Callable[[str, Mapping[str, Any]], None] | None = None,
        forward_logs: bool = False,
    ) -> None:
        self.target = target
        self.is_process = isinstance(target, StdioServerParameters)
        """A stdio command (restarted when it exits), else a connection (reconnected when
        it is lost: Streamable HTTP)."""
        self.server_name = server_name
        self.restart = restart if restart is not None else Restart()
        self.client_options = dict(client_options or {})
        if forward_logs:
            # Every level is asked for; the client's own session drops what it did not ask.
            self.client_options.setdefault("logging_callback", self._forward_log)
            self.client_options.setdefault("log_level", "debug")
        self._in_flight: list[Any] = []
        self.on_restart = on_restart
        self.on_event = on_event
        self.state = "starting"
        """``starting``, ``up``, ``down`` (restarting), or ``failed`` (the session ends)."""
        self.reason = ""
        self.restarts = 0
        self.client: Client | None = None
        self._transport: Any = None
        self._down = anyio.Event()
        self._next_try: float | None = None
        self._refused = False
        """The connection went down because it could not be made (HTTP): nothing in flight
        was delivered."""

    # -- the calls -----------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The upstream process's pid (stdio only), while it is connected."""
        transport = self._transport
        return transport.pid if isinstance(transport, StdioTransport) else None

    async def _ready(self) -> ClientUpstream:
        client = self.client
        if self.state == "up" and client is not None and not _running(self.pid):
            # It exited a moment ago and the watcher has not run yet: wait for it to
            # learn why (briefly), so the message can say.
            with anyio.move_on_after(1.0):
                await self._down.wait()
            client = None
        if self.state != "up" or client is None:
            raise ToolFailure(self._not_running(), retryable=True)
        return ClientUpstream(client)

    def _not_running(self) -> str:
        reason = self.reason or "it exited"
        if not self.is_process:
            head = (
                f"the MCP server '{self.server_name}' cannot be reached ({reason}); nothing "
                "was sent."
            )
            if self.state == "failed":
                return f"{head} callgate stopped reconnecting: tell the user it is down."
            when = ""
            if self._next_try is not None:
                when = f" in {max(self._next_try - time.monotonic(), 0):.1f} s"
            return (
                f"{head} callgate is reconnecting (attempt {self.restarts} of "
                f"{self.restart.attempts}{when}): send this call again in a moment."
            )
        head = f"the MCP server '{self.server_name}' is not running ({reason}); nothing was sent."
        if self.state == "failed":
            return f"{head} callgate will not restart it: tell the user it must be restarted."
        when = ""
        if self._next_try is not None:
            when = f" in {max(self._next_try - time.monotonic(), 0):.1f} s"
        return (
            f"{head} callgate is restarting it (restart {self.restarts} of "
            f"{self.restart.attempts}{when}): send this call again in a moment."
        )

    async def list_tools(self) -> list[mcp_types.Tool]:
        upstream = await self._ready()
        return await upstream.list_tools()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        upstream = await self._ready()
        down = self._down
        request = REQUEST.get()
        self._in_flight.append(request)
        try:
            return await upstream.call_tool(name, arguments)
        except Exception as exc:
            if not _connection_lost(exc):
                raise
            # The connection closed under the call: if the process exits (the watcher
            # says so within a moment), the call was in flight when it died.
            with anyio.move_on_after(2.0):
                await down.wait()
            if not down.is_set():
                raise
            if self._refused:
                # The server could not be reached at all: this call was never delivered.
                raise ToolFailure(self._not_running(), retryable=True) from None
            raise OutcomeUnknown(
                f"the MCP server '{self.server_name}' stopped while this call was in flight "
                f"({self.reason or 'it exited'}): it may have acted before it stopped"
            ) from None
        finally:
            self._in_flight.remove(request)

    async def roots_changed(self) -> None:
        """Tell the upstream that its client's roots changed (it then asks for them)."""
        client = self.client
        if self.state != "up" or client is None:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            sending = client.session.send_roots_list_changed()
        await sending

    async def _forward_log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        """Pass an upstream log message to the client whose call is in flight.

        A log message does not say which call it belongs to, so it is forwarded only
        while exactly one call is in flight (never to another client's request);
        otherwise it is dropped, and logged at debug level.
        """
        requests = [r for r in self._in_flight if r is not None]
        if len(requests) != 1 or len(self._in_flight) != 1:
            logger.debug("MCP server '%s': a log message not forwarded", self.server_name)
            return
        request = requests[0]
        try:
            with warnings.catch_warnings():
                # Deprecated by the 2026-07-28 protocol, still what a server sends.
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                sending = request.session.send_log_message(
                    params.level, params.data, params.logger, related_request_id=request.request_id
                )
            await sending
        except Exception as exc:  # the client went away
            logger.debug("log message not forwarded: %s", type(exc).__name__)

    # -- the connection's life -------------------------------------------------------

    def _event(self, state: str, **data: Any) -> None:
        if self.on_event is not None:
            self.on_event(state, {"server": self.server_name, "state": state, **data})

    async def _watch(self, transport: Any) -> str:
        """Wait until the upstream process exits or its output can no longer be read; why."""
        process: Any = getattr(transport, "_process", None)
        if not isinstance(transport, StdioTransport):
            await anyio.sleep_forever()
        reason = "its output could not be read any more (the reader ended)"
        async with anyio.create_task_group() as watchers:

            async def exited() -> None:
                nonlocal reason
                if process is None:
                    await anyio.sleep_forever()
                returncode = await process.wait()
                reason = _reason(returncode if isinstance(returncode, int) else None)
                watchers.cancel_scope.cancel()

            async def unread() -> None:
                await transport.reader_ended.wait()
                # The process may be exiting too: its exit status is the better reason.
                await anyio.sleep(0.2)
                watchers.cancel_scope.cancel()

            watchers.start_soon(exited)
            watchers.start_soon(unread)
        return reason

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Connect, and reconnect after each exit, until cancelled or out of restarts.

        Raises `UpstreamFailed` when the first start fails (before ``task_status``
        is reported) or when no restart is left.
        """
        started = False
        failures = 0
        while True:
            transport = connectable(self.target)
            self._transport = transport
            up_at = time.monotonic()
            try:
                async with Client(transport, **self.client_options) as client:
                    self.client = client
                    self.state = "up"
                    self._next_try = None
                    up_at = time.monotonic()
                    if started:
                        logger.warning(
                            "the upstream MCP server '%s' was %s (restart %d of %d)",
                            self.server_name,
                            "restarted" if self.is_process else "reconnected",
                            self.restarts,
                            self.restart.attempts,
                        )
                        self._event("up", restart=self.restarts, pid=self.pid)
                        if self.on_restart is not None:
                            await self.on_restart()
                    else:
                        started = True
                        task_status.started()
                    reason = await self._watch(transport)
                self._refused = False
            except Exception as exc:
                reason = self._failure(transport, exc)
                self._refused = not isinstance(transport, StdioTransport) and _refused(exc)
                if not started:
                    raise UpstreamFailed(
                        f"the upstream MCP server '{self.server_name}' did not start: {reason}. "
                        "Its own error output, if any, is above; check its command and arguments."
                    ) from None
            self.client = None
            self.state = "down"
            self.reason = reason
            self._down.set()
            if time.monotonic() - up_at >= self.restart.stable:
                failures = 0
            failures += 1
            self._event("down", reason=reason)
            if failures > self.restart.attempts:
                self.state = "failed"
                allowed = self.restart.attempts
                what = "exited" if self.is_process else "cannot be reached"
                undone = "restarted" if self.is_process else "reconnected"
                message = (
                    f"the upstream MCP server '{self.server_name}' {what} ({reason}) and was "
                    f"not {undone} ({allowed} restart{'s' if allowed != 1 else ''} in a row "
                    "allowed, see --restarts); ending the session"
                )
                logger.error("%s", message)
                self._event("failed", reason=reason)
                # Calls in flight get their answer (unknown) before the session ends.
                await anyio.sleep(self.restart.grace)
                raise UpstreamFailed(message)
            self.restarts = failures
            delay = self.restart.delay_for(failures)
            self._next_try = time.monotonic() + delay
            logger.warning(
                "the upstream MCP server '%s' %s (%s); %s in %.1f s "
                "(restart %d of %d); calls meanwhile are refused, nothing is sent",
                self.server_name,
                "exited" if self.is_process else "cannot be reached",
                reason,
                "restarting it" if self.is_process else "reconnecting",
                delay,
                failures,
                self.restart.attempts,
            )
            await anyio.sleep(delay)
            self._down = anyio.Event()

    @staticmethod
    def _failure(transport: Any, exc: BaseException) -> str:
        process = getattr(transport, "_process", None)
        returncode = getattr(process, "returncode", None)
        if isinstance(returncode, int):
            return _reason(returncode)
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        if isinstance(exc, OSError):
            return f"{type(exc).__name__}: {exc.strerror or exc}"
        return f"the connection failed ({type(exc).__name__})"

"""Network egress for sandboxed code, one gated connection at a time.

The sandbox has no network of its own. A deployer who wants code to reach a
service registers `network_tool` and lists it among the code's tools
(``python_tool(tools=[..., "network_connect"])``). Inside, the code's
``socket.create_connection`` (which ``http.client`` and ``urllib`` use) then
asks the host over the bridge; the host submits a ``network_connect(host,
port)`` call through the same run, so the connection is the effect
``network:<host>``: it needs a grant, the policy rules apply, and ``host`` is a
sink (a host that appears only in untrusted data is escalated or denied, like
any tainted destination). Admitted, the host resolves the name, refuses
private, loopback and link-local addresses unless ``allow_private``, connects,
and keeps the connection: the runner hands the code one end of a new socketpair
(``SCM_RIGHTS`` over the bridge socket) and relays bytes between the other end
and the connection (`callgate.sandbox.runner`). The code can use that one
connection and nothing else: it holds no socket of the host's network, so it
cannot re-aim or listen on it, and it still cannot create a socket of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import re
import socket
import weakref
from collections.abc import Callable, Iterator
from typing import Annotated, Any

from pydantic import Field

from callgate.errors import ToolFailure
from callgate.tools import CallContext, ToolSpec, make_spec

__all__ = [
    "NETWORK_TOOL",
    "drop_connections",
    "expecting_connection",
    "is_network_tool",
    "network_tool",
    "take_connection",
]

NETWORK_TOOL = "network_connect"

_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$|^\[?[0-9A-Fa-f:.]+\]?$")

_handlers: weakref.WeakSet[Callable[..., Any]] = weakref.WeakSet()
"""The handlers `network_tool` made: their calls hand a connection to the code."""

_opened: dict[tuple[str, str], socket.socket] = {}
"""(run id, call name) → a connection opened by an admitted call, until the bridge takes it."""

_expected: set[tuple[str, str]] = set()
"""(run id, call id) of calls from code that the bridge is submitting: only these may
connect. A call the model makes directly has no code to hand a connection to; it used to
connect anyway and leave the socket open for the host process's life."""


@contextlib.contextmanager
def expecting_connection(run_id: str, call_id: str) -> Iterator[None]:
    """While the bridge submits the code's call ``call_id``, let `network_tool` connect."""
    key = (run_id, call_id)
    _expected.add(key)
    try:
        yield
    finally:
        _expected.discard(key)


def is_network_tool(spec: ToolSpec) -> bool:
    """Whether ``spec`` was made by `network_tool` (its admitted calls open a connection)."""
    return spec.fn in _handlers


def take_connection(run_id: str, call_id: str) -> socket.socket | None:
    """The connection the call opened, for the bridge to hand to the code (once)."""
    return _opened.pop((run_id, call_id), None)


def drop_connections(run_id: str, prefix: str) -> None:
    """Close connections of calls under ``prefix`` that were never handed over."""
    for key in [k for k in _opened if k[0] == run_id and k[1].startswith(prefix)]:
        with contextlib.suppress(OSError):
            _opened.pop(key).close()


def _refused(address: str) -> str | None:
    ip = ipaddress.ip_address(address.split("%")[0])
    if ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_reserved:
        return "a private, loopback or link-local address"
    if ip.is_multicast or ip.is_unspecified:
        return "a multicast or unspecified address"
    return None


def network_tool(
    *, name: str = NETWORK_TOOL, allow_private: bool = False, timeout: float = 10.0
) -> ToolSpec:
    """The tool that opens one TCP connection for sandboxed code (effect ``network:{host}``).

    Args:
        name: the tool's name (list it in ``python_tool(tools=[...])``).
        allow_private: also connect to private, loopback and link-local addresses
            (off by default: a public name resolving to an internal address is refused).
        timeout: seconds to resolve and connect.
    """

    async def network_connect(
        host: str, port: Annotated[int, Field(ge=1, le=65535)], ctx: CallContext
    ) -> str:
        if (ctx.run_id, ctx.call_id) not in _expected:
            raise ToolFailure(
                f"{name} opens a connection for code running in a sandbox "
                "(list it in python_tool(tools=[...]) and call socket.create_connection "
                "inside); called directly there is nothing to hand the connection to, so "
                "nothing was connected or sent",
                retryable=False,
            )
        if not _HOST.fullmatch(host):
            raise ToolFailure(
                f"host {host[:80]!r} is not a host name or address; give e.g. 'api.example.com'",
                retryable=False,
            )
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
        except OSError:
            raise ToolFailure(f"host {host!r} could not be resolved; nothing was sent") from None
        last: OSError | None = None
        for family, kind, proto, _, address in infos:
            why = None if allow_private else _refused(str(address[0]))
            if why is not None:
                raise ToolFailure(
                    f"host {host!r} resolves to {address[0]}, {why}: the sandbox may not "
                    "connect there (network_tool(allow_private=True) allows it)",
                    retryable=False,
                )
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            try:
                await loop.sock_connect(sock, address)
            except OSError as exc:
                sock.close()
                last = exc
                continue
            _opened[ctx.run_id, ctx.call_id] = sock
            return f"connected to {host}:{port} ({address[0]})"
        detail = type(last).__name__ if last else "no address"
        raise ToolFailure(f"could not connect to {host}:{port} ({detail}); nothing was sent")

    _handlers.add(network_connect)
    network_connect.__doc__ = (
        "Open a TCP connection from the sandbox.\n\nArgs:\n"
        "    host: host name or address.\n    port: TCP port."
    )
    return make_spec(
        network_connect,
        name=name,
        effects=["network:{host}"],
        sinks=["host"],
        risk="write",
        timeout=timeout,
    )

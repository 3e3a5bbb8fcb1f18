"""This process's stdin and stdout as the MCP wire of a stdio server, without worker threads.

The SDK's `stdio_server` reads stdin and writes stdout through worker threads: every
message in is one hop from a thread to the event loop, and every message out two (the
write, then the flush). On the asyncio event loop, when stdin and stdout are pipes or
sockets (as when an MCP client starts the server), `stdio_wire` reads and writes them
natively instead: no thread, and a read can be cancelled at once (a proxy told to stop
does not wait for its client's next line).

Elsewhere (a terminal, a regular file, Windows, another event loop), stdin is read by a
daemon thread (`_stdin_lines`, also cancellable) and stdout is left to the SDK.

As the SDK does, while serving fd 0 points at the null device and fd 1 at stderr (handlers
and their children read end of file, and their stray output misses the wire); both are
restored afterwards, in blocking mode.

A line longer than ``line_limit`` bytes is never buffered whole: it is discarded up to its
newline and stands in the stream as `OVERRUN` (not JSON, so the SDK reports it as a bad
message; `answer_bad_lines` answers the client with an error, and logs one line). The
error carries the request's id when the line starts with it plainly (``{"jsonrpc": "2.0",
"id": 3, ...``: the client's call ends at once), else id null.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import re
import stat
import sys
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.from_thread

__all__ = ["OVERRUN", "answer_bad_lines", "line_limit_for", "stdio_wire"]

logger = logging.getLogger("callgate.mcp")

_LINE_LIMIT = 1 << 30
"""The longest line buffered when no argument cap is set."""

_LINE_MARGIN = 1 << 20
"""Bytes a line may have beyond its arguments (the JSON-RPC envelope, the tool's name)."""

OVERRUN = "\x00callgate: line over the limit\n"
"""What stands in the stream for a discarded overlong line (not JSON)."""

_overruns: collections.deque[tuple[int, int | str | None]] = collections.deque(maxlen=64)
"""The limit and request id of overlong lines discarded and not yet answered, oldest first."""

_HEAD_ID = re.compile(
    rb'\A\s*\{(?:\s*"(?:jsonrpc|method)"\s*:\s*"[^"\\]{0,256}"\s*,)*'
    rb'\s*"id"\s*:\s*(-?[0-9]{1,18}|"[^"\\]{0,256}")'
)
"""A request id at the head of a line: a top-level member, after only ``jsonrpc`` and
``method`` (an id inside the params is never taken for it)."""


def _head_id(head: bytes) -> int | str | None:
    """The request id an overlong line starts with, if it says so plainly; else None."""
    found = _HEAD_ID.match(head)
    if found is None:
        return None
    value = json.loads(found.group(1))
    return value if isinstance(value, int | str) else None


def line_limit_for(max_argument_chars: int | None) -> int:
    """The longest client line buffered for an argument cap: each character of the
    arguments may take up to 6 bytes on the wire (a ``\\uXXXX`` escape), plus a margin."""
    if max_argument_chars is None:
        return _LINE_LIMIT
    return 6 * max_argument_chars + _LINE_MARGIN


class answer_bad_lines:
    """The SDK's ``read_stream`` of client messages, where a line the SDK could not read
    (not JSON, not JSON-RPC, or over the line limit) is answered with a JSON-RPC error
    (-32600 for an overlong line, with its id when its head names one, else id null; -32700,
    id null, otherwise), logged in one line, and skipped."""

    def __init__(self, read_stream: Any, write_stream: Any) -> None:
        self._stream = read_stream
        self._write = write_stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    async def __aenter__(self) -> answer_bad_lines:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._stream.__aexit__(*exc)

    def __aiter__(self) -> answer_bad_lines:
        return self

    async def __anext__(self) -> Any:
        while True:
            item = await self._stream.__anext__()
            if not isinstance(item, Exception):
                return item
            await self._answer(item)

    async def _answer(self, item: Exception) -> None:
        import mcp_types
        from mcp.shared.message import SessionMessage

        request_id: int | str | None = None
        if _overruns:
            limit, request_id = _overruns.popleft()
            code = mcp_types.INVALID_REQUEST
            message = (
                f"callgate discarded a message longer than {limit} bytes (the limit follows "
                "the argument cap, --max-argument-chars); send smaller arguments"
            )
        else:
            code = mcp_types.PARSE_ERROR
            message = (
                f"callgate could not read the message: not a JSON-RPC message "
                f"({type(item).__name__})"
            )
        logger.warning("MCP client message refused: %s", message)
        error = mcp_types.JSONRPCError(
            jsonrpc="2.0", id=request_id, error=mcp_types.ErrorData(code=code, message=message)
        )
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._write.send(SessionMessage(message=error))


async def _discard_line(reader: asyncio.StreamReader, consumed: int) -> bool:
    """Drop an overlong line from ``reader`` up to and with its newline; False at the end."""
    while True:
        try:
            await reader.readexactly(consumed)
            await reader.readuntil(b"\n")
            return True
        except asyncio.LimitOverrunError as again:
            consumed = again.consumed
        except asyncio.IncompleteReadError:
            return False


def _native_pipe(fd: int) -> bool:
    """Whether ``fd`` is a pipe or a socket (never a terminal: its mode is shared with the
    shell, which a non-blocking descriptor left behind by a killed process would break)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _asyncio() -> bool:
    try:
        import sniffio

        return sniffio.current_async_library() == "asyncio"
    except Exception:  # no async library detected
        return False


class _Writer:
    """What `stdio_server` needs of stdout: ``write`` and ``flush``, on a native pipe."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


@contextlib.asynccontextmanager
async def stdio_wire(line_limit: int = _LINE_LIMIT) -> AsyncIterator[tuple[Any, Any]]:
    """``(stdin, stdout)`` for the SDK's ``stdio_server(stdin=..., stdout=...)``: native pipes
    when possible, else a thread-read stdin and ``None`` (the SDK's own stdout). A line over
    ``line_limit`` bytes is discarded (`OVERRUN` in its place)."""
    if sys.platform == "win32" or not _asyncio() or not (_native_pipe(0) and _native_pipe(1)):
        async with _stdin_lines(line_limit) as lines:
            yield lines, None
        return
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    os.dup2(2, 1)
    read_transport: Any = None
    write_transport: Any = None
    try:
        reader = asyncio.StreamReader(limit=line_limit)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader),
            os.fdopen(wire_in, "rb", buffering=0, closefd=False),
        )
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin,
            os.fdopen(wire_out, "wb", buffering=0, closefd=False),
        )
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)

        async def lines() -> AsyncIterator[str]:
            while True:
                try:
                    raw = await reader.readuntil(b"\n")
                except asyncio.IncompleteReadError as end:
                    raw = end.partial
                except asyncio.LimitOverrunError as over:
                    try:
                        head = await reader.readexactly(min(over.consumed, 4096))
                    except asyncio.IncompleteReadError:
                        return
                    _overruns.append((line_limit, _head_id(head)))
                    yield OVERRUN
                    if not await _discard_line(reader, over.consumed - len(head)):
                        return
                    continue
                if not raw:
                    return
                yield raw.decode("utf-8", "replace")

        yield lines(), _Writer(writer)
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await writer.drain()
    finally:
        for transport in (read_transport, write_transport):
            if transport is not None:
                transport.close()
        for wire, fd in ((wire_in, 0), (wire_out, 1)):
            with contextlib.suppress(OSError):
                os.set_blocking(wire, True)
            os.dup2(wire, fd)
            os.close(wire)


@contextlib.asynccontextmanager
async def _stdin_lines(line_limit: int = _LINE_LIMIT) -> AsyncIterator[Any]:
    """This process's stdin as lines, read by a daemon thread, so that serving can be
    cancelled while the client sends nothing (None on Windows: the SDK reads stdin).

    The SDK's `stdio_server` reads stdin in a worker thread that a cancellation has to
    wait for: a proxy told to stop would wait for its client's next line before it could
    end its upstream, and could not exit. As the SDK does, fd 0 points at the null device
    while serving (handlers and their children read end of file) and is restored after.
    """
    if sys.platform == "win32":
        yield None
        return
    wire = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    send, receive = anyio.create_memory_object_stream[str](0)
    try:
        async with anyio.from_thread.BlockingPortal() as portal:

            def pump() -> None:
                try:
                    with os.fdopen(wire, "rb", closefd=False) as stream:
                        while raw := stream.readline(line_limit + 1):
                            if len(raw) > line_limit and not raw.endswith(b"\n"):
                                _overruns.append((line_limit, _head_id(raw[:4096])))
                                portal.call(send.send, OVERRUN)
                                while (rest := stream.readline(1 << 16)) and not rest.endswith(
                                    b"\n"
                                ):
                                    pass
                                continue
                            portal.call(send.send, raw.decode("utf-8", "replace"))
                    portal.call(send.aclose)
                except (RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass  # serving is over

            threading.Thread(target=pump, name="callgate-mcp-stdin", daemon=True).start()
            try:
                yield receive
            finally:
                receive.close()
    finally:
        # The wire goes back on fd 0. `wire` itself stays open: the thread may still
        # be blocked reading it, and a closed descriptor could be reused under it.
        os.dup2(wire, 0)

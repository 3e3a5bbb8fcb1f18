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
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.from_thread

__all__ = ["stdio_wire"]

_LINE_LIMIT = 1 << 30
"""The longest line the native reader buffers (the server's own caps come after)."""


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
async def stdio_wire() -> AsyncIterator[tuple[Any, Any]]:
    """``(stdin, stdout)`` for the SDK's ``stdio_server(stdin=..., stdout=...)``: native pipes
    when possible, else a thread-read stdin and ``None`` (the SDK's own stdout)."""
    if sys.platform == "win32" or not _asyncio() or not (_native_pipe(0) and _native_pipe(1)):
        async with _stdin_lines() as lines:
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
        reader = asyncio.StreamReader(limit=_LINE_LIMIT)
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
async def _stdin_lines() -> AsyncIterator[Any]:
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
                        for raw in stream:
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

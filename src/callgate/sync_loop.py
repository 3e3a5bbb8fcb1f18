"""Running async code from synchronous callers, on an event loop kept per thread.

A sync ``submit`` of an async tool, or of a batch, needs an event loop. A
new loop per call (``anyio.run``) costs about a hundred microseconds and
breaks tools that keep loop-bound clients between calls; this module keeps
one loop per thread instead, closed when the interpreter exits. A thread that
already runs a loop (a sync ``submit`` called from async code) hands the
work to a helper thread, which has its own.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import os
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")

_local = threading.local()
_loops: list[asyncio.AbstractEventLoop] = []
_lock = threading.Lock()
_helpers: concurrent.futures.ThreadPoolExecutor | None = None


def run_sync(fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn()`` to completion and return its result (or raise its exception)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:

        def in_helper() -> T:
            return run_sync(fn)

        # The caller's context variables (a trace's current span among them) go along.
        return _helper_threads().submit(contextvars.copy_context().run, in_helper).result()
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or _local.pid != os.getpid():
        # A forked child must not share its parent's loop (and its selector).
        loop = asyncio.new_event_loop()
        _local.loop, _local.pid = loop, os.getpid()
        with _lock:
            _loops.append(loop)
    task = loop.create_task(_awaited(fn))
    try:
        return loop.run_until_complete(task)
    except BaseException:
        # Interrupted (Ctrl-C) outside the task: cancel it, so that it cannot resume
        # inside a later call on this loop.
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(task)
        raise


async def _awaited(fn: Callable[[], Awaitable[T]]) -> T:
    return await fn()


def _helper_threads() -> concurrent.futures.ThreadPoolExecutor:
    global _helpers
    with _lock:
        if _helpers is None:
            _helpers = concurrent.futures.ThreadPoolExecutor(
                max_workers=8, thread_name_prefix="callgate-loop"
            )
        return _helpers


@atexit.register
def _close_all() -> None:
    with _lock:
        loops, _loops[:] = list(_loops), []
    for loop in loops:
        if loop.is_running():  # in a thread still alive at exit: leave it
            continue
        with contextlib.suppress(RuntimeError):
            loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

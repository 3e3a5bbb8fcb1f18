"""Running async code from synchronous callers, on an event loop kept per thread.

A sync ``submit`` of an async tool, or of a batch, needs an event loop. A
new loop per call (``anyio.run``) costs about a hundred microseconds and
breaks tools that keep loop-bound clients between calls; this module keeps
one loop per thread instead, closed when the interpreter exits. A thread that
already runs a loop (a sync ``submit`` or ``Agent.run`` called from async
code, a notebook's cell) hands the work to a helper thread of its own, the
same one every time, so its calls too share one loop. A helper, and its loop,
end when the thread it serves ends.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import os
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")

_local = threading.local()
_loops: list[asyncio.AbstractEventLoop] = []
_lock = threading.Lock()


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
        return _helper().submit(contextvars.copy_context().run, in_helper).result()
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or _local.pid != os.getpid():
        # A forked child must not share its parent's loop (and its selector).
        loop = asyncio.new_event_loop()
        owner = _Owner()
        # When this thread ends, its thread-local data goes and `owner` with it: the loop
        # is closed then (a thread per request would otherwise keep a loop, and its
        # three file descriptors, per thread ever seen). Not at exit: `_close_all` does.
        weakref.finalize(owner, _close_loop, loop).atexit = False
        _local.loop, _local.pid, _local.loop_owner = loop, os.getpid(), owner
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


class _Owner:
    """Held by a thread: when that thread ends, this is freed, and the helper serving the
    thread retires (`_retire`) or the thread's own loop is closed (`_close_loop`)."""


def _helper() -> concurrent.futures.ThreadPoolExecutor:
    """This thread's helper: one thread, the same for every call made from here, so that
    every call runs on one loop. A shared pool handed each call to whichever helper was
    idle, and a loop-bound client then met another loop on the next call."""
    helper: concurrent.futures.ThreadPoolExecutor | None = getattr(_local, "helper", None)
    if helper is None or _local.helper_pid != os.getpid():
        helper = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="callgate-loop"
        )
        owner = _Owner()
        # Not at exit: the loops are closed then by `_close_all`, and the pool refuses work.
        weakref.finalize(owner, _retire, helper).atexit = False
        _local.helper, _local.helper_owner, _local.helper_pid = helper, owner, os.getpid()
    return helper


def _retire(helper: concurrent.futures.ThreadPoolExecutor) -> None:
    """The served thread ended: close the helper's loop in the helper, then end it."""
    with contextlib.suppress(RuntimeError):  # the interpreter is shutting down
        helper.submit(_close_own_loop)
    helper.shutdown(wait=False)


def _close_own_loop() -> None:
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or _local.pid != os.getpid():
        return
    _local.loop = None
    _close_loop(loop)


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Forget a thread's loop and close it (it runs nothing: its thread is done)."""
    with _lock:
        if loop in _loops:
            _loops.remove(loop)
    if loop.is_running() or loop.is_closed():
        return
    with contextlib.suppress(RuntimeError):
        loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


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

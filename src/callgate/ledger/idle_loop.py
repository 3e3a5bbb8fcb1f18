"""Whether the running event loop has nothing to do but the current task (`loop_idle`),
and how to run a function on it as a worker thread would see it (`as_if_no_loop`).

An idle loop cannot be held up: no other task waits to run, no timer is due (so
no timeout around the current task either: `anyio.fail_after` and
`asyncio.timeout` each set one), no callback is queued and no file is watched
but the loop's own wake-up pipe. Work done there without yielding delays no one,
so a lone call under ``asubmit`` does it in place, as ``submit`` does, instead
of paying a thread hop (docs/execution.md, docs/design-notes.md).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["as_if_no_loop", "loop_idle"]

T = TypeVar("T")

try:  # anyio's marker of the running library (anyio.run refuses to start under it)
    from sniffio import current_async_library_cvar as _library
except ImportError:  # pragma: no cover - sniffio comes with anyio
    _library = None  # type: ignore[assignment]


def loop_idle() -> bool:
    """True when the running asyncio loop has no other task, no pending timer, no queued
    callback and no watched file but its wake-up pipe; False off such a loop (trio, a
    loop without these internals: uvloop, Windows' proactor), where nothing is assumed."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    ready: Any = getattr(loop, "_ready", None)
    scheduled: Any = getattr(loop, "_scheduled", None)
    selector: Any = getattr(loop, "_selector", None)
    if ready is None or scheduled is None or selector is None or ready:
        return False
    # A timer cancelled stays in the heap until the loop drops it: only live ones count.
    if any(not handle.cancelled() for handle in scheduled):
        return False
    if len(selector.get_map()) > 1:
        return False
    # Every task of the process, done or not, of any loop: one (this) is a quick yes.
    every: Any = getattr(asyncio.tasks, "_all_tasks", None)
    if every is not None and len(every) <= 1:
        return True
    return len(asyncio.all_tasks(loop)) <= 1


def as_if_no_loop(fn: Callable[[], T]) -> T:
    """``fn()`` run in this thread as a worker thread would see it: no running event loop
    (so ``asyncio.run``, ``anyio.run`` or a sync ``submit`` inside it work as they do in a
    worker thread), restored when it returns or raises."""
    loop = asyncio.events._get_running_loop()
    token: contextvars.Token[str | None] | None = None
    asyncio.events._set_running_loop(None)
    if _library is not None:
        token = _library.set(None)
    try:
        return fn()
    finally:
        if token is not None and _library is not None:
            _library.reset(token)
        asyncio.events._set_running_loop(loop)

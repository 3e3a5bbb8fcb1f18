"""Whether the running event loop has nothing to do but the current task (`loop_idle`).

An idle loop cannot be held up by work done without yielding: no other task
waits to run, no timer is due (so no timeout around the current task either:
`anyio.fail_after` and `asyncio.timeout` each set one), no callback is queued
and no file is watched but the loop's own wake-up pipe. The SQLite ledger's
group commit uses it to commit a lone item in place, as ``submit`` does, with no
yield and no thread hop (docs/design-notes.md). Tool handlers do not: a sync
handler under ``asubmit`` always runs in a worker thread, since it may call back
into the loop (``anyio.from_thread``, ``run_coroutine_threadsafe``), and work
other threads hand the loop while it runs is not visible here.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["loop_idle"]


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

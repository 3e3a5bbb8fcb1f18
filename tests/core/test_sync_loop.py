"""`callgate.sync_loop.run_sync`: async work from sync callers, on one event loop per thread.

A sync ``submit`` of an async tool or a batch runs it here: the result or the
exception comes back as from a plain call, a thread keeps its loop between calls
(loop-bound clients keep working), a caller inside a running loop is served by
a helper thread, and an interrupt leaves no half-run task behind.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from callgate.sync_loop import run_sync

T = TypeVar("T")


def _in_new_thread(fn: Callable[[], T]) -> T:
    """``fn()`` in a thread of its own (a fresh thread-local loop), its result or error."""
    box: dict[str, Any] = {}

    def main() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=main)
    thread.start()
    thread.join(30)
    if "error" in box:
        raise box["error"]
    result: T = box["result"]
    return result


async def _current_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


def test_the_result_comes_back_as_from_a_plain_call() -> None:
    """run_sync returns what the coroutine returns, after awaiting inside it."""

    async def add() -> int:
        await asyncio.sleep(0)
        return 2 + 3

    assert run_sync(add) == 5


def test_the_exception_comes_back_as_raised() -> None:
    """The coroutine's own exception object is raised to the caller."""
    error = ValueError("the tool failed")

    async def fail() -> None:
        await asyncio.sleep(0)
        raise error

    with pytest.raises(ValueError, match="the tool failed") as caught:
        run_sync(fail)
    assert caught.value is error


def test_a_thread_keeps_its_loop_between_calls() -> None:
    """Two calls in one thread run on the same open loop, so loop-bound objects keep working."""

    def twice() -> tuple[Any, Any, str, bool]:
        box: dict[str, asyncio.Future[str]] = {}

        async def make() -> asyncio.AbstractEventLoop:
            box["future"] = asyncio.get_running_loop().create_future()  # bound to this loop
            return asyncio.get_running_loop()

        async def use() -> str:
            box["future"].set_result("kept")
            return await box["future"]  # a future of another loop would raise RuntimeError

        first = run_sync(make)
        second = run_sync(_current_loop)
        return first, second, run_sync(use), first.is_closed()

    first, second, got, closed_between_calls = _in_new_thread(twice)
    assert first is second
    assert not closed_between_calls
    assert got == "kept"


def test_each_thread_has_a_loop_of_its_own() -> None:
    """Two threads never share a loop."""
    mine = run_sync(_current_loop)
    other = _in_new_thread(lambda: run_sync(_current_loop))
    assert other is not mine


def test_a_caller_inside_a_running_loop_is_served_by_a_helper_thread() -> None:
    """Called where a loop already runs, the work runs on a callgate-loop helper thread."""

    async def where() -> tuple[str, asyncio.AbstractEventLoop]:
        return threading.current_thread().name, asyncio.get_running_loop()

    async def caller() -> tuple[asyncio.AbstractEventLoop, tuple[str, Any]]:
        return asyncio.get_running_loop(), run_sync(where)

    outer, (name, inner) = asyncio.run(caller())
    assert name.startswith("callgate-loop")
    assert inner is not outer


def test_a_caller_inside_a_running_loop_keeps_one_helper_loop() -> None:
    """Sync calls made from async code (a notebook's cell, a handler on a loop) all run on
    one helper loop for that calling thread, so a loop-bound client (an SDK's connection
    pool) keeps working between them. A shared pool handed successive calls to whichever
    helper was idle: after two concurrent callers, one caller's calls alternated loops."""
    barrier = threading.Barrier(2, timeout=10)

    async def both_at_once() -> None:
        await asyncio.to_thread(barrier.wait)

    def from_a_running_loop(fn: Callable[[], T]) -> T:
        async def main() -> T:
            return fn()

        return _in_new_thread(lambda: asyncio.run(main()))

    # Two loop threads call at the same time: two helpers exist afterwards.
    first = threading.Thread(target=from_a_running_loop, args=(lambda: run_sync(both_at_once),))
    first.start()
    from_a_running_loop(lambda: run_sync(both_at_once))
    first.join(30)

    loops = from_a_running_loop(lambda: [run_sync(_current_loop) for _ in range(8)])
    assert len(set(map(id, loops))) == 1


def test_a_helper_and_its_loop_end_with_the_thread_they_serve() -> None:
    """When a thread that ran a loop and made sync calls ends, its helper thread closes
    its loop and ends too: short-lived threads leave no loops (nor their file
    descriptors) behind."""
    import gc

    async def here() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
        return asyncio.get_running_loop(), threading.current_thread()

    async def main() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
        return run_sync(here)

    loop, helper = _in_new_thread(lambda: asyncio.run(main()))
    assert helper.name.startswith("callgate-loop")
    gc.collect()
    helper.join(30)
    assert not helper.is_alive()
    assert loop.is_closed()


def test_an_interrupt_outside_the_task_cancels_it_and_the_loop_goes_on() -> None:
    """A KeyboardInterrupt while the task waits cancels it (its finally runs); the next
    call on the same thread runs normally."""
    cleaned: list[str] = []

    def interrupted_then_again() -> int:
        async def waits() -> None:
            asyncio.get_running_loop().call_soon(_interrupt)
            try:
                await asyncio.sleep(30)
            finally:
                cleaned.append("finally")

        with pytest.raises(KeyboardInterrupt):
            run_sync(waits)
        assert cleaned == ["finally"]  # cancelled and finished, not left to resume later

        async def next_call() -> int:
            await asyncio.sleep(0)
            return 7

        return run_sync(next_call)

    assert _in_new_thread(interrupted_then_again) == 7
    assert cleaned == ["finally"]


def _interrupt() -> None:
    raise KeyboardInterrupt


def test_a_forked_child_makes_a_loop_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the process id changes (a fork), the thread's next call gets a new loop."""

    def before_and_after() -> tuple[Any, Any, Any]:
        first = run_sync(_current_loop)
        same = run_sync(_current_loop)
        pid = os.getpid()
        monkeypatch.setattr(os, "getpid", lambda: pid + 1)
        return first, same, run_sync(_current_loop)

    first, same, child = _in_new_thread(before_and_after)
    assert same is first
    assert child is not first


_LOOP_STARTERS = {
    ("anyio", "run"),
    ("asyncio", "run"),
    ("trio", "run"),
    ("asyncio", "new_event_loop"),
}
_ONE_LOOP_PER_PROCESS = {
    # `callgate mcp serve` and `callgate mcp proxy`: the process's one long-lived server,
    # started once by the command and ended with it (no user repeats it in a process).
    ("cli/mcp.py", 2),
    # The bridge itself: the loop kept per thread.
    ("sync_loop.py", 1),
}


def test_only_the_bridge_and_the_servers_start_an_event_loop() -> None:
    """Every sync entry point (Agent.run/resume, the lab, submit, the MCP import, the
    sandboxed pytest) goes through `run_sync`: a new loop per call leaves loop-bound SDK
    clients on a closed loop ('Event loop is closed' on the second run). Only the bridge
    and the long-lived MCP server commands start a loop of their own."""
    import ast
    from pathlib import Path

    import callgate

    root = Path(callgate.__file__).parent
    found: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            # Called or passed as a callable (pool.submit(asyncio.run, ...)): both count.
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and (node.value.id, node.attr) in _LOOP_STARTERS
            ):
                where = path.relative_to(root).as_posix()
                found[where] = found.get(where, 0) + 1
    assert set(found.items()) == _ONE_LOOP_PER_PROCESS


def _where_registry(timeout: float | None) -> Any:
    from callgate import Registry

    registry = Registry()

    @registry.tool(effects="read:x", timeout=timeout)
    def where(q: str) -> int:
        """The thread the handler ran in."""
        return threading.get_ident()

    return registry


@pytest.mark.sync_driver
@pytest.mark.parametrize(
    ("timeout", "gate_options", "same_thread"),
    [
        (None, {}, True),
        (5.0, {}, False),  # the tool's timeout: a worker thread, so waiting can stop
        (None, {"default_timeout": 5.0}, False),  # the gate's default timeout, the same
        (None, {"batch_deadline": 30.0}, False),  # a batch deadline, the same
    ],
)
def test_a_lone_sync_tool_leaves_the_calling_thread_only_when_time_is_bounded(
    timeout: float | None, gate_options: dict[str, Any], same_thread: bool
) -> None:
    """docs/schedule.md, "Where calls run": a lone sync tool under a sync ``submit`` runs in
    the calling thread unless a timeout or a batch deadline bounds it; then it runs in the
    handler pool, since a thread cannot be interrupted but a wait can be abandoned."""
    from callgate import Authority, Gate, MemoryLedger, Policy, ToolCall, allow

    gate = Gate(
        _where_registry(timeout),
        policy=Policy([allow("where")]),
        ledger=MemoryLedger(),
        **gate_options,
    )
    run = gate.run(authority=Authority(principal="p", grants=["read:*"]))
    (obs,) = run.submit([ToolCall(id="c1", name="where", arguments={"q": "a"})])
    assert obs.status.value == "ok", obs
    assert (obs.result == threading.get_ident()) is same_thread


def test_a_plain_threads_loop_ends_with_the_thread() -> None:
    """A thread that made sync calls (a web server's request thread, a pool's worker)
    leaves no loop behind when it ends: its loop is closed and forgotten, and 40 such
    threads hold no more file descriptors than before (each kept loop held three: its
    selector and its self-pipe, so a thread per request ran out of descriptors)."""
    import gc

    from callgate import sync_loop

    def fds() -> int:
        return len(os.listdir(f"/proc/{os.getpid()}/fd"))

    gc.collect()
    before, kept = fds(), len(sync_loop._loops)
    loops = [_in_new_thread(lambda: run_sync(_current_loop)) for _ in range(40)]
    gc.collect()
    assert all(loop.is_closed() for loop in loops)
    assert len(sync_loop._loops) == kept
    assert fds() <= before + 2

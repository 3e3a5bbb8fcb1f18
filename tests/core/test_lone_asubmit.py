"""A lone ``asubmit`` of a sync tool runs its handler in a worker thread (one hop, never on
the caller's loop), so handlers that reach back to that loop, a cancellation from another
thread and other threads' calls on the same loop all behave as in a worker thread; an
async tool runs on the loop (no hop); the ledger's lone commit takes no hop either; and
a native cancellation at a group commit never leaves an item queued or a call running
(issue 31)."""

from __future__ import annotations

import asyncio
import contextvars
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest

from callgate import Authority, Gate, Registry, Status, ToolCall
from callgate.ledger import CallState
from callgate.ledger.base import AttemptFinish, AttemptStart, Outcome
from callgate.ledger.idle_loop import loop_idle
from callgate.ledger.sqlite import SQLiteLedger

AUTH = Authority(principal="p", grants=["spend:USD", "read:orders"])
LOOP: dict[str, asyncio.AbstractEventLoop] = {}
CV: contextvars.ContextVar[str] = contextvars.ContextVar("cv", default="caller")


async def _fetch() -> str:
    """An async client living on the caller's loop."""
    await asyncio.sleep(0)
    return "from-loop"


def _registry() -> Registry:
    registry = Registry()

    @registry.tool(effects="spend:USD", writes="charge:{operation_id}")
    def charge(operation_id: str) -> dict[str, Any]:
        """A side-effecting sync tool; reports the thread it ran in."""
        return {"thread": threading.get_ident(), "op": operation_id}

    @registry.tool(effects="spend:USD", writes="charge:{operation_id}")
    async def charge_async(operation_id: str) -> dict[str, Any]:
        """A side-effecting async tool; reports the thread it ran in."""
        return {"thread": threading.get_ident(), "op": operation_id}

    @registry.tool(effects="read:orders")
    def nested(k: str) -> list[int]:
        """A sync read that runs event loops of its own, as a worker thread may."""

        async def five() -> int:
            return 5

        return [asyncio.run(five()), anyio.run(five)]

    @registry.tool(effects="read:orders")
    def via_anyio_portal(k: str) -> str:
        """anyio's way back to the loop from a worker thread."""
        return str(anyio.from_thread.run(_fetch))

    @registry.tool(effects="read:orders")
    def via_threadsafe(k: str) -> str:
        """asyncio's way back to a loop from another thread, waiting with no timeout."""
        return asyncio.run_coroutine_threadsafe(_fetch(), LOOP["l"]).result()

    @registry.tool(effects="read:orders")
    def check_cancel(k: str) -> str:
        """A long job that checks anyio cancellation cooperatively."""
        anyio.from_thread.check_cancelled()
        return "from-loop"

    @registry.tool(effects="read:orders")
    def legacy_loop(k: str) -> str:
        """The common sync wrapper of async libraries (a loop of the thread's own)."""
        try:
            loop = asyncio.get_event_loop()
        except RuntimeError:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
        return loop.run_until_complete(_fetch())

    @registry.tool(effects="read:orders")
    def sets_cv(k: str) -> str:
        """A handler that sets a context variable."""
        CV.set("handler")
        return "from-loop"

    return registry


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every `anyio.to_thread.run_sync` made, by the function it hands over."""
    made: list[str] = []
    original = anyio.to_thread.run_sync

    async def counting(fn: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(getattr(fn, "__name__", repr(fn)))
        return await original(fn, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    return made


class _Counting(SQLiteLedger):
    """A SQLite ledger that counts its transactions."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.transactions = 0

    def _transact_once(self, items: Any, *, durable: bool) -> list[Any]:
        self.transactions += 1
        return super()._transact_once(items, durable=durable)


def _call(i: int, tool: str = "charge") -> ToolCall:
    arguments = {"operation_id": f"op{i}"} if tool.startswith("charge") else {"k": f"k{i}"}
    return ToolCall(id=f"c{i}", name=tool, arguments=arguments)


def _queued(ledger: SQLiteLedger) -> int:
    """Items still waiting in any of the ledger's group commits."""
    return sum(len(g.queue) for g in ledger._groups.values())


def _bounded(fn: Callable[[], Any], seconds: float = 20) -> Any:
    """``fn()`` in a daemon thread, given up after ``seconds`` (so a deadlock fails the
    test instead of hanging the suite)."""
    box: dict[str, Any] = {}

    def main() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s (a deadlock)"
    if "error" in box:
        raise box["error"]
    return box["result"]


@pytest.mark.sync_driver
def test_a_lone_asubmit_runs_a_sync_handler_in_one_worker_thread_hop(
    tmp_path: Path, hops: list[str]
) -> None:
    """On an idle loop, a lone side-effecting sync call: one hop (the handler, off the
    caller's thread), and as many transactions as ``submit``, committed in place."""
    ledger = _Counting(tmp_path / "l.db")
    run = Gate(_registry(), ledger=ledger).run(authority=AUTH)
    before = ledger.transactions
    [obs] = run.submit([_call(1)])
    by_submit = ledger.transactions - before
    assert obs.status is Status.OK

    async def main() -> tuple[Any, int]:
        start = ledger.transactions
        [o] = await run.asubmit([_call(2)])
        assert o.status is Status.OK
        return o.result["thread"], ledger.transactions - start

    thread, by_asubmit = anyio.run(main)
    assert len(hops) == 1
    assert "commit" not in hops
    assert by_asubmit == by_submit == 2
    assert thread != threading.get_ident()
    assert ledger.get_call(run.id, "c2").state is CallState.OK  # type: ignore[union-attr]
    ledger.close()


@pytest.mark.sync_driver
def test_a_lone_asubmit_of_an_async_tool_makes_no_thread_hop(
    tmp_path: Path, hops: list[str]
) -> None:
    """An ``async def`` handler runs on the caller's loop: no hop at all, two transactions."""
    ledger = _Counting(tmp_path / "l.db")
    run = Gate(_registry(), ledger=ledger).run(authority=AUTH)

    async def main() -> tuple[Any, int]:
        start = ledger.transactions
        [o] = await run.asubmit([_call(1, "charge_async")])
        assert o.status is Status.OK
        return o.result["thread"], ledger.transactions - start

    thread, transactions = anyio.run(main)
    assert hops == []
    assert transactions == 2
    assert thread == threading.get_ident()
    ledger.close()


@pytest.mark.parametrize(
    "tool", ["via_anyio_portal", "via_threadsafe", "check_cancel", "legacy_loop", "nested"]
)
def test_a_handler_reaching_back_to_the_callers_loop_works_under_a_lone_asubmit(
    tool: str,
) -> None:
    """anyio.from_thread, run_coroutine_threadsafe(...).result(), a loop of the thread's
    own, asyncio.run inside: each works under a lone asubmit on an idle loop."""
    run = Gate(_registry()).run(authority=AUTH)

    async def main() -> tuple[Status, Any]:
        LOOP["l"] = asyncio.get_running_loop()
        [obs] = await run.asubmit([_call(1, tool)])
        return obs.status, obs.result

    status, result = _bounded(lambda: asyncio.run(main()))
    assert status is Status.OK, result
    assert result in ("from-loop", [5, 5])


def test_a_context_variable_set_by_the_handler_stays_in_the_handler() -> None:
    """The handler runs in a copy of the caller's context, as in any worker thread."""
    run = Gate(_registry()).run(authority=AUTH)

    async def main() -> str:
        [obs] = await run.asubmit([_call(1, "sets_cv")])
        assert obs.status is Status.OK
        return CV.get()

    assert asyncio.run(main()) == "caller"


def test_a_cancel_from_another_thread_reaches_the_caller_while_the_handler_runs(
    tmp_path: Path,
) -> None:
    """``loop.call_soon_threadsafe(task.cancel)`` while the handler still runs: the caller
    is cancelled before the handler returns, the call is recorded unknown (never left
    running) and no item stays queued in the ledger's group commit."""
    started, release = threading.Event(), threading.Event()
    registry = Registry()

    @registry.tool(effects="spend:USD", writes="charge:{op}")
    def slow_charge(op: str) -> str:
        """A side-effecting handler that waits to be released."""
        started.set()
        release.wait(10)
        return "charged " + op

    ledger = SQLiteLedger(tmp_path / "l.db")
    run = Gate(registry, ledger=ledger).run(authority=AUTH)

    async def main() -> None:
        task, loop = asyncio.current_task(), asyncio.get_running_loop()
        assert task is not None

        def watchdog() -> None:
            started.wait(10)
            loop.call_soon_threadsafe(task.cancel)

        threading.Thread(target=watchdog, daemon=True).start()
        await run.asubmit([ToolCall(id="c1", name="slow_charge", arguments={"op": "A"})])

    try:
        with pytest.raises(asyncio.CancelledError):
            _bounded(lambda: asyncio.run(main()))
        assert not release.is_set()  # the handler had not returned yet
    finally:
        release.set()
    record = ledger.get_call(run.id, "c1")
    assert record is not None
    assert record.state is CallState.UNKNOWN
    assert _queued(ledger) == 0
    ledger.close()


def test_the_callers_current_event_loop_survives_a_handler_that_runs_asyncio_run() -> None:
    """A handler calling ``asyncio.run`` does not clear the current loop of the thread
    that drives the caller's loop (``get_event_loop`` still answers it afterwards)."""
    run = Gate(_registry()).run(authority=AUTH)

    def app() -> bool:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            [obs] = loop.run_until_complete(run.asubmit([_call(1, "nested")]))
            assert obs.status is Status.OK
            return asyncio.get_event_loop() is loop
        finally:
            asyncio.set_event_loop(None)
            loop.close()

    assert _bounded(app) is True


def test_two_threads_calls_on_one_loop_run_at_once() -> None:
    """A loop serving request threads: a second thread's lone asubmit, handed to the loop
    while the first call's sync handler runs, is inside its handler at the same time."""
    both = threading.Barrier(2, timeout=10)
    first_in = threading.Event()
    registry = Registry()

    @registry.tool(effects="read:orders")
    def meet(k: str) -> str:
        """Waits until the other call's handler is inside too."""
        first_in.set()
        both.wait()
        return k

    run = Gate(registry).run(authority=AUTH)
    loop = asyncio.new_event_loop()
    server = threading.Thread(target=loop.run_forever, daemon=True)
    server.start()
    statuses: dict[int, Status] = {}

    def request(i: int) -> None:
        if i == 1:
            first_in.wait(10)  # the loop was idle when the first call began
        call = ToolCall(id=f"c{i}", name="meet", arguments={"k": str(i)})
        [obs] = asyncio.run_coroutine_threadsafe(run.asubmit([call]), loop).result(30)
        statuses[i] = obs.status

    try:
        threads = [threading.Thread(target=request, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        server.join(10)
        loop.close()
    assert statuses == {0: Status.OK, 1: Status.OK}


class _Held(SQLiteLedger):
    """A SQLite ledger whose group commits (in a worker thread) wait to be released."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entered, self.release = threading.Event(), threading.Event()

    def _commit_group(self, batch: Any) -> None:
        self.entered.set()
        self.release.wait(10)
        super()._commit_group(batch)


def _begun(ledger: SQLiteLedger, call_id: str) -> AttemptFinish:
    """Begin a side-effecting attempt (sync), and the finish that records it ok."""
    now = time.time()
    ledger.begin_attempt(
        AttemptStart(
            run_id="r",
            call_id=call_id,
            tool="t",
            tool_version="1",
            attempt=1,
            idempotency_key=f"k-{call_id}",
            request_hash="h",
            started_at=now,
            key_expires_at=now + 60,
            side_effecting=True,
        )
    )
    return AttemptFinish(
        run_id="r",
        call_id=call_id,
        attempt=1,
        idempotency_key=f"k-{call_id}",
        outcome=Outcome(status="ok", content="done", finished_at=now),
        side_effecting=True,
    )


def _outcome(ledger: SQLiteLedger, call_id: str) -> str | None:
    """The recorded outcome of the call's first attempt (None: still running)."""
    [attempt] = ledger.attempts("r", call_id)
    return attempt.outcome.status if attempt.outcome is not None else None


def test_a_native_cancel_at_the_group_commit_yield_commits_before_it_goes_on(
    tmp_path: Path,
) -> None:
    """``task.cancel()`` while the commit's leader yields (another task on the loop): the
    outcome is committed before the CancelledError goes on, nothing stays queued."""
    ledger = SQLiteLedger(tmp_path / "l.db")
    finish = _begun(ledger, "c1")

    async def main() -> bool:
        task = asyncio.get_running_loop().create_task(ledger.afinish_attempt(finish))
        await asyncio.sleep(0)  # the leader is at its yield
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    assert asyncio.run(main()) is True
    assert _outcome(ledger, "c1") == "ok"
    assert _queued(ledger) == 0
    ledger.close()


def test_a_native_cancel_of_the_leader_during_the_hop_still_commits_the_followers(
    tmp_path: Path,
) -> None:
    """The leader is cancelled while its batch commits in a worker thread: the batch and
    everything queued after it commit, the follower returns, the leader's cancel goes on."""
    ledger = _Held(tmp_path / "l.db")
    first, second, third = (_begun(ledger, f"c{i}") for i in range(3))

    async def main() -> tuple[bool, Any]:
        loop = asyncio.get_running_loop()
        leader = loop.create_task(ledger.afinish_attempt(first))
        follower = loop.create_task(ledger.afinish_attempt(second))
        while not ledger.entered.is_set():
            await asyncio.sleep(0.001)
        late = loop.create_task(ledger.afinish_attempt(third))
        await asyncio.sleep(0)  # the late one is queued behind the batch in the thread
        leader.cancel()
        ledger.release.set()
        await asyncio.wait({leader, follower, late}, timeout=20)
        assert follower.done(), "the follower was stranded"
        assert late.done(), "the late caller was stranded"
        return leader.cancelled(), (follower.result(), late.result())

    try:
        cancelled, results = _bounded(lambda: asyncio.run(main()), 30)
    finally:
        ledger.release.set()
    assert cancelled is True
    assert results == (True, True)
    for call_id in ("c0", "c1", "c2"):
        assert _outcome(ledger, call_id) == "ok"
    assert _queued(ledger) == 0
    ledger.close()


def test_loop_idle_sees_tasks_timers_callbacks_and_watched_files() -> None:
    """Idle: nothing but this task; not idle: another task, a live timer, a watched
    socket; a cancelled timer does not count; off a loop nothing is assumed."""
    assert loop_idle() is False

    async def main() -> dict[str, bool]:
        seen = {"alone": loop_idle()}
        timer = asyncio.get_running_loop().call_later(60, lambda: None)
        seen["timer"] = loop_idle()
        timer.cancel()
        seen["cancelled timer"] = loop_idle()
        with anyio.fail_after(60):
            seen["fail_after"] = loop_idle()
        task = asyncio.get_running_loop().create_task(asyncio.sleep(0.01))
        seen["task"] = loop_idle()
        await task
        a, b = socket.socketpair()
        asyncio.get_running_loop().add_reader(a, lambda: None)
        seen["reader"] = loop_idle()
        asyncio.get_running_loop().remove_reader(a)
        a.close()
        b.close()
        seen["after"] = loop_idle()
        return seen

    assert asyncio.run(main()) == {
        "alone": True,
        "timer": False,
        "cancelled timer": True,
        "fail_after": False,
        "task": False,
        "reader": False,
        "after": True,
    }


@pytest.mark.sync_driver
def test_concurrent_calls_still_share_commits_in_a_worker_thread(
    tmp_path: Path, hops: list[str]
) -> None:
    """Four concurrent lone ``asubmit`` calls on SQLite share their commits (group commit):
    fewer transactions than four lone calls, through the committer's thread hops."""
    ledger = _Counting(tmp_path / "l.db")
    run = Gate(_registry(), ledger=ledger).run(authority=AUTH)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(run.asubmit, [_call(i)])

    anyio.run(main)
    assert all(c.state is CallState.OK for c in ledger.calls(run_id=run.id))
    assert ledger.transactions < 8
    assert "commit" in hops  # the group commit's hop (`_Once.commit`)
    ledger.close()

"""A lone ``asubmit`` on an idle event loop costs what ``submit`` costs: no thread hop and
the same commits; with other work on the loop (a task, a timeout) the handler still
runs in a worker thread, so it never blocks the loop, and a timeout still cuts it off."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from callgate import Authority, Gate, Registry, Status, ToolCall
from callgate.ledger import CallState
from callgate.ledger.idle_loop import as_if_no_loop, loop_idle
from callgate.ledger.sqlite import SQLiteLedger

AUTH = Authority(principal="p", grants=["spend:USD", "read:orders"])


def _registry(release: threading.Event | None = None) -> Registry:
    registry = Registry()

    @registry.tool(effects="spend:USD", writes="charge:{operation_id}")
    def charge(operation_id: str) -> dict[str, Any]:
        """A side-effecting sync tool; reports the thread it ran in."""
        return {"thread": threading.get_ident(), "op": operation_id}

    @registry.tool(effects="read:orders")
    def wait(k: str) -> str:
        """A sync read that blocks until released."""
        assert release is not None
        release.wait(10)
        return k

    @registry.tool(effects="read:orders")
    def nested(k: str) -> list[int]:
        """A sync read that runs event loops of its own, as a worker thread may."""

        async def five() -> int:
            return 5

        return [asyncio.run(five()), anyio.run(five)]

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
    arguments = {"operation_id": f"op{i}"} if tool == "charge" else {"k": f"k{i}"}
    return ToolCall(id=f"c{i}", name=tool, arguments=arguments)


@pytest.mark.sync_driver
def test_a_lone_asubmit_on_sqlite_makes_no_thread_hop_and_the_commits_of_submit(
    tmp_path: Path, hops: list[str]
) -> None:
    """On an idle loop, a lone side-effecting sync call: 0 thread hops (was 1, the handler),
    as many transactions as ``submit``, and the handler in the caller's thread."""
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
    assert hops == []
    assert by_asubmit == by_submit == 2
    assert thread == threading.get_ident()
    assert ledger.get_call(run.id, "c2").state is CallState.OK  # type: ignore[union-attr]
    ledger.close()


@pytest.mark.sync_driver
def test_a_lone_asubmit_under_a_timeout_runs_its_sync_handler_off_the_loop() -> None:
    """A timeout around ``asubmit`` is a timer on the loop: the blocking handler goes to a
    worker thread, the timeout fires on time and the call is recorded unknown."""
    release = threading.Event()
    gate = Gate(_registry(release))
    run = gate.run(authority=AUTH)

    async def main() -> bool:
        with anyio.move_on_after(0.2) as scope:
            await run.asubmit([_call(1, "wait")])
        return scope.cancelled_caught

    try:
        assert anyio.run(main) is True
    finally:
        release.set()
    record = gate.ledger.get_call(run.id, "c1")
    assert record is not None
    assert record.state is CallState.UNKNOWN


@pytest.mark.sync_driver
def test_an_asyncio_timeout_also_keeps_the_handler_off_the_loop() -> None:
    """``asyncio.timeout`` (not anyio's) around ``asubmit`` is seen too."""
    release = threading.Event()
    gate = Gate(_registry(release))
    run = gate.run(authority=AUTH)

    async def main() -> None:
        async with asyncio.timeout(0.2):
            await run.asubmit([_call(1, "wait")])

    try:
        with pytest.raises(TimeoutError):
            asyncio.run(main())
    finally:
        release.set()
    record = gate.ledger.get_call(run.id, "c1")
    assert record is not None
    assert record.state is CallState.UNKNOWN


@pytest.mark.sync_driver
def test_a_handler_run_in_place_sees_no_running_loop(hops: list[str]) -> None:
    """In place on the loop's thread a sync handler may start loops of its own
    (``asyncio.run``, ``anyio.run``) as in a worker thread; the caller's loop goes on."""
    run = Gate(_registry()).run(authority=AUTH)

    async def main() -> Any:
        [obs] = await run.asubmit([_call(1, "nested")])
        await anyio.sleep(0)  # the caller's loop is still the running one
        return obs.status, obs.result, asyncio.get_running_loop() is not None

    assert anyio.run(main) == (Status.OK, [5, 5], True)
    assert hops == []


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


def test_as_if_no_loop_restores_the_loop_when_the_function_raises() -> None:
    """The running loop is put back after the function, also when it raises."""

    def boom() -> None:
        raise ValueError("x")

    async def main() -> bool:
        loop = asyncio.get_running_loop()
        with pytest.raises(ValueError, match="x"):
            as_if_no_loop(boom)
        return asyncio.get_running_loop() is loop

    assert asyncio.run(main()) is True


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
    assert "_commit_group" in hops
    ledger.close()

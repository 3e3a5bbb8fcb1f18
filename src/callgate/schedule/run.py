"""The schedule stage's runner: one batch's admitted calls, run as their plan allows.

A call starts as soon as everything it waits for has finished, under a global bound and
per-tool bounds, in proposal order among the ready calls; the batch deadline rejects the
calls still waiting and cancels those still running. See `callgate.schedule`.
"""

from __future__ import annotations

import heapq
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc

from callgate.calls import Observation
from callgate.execute import Admitted
from callgate.schedule.batch import cancelled_at_deadline, dependency_failed, not_started
from callgate.schedule.plan import Batch
from callgate.sync_loop import run_sync

__all__ = ["Execute", "Skipped", "run_batch_async", "run_batch_sync"]

# -- running ---------------------------------------------------------------------

Execute = Callable[[Admitted], Awaitable[Observation]]
Skipped = Callable[[Admitted, Observation], None]
"""Called for each call the scheduler settles without executing it (to record it)."""


async def run_batch_async(
    batch: Batch,
    execute: Execute,
    *,
    max_concurrency: int = 16,
    deadline: float | None = None,
    on_skipped: Skipped | None = None,
) -> list[Observation]:
    """Run the batch; one observation per node, in node (proposal) order.

    A call starts once everything it waits for has finished, when fewer than
    ``max_concurrency`` calls run and fewer than its tool's ``max_concurrency``
    calls of that tool run; among ready calls the earliest proposed starts
    first. ``deadline`` is in seconds from now. If the caller is cancelled,
    calls not yet started are settled as not started (``on_skipped`` sees
    them) and the cancellation propagates; running calls record their own
    ``unknown`` outcome.
    """
    nodes = batch.nodes
    if len(nodes) == 1 and deadline is None:
        return [await execute(nodes[0].item)]
    return await _Runner(batch, execute, max_concurrency, deadline, on_skipped).run()


def run_batch_sync(
    batch: Batch,
    execute: Execute,
    *,
    max_concurrency: int = 16,
    deadline: float | None = None,
    on_skipped: Skipped | None = None,
) -> list[Observation]:
    """`run_batch_async` for synchronous callers, on an event loop of its own.

    The loop is the calling thread's own (kept between batches), or a helper
    thread's when the calling thread already runs one (a sync ``submit`` inside
    async code); see `callgate.sync_loop`.
    """

    async def main() -> list[Observation]:
        return await run_batch_async(
            batch,
            execute,
            max_concurrency=max_concurrency,
            deadline=deadline,
            on_skipped=on_skipped,
        )

    return run_sync(main)


class _Runner:
    """The state of one running batch. Event-driven: each finish starts what it unblocks."""

    def __init__(
        self,
        batch: Batch,
        execute: Execute,
        max_concurrency: int,
        deadline: float | None,
        on_skipped: Skipped | None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self.batch = batch
        self.execute = execute
        self.max_concurrency = max_concurrency
        self.deadline = deadline
        self.on_skipped = on_skipped
        count = len(batch.nodes)
        self.results: list[Observation | None] = [None] * count
        self.started = [False] * count
        """Whether the call was handed to ``execute`` (which then records its own outcome)."""
        self.pending = [len(n.waits_for) for n in batch.nodes]
        self.ready: dict[str, list[int]] = {}
        """Ready calls per tool, as heaps of node indices."""
        self.heads: list[tuple[int, str]] = []
        """(first ready index, tool) for tools that may have room; stale entries are skipped."""
        self.running = 0
        self.running_by_tool: dict[str, int] = {}
        self.stop_at: float | None = None
        self.tg: anyio.abc.TaskGroup | None = None

    async def run(self) -> list[Observation]:
        if self.deadline is not None:
            self.stop_at = anyio.current_time() + self.deadline
        try:
            async with anyio.create_task_group() as tg:
                self.tg = tg
                roots = [i for i, p in enumerate(self.pending) if p == 0]
                for i in roots:
                    self._release(i)
                self._start_ready()
        except BaseException:
            # Cancelled from outside (or a bug): whatever never started did not run.
            self._settle_unstarted(None)
            raise
        self._settle_unstarted(self.deadline)
        done = [r for r in self.results if r is not None]
        assert len(done) == len(self.results), "every call is settled"
        return done

    def _settle_unstarted(self, deadline: float | None) -> None:
        for node in self.batch.nodes:
            if self.results[node.index] is None and not self.started[node.index]:
                self._skip(node.index, not_started(node.item, deadline=deadline))

    def _skip(self, i: int, obs: Observation) -> None:
        self.results[i] = obs
        if self.on_skipped is not None:
            self.on_skipped(self.batch.nodes[i].item, obs)

    def _release(self, i: int) -> None:
        """Node ``i`` waits for nothing more: queue it, or reject it if a dependency failed."""
        work = [i]
        nodes = self.batch.nodes
        while work:
            k = work.pop()
            node = nodes[k]
            failed = None
            for d in sorted(node.depends_on):
                dep = self.results[d]
                if dep is not None and dep.is_error:
                    failed = dep
                    break
            if failed is None:
                tool = node.item.spec.name
                heap = self.ready.setdefault(tool, [])
                heapq.heappush(heap, k)
                if heap[0] == k:
                    heapq.heappush(self.heads, (k, tool))
                continue
            self._skip(k, dependency_failed(node.item, failed))
            work.extend(self._finished(k))

    def _finished(self, i: int) -> list[int]:
        """Mark node ``i`` done; the nodes it unblocks."""
        unblocked = []
        for user in self.batch.dependents[i]:
            self.pending[user] -= 1
            if self.pending[user] == 0:
                unblocked.append(user)
        return unblocked

    def _room(self, tool: str, spec_limit: int | None) -> bool:
        return spec_limit is None or self.running_by_tool.get(tool, 0) < spec_limit

    def _start_ready(self) -> None:
        if self.stop_at is not None and anyio.current_time() >= self.stop_at:
            return
        nodes = self.batch.nodes
        assert self.tg is not None
        while self.running < self.max_concurrency and self.heads:
            k, tool = heapq.heappop(self.heads)
            heap = self.ready.get(tool)
            limit = nodes[k].item.spec.max_concurrency
            if not heap or heap[0] != k or not self._room(tool, limit):
                continue  # stale: started already, or the tool is full (re-queued on finish)
            heapq.heappop(heap)
            self.running += 1
            self.running_by_tool[tool] = self.running_by_tool.get(tool, 0) + 1
            self.tg.start_soon(self._run_one, k)
            if heap and self._room(tool, limit):
                heapq.heappush(self.heads, (heap[0], tool))

    async def _run_one(self, i: int) -> None:
        node = self.batch.nodes[i]
        obs: Observation | None = None
        if self.stop_at is None:
            self.started[i] = True
            obs = await self.execute(node.item)
        elif anyio.current_time() < self.stop_at:
            self.started[i] = True
            with anyio.CancelScope(deadline=self.stop_at) as scope:
                obs = await self.execute(node.item)
            if scope.cancelled_caught and self.deadline is not None:
                obs = cancelled_at_deadline(node.item, self.deadline)
        # else: the deadline passed between queueing and starting; settled as not started.
        tool = node.item.spec.name
        self.running -= 1
        self.running_by_tool[tool] -= 1
        heap = self.ready.get(tool)
        if heap:
            heapq.heappush(self.heads, (heap[0], tool))
        if obs is not None:
            self.results[i] = obs
            for user in self._finished(i):
                self._release(user)
        self._start_ready()

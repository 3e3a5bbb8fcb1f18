"""Stage ``schedule``: which admitted calls may run together, and in what order.

The admitted calls of one batch form a graph. Two kinds of edges order them:

* **data edges** (a call needs another's result): an explicit
  ``ToolCall.after``, and proposal order between calls of one tool marked
  ``ordered``. A call whose data dependency did not end ``ok`` is not run: it
  is rejected at this stage, naming the dependency.
* **conflict edges** (the calls must not overlap): from the resources a tool
  declares (``reads="order:{order_id}"``, ``writes="cart:{cart_id}"``),
  expanded on the arguments. Two calls conflict when one writes a resource the
  other reads or writes; reads of one resource commute. A resource containing
  ``*``, ``?`` or ``[`` is a glob pattern (``"cart:*"``; ``"*"`` is everything).
  A tool that declares no resources reads everything when it is read-only and
  writes everything otherwise, so it conflicts with every write (safe default).

Conflicting calls run in proposal order, unless explicit ``after`` edges say
otherwise: conflict and ``ordered`` edges follow the stable topological order
of the ``after`` edges, so they can never close a cycle.

Planning indexes resources by name instead of comparing every pair of calls:
each resource (or pattern) keeps its last writer and the readers since, and a
new call waits only for those. Earlier accesses are covered transitively, so
a batch of n calls on one resource gets O(n) edges, not O(n²).

The runner (`run_batch_async`) starts a call as soon as everything it waits
for has finished, under a global bound and per-tool bounds, in proposal order
among the ready calls, and enforces the batch deadline: calls still waiting at
the deadline are rejected as not started, calls running at the deadline are
cancelled and reported ``unknown``.
"""

from __future__ import annotations

import fnmatch
import heapq
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import anyio
import anyio.abc

from callgate.calls import Observation, Stage, Status, ToolCall
from callgate.execute import Admitted, may_retry
from callgate.render import Problem, Rejection
from callgate.sync_loop import run_sync

__all__ = [
    "Batch",
    "dependency_failed",
    "find_cycle",
    "plan_batch",
    "run_batch_async",
    "run_batch_sync",
]

_GLOB_CHARS = frozenset("*?[")
_EVERYTHING = "*"


def find_cycle(calls: Sequence[ToolCall]) -> list[str]:
    """The ids of the calls on one cycle of explicit ``after`` dependencies (empty if none).

    A call that names itself in ``after`` is a cycle of one. Iterative, so a
    long chain of dependencies cannot exhaust the recursion limit.
    """
    edges = {c.id: tuple(dict.fromkeys(c.after)) for c in calls if c.after}
    if not edges:
        return []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in edges:
        if state.get(root):
            continue
        path: list[str] = [root]
        cursors: list[int] = [0]
        state[root] = 1
        while path:
            node = path[-1]
            deps = edges.get(node, ())
            if cursors[-1] == len(deps):
                state[node] = 2
                path.pop()
                cursors.pop()
                continue
            dep = deps[cursors[-1]]
            cursors[-1] += 1
            mark = state.get(dep, 0)
            if mark == 1:
                return path[path.index(dep) :]
            if mark == 0:
                state[dep] = 1
                path.append(dep)
                cursors.append(0)
    return []


@dataclass(slots=True)
class _Node:
    index: int
    item: Admitted
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    waits_for: set[int] = field(default_factory=set)
    """Nodes that must finish first (conflicts and data edges)."""
    depends_on: set[int] = field(default_factory=set)
    """Data edges only: a failure there fails this node."""


@dataclass(slots=True)
class Batch:
    """Admitted calls with their edges; ``order`` is a topological order of all edges."""

    nodes: list[_Node]
    order: list[int]
    dependents: list[list[int]]
    """For each node, the nodes that wait for it (the reverse of ``waits_for``)."""


def _resources(item: Admitted) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What a call reads and writes; a tool that declares nothing gets the safe default."""
    spec = item.spec
    if not spec.reads and not spec.writes:
        if spec.side_effecting:
            return (), (_EVERYTHING,)
        return (_EVERYTHING,), ()
    values = item.arguments.__dict__
    reads = tuple(dict.fromkeys(t.expand(values) for t in spec.reads))
    writes = tuple(dict.fromkeys(t.expand(values) for t in spec.writes))
    return reads, writes


def _is_pattern(resource: str) -> bool:
    return not _GLOB_CHARS.isdisjoint(resource)


class _Pattern:
    """A glob resource, with what is needed to test it against names and other globs."""

    __slots__ = ("everything", "prefix", "regex", "suffix")

    def __init__(self, text: str) -> None:
        self.everything = text == _EVERYTHING
        self.regex = re.compile(fnmatch.translate(text))
        cut = min((i for i, ch in enumerate(text) if ch in "*?[]"), default=len(text))
        self.prefix = text[:cut]
        last = max((i for i, ch in enumerate(text) if ch in "*?[]"), default=-1)
        self.suffix = text[last + 1 :]

    def matches(self, name: str) -> bool:
        return self.everything or self.regex.match(name) is not None

    def overlaps(self, other: _Pattern) -> bool:
        """Whether some name might match both globs.

        Conservative: two globs whose literal prefixes and suffixes are
        compatible are taken to overlap. Exact for globs made of literals and
        ``*``; ``?`` and ``[...]`` may add edges that are not needed, never
        remove one that is.
        """
        if self.everything or other.everything:
            return True
        a, b = self.prefix, other.prefix
        if not (a.startswith(b) or b.startswith(a)):
            return False
        a, b = self.suffix, other.suffix
        return a.endswith(b) or b.endswith(a)


@dataclass(slots=True)
class _Lane:
    """One resource name or glob: its last writer and the readers since."""

    last_writer: int | None = None
    readers: list[int] = field(default_factory=list)


class _Conflicts:
    """Conflict edges from resource accesses, added in execution order."""

    def __init__(self) -> None:
        self.exact: dict[str, _Lane] = {}
        self.patterns: dict[str, tuple[_Pattern, _Lane]] = {}

    def _overlapping(self, resource: str) -> list[_Lane]:
        if not _is_pattern(resource):
            lanes = [lane for p, lane in self.patterns.values() if p.matches(resource)]
            lane = self.exact.get(resource)
            if lane is not None:
                lanes.append(lane)
            return lanes
        pattern = self._pattern(resource)
        if pattern.everything:
            lanes = list(self.exact.values())
        else:
            lanes = [lane for name, lane in self.exact.items() if pattern.matches(name)]
        lanes.extend(lane for p, lane in self.patterns.values() if pattern.overlaps(p))
        return lanes

    def _pattern(self, resource: str) -> _Pattern:
        known = self.patterns.get(resource)
        return known[0] if known is not None else _Pattern(resource)

    def _lane(self, resource: str) -> _Lane:
        if not _is_pattern(resource):
            return self.exact.setdefault(resource, _Lane())
        known = self.patterns.get(resource)
        if known is None:
            known = self.patterns[resource] = (_Pattern(resource), _Lane())
        return known[1]

    def add(self, node: _Node) -> None:
        """Make ``node`` wait for every earlier access it conflicts with."""
        waits = node.waits_for
        for resource in node.reads:
            for lane in self._overlapping(resource):
                if lane.last_writer is not None:
                    waits.add(lane.last_writer)
        for resource in node.writes:
            for lane in self._overlapping(resource):
                if lane.readers:  # each of them waited for the lane's last writer
                    waits.update(lane.readers)
                elif lane.last_writer is not None:
                    waits.add(lane.last_writer)
        waits.discard(node.index)
        if _EVERYTHING in node.writes:
            # This call waits for every earlier access, so it alone stands for them.
            self.exact.clear()
            self.patterns.clear()
        for resource in node.reads:
            self._lane(resource).readers.append(node.index)
        for resource in node.writes:
            lane = self._lane(resource)
            lane.last_writer = node.index
            lane.readers.clear()


def _stable_order(nodes: list[_Node]) -> list[int]:
    """A topological order of the data edges known so far, earliest proposal first."""
    count = len(nodes)
    pending = [len(n.waits_for) for n in nodes]
    users: list[list[int]] = [[] for _ in range(count)]
    for node in nodes:
        for dep in node.waits_for:
            users[dep].append(node.index)
    ready = [i for i in range(count) if pending[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for user in users[i]:
            pending[user] -= 1
            if pending[user] == 0:
                heapq.heappush(ready, user)
    if len(order) != count:
        raise ValueError("plan_batch: the 'after' dependencies form a cycle; use find_cycle first")
    return order


def plan_batch(items: Sequence[Admitted]) -> Batch:
    """Build the graph of admitted calls (the gate rejects ``after`` cycles before this)."""
    nodes: list[_Node] = []
    for i, item in enumerate(items):
        reads, writes = _resources(item)
        nodes.append(_Node(i, item, reads, writes))
    by_id = {n.item.call.id: n.index for n in nodes}
    for node in nodes:
        for dep in node.item.call.after:
            k = by_id.get(dep)
            if k is not None and k != node.index:
                node.waits_for.add(k)
                node.depends_on.add(k)
    order = _stable_order(nodes)
    conflicts = _Conflicts()
    last_ordered: dict[str, int] = {}
    for i in order:
        node = nodes[i]
        spec = node.item.spec
        if spec.ordered:
            previous = last_ordered.get(spec.name)
            if previous is not None:
                node.waits_for.add(previous)
                node.depends_on.add(previous)
            last_ordered[spec.name] = i
        conflicts.add(node)
    dependents: list[list[int]] = [[] for _ in nodes]
    for node in nodes:
        for waited in node.waits_for:
            dependents[waited].append(node.index)
    return Batch(nodes, order, dependents)


# -- observations the scheduler writes ----------------------------------------


def _schedule_rejection(
    item: Admitted, problem: Problem, advice: str, details: dict[str, object]
) -> Observation:
    rejection = Rejection(stage=Stage.SCHEDULE, problems=(problem,), advice=advice)
    return Observation(
        call_id=item.call.id,
        tool=item.spec.name,
        status=Status.REJECTED,
        stage=Stage.SCHEDULE,
        content=rejection.message,
        retryable=True,
        tool_version=item.spec.version,
        repaired=item.call.repaired,
        details=({**problem.as_dict(), **details},),
    )


def dependency_failed(item: Admitted, dep: Observation) -> Observation:
    """The rejection of a call whose data dependency did not succeed."""
    return _schedule_rejection(
        item,
        Problem(
            rule="dependency_failed",
            message=f"this call depends on call '{dep.call_id}' ({dep.tool}), which ended "
            f"'{dep.status.value}'",
        ),
        "Nothing was executed for this call. Resolve that call first, then send this one again.",
        {"dependency": dep.call_id},
    )


def not_started(item: Admitted, *, deadline: float | None) -> Observation:
    """The rejection of a call that never started: deadline passed, or batch cancelled."""
    if deadline is not None:
        problem = Problem(
            rule="batch_deadline",
            message=f"the batch deadline of {deadline:g} s passed before this call could start",
        )
        advice = (
            "Nothing was executed for this call. Send it again if it is still needed, "
            "in a smaller batch or after the calls it waited for."
        )
    else:
        problem = Problem(
            rule="batch_cancelled",
            message="the batch was cancelled before this call could start",
        )
        advice = "Nothing was executed for this call. Send it again if it is still needed."
    return _schedule_rejection(item, problem, advice, {})


def cancelled_at_deadline(item: Admitted, deadline: float) -> Observation:
    """The observation of a call that was still running when the batch deadline passed."""
    spec = item.spec
    if spec.side_effecting:
        tail = (
            "The outcome is unknown: the effect may have happened. "
            "Do not repeat this call; check the current state first."
        )
    else:
        tail = "The outcome is unknown; this tool only reads, so retrying is safe."
    return Observation(
        call_id=item.call.id,
        tool=spec.name,
        status=Status.UNKNOWN,
        stage=Stage.EXECUTE,
        content=f"the batch deadline of {deadline:g} s passed while this call was running, "
        f"so it was cancelled. {tail}",
        retryable=may_retry(spec, Status.UNKNOWN),
        tool_version=spec.version,
        repaired=item.call.repaired,
        details=({"rule": "batch_deadline", "deadline": deadline},),
    )


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

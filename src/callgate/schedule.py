"""Stage ``schedule``: which admitted calls may run together, and in what order.

Edges come from data dependencies (``ToolCall.after``, and proposal order for
tools marked ``ordered``) and from conflicts between declared resources: two
calls conflict when one writes what the other reads or writes. A tool that
declares no resources conflicts with every write (and, if it writes, with
everything). Conflicting calls run in proposal order; independent calls run
concurrently under a bound.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import anyio

from callgate.calls import Observation, Stage, Status, ToolCall
from callgate.execute import Admitted

__all__ = [
    "Batch",
    "dependency_failed",
    "find_cycle",
    "plan_batch",
    "run_batch_async",
    "run_batch_sync",
]


def find_cycle(calls: Sequence[ToolCall]) -> list[str]:
    """The ids of calls on a cycle of explicit ``after`` dependencies (empty if none)."""
    edges = {c.id: [d for d in c.after if d != c.id] for c in calls if c.after}
    if not edges:
        return []
    state: dict[str, int] = {}
    on_cycle: list[str] = []

    def visit(node: str, path: list[str]) -> None:
        mark = state.get(node, 0)
        if mark == 2 or on_cycle:
            return
        if mark == 1:
            on_cycle.extend(path[path.index(node) :])
            return
        state[node] = 1
        for dep in edges.get(node, ()):
            visit(dep, [*path, node])
        state[node] = 2

    for call_id in edges:
        visit(call_id, [])
    return on_cycle


@dataclass(slots=True)
class _Node:
    index: int
    item: Admitted
    reads: frozenset[str]
    writes: frozenset[str]
    waits_for: set[int] = field(default_factory=set)
    """Nodes that must finish first (conflicts and data edges)."""
    depends_on: set[int] = field(default_factory=set)
    """Data edges only: a failure there fails this node."""


@dataclass(slots=True)
class Batch:
    """Admitted calls with their edges, in a topological order."""

    nodes: list[_Node]
    order: list[int]


def _resources(item: Admitted) -> tuple[frozenset[str], frozenset[str]]:
    spec = item.spec
    values = item.arguments.__dict__
    reads = frozenset(t.expand(values) for t in spec.reads)
    writes = frozenset(t.expand(values) for t in spec.writes)
    if not reads and not writes:
        if spec.side_effecting:
            return frozenset(), frozenset({"*"})
        return frozenset({"*"}), frozenset()
    return reads, writes


def _overlap(a: frozenset[str], b: frozenset[str]) -> bool:
    if not a or not b:
        return False
    if a & b:
        return True
    return any(
        x == "*" or y == "*" or fnmatch.fnmatchcase(x, y) or fnmatch.fnmatchcase(y, x)
        for x in a
        for y in b
    )


def _conflict(a: _Node, b: _Node) -> bool:
    return _overlap(a.writes, b.writes | b.reads) or _overlap(b.writes, a.reads)


def plan_batch(items: Sequence[Admitted]) -> Batch:
    """Build the graph of admitted calls (cycles were rejected before admission)."""
    nodes = []
    for i, item in enumerate(items):
        reads, writes = _resources(item)
        nodes.append(_Node(i, item, reads, writes))
    by_id = {n.item.call.id: n.index for n in nodes}
    for j, node in enumerate(nodes):
        for dep in node.item.call.after:
            k = by_id.get(dep)
            if k is not None and k != j:
                node.waits_for.add(k)
                node.depends_on.add(k)
        for i in range(j):
            other = nodes[i]
            same_ordered = node.item.spec.ordered and other.item.spec is node.item.spec
            if same_ordered:
                node.waits_for.add(i)
                node.depends_on.add(i)
            elif i not in node.waits_for and _conflict(other, node):
                node.waits_for.add(i)
    return Batch(nodes, _topological(nodes))


def _topological(nodes: list[_Node]) -> list[int]:
    order: list[int] = []
    done = [False] * len(nodes)

    def visit(i: int) -> None:
        if done[i]:
            return
        done[i] = True
        for dep in sorted(nodes[i].waits_for):
            visit(dep)
        order.append(i)

    for i in range(len(nodes)):
        visit(i)
    return order


def dependency_failed(item: Admitted, dep: Observation) -> Observation:
    """The rejection of a call whose data dependency did not succeed."""
    return Observation(
        call_id=item.call.id,
        tool=item.spec.name,
        status=Status.REJECTED,
        stage=Stage.SCHEDULE,
        content=(
            "Rejected at the schedule stage:\n"
            f"- this call depends on call '{dep.call_id}' ({dep.tool}), which ended "
            f"'{dep.status.value}'\nNothing was executed. Resolve that call first, then "
            "send this one again."
        ),
        retryable=True,
        tool_version=item.spec.version,
        details=({"rule": "dependency_failed", "dependency": dep.call_id},),
    )


def run_batch_sync(
    batch: Batch, execute: Callable[[Admitted], Observation]
) -> dict[int, Observation]:
    """Run every node in topological order in the calling thread."""
    done: dict[int, Observation] = {}
    for i in batch.order:
        node = batch.nodes[i]
        failed = next((done[d] for d in sorted(node.depends_on) if done[d].is_error), None)
        done[i] = dependency_failed(node.item, failed) if failed else execute(node.item)
    return done


async def run_batch_async(
    batch: Batch,
    execute: Callable[[Admitted], Awaitable[Observation]],
    *,
    max_concurrency: int = 16,
) -> dict[int, Observation]:
    """Run independent nodes concurrently, each after everything it waits for."""
    done: dict[int, Observation] = {}
    if len(batch.nodes) == 1:
        done[0] = await execute(batch.nodes[0].item)
        return done
    finished = {i: anyio.Event() for i in range(len(batch.nodes))}
    limiter = anyio.CapacityLimiter(max_concurrency)

    async def run(node: _Node) -> None:
        try:
            for dep in node.waits_for:
                await finished[dep].wait()
            failed = next((done[d] for d in sorted(node.depends_on) if done[d].is_error), None)
            if failed is not None:
                done[node.index] = dependency_failed(node.item, failed)
                return
            async with limiter:
                done[node.index] = await execute(node.item)
        finally:
            finished[node.index].set()

    async with anyio.create_task_group() as tg:
        for i in batch.order:
            tg.start_soon(run, batch.nodes[i])
    return done

"""The schedule stage's plan: the graph of one batch's admitted calls (data and conflict
edges) and the cycle check of its ``after`` edges. See `callgate.schedule`."""

from __future__ import annotations

import fnmatch
import heapq
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from callgate.calls import ToolCall
from callgate.execute import Admitted

__all__ = ["Batch", "find_cycle", "plan_batch"]

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

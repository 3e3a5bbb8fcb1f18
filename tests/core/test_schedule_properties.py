"""Properties of the scheduler over random batches (hypothesis, on a virtual clock).

Each example is a random DAG: calls with random durations, random resource
reads and writes (exact names and globs), undeclared tools, and ``after``
edges that follow a hidden random order (so some point forward in the
batch). The expected graph is computed here, independently of
``callgate.schedule``: the stable order of the ``after`` edges, conflict
pairs from the resource rules, and the critical path over both.

On the virtual clock every start and end is exact, so "the makespan equals
the critical path" is checked to the microsecond, and each example takes a
few milliseconds.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate import Authority, CallState, Gate, Observation, Registry, Status, ToolCall

from .test_schedule import Timeline, virtual_run

EPS = 1e-6
POOL = ["r0", "r1", "r2", "r3", "r*", "r1*", "*"]
"""Shared resources; among the globs here, every two overlap (checked in ``overlaps``)."""
KINDS = ["rw", "rw", "rw", "peek", "poke"]


def registry(timeline: Timeline) -> Registry:
    reg = Registry()

    @reg.tool(reads=["{r1}", "{r2}"], writes="{w}")
    async def rw(name: str, d: int, r1: str, r2: str, w: str) -> str:
        """Read two resources and write one."""
        await timeline.span(name, "rw", d)
        return name

    @reg.tool(reads=["{r1}"], writes="{w}", max_concurrency=1)
    async def narrow(name: str, d: int, r1: str, w: str) -> str:
        """Like rw, one call at a time."""
        await timeline.span(name, "narrow", d)
        return name

    @reg.tool(risk="read")
    async def peek(name: str, d: int) -> str:
        """Read-only, declares nothing: reads everything."""
        await timeline.span(name, "peek", d)
        return name

    @reg.tool()
    async def poke(name: str, d: int) -> str:
        """Side-effecting, declares nothing: writes everything."""
        await timeline.span(name, "poke", d)
        return name

    return reg


@dataclass
class Spec:
    """One generated call and what the test expects of it."""

    cid: str
    kind: str
    d: int
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)

    def tool_call(self) -> ToolCall:
        args: dict[str, Any] = {"name": self.cid, "d": self.d}
        if self.kind == "rw":
            args |= {"r1": self.reads[0], "r2": self.reads[1], "w": self.writes[0]}
        elif self.kind == "narrow":
            args |= {"r1": self.reads[0], "w": self.writes[0]}
        return ToolCall(id=self.cid, name=self.kind, arguments=args, after=tuple(self.after))


@st.composite
def batches(draw: st.DrawFn, *, kinds: list[str] = KINDS, max_size: int = 8) -> list[Spec]:
    n = draw(st.integers(1, max_size))
    rank = draw(st.permutations(range(n)))  # the hidden order that 'after' edges follow
    specs: list[Spec] = []
    for j in range(n):
        cid = f"c{j}"
        kind = draw(st.sampled_from(kinds))

        def resource(slot: str, cid: str = cid) -> str:
            shared = draw(st.booleans())
            return draw(st.sampled_from(POOL)) if shared else f"own:{cid}:{slot}"

        spec = Spec(cid, kind, draw(st.integers(1, 5)))
        if kind == "rw":
            spec.reads = [resource("r1"), resource("r2")]
            spec.writes = [resource("w")]
        elif kind == "narrow":
            spec.reads = [resource("r1")]
            spec.writes = [resource("w")]
        elif kind == "peek":
            spec.reads = ["*"]
        else:
            spec.writes = ["*"]
        specs.append(spec)
    for j in range(n):
        for i in range(n):
            if rank[i] < rank[j] and draw(st.integers(0, 3)) == 0:
                specs[j].after.append(f"c{i}")
    return specs


# -- the independent oracle ---------------------------------------------------------------


def is_glob(name: str) -> bool:
    return any(ch in name for ch in "*?[")


def overlaps(a: str, b: str) -> bool:
    if a == b:
        return True
    if is_glob(a) and is_glob(b):
        return True  # true of every two globs in POOL
    if is_glob(a):
        return fnmatch.fnmatchcase(b, a)
    if is_glob(b):
        return fnmatch.fnmatchcase(a, b)
    return False


def conflict(x: Spec, y: Spec) -> bool:
    def touch(writes: list[str], other: list[str]) -> bool:
        return any(overlaps(w, o) for w in writes for o in other)

    return touch(x.writes, y.reads + y.writes) or touch(y.writes, x.reads)


def stable_order(specs: list[Spec]) -> list[int]:
    """Repeatedly take the earliest call whose 'after' calls are all placed."""
    index = {s.cid: i for i, s in enumerate(specs)}
    placed: list[int] = []
    left = list(range(len(specs)))
    while left:
        i = next(i for i in left if all(index[a] in placed for a in specs[i].after))
        placed.append(i)
        left.remove(i)
    return placed


def edges(specs: list[Spec]) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    """(data edges, conflict edges) as (before, after) index pairs."""
    index = {s.cid: i for i, s in enumerate(specs)}
    data = {(index[a], j) for j, s in enumerate(specs) for a in s.after}
    order = stable_order(specs)
    conflicts = {
        (order[p], order[q])
        for p in range(len(order))
        for q in range(p + 1, len(order))
        if conflict(specs[order[p]], specs[order[q]])
    }
    return data, conflicts


def critical_path(specs: list[Spec], all_edges: set[tuple[int, int]]) -> float:
    finish: dict[int, float] = {}
    for j in stable_order_all(len(specs), all_edges):
        start = max((finish[i] for i, k in all_edges if k == j), default=0.0)
        finish[j] = start + specs[j].d
    return max(finish.values())


def stable_order_all(n: int, all_edges: set[tuple[int, int]]) -> list[int]:
    placed: list[int] = []
    while len(placed) < n:
        placed.append(
            next(
                j
                for j in range(n)
                if j not in placed and all(i in placed for i, k in all_edges if k == j)
            )
        )
    return placed


# -- running -------------------------------------------------------------------------------


def run_batch(
    specs: list[Spec], *, max_concurrency: int | None = None, deadline: float | None = None
) -> tuple[list[Observation], Timeline, Gate]:
    timeline = Timeline()
    gate = Gate(registry(timeline), max_concurrency=max_concurrency or len(specs))
    run = gate.run(authority=Authority(principal="p", grants=["call:*"]), run_id="r")

    async def main() -> list[Observation]:
        return await run.asubmit([s.tool_call() for s in specs], deadline=deadline)

    return virtual_run(main), timeline, gate


def assert_edges_respected(specs: list[Spec], timeline: Timeline) -> set[tuple[int, int]]:
    data, conflicts = edges(specs)
    spans = timeline.spans
    for i, j in data | conflicts:
        a, b = specs[i].cid, specs[j].cid
        if a in spans and b in spans:
            assert spans[b][0] >= spans[a][1] - EPS, f"{b} started before {a} ended"
    for i, j in conflicts:
        a, b = specs[i].cid, specs[j].cid
        if a in spans and b in spans:
            assert not timeline.overlap(a, b), f"conflicting {a} and {b} overlapped"
    return data | conflicts


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(batches())
def test_with_enough_workers_the_makespan_is_the_critical_path(specs: list[Spec]) -> None:
    """No conflicting overlap, every data edge respected, makespan = critical path."""
    observations, timeline, _ = run_batch(specs)
    assert [o.status for o in observations] == [Status.OK] * len(specs)
    assert [o.call_id for o in observations] == [s.cid for s in specs]
    all_edges = assert_edges_respected(specs, timeline)
    assert min(s for s, _ in timeline.spans.values()) == pytest.approx(0, abs=EPS)
    assert timeline.makespan() == pytest.approx(critical_path(specs, all_edges), abs=EPS)


@SETTINGS
@given(batches(kinds=[*KINDS, "narrow"]), st.integers(1, 3))
def test_bounded_workers_respect_every_bound_and_stay_greedy(
    specs: list[Spec], workers: int
) -> None:
    """Peaks never exceed the global or per-tool bound; greedy list-scheduling bound holds.

    Graham's bound: a scheduler that never leaves a worker idle while a call is
    ready finishes within W/m + L(1 - 1/m), W the total work, L the critical path.
    """
    observations, timeline, _ = run_batch(specs, max_concurrency=workers)
    assert [o.status for o in observations] == [Status.OK] * len(specs)
    all_edges = assert_edges_respected(specs, timeline)
    assert timeline.peak["*"] <= workers
    assert timeline.peak.get("narrow", 0) <= 1
    work = sum(s.d for s in specs)
    longest = critical_path(specs, all_edges)
    makespan = timeline.makespan()
    assert makespan >= max(longest, work / workers) - EPS
    if all(s.kind != "narrow" for s in specs):
        assert makespan <= work / workers + longest * (1 - 1 / workers) + EPS


@settings(max_examples=100, deadline=None)
@given(batches(), st.integers(1, 12).map(lambda half: half / 2))
def test_deadline_outcomes_are_honest(specs: list[Spec], deadline: float) -> None:
    """After the deadline nothing starts; each outcome says what really happened.

    ok: ended by the deadline. unknown: started before it and was cut off.
    rejected: never started (the tool never ran). The ledger agrees; no call is
    left admitted or running.
    """
    observations, timeline, gate = run_batch(specs, deadline=deadline)
    assert_edges_respected(specs, timeline)
    for obs, spec in zip(observations, specs, strict=True):
        if obs.status is Status.OK:
            assert timeline.spans[spec.cid][1] <= deadline + EPS
        elif obs.status is Status.UNKNOWN:
            assert spec.cid in timeline.starts
            assert spec.cid not in timeline.spans  # cut off: never reached its end
        else:
            assert obs.status is Status.REJECTED
            assert spec.cid not in timeline.starts
    states = {r.call_id: r.state for r in gate.ledger.calls()}
    assert states == {o.call_id: CallState(o.status.value) for o in observations}
    assert all(start < deadline for start in timeline.starts.values())

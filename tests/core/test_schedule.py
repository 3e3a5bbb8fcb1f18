"""Stage ``schedule``: the dependency and conflict graph, bounds, deadlines, cancellation.

Most tests run on a virtual clock (`virtual_run`): an asyncio loop whose
time jumps straight to the next timer, so a tool that sleeps "4 seconds"
takes microseconds and every start and end time is exact. A few tests use
real time (worker threads cannot run on a virtual clock); they scale time
down and assert with a tolerance.
"""

from __future__ import annotations

import asyncio
import selectors
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import anyio
import pytest

from callgate import (
    Authority,
    CallState,
    DefinitionError,
    Gate,
    Observation,
    OutcomeUnknown,
    Registry,
    Stage,
    Status,
    ToolCall,
    ToolFailure,
    tool,
)
from callgate.execute import Admitted
from callgate.schedule import find_cycle, plan_batch

T = TypeVar("T")

# -- a virtual clock ---------------------------------------------------------------


class _JumpingSelector:
    """A selector that, when nothing is ready, advances the loop's clock instead of waiting."""

    def __init__(self, loop: VirtualClockLoop) -> None:
        self._real = selectors.DefaultSelector()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[Any]:
        events = self._real.select(0)
        if events:
            return events
        if timeout is None:  # nothing scheduled: only another thread can wake us
            events = self._real.select(10)
            if not events:
                raise RuntimeError("virtual clock: nothing left to run (deadlock)")
            return events
        self._loop.now += timeout
        return []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time: sleeping costs nothing and timings are exact."""

    def __init__(self) -> None:
        self.now = 0.0
        super().__init__(_JumpingSelector(self))  # type: ignore[arg-type]

    def time(self) -> float:
        return self.now


def virtual_run(fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn`` on a fresh virtual-clock loop."""
    return anyio.run(fn, backend_options={"loop_factory": VirtualClockLoop})


# -- helpers -------------------------------------------------------------------------


class Timeline:
    """What the tools saw: (start, end) per call id, and the most calls running at once."""

    def __init__(self) -> None:
        self.starts: dict[str, float] = {}
        """Every call that started, finished or not."""
        self.spans: dict[str, tuple[float, float]] = {}
        """Calls that ran to their end."""
        self.running: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.lock = threading.Lock()

    def enter(self, *keys: str) -> None:
        with self.lock:
            for key in keys:
                self.running[key] = self.running.get(key, 0) + 1
                self.peak[key] = max(self.peak.get(key, 0), self.running[key])

    def leave(self, *keys: str) -> None:
        with self.lock:
            for key in keys:
                self.running[key] -= 1

    async def span(self, call: str, tool_name: str, duration: float) -> None:
        start = self.starts[call] = anyio.current_time()
        self.enter("*", tool_name)
        try:
            await anyio.sleep(duration)
        finally:
            self.leave("*", tool_name)
        self.spans[call] = (start, anyio.current_time())

    def overlap(self, a: str, b: str) -> bool:
        (s1, e1), (s2, e2) = self.spans[a], self.spans[b]
        return s1 < e2 and s2 < e1

    def makespan(self) -> float:
        return max(e for _, e in self.spans.values()) - min(s for s, _ in self.spans.values())


def make_registry(timeline: Timeline) -> Registry:
    """Async tools that sleep ``d`` virtual seconds and record when they ran."""
    reg = Registry()

    @reg.tool(writes="{res}")
    async def write(name: str, d: float, res: str = "") -> str:
        """Write a resource."""
        await timeline.span(name, "write", d)
        return name

    @reg.tool(reads="{res}", risk="read")
    async def read(name: str, d: float, res: str = "") -> str:
        """Read a resource."""
        await timeline.span(name, "read", d)
        return name

    @reg.tool(risk="read")
    async def peek(name: str, d: float) -> str:
        """Read-only tool that declares no resources."""
        await timeline.span(name, "peek", d)
        return name

    @reg.tool()
    async def poke(name: str, d: float) -> str:
        """Side-effecting tool that declares no resources."""
        await timeline.span(name, "poke", d)
        return name

    @reg.tool(writes="{res}", max_concurrency=1)
    async def narrow(name: str, d: float, res: str = "n") -> str:
        """A tool that allows one call at a time."""
        await timeline.span(name, "narrow", d)
        return name

    @reg.tool(ordered=True, writes="log:{name}")
    async def step(name: str, d: float, fail: bool = False) -> str:
        """Calls of this tool run in proposal order."""
        await timeline.span(name, "step", d)
        if fail:
            raise ToolFailure("step failed")
        return name

    @reg.tool(writes="{res}")
    async def fails(name: str, d: float, res: str = "", unknown: bool = False) -> str:
        """A write that fails after ``d``."""
        await timeline.span(name, "fails", d)
        if unknown:
            raise OutcomeUnknown("the service did not answer")
        raise ToolFailure("the service refused")

    return reg


def call(
    cid: str, name: str = "write", d: float = 1, *, after: Iterable[str] = (), **args: Any
) -> ToolCall:
    return ToolCall(id=cid, name=name, arguments={"name": cid, "d": d, **args}, after=tuple(after))


AUTH = Authority(principal="tester", grants=["call:*"])  # its tools declare no effects


def submit_virtual(
    calls: list[ToolCall], *, gate_options: Mapping[str, Any] | None = None, **kw: Any
) -> tuple[list[Observation], Timeline, Gate]:
    timeline = Timeline()
    gate = Gate(make_registry(timeline), **(gate_options or {}))
    run = gate.run(authority=AUTH, run_id="r")

    async def main() -> list[Observation]:
        return await run.asubmit(calls, **kw)

    return virtual_run(main), timeline, gate


def statuses(observations: list[Observation]) -> dict[str, Status]:
    return {o.call_id: o.status for o in observations}


# -- the seeds' worked example ---------------------------------------------------------


def test_worked_example_independent_calls_finish_at_the_critical_path() -> None:
    """A (2 s) and B (3 s) independent, C (4 s) after both: 3 + 4 = 7 s, not 9."""
    calls = [
        call("A", d=2, res="a"),
        call("B", d=3, res="b"),
        call("C", d=4, res="c", after=["A", "B"]),
    ]
    observations, timeline, _ = submit_virtual(calls)
    assert [o.status for o in observations] == [Status.OK] * 3
    assert timeline.makespan() == pytest.approx(7)
    assert timeline.spans["A"][0] == timeline.spans["B"][0] == pytest.approx(0)
    assert timeline.spans["C"][0] == pytest.approx(3)


def test_worked_example_write_conflict_between_a_and_b_takes_9_seconds() -> None:
    """With A and B writing the same cart, B waits for A: 2 + 3 + 4 = 9 s."""
    calls = [
        call("A", d=2, res="cart:1"),
        call("B", d=3, res="cart:1"),
        call("C", d=4, res="c", after=["A", "B"]),
    ]
    observations, timeline, _ = submit_virtual(calls)
    assert [o.status for o in observations] == [Status.OK] * 3
    assert timeline.makespan() == pytest.approx(9)
    assert timeline.spans["B"][0] == pytest.approx(2)


UNIT = 0.05  # 50 ms per "second" of the worked example, in real time


def _real_registry(spans: dict[str, tuple[float, float]]) -> Registry:
    """Sync and async writes that sleep ``d`` units and note when they ran, by ``res``."""
    reg = Registry()

    @reg.tool(writes="{res}")
    async def awrite(res: str, d: float, tag: str) -> str:
        """Async write that sleeps d units."""
        start = time.monotonic()
        await anyio.sleep(d * UNIT)
        spans[tag] = (start, time.monotonic())
        return res

    @reg.tool(writes="{res}")
    def swrite(res: str, d: float, tag: str) -> str:
        """Sync write that sleeps d units."""
        start = time.monotonic()
        time.sleep(d * UNIT)
        spans[tag] = (start, time.monotonic())
        return res

    return reg


@pytest.mark.parametrize(("conflict", "units"), [(False, 7), (True, 9)])
@pytest.mark.parametrize("name", ["awrite", "swrite"])
def test_worked_example_in_real_time(conflict: bool, units: int, name: str) -> None:
    """The same example on a real clock, sync and async tools, through sync ``submit``.

    Judged on the recorded run times, not on elapsed wall time alone, so that a busy
    machine cannot make it fail: A and B overlap unless they conflict, C starts after
    both, and the batch takes at least the critical path.
    """
    spans: dict[str, tuple[float, float]] = {}
    gate = Gate(_real_registry(spans))
    run = gate.run(authority=AUTH)
    b_res = "cart" if conflict else "b"
    calls = [
        ToolCall(id="A", name=name, arguments={"res": "cart", "d": 2, "tag": "A"}),
        ToolCall(id="B", name=name, arguments={"res": b_res, "d": 3, "tag": "B"}),
        ToolCall(id="C", name=name, arguments={"res": "c", "d": 4, "tag": "C"}, after=("A", "B")),
    ]
    observations = run.submit(calls)
    assert [o.status for o in observations] == [Status.OK] * 3
    (a0, a1), (b0, b1), (c0, _) = spans["A"], spans["B"], spans["C"]
    if conflict:
        assert b0 >= a1
    else:
        assert b0 < a1
        assert a0 < b1
    assert c0 >= max(a1, b1)


# -- graph rules ---------------------------------------------------------------------------


def test_reads_of_the_same_resource_run_together() -> None:
    """Reads commute: two reads of one cart overlap."""
    _, timeline, _ = submit_virtual(
        [call("r1", "read", res="cart:1"), call("r2", "read", res="cart:1")]
    )
    assert timeline.overlap("r1", "r2")
    assert timeline.makespan() == pytest.approx(1)


def test_a_read_and_a_write_of_one_resource_run_in_proposal_order() -> None:
    """A write then a read of the same cart: the read starts when the write ends."""
    _, timeline, _ = submit_virtual(
        [call("w", "write", d=2, res="cart:1"), call("r", "read", res="cart:1")]
    )
    assert timeline.spans["r"][0] == pytest.approx(timeline.spans["w"][1])


def test_writes_of_different_resources_run_together() -> None:
    """Writes of two different resources overlap in time."""
    _, timeline, _ = submit_virtual([call("a", res="cart:1"), call("b", res="cart:2")])
    assert timeline.overlap("a", "b")


@pytest.mark.parametrize(
    ("first", "second", "conflict"),
    [
        ("cart:*", "cart:7", True),
        ("cart:7", "cart:*", True),
        ("*", "order:1", True),
        ("cart:*", "order:1", False),
        ("cart:*", "cart:1*", True),
        ("cart:1*", "cart:2*", False),
        ("cart:*:x", "cart:*:y", False),
        ("cart:?", "cart:12", False),
        ("cart:[12]", "cart:2", True),
    ],
)
def test_wildcard_resources(first: str, second: str, conflict: bool) -> None:
    """Glob resources conflict with every name (and glob) they may match."""
    _, timeline, _ = submit_virtual([call("a", res=first), call("b", res=second)])
    assert timeline.overlap("a", "b") is not conflict


def test_tool_declaring_nothing_read_only_conflicts_with_writes_not_reads() -> None:
    """The safe default: an undeclared read-only tool is taken to read everything."""
    _, timeline, _ = submit_virtual(
        [call("w", res="cart:1"), call("p", "peek"), call("r", "read", res="cart:1")]
    )
    assert not timeline.overlap("w", "p")
    assert timeline.overlap("p", "r")


def test_tool_declaring_nothing_side_effecting_conflicts_with_everything() -> None:
    """An undeclared side-effecting tool is taken to write everything."""
    _, timeline, _ = submit_virtual(
        [call("r", "read", res="cart:1"), call("x", "poke"), call("w", res="order:9")]
    )
    assert timeline.spans["x"][0] == pytest.approx(timeline.spans["r"][1])
    assert timeline.spans["w"][0] == pytest.approx(timeline.spans["x"][1])


def test_conflict_edge_respects_an_explicit_after_that_points_forward() -> None:
    """Call 0 is ``after`` call 1 and both write one cart: 1 runs first, no deadlock."""
    observations, timeline, _ = submit_virtual(
        [call("late", res="cart", after=["early"]), call("early", res="cart", d=2)]
    )
    assert [o.status for o in observations] == [Status.OK, Status.OK]
    assert timeline.spans["late"][0] == pytest.approx(timeline.spans["early"][1])


def test_ordered_tool_runs_in_proposal_order() -> None:
    """``ordered`` tools run one after the other, though their resources differ."""
    _, timeline, _ = submit_virtual(
        [call("s1", "step", d=2), call("s2", "step"), call("s3", "step")]
    )
    assert timeline.spans["s2"][0] == pytest.approx(2)
    assert timeline.spans["s3"][0] == pytest.approx(3)


def test_ordered_tool_failure_fails_the_later_calls() -> None:
    """A failed ordered call rejects the later ones (naming it); other calls still run."""
    observations, timeline, _ = submit_virtual(
        [call("s1", "step", fail=True), call("s2", "step"), call("w", res="x")]
    )
    assert statuses(observations) == {"s1": Status.ERROR, "s2": Status.REJECTED, "w": Status.OK}
    assert "s2" not in timeline.spans
    assert "'s1'" in observations[1].content


# -- partial failure -----------------------------------------------------------------------


@pytest.mark.parametrize("unknown", [False, True])
def test_failed_call_rejects_its_dependents_and_independent_calls_still_run(
    unknown: bool,
) -> None:
    """A fails; B after A and D after B are rejected naming their dependency; C runs."""
    calls = [
        call("A", "fails", res="x", unknown=unknown),
        call("B", res="y", after=["A"]),
        call("C", res="z"),
        call("D", res="w", after=["B"]),
    ]
    observations, timeline, gate = submit_virtual(calls)
    first = Status.UNKNOWN if unknown else Status.ERROR
    assert [o.status for o in observations] == [first, Status.REJECTED, Status.OK, Status.REJECTED]
    b, d = observations[1], observations[3]
    assert b.stage is Stage.SCHEDULE
    assert d.stage is Stage.SCHEDULE
    assert f"depends on call 'A' (fails), which ended '{first.value}'" in b.content
    assert "depends on call 'B'" in d.content
    assert b.details[0]["dependency"] == "A"
    assert set(timeline.spans) == {"A", "C"}
    for cid in ("B", "D"):
        record = gate.ledger.get_call("r", cid)
        assert record is not None
        assert record.state is CallState.REJECTED
        assert record.stage == "schedule"


def test_conflict_edge_does_not_propagate_failure() -> None:
    """B only conflicts with A (same resource), so A's failure does not stop B."""
    observations, _, _ = submit_virtual([call("A", "fails", res="x"), call("B", res="x")])
    assert statuses(observations) == {"A": Status.ERROR, "B": Status.OK}


def test_observations_come_back_in_proposal_order_whatever_the_completion_order() -> None:
    """The last call finishes first; each observation still answers its own call id."""
    calls = [call(f"c{i}", res=f"r{i}", d=5 - i) for i in range(5)]
    observations, timeline, _ = submit_virtual(calls)
    assert [o.call_id for o in observations] == [f"c{i}" for i in range(5)]
    assert [o.result for o in observations] == [f"c{i}" for i in range(5)]
    ends = [timeline.spans[f"c{i}"][1] for i in range(5)]
    assert ends == sorted(ends, reverse=True)


# -- cycles and fan-out ----------------------------------------------------------------------


def test_cycle_rejects_the_whole_batch_and_runs_nothing() -> None:
    """A dependency cycle rejects every call of the batch at schedule, names it, runs none."""
    calls = [
        call("a", res="1", after=["b"]),
        call("b", res="2", after=["a"]),
        call("c", res="3"),
    ]
    observations, timeline, gate = submit_virtual(calls)
    assert timeline.spans == {}
    assert [o.status for o in observations] == [Status.REJECTED] * 3
    assert all(o.stage is Stage.SCHEDULE for o in observations)
    assert "form a cycle: a -> b -> a" in observations[0].content
    assert "batch was not run" in observations[2].content
    assert "Nothing in this batch was executed" in observations[2].content
    assert all(r.state is CallState.REJECTED for r in gate.ledger.calls())


def test_call_after_itself_is_a_cycle() -> None:
    """A call after itself is a one-call cycle: rejected, named 'a -> a', not run."""
    assert find_cycle([ToolCall(id="a", name="t", after=("a",))]) == ["a"]
    observations, timeline, _ = submit_virtual([call("a", res="x", after=["a"])])
    assert observations[0].status is Status.REJECTED
    assert "form a cycle: a -> a" in observations[0].content
    assert timeline.spans == {}


def test_find_cycle_handles_long_chains_without_recursion() -> None:
    """find_cycle walks a 5,000-call chain without recursion and finds the 5,001-call cycle."""
    chain = [ToolCall(id=f"c{i}", name="t", after=(f"c{i + 1}",)) for i in range(5000)]
    assert find_cycle(chain) == []
    chain.append(ToolCall(id="c5000", name="t", after=("c0",)))
    assert len(find_cycle(chain)) == 5001


def test_excess_calls_are_rejected_with_a_clear_message_not_dropped() -> None:
    """Calls past max_batch_calls and their dependants are rejected with a message, not dropped."""
    calls = [call(f"c{i}", res=f"r{i}") for i in range(5)]
    calls[1] = call("c1", res="r1", after=["c4"])
    observations, timeline, gate = submit_virtual(calls, gate_options={"max_batch_calls": 3})
    assert len(observations) == 5
    assert statuses(observations) == {
        "c0": Status.OK,
        "c1": Status.REJECTED,
        "c2": Status.OK,
        "c3": Status.REJECTED,
        "c4": Status.REJECTED,
    }
    assert set(timeline.spans) == {"c0", "c2"}
    excess = observations[3]
    assert excess.stage is Stage.SCHEDULE
    assert "proposed 5 calls and at most 3 run per batch" in excess.content
    assert "Send it again in a later turn" in excess.content
    assert "depends on call 'c4'" in observations[1].content
    record = gate.ledger.get_call("r", "c4")
    assert record is not None
    assert record.state is CallState.REJECTED


# -- bounds ---------------------------------------------------------------------------------


def test_global_concurrency_is_never_exceeded() -> None:
    """max_concurrency=3 caps 10 one-second calls at 3 at once: 4 seconds in all."""
    calls = [call(f"c{i}", res=f"r{i}") for i in range(10)]
    _, timeline, _ = submit_virtual(calls, gate_options={"max_concurrency": 3})
    assert timeline.peak["*"] == 3
    assert timeline.makespan() == pytest.approx(4)  # ceil(10 / 3) rounds of 1 s


def test_per_tool_concurrency_is_never_exceeded_and_does_not_block_other_tools() -> None:
    """``narrow`` allows one call at a time; the writes behind it in the batch still start."""
    calls = [call(f"n{i}", "narrow", res=f"n{i}") for i in range(3)]
    calls += [call(f"w{i}", res=f"w{i}") for i in range(3)]
    _, timeline, _ = submit_virtual(calls)
    assert timeline.peak["narrow"] == 1
    assert timeline.peak["write"] == 3
    assert timeline.makespan() == pytest.approx(3)
    assert all(timeline.spans[f"w{i}"][0] == pytest.approx(0) for i in range(3))


def test_per_tool_concurrency_with_sync_tools_in_threads() -> None:
    """Real threads: at most two calls of ``slow`` at once, all six run."""
    timeline = Timeline()
    reg = Registry()

    @reg.tool(risk="read", reads="x", max_concurrency=2)
    def slow(i: int) -> int:
        """Sleep a little in a worker thread."""
        timeline.enter("slow")
        time.sleep(0.03)
        timeline.leave("slow")
        return i

    run = Gate(reg).run(authority=AUTH)
    observations = run.submit(
        [ToolCall(id=f"s{i}", name="slow", arguments={"i": i}) for i in range(6)]
    )
    assert [o.result for o in observations] == list(range(6))
    assert timeline.peak["slow"] == 2


@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_tool_max_concurrency_must_be_a_positive_integer(value: Any) -> None:
    """@tool(max_concurrency=...) of 0, -1, 1.5 or True is a DefinitionError."""
    with pytest.raises(DefinitionError, match="max_concurrency"):

        @tool(max_concurrency=value)
        def t() -> None:
            """A tool."""


@pytest.mark.parametrize(
    "options",
    [{"max_concurrency": 0}, {"max_batch_calls": 0}, {"batch_deadline": 0}, {"batch_deadline": -1}],
)
def test_gate_bounds_must_be_positive(options: dict[str, Any]) -> None:
    """Gate refuses a zero max_concurrency or max_batch_calls and a non-positive batch_deadline."""
    with pytest.raises(DefinitionError):
        Gate(Registry(), **options)


def test_submit_deadline_must_be_positive() -> None:
    """submit(deadline=0) raises ValueError naming the deadline."""
    run = Gate(make_registry(Timeline())).run(authority=AUTH)
    with pytest.raises(ValueError, match="deadline"):
        run.submit([call("a")], deadline=0)


# -- deadlines ----------------------------------------------------------------------------


def test_deadline_cancels_running_calls_as_unknown_and_rejects_the_rest() -> None:
    """Deadline 3 s: A ends ok at 2; B and R are running at 3; C waits for R, never starts.

    D depends on B, which ended unknown: it is rejected naming B.
    """
    calls = [
        call("A", d=2, res="a"),
        call("B", d=2, res="b", after=["A"]),
        call("R", "read", d=5, res="r"),
        call("C", d=1, res="r", after=["A"]),
        call("D", d=1, res="d", after=["B"]),
    ]
    observations, timeline, gate = submit_virtual(calls, deadline=3)
    assert [o.status for o in observations] == [
        Status.OK,
        Status.UNKNOWN,
        Status.UNKNOWN,
        Status.REJECTED,
        Status.REJECTED,
    ]
    b, r, c, d = observations[1:]
    assert "deadline of 3 s passed while this call was running" in b.content
    assert "may have happened" in b.content
    assert not b.retryable
    assert "retrying is safe" in r.content
    assert r.retryable
    assert c.stage is Stage.SCHEDULE
    assert "deadline of 3 s passed before this call could start" in c.content
    assert "depends on call 'B'" in d.content
    assert set(timeline.spans) == {"A"}  # B and R never reached their end
    states = {rec.call_id: rec.state for rec in gate.ledger.calls()}
    assert states == {
        "A": CallState.OK,
        "B": CallState.UNKNOWN,
        "C": CallState.REJECTED,
        "R": CallState.UNKNOWN,
        "D": CallState.REJECTED,
    }


def test_gate_batch_deadline_applies_and_submit_can_override_it() -> None:
    """Gate(batch_deadline=1) times a batch out; submit(deadline=10) overrides it."""
    calls = [call("A", d=2, res="a"), call("B", d=2, res="b", after=["A"])]
    observations, _, _ = submit_virtual(calls, gate_options={"batch_deadline": 1})
    assert [o.status for o in observations] == [Status.UNKNOWN, Status.REJECTED]
    observations, _, _ = submit_virtual(calls, gate_options={"batch_deadline": 1}, deadline=10)
    assert [o.status for o in observations] == [Status.OK, Status.OK]


def test_deadline_applies_to_a_lone_async_call() -> None:
    """A lone async call past the deadline ends unknown, in the observation and the ledger."""
    observations, _, gate = submit_virtual([call("A", d=5, res="a")], deadline=1)
    assert observations[0].status is Status.UNKNOWN
    record = gate.ledger.get_call("r", "A")
    assert record is not None
    assert record.state is CallState.UNKNOWN


def test_deadline_abandons_a_sync_call_in_a_worker_thread() -> None:
    """Real time: two sync calls of 0.5 s under a 0.1 s deadline return after ~0.1 s."""
    reg = Registry()

    release = threading.Event()
    finished: list[str] = []

    @reg.tool(writes="{k}")
    def sleepy(k: str) -> str:
        """Block until the test lets go (or 10 s)."""
        release.wait(10)
        finished.append(k)
        return k

    gate = Gate(reg)
    run = gate.run(authority=AUTH)
    try:
        observations = run.submit(
            [ToolCall(id=k, name="sleepy", arguments={"k": k}) for k in "ab"], deadline=0.1
        )
        assert finished == []  # answered at the deadline, not when the handlers returned
    finally:
        release.set()
    assert [o.status for o in observations] == [Status.UNKNOWN, Status.UNKNOWN]


# -- cancellation ----------------------------------------------------------------------------


def test_cancelling_the_batch_records_running_calls_unknown_and_the_rest_not_started() -> None:
    """The caller gives up at 3 s: B runs (unknown), C never started (rejected), A was done."""
    timeline = Timeline()
    gate = Gate(make_registry(timeline))
    run = gate.run(authority=AUTH, run_id="r")
    calls = [
        call("A", d=2, res="a"),
        call("B", d=2, res="b", after=["A"]),
        call("C", d=1, res="c", after=["B"]),
    ]
    returned: list[Observation] = []

    async def main() -> bool:
        with anyio.move_on_after(3) as scope:
            returned.extend(await run.asubmit(calls))
        return scope.cancelled_caught

    assert virtual_run(main) is True
    assert returned == []
    states = {rec.call_id: rec.state for rec in gate.ledger.calls()}
    assert states == {"A": CallState.OK, "B": CallState.UNKNOWN, "C": CallState.REJECTED}
    record = gate.ledger.get_call("r", "C")
    assert record is not None
    assert record.stage == "schedule"
    assert "cancelled before this call could start" in record.message
    assert not gate.ledger.calls(state=CallState.ADMITTED)


# -- threads -----------------------------------------------------------------------------------


def _thread_registry() -> Registry:
    reg = Registry()

    @reg.tool(risk="read", reads="{k}")
    def where(k: str) -> int:
        """The thread the handler ran in."""
        time.sleep(0.05)
        return threading.get_ident()

    return reg


@pytest.mark.sync_driver
def test_lone_sync_call_runs_in_the_calling_thread_under_submit_only() -> None:
    """``submit``: no thread hop. ``asubmit``: a worker thread, never the event loop's,
    on an idle loop as beside another task."""
    run = Gate(_thread_registry()).run(authority=AUTH)
    [obs] = run.submit([ToolCall(id="a", name="where", arguments={"k": "x"})])
    assert obs.result == threading.get_ident()

    async def alone() -> Observation:
        [o] = await run.asubmit([ToolCall(id="b", name="where", arguments={"k": "x"})])
        return o

    async def beside_another_task() -> Observation:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.sleep, 0.01)
            [o] = await run.asubmit([ToolCall(id="c", name="where", arguments={"k": "x"})])
        return o

    assert anyio.run(alone).result != threading.get_ident()
    assert anyio.run(beside_another_task).result != threading.get_ident()


def test_several_sync_calls_run_concurrently_in_worker_threads() -> None:
    """A batch of sync calls runs its handlers on worker threads, none on the caller's."""
    run = Gate(_thread_registry()).run(authority=AUTH)
    observations = run.submit([ToolCall(id=k, name="where", arguments={"k": "x"}) for k in "abcd"])
    assert threading.get_ident() not in {o.result for o in observations}


def test_sync_submit_inside_a_running_event_loop() -> None:
    """A sync ``submit`` from async code runs the batch on a loop in a helper thread."""
    run = Gate(_thread_registry()).run(authority=AUTH)

    async def main() -> list[Observation]:
        return run.submit([ToolCall(id=k, name="where", arguments={"k": k}) for k in "ab"])

    assert [o.status for o in anyio.run(main)] == [Status.OK, Status.OK]


# -- planning at scale --------------------------------------------------------------------------


def _admitted(gate: Gate, calls: list[ToolCall]) -> list[Admitted]:
    staged = gate.run(authority=AUTH)._admit_batch(calls)
    items = [s for s in staged if isinstance(s, Admitted)]
    assert len(items) == len(calls)
    return items


def test_plan_keeps_edges_linear_for_many_writes_of_one_resource() -> None:
    """2,000 writes of one cart: each waits only for the one before (not all before)."""
    gate = Gate(make_registry(Timeline()), max_batch_calls=5000)
    items = _admitted(gate, [call(f"c{i}", res="cart") for i in range(2000)])
    batch = plan_batch(items)
    assert [sorted(n.waits_for) for n in batch.nodes[:3]] == [[], [0], [1]]
    assert sum(len(n.waits_for) for n in batch.nodes) == 1999


def test_plan_waits_for_all_readers_since_the_last_write() -> None:
    """A write waits for every read since the previous write; a read only for that write."""
    gate = Gate(make_registry(Timeline()))
    calls = [
        call("w0", res="x"),
        call("r1", "read", res="x"),
        call("r2", "read", res="x"),
        call("w3", res="x"),
        call("r4", "read", res="x"),
    ]
    batch = plan_batch(_admitted(gate, calls))
    assert [sorted(n.waits_for) for n in batch.nodes] == [[], [0], [0], [1, 2], [3]]


def test_a_lone_sync_call_is_bounded_by_the_batch_deadline() -> None:
    """With a deadline, even a lone sync call runs where the deadline can stop the wait:
    it ends `unknown` at the deadline instead of when the handler returns."""

    from callgate import Authority, Gate, Registry, Status, ToolCall, tool

    release = threading.Event()
    finished: list[bool] = []

    @tool(effects="write:x")
    def slow() -> str:
        release.wait(10)
        finished.append(True)
        return "done"

    run = Gate(Registry([slow])).run(authority=Authority(principal="p", grants=["write:*"]))
    try:
        [obs] = run.submit([ToolCall(id="c1", name="slow", arguments={})], deadline=0.2)
        assert finished == []  # answered at the deadline, while the handler still runs
    finally:
        release.set()
    assert obs.status is Status.UNKNOWN

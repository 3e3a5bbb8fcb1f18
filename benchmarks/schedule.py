"""How close the scheduler gets to the critical path, and what it costs per call.

For seeded random DAGs of 10, 100 and 1000 sleep-based calls (data edges from
``after``, conflicts from declared reads and writes), prints:

* **makespan / critical path**: the scheduler's wall time over the longest
  path through the data edges and the conflict edges in proposal order (a
  lower bound for any schedule that serializes conflicts that way); target
  ≤ 1.05 with enough workers.
* **floor**: ``asyncio.gather`` of the same calls, each awaiting the events
  of all its predecessors (data and conflict edges, from this script): the
  ratio that sleep and timer granularity alone cost on this machine.
* **naive**: ``asyncio.gather`` of the same calls, each awaiting only its
  data dependencies (conflicts ignored, so it may overlap conflicting writes),
  over the data-only critical path.
* **overhead per call**: ``plan_batch`` + ``run_batch_async`` on zero-duration
  calls, minus awaiting the same calls one after the other; target ≤ 50 µs.
  The plan alone and ``asyncio.gather`` of the same zero-duration calls are
  shown for comparison.
* one line through the whole gate (``Run.asubmit``: admission, ledger,
  execute) for the 100-call graph.

The critical paths are computed here, independently of ``callgate.schedule``.
Figures are medians of several repeats. Run: ``.venv/bin/python benchmarks/schedule.py``.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from dataclasses import dataclass, field

from callgate import Authority, Gate, MemoryLedger, Observation, Registry, Stage, Status, ToolCall
from callgate.execute import Admitted
from callgate.schedule import plan_batch, run_batch_async
from callgate.tools import ToolSpec

SIZES = (10, 100, 1000)
LAYERS = 6
DURATION_MS = (20, 60)
MAKESPAN_REPEATS = 5
OVERHEAD_REPEATS = 9
SEED = 20260

registry = Registry()


@registry.tool(reads="{r}", writes="{w}")
async def work(name: str, ms: int, r: str, w: str) -> str:
    """Sleep ``ms`` milliseconds; read ``r`` and write ``w``."""
    await asyncio.sleep(ms / 1000)
    return name


SPEC: ToolSpec = registry.get("work")  # type: ignore[assignment]


@dataclass
class Call:
    cid: str
    ms: int
    r: str
    w: str
    after: list[int] = field(default_factory=list)


def random_dag(n: int, rng: random.Random) -> list[Call]:
    """Calls in proposal order; each in a random layer, with 0-2 data edges to lower layers."""
    pool = max(4, n // 4)
    layer = [rng.randrange(LAYERS) for _ in range(n)]
    calls = []
    for i in range(n):

        def resource(kind: str, i: int = i) -> str:
            if rng.random() < 0.3:
                return f"res:{rng.randrange(pool)}"
            return f"own:{i}:{kind}"

        lower = [j for j in range(n) if layer[j] < layer[i]]
        deps = rng.sample(lower, min(len(lower), rng.randrange(3)))
        calls.append(Call(f"c{i}", rng.randint(*DURATION_MS), resource("r"), resource("w"), deps))
    return calls


def stable_order(calls: list[Call]) -> list[int]:
    """Kahn's algorithm over the data edges, earliest proposal first (as the gate orders)."""
    import heapq

    pending = [len(set(c.after)) for c in calls]
    users: list[list[int]] = [[] for _ in calls]
    for j, c in enumerate(calls):
        for i in set(c.after):
            users[i].append(j)
    ready = [j for j, p in enumerate(pending) if p == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in users[i]:
            pending[j] -= 1
            if pending[j] == 0:
                heapq.heappush(ready, j)
    return order


def predecessors(calls: list[Call], *, conflicts: bool) -> list[set[int]]:
    """Each call's data dependencies, plus earlier conflicting calls in the stable order."""
    order = stable_order(calls)
    preds = [set(c.after) for c in calls]
    if conflicts:
        for p, j in enumerate(order):
            c = calls[j]
            for i in order[:p]:
                o = calls[i]
                if o.w in (c.r, c.w) or c.w == o.r:
                    preds[j].add(i)
    return preds


def critical_path_ms(calls: list[Call], *, conflicts: bool) -> float:
    """Longest path (ms) over data edges, plus conflict edges in the stable order."""
    preds = predecessors(calls, conflicts=conflicts)
    finish: dict[int, float] = {}
    for j in stable_order(calls):
        finish[j] = max((finish[i] for i in preds[j]), default=0.0) + calls[j].ms
    return max(finish.values())


def admitted(calls: list[Call]) -> list[Admitted]:
    items = []
    for c in calls:
        args = {"name": c.cid, "ms": c.ms, "r": c.r, "w": c.w}
        call = ToolCall(
            id=c.cid, name="work", arguments=args, after=tuple(calls[i].cid for i in c.after)
        )
        items.append(
            Admitted(
                call=call,
                spec=SPEC,
                arguments=SPEC.arguments_model(**args),
                run_id="bench",
                principal="bench",
                idempotency_key=c.cid,
                request_hash="",
            )
        )
    return items


def ok(item: Admitted) -> Observation:
    return Observation(
        call_id=item.call.id,
        tool="work",
        status=Status.OK,
        stage=Stage.EXECUTE,
        content="",
        retryable=True,
    )


async def sleep_execute(item: Admitted) -> Observation:
    await asyncio.sleep(item.arguments.ms / 1000)  # type: ignore[attr-defined]
    return ok(item)


async def scheduled_makespan(items: list[Admitted]) -> float:
    start = time.perf_counter()
    await run_batch_async(plan_batch(items), sleep_execute, max_concurrency=len(items))
    return (time.perf_counter() - start) * 1000


async def gather_makespan(calls: list[Call], *, conflicts: bool) -> float:
    """asyncio.gather, each call awaiting its predecessors' events.

    Without conflicts this is the naive baseline (it may overlap conflicting
    writes); with them it is the floor set by sleep and timer granularity.
    """
    preds = predecessors(calls, conflicts=conflicts)
    done = [asyncio.Event() for _ in calls]

    async def one(j: int) -> None:
        for i in preds[j]:
            await done[i].wait()
        await asyncio.sleep(calls[j].ms / 1000)
        done[j].set()

    start = time.perf_counter()
    await asyncio.gather(*(one(j) for j in range(len(calls))))
    return (time.perf_counter() - start) * 1000


async def zero_overhead(items: list[Admitted]) -> tuple[float, float, float, float]:
    """(scheduler, plan only, direct awaits, gather) in µs per call, on zero-duration calls."""
    results = {item.call.id: ok(item) for item in items}

    async def zero(item: Admitted) -> Observation:
        return results[item.call.id]

    n = len(items)
    t0 = time.perf_counter()
    await run_batch_async(plan_batch(items), zero, max_concurrency=n)
    t1 = time.perf_counter()
    plan_batch(items)
    t2 = time.perf_counter()
    for item in items:
        await zero(item)
    t3 = time.perf_counter()
    await asyncio.gather(*(zero(item) for item in items))
    t4 = time.perf_counter()
    per = 1e6 / n
    return (t1 - t0) * per, (t2 - t1) * per, (t3 - t2) * per, (t4 - t3) * per


async def through_gate(calls: list[Call]) -> float:
    gate = Gate(
        registry, ledger=MemoryLedger(), max_concurrency=len(calls), max_batch_calls=len(calls)
    )
    run = gate.run(authority=Authority(principal="bench", grants=["call:work"]))
    batch = [
        ToolCall(
            id=c.cid,
            name="work",
            arguments={"name": c.cid, "ms": c.ms, "r": c.r, "w": c.w},
            after=tuple(calls[i].cid for i in c.after),
        )
        for c in calls
    ]
    start = time.perf_counter()
    observations = await run.asubmit(batch)
    elapsed = (time.perf_counter() - start) * 1000
    bad = [o for o in observations if o.status is not Status.OK]
    assert not bad, bad[0]
    return elapsed


async def main() -> None:
    rng = random.Random(SEED)
    print(
        f"random DAGs, {LAYERS} layers, durations {DURATION_MS[0]}-{DURATION_MS[1]} ms, "
        f"workers = calls; medians of {MAKESPAN_REPEATS} (makespan) / "
        f"{OVERHEAD_REPEATS} (overhead) repeats"
    )
    header = (
        f"{'calls':>6} {'CP ms':>7} {'makespan':>9} {'ratio':>6} {'floor':>6} | {'data CP':>7} "
        f"{'gather':>7} {'ratio':>6} | {'sched µs':>8} {'plan µs':>7} {'gather µs':>9}"
    )
    print(header)
    print("-" * len(header))
    graphs = {}
    for n in SIZES:
        calls = random_dag(n, rng)
        graphs[n] = calls
        items = admitted(calls)
        cp = critical_path_ms(calls, conflicts=True)
        data_cp = critical_path_ms(calls, conflicts=False)
        await scheduled_makespan(items)  # warm-up
        ours = statistics.median([await scheduled_makespan(items) for _ in range(MAKESPAN_REPEATS)])
        floor = statistics.median(
            [await gather_makespan(calls, conflicts=True) for _ in range(MAKESPAN_REPEATS)]
        )
        naive = statistics.median(
            [await gather_makespan(calls, conflicts=False) for _ in range(MAKESPAN_REPEATS)]
        )
        await zero_overhead(items)  # warm-up
        runs = [await zero_overhead(items) for _ in range(OVERHEAD_REPEATS)]
        sched, plan, direct, gather = (statistics.median(r[k] for r in runs) for k in range(4))
        print(
            f"{n:>6} {cp:>7.0f} {ours:>9.1f} {ours / cp:>6.3f} {floor / cp:>6.3f} | "
            f"{data_cp:>7.0f} {naive:>7.1f} {naive / data_cp:>6.3f} | {sched - direct:>8.1f} "
            f"{plan:>7.1f} {gather - direct:>9.1f}"
        )
    calls = graphs[100]
    cp = critical_path_ms(calls, conflicts=True)
    full = statistics.median([await through_gate(calls) for _ in range(MAKESPAN_REPEATS)])
    print(
        f"\nthrough Gate.asubmit (admission, ledger, execute), 100 calls: makespan "
        f"{full:.1f} ms, ratio {full / cp:.3f}"
    )


if __name__ == "__main__":
    asyncio.run(main())

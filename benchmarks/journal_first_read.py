"""What the journal read before a side effect costs: a fresh process's first call, by size.

Since issue 28 a SQL ledger folds its journal (`callgate.ledger.truth.JournalTruth`) before
a side effect runs: the whole journal once per process, then only the records written
since. This script measures, on SQLite, in a temporary directory only:

* ``first``: a journal is grown to each size (records in ``journal``) by side-effecting
  calls through the gate; then a fresh process opens the ledger and times its first
  side-effecting ``run.submit`` (which folds the whole journal) and the median of its next
  20 (which fold only their own records). Medians over ``--repeats`` fresh processes.
* ``writers``: one process doing ``--calls`` side-effecting calls against the same calls
  split over two processes writing at once to one ledger: µs per call, and how many
  records each process verified by hash (``JournalTruth.fold``: the other writer's
  records) against those it folded as its own (``trusted``).

Run by hand: ``.venv/bin/python benchmarks/journal_first_read.py`` (a few minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import anyio

from callgate import Authority, Gate, Registry, ToolCall
from callgate.ledger import truth
from callgate.ledger.sqlite import SQLiteLedger

registry = Registry()


@registry.tool(effects="spend:USD", writes="charge:{operation_id}")
def charge(operation_id: str, amount: int) -> dict[str, Any]:
    """A no-op charge: the benchmark measures what surrounds the effect."""
    return {"operation_id": operation_id, "amount": amount}


@registry.tool(effects="spend:USD", writes="charge:{operation_id}")
async def charge_async(operation_id: str, amount: int) -> dict[str, Any]:
    """The async twin of `charge`, to grow a journal 16 calls per commit."""
    return {"operation_id": operation_id, "amount": amount}


AUTHORITY = Authority(principal="bench", grants=["spend:USD"])
BATCH = 16
COUNTS = {"fold": 0, "trusted": 0}


def _count_folds() -> None:
    fold, trusted = truth.JournalTruth.fold, truth.JournalTruth.trusted

    def counted_fold(self: truth.JournalTruth, rec: Any) -> None:
        COUNTS["fold"] += 1
        COUNTS["trusted"] -= 1  # fold calls trusted
        fold(self, rec)

    def counted_trusted(self: truth.JournalTruth, rec: Any) -> None:
        COUNTS["trusted"] += 1
        trusted(self, rec)

    truth.JournalTruth.fold = counted_fold  # type: ignore[method-assign]
    truth.JournalTruth.trusted = counted_trusted  # type: ignore[method-assign]


def records(path: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM journal WHERE kind != '@head'").fetchone()[0])
    finally:
        conn.close()


def grow(path: str, target: int, tag: str) -> None:
    """Side-effecting calls, 16 per batch, until the journal holds ``target`` records."""
    ledger = SQLiteLedger(path)
    run = Gate(registry, ledger=ledger).run(authority=AUTHORITY, run_id=f"grow-{tag}")

    async def main() -> None:
        b = 0
        while records(path) < target:
            await run.asubmit(
                [
                    ToolCall(
                        id=f"g{tag}_{b}_{i}",
                        name="charge_async",
                        arguments={"operation_id": f"g{tag}_{b}_{i}", "amount": 1},
                    )
                    for i in range(BATCH)
                ]
            )
            b += 1

    anyio.run(main)
    ledger.close()


def child_first(path: str, tag: str) -> dict[str, float]:
    t0 = time.perf_counter()
    ledger = SQLiteLedger(path)
    run = Gate(registry, ledger=ledger).run(authority=AUTHORITY)
    opened = time.perf_counter() - t0
    times = []
    for i in range(21):
        call = ToolCall(
            id=f"f{tag}_{i}", name="charge", arguments={"operation_id": f"f{tag}_{i}", "amount": 1}
        )
        t = time.perf_counter()
        (result,) = run.submit([call])
        times.append(time.perf_counter() - t)
        if result.status != "ok":
            raise SystemExit(f"call {call.id} was not executed: {result.status} {result.content}")
    ledger.close()
    return {"open_s": opened, "first_s": times[0], "next_us": statistics.median(times[1:]) * 1e6}


def child_writer(path: str, tag: str, n: int, start_at: float) -> dict[str, float]:
    _count_folds()
    ledger = SQLiteLedger(path)
    run = Gate(registry, ledger=ledger).run(authority=AUTHORITY)
    warm = ToolCall(id=f"w{tag}", name="charge", arguments={"operation_id": f"w{tag}", "amount": 1})
    run.submit([warm])  # the first fold, outside the timing
    COUNTS.update(fold=0, trusted=0)
    while time.time() < start_at:
        time.sleep(0.001)
    t0 = time.perf_counter()
    for i in range(n):
        call = ToolCall(
            id=f"{tag}_{i}", name="charge", arguments={"operation_id": f"{tag}_{i}", "amount": 1}
        )
        run.submit([call])
    elapsed = time.perf_counter() - t0
    ledger.close()
    return {"us_per_call": elapsed / n * 1e6, **{k: v / n for k, v in COUNTS.items()}}


def _child(*args: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def writers(root: str, calls: int, repeats: int) -> None:
    print(f"\n{'writers':<8} {'µs/call':>9} {'others verified/call':>21} {'own/call':>9}")
    rows: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    for r in range(repeats):
        for k in (1, 2):
            path = os.path.join(tempfile.mkdtemp(dir=root), "w.db")
            grow(path, 1000, "w")
            start_at = time.time() + 3.0
            procs = [
                subprocess.Popen(
                    [
                        *(sys.executable, __file__, "--writer", path, f"p{r}_{k}_{j}"),
                        *(str(calls // k), str(start_at)),
                    ],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for j in range(k)
            ]
            outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
            # the wall time of the whole workload, per call (each process did calls // k)
            rows[k].append(
                {
                    "us_per_call": max(o["us_per_call"] for o in outs) / k,
                    "fold": statistics.mean(o["fold"] for o in outs),
                    "trusted": statistics.mean(o["trusted"] for o in outs),
                }
            )
    for k, v in rows.items():
        print(
            f"{k:<8} {statistics.median(x['us_per_call'] for x in v):>9.1f} "
            f"{statistics.median(x['fold'] for x in v):>21.2f} "
            f"{statistics.median(x['trusted'] for x in v):>9.2f}"
        )
    print(
        f"({calls} side-effecting calls in all, split over the writers; µs/call = the slowest "
        f"writer's wall time / all calls; medians of {repeats}; journal of ~1,000 records)"
    )


def first(root: str, sizes: list[int], repeats: int) -> None:
    path = os.path.join(tempfile.mkdtemp(dir=root), "first.db")
    print(
        f"{'records':>8} {'open s':>8} {'first call s':>13} {'next calls µs':>14} {'µs/record':>10}"
    )
    base: tuple[int, float] | None = None
    for size in sizes:
        grow(path, size, str(size))
        n = records(path)
        got = [_child("--first", path, f"{size}_{r}") for r in range(repeats)]
        first_s = statistics.median(g["first_s"] for g in got)
        next_us = statistics.median(g["next_us"] for g in got)
        if base is None:
            base = (n, first_s)
        slope = "-" if n == base[0] else f"{(first_s - base[1]) / (n - base[0]) * 1e6:.1f}"
        print(
            f"{n:>8} {statistics.median(g['open_s'] for g in got):>8.3f} {first_s:>13.3f} "
            f"{next_us:>14.0f} {slope:>10}"
        )
    print(
        f"(medians of {repeats} fresh processes; µs/record = (first call - the first row's "
        "first call) / (records - the first row's records))"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0,1000,10000,50000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calls", type=int, default=400, help="calls in the writers test")
    parser.add_argument("--skip-first", action="store_true")
    parser.add_argument("--skip-writers", action="store_true")
    parser.add_argument("--first", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--writer", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first:
        print(json.dumps(child_first(*args.first)))
        return
    if args.writer:
        path, tag, n, start_at = args.writer
        print(json.dumps(child_writer(path, tag, int(n), float(start_at))))
        return
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as root:
        if not args.skip_first:
            first(root, [int(s) for s in args.sizes.split(",")], args.repeats)
        if not args.skip_writers:
            writers(root, args.calls, args.repeats)


if __name__ == "__main__":
    main()

"""Which mechanism should carry a handler across threads and loops? Measured, not assumed.

Issue 15 asked for one mechanism where callgate has three: the sync driver's
thread pool (a sync handler with a timeout), `callgate.sync_loop` (an async
handler, or a batch, from synchronous code, on a loop kept per thread), and
anyio's worker threads (a sync handler under ``asubmit``). This script times
each job done the way callgate does it next to the anyio way
(``anyio.to_thread``, ``anyio.run``, a ``BlockingPortal``), in one process and
one run, and prints medians in µs per call and the ratio to callgate's way.

    python benchmarks/threads.py [--rounds 7] [--calls 2000]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import statistics
import time
from collections.abc import Callable

import anyio
import anyio.from_thread
import anyio.to_thread

from callgate.sync_loop import run_sync


def handler(x: int) -> int:
    """A sync tool: the cost measured is the hop, not the work."""
    return x + 1


async def async_handler(x: int) -> int:
    """An async tool."""
    return x + 1


def timed(fn: Callable[[int], object], calls: int) -> float:
    """µs per call of ``fn`` over ``calls`` calls."""
    start = time.perf_counter()
    for i in range(calls):
        fn(i)
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    """Time each way and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=32)

    def pool_with_timeout(i: int) -> object:
        return pool.submit(handler, i).result(timeout=5.0)

    def sync_loop_to_thread(i: int) -> object:
        async def hop() -> int:
            with anyio.fail_after(5.0):
                return await anyio.to_thread.run_sync(handler, i, abandon_on_cancel=True)

        return run_sync(hop)

    def sync_loop_async(i: int) -> object:
        return run_sync(lambda: async_handler(i))

    def anyio_run_async(i: int) -> object:
        return anyio.run(async_handler, i)

    with anyio.from_thread.start_blocking_portal() as portal:

        def portal_async(i: int) -> object:
            return portal.call(async_handler, i)

        def portal_to_thread(i: int) -> object:
            async def hop() -> int:
                with anyio.fail_after(5.0):
                    return await anyio.to_thread.run_sync(handler, i, abandon_on_cancel=True)

            return portal.call(hop)

        jobs: dict[str, list[tuple[str, Callable[[int], object]]]] = {
            "sync handler with a timeout, from sync code": [
                ("callgate: ThreadPoolExecutor.submit().result(timeout)", pool_with_timeout),
                ("anyio.to_thread on callgate's per-thread loop", sync_loop_to_thread),
                ("anyio.to_thread through a BlockingPortal", portal_to_thread),
            ],
            "async handler, from sync code": [
                ("callgate: sync_loop.run_sync (a loop per thread)", sync_loop_async),
                ("anyio.run (a new loop per call)", anyio_run_async),
                ("BlockingPortal.call (one loop thread)", portal_async),
            ],
        }
        for title, ways in jobs.items():
            print(f"\n{title} (median µs per call over {args.rounds} rounds of {args.calls})")
            medians = []
            for _label, fn in ways:
                timed(fn, min(args.calls, 200))  # warm up
                medians.append(statistics.median(timed(fn, args.calls) for _ in range(args.rounds)))
            for (label, _fn), median in zip(ways, medians, strict=True):
                print(f"  {label:<58} {median:8.1f}  ×{median / medians[0]:.2f}")
    rounds = args.rounds
    print(f"\nsync handler offloaded from async code (median µs per call over {rounds} rounds)")

    async def in_loop() -> list[tuple[str, float]]:
        import asyncio

        loop = asyncio.get_running_loop()

        async def timed_async(use_anyio: bool) -> float:
            start = time.perf_counter()
            for i in range(args.calls):
                if use_anyio:
                    await anyio.to_thread.run_sync(handler, i, abandon_on_cancel=True)
                else:
                    await loop.run_in_executor(pool, handler, i)
            return (time.perf_counter() - start) / args.calls * 1e6

        rows = []
        for label, use_anyio in (
            ("callgate: anyio.to_thread.run_sync", True),
            ("loop.run_in_executor(the sync driver's pool)", False),
        ):
            await timed_async(use_anyio)
            samples = [await timed_async(use_anyio) for _ in range(rounds)]
            rows.append((label, statistics.median(samples)))
        return rows

    rows = anyio.run(in_loop)
    for label, median in rows:
        print(f"  {label:<58} {median:8.1f}  ×{median / rows[0][1]:.2f}")
    pool.shutdown()


if __name__ == "__main__":
    main()

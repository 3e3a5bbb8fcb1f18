"""The code surface's two costs: starting a sandbox, and a tool call through the bridge.

1. **Start to first instruction.** ``run_code`` spawns bubblewrap and the guest; the
   code's first statement prints ``time.monotonic()`` (one clock for every PID
   namespace), and the difference from the host's clock at the spawn is the latency.
   Baseline measured in the same run: the same interpreter started unconfined
   (``python3 -I -S -c``) by the same asyncio spawn. Target: median ≤ 50 ms.
2. **Bridge overhead per call.** A read-only tool called ``M`` times from code
   (timed inside the sandbox, so start-up is excluded) against ``M`` direct
   ``await run.asubmit([...])`` calls of the same tool on the same kind of gate.
   The overhead is the difference of the per-call medians. Target: ≤ 200 µs.

Run: ``.venv/bin/python benchmarks/sandbox.py [--runs 40] [--calls 300]``. Exits 0
with a message where bubblewrap cannot run. Writes nothing but stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

from callgate import Authority, Gate, MemoryLedger, Registry, ToolCall, tool
from callgate.sandbox import Limits, SandboxConfig, python_tool, run_code, unavailable_reason

FIRST = "import time; print(time.monotonic())"


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


async def start_latency(runs: int) -> tuple[list[float], list[float]]:
    """Milliseconds from spawn to the code's first instruction: sandboxed, and unconfined."""
    config = SandboxConfig(timeout=10)
    sandboxed: list[float] = []
    bare: list[float] = []
    await run_code(FIRST, config)  # warm-up (page cache, seccomp program)
    for _ in range(runs):
        result = await run_code(FIRST, config)
        sandboxed.append((float(result.stdout) - result.started_at) * 1000)
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            config.python,
            "-I",
            "-S",
            "-c",
            FIRST,
            stdout=subprocess.PIPE,
            env={},
        )
        out, _ = await proc.communicate()
        bare.append((float(out) - started) * 1000)
    return sandboxed, bare


@tool(effects="read:orders")
def lookup(order_id: str) -> dict[str, str]:
    """Look up an order."""
    return {"id": order_id, "state": "shipped"}


def _gate() -> Gate:
    registry = Registry([lookup])
    registry.add(python_tool(tools=[lookup], timeout=120, limits=Limits(max_calls=1_000_000)))
    return Gate(registry, ledger=MemoryLedger())


AUTHORITY = Authority(principal="bench", grants=["exec:sandbox", "read:orders"])


async def direct_per_call(calls: int) -> float:
    """µs per direct ``asubmit`` of one lookup."""
    run = _gate().run(authority=AUTHORITY)
    started = time.perf_counter()
    for i in range(calls):
        await run.asubmit([ToolCall(id=f"d{i}", name="lookup", arguments={"order_id": "A1"})])
    return (time.perf_counter() - started) / calls * 1e6


async def bridged_per_call(calls: int) -> float:
    """µs per ``tools.lookup`` from code, timed inside the sandbox."""
    run = _gate().run(authority=AUTHORITY)
    code = (
        "import time, tools\n"
        "tools.lookup(order_id='A1')\n"  # the first call imports json
        "t = time.perf_counter()\n"
        f"for _ in range({calls}): tools.lookup(order_id='A1')\n"
        f"print((time.perf_counter() - t) / {calls} * 1e6)\n"
    )
    obs = await run.asubmit([ToolCall(id="c", name="run_python", arguments={"code": code})])
    result = json.loads(obs[0].content)
    return float(result["stdout"])


async def main(runs: int, calls: int, repeats: int) -> None:
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    sandboxed, bare = await start_latency(runs)
    med, base = statistics.median(sandboxed), statistics.median(bare)
    print(f"start to first instruction ({runs} runs):")
    print(f"  sandboxed  median {med:6.1f} ms   p95 {p95(sandboxed):6.1f} ms")
    print(f"  unconfined median {base:6.1f} ms   p95 {p95(bare):6.1f} ms   (same interpreter)")
    print(f"  sandbox adds {med - base:.1f} ms (ratio {med / base:.2f}); target median <= 50 ms")

    await direct_per_call(calls // 5)  # warm-up
    direct = [await direct_per_call(calls) for _ in range(repeats)]
    bridged = [await bridged_per_call(calls) for _ in range(repeats)]
    d, b = statistics.median(direct), statistics.median(bridged)
    print(f"tool call ({calls} calls x {repeats} repeats, medians):")
    print(f"  direct asubmit   {d:7.1f} us/call")
    print(f"  from code        {b:7.1f} us/call")
    print(f"  bridge overhead  {b - d:7.1f} us/call (ratio {b / d:.2f}); target <= 200 us")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason is not None:
        print(f"benchmarks/sandbox.py: skipped, the sandbox cannot run here: {reason}")
        sys.exit(0)
    asyncio.run(main(args.runs, args.calls, args.repeats))

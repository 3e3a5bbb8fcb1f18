"""The MCP proxy's cost per call against a direct call, for ``echo`` over stdio.

Three connections with the SDK's own client, open at once in one process:

* direct: the upstream server (``tests/mcp/servers/upstream.py echo``, the SDK's
  ``MCPServer``) as a stdio child process;
* proxy: ``callgate mcp proxy --policy allow-all -- <the same server>`` (two stdio
  hops), its ledger in memory;
* proxy --db: the same with an SQLite ledger file in a temporary directory (``echo`` is
  a remote tool, so ``risk="write"``: its attempt and its outcome each commit with
  ``synchronous=FULL``, two syncs of the file per call);
* proxy --db read: the same with ``echo`` configured as ``risk = "read"`` (``--tools``):
  commits that do not wait for the disk, so the difference to ``proxy --db`` is what the
  two syncs cost on this machine.

Calls are interleaved (one of each per round, in a shuffled order) so they all see
the same machine; each is timed alone. Reports the median and p90 in ms and the
proxy's ratio to direct. Target (issue 30): proxy median <= 2.5x direct. On Linux it
also reports each proxy process's CPU time per call (user + system, from /proc): on a
loaded machine wall-clock times swing by milliseconds from run to run, CPU time much less.

    .venv/bin/python benchmarks/mcp.py [--calls 300]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

# This file is named mcp.py: its own folder must not shadow the `mcp` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import anyio  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = ROOT / "tests" / "mcp" / "servers" / "upstream.py"
POLICY = '[[rule]]\nname = "all"\naction = "allow"\ntool = "*"\n'


def upstream() -> list[str]:
    return [sys.executable, str(UPSTREAM), "echo"]


def proxied(tmp: Path, *extra: str) -> StdioServerParameters:
    policy = tmp / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    (tmp / "read.toml").write_text('[tools.echo]\nrisk = "read"\n', encoding="utf-8")
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "callgate.cli",
            "mcp",
            "proxy",
            "--policy",
            str(policy),
            "--pins",
            str(tmp / f"pins{len(extra)}.json"),
            *extra,
            "--",
            *upstream(),
        ],
        env={**os.environ, "UPSTREAM_LOG": ""},
        cwd=str(tmp),
    )


async def measure(calls: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        targets = {
            "direct": StdioServerParameters(
                command=upstream()[0], args=upstream()[1:], env={**os.environ, "UPSTREAM_LOG": ""}
            ),
            "proxy": proxied(tmp),
            "proxy --db": proxied(tmp, "--db", str(tmp / "ledger.db")),
            "proxy --db read": proxied(
                tmp, "--db", str(tmp / "read.db"), "--tools", str(tmp / "read.toml")
            ),
        }
        times: dict[str, list[float]] = {name: [] for name in targets}
        async with contextlib.AsyncExitStack() as stack:
            clients = {
                name: await stack.enter_async_context(Client(target))
                for name, target in targets.items()
            }
            for client in clients.values():  # warm up: imports, first listing, pins
                for _ in range(20):
                    await client.call_tool("echo", {"message": "warm"})
            before = _child_cpu()
            order = list(clients)
            for i in range(calls):
                random.shuffle(order)
                for name in order:
                    started = time.perf_counter()
                    result = await clients[name].call_tool("echo", {"message": f"m{i}"})
                    times[name].append(time.perf_counter() - started)
                    if result.is_error:
                        raise SystemExit(f"{name}: the call failed: {result.content}")
            spent = {
                label: (_child_cpu().get(label, 0.0) - seconds) / calls
                for label, seconds in before.items()
            }
        return times, spent


def _child_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of each ``callgate mcp proxy`` child process, by target
    (Linux only: empty elsewhere)."""
    found: dict[str, float] = {}
    if not Path("/proc").is_dir():
        return found
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(fields[1]) != os.getpid() or "callgate.cli" not in command:
            continue
        label = "proxy --db read" if "--tools" in command else "proxy"
        if "--db" in command and "--tools" not in command:
            label = "proxy --db"
        found[label] = (int(fields[11]) + int(fields[12])) / tick
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    times, cpu = anyio.run(measure, args.calls)
    direct = statistics.median(times["direct"])
    print(f"echo over stdio, {args.calls} interleaved calls each (ms per call)")
    for name, samples in times.items():
        median = statistics.median(samples)
        p90 = statistics.quantiles(samples, n=10)[-1]
        print(
            f"  {name:<15} median {median * 1e3:6.2f}  p90 {p90 * 1e3:6.2f}  "
            f"x{median / direct:4.2f} direct"
            + (f"  CPU {cpu[name] * 1e3:5.2f} ms per call" if name in cpu else "")
        )


if __name__ == "__main__":
    main()

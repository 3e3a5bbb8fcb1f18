"""The code surface's costs: starting a sandbox, a tool call through the bridge, and egress
through the relay.

1. **Start to first instruction.** ``run_code`` spawns bubblewrap and the guest; the
   code's first statement prints ``time.monotonic()`` (one clock for every PID
   namespace), and the difference from the host's clock at the spawn is the latency.
   Baseline measured in the same run: the same interpreter started unconfined
   (``python3 -I -S -c``) by the same asyncio spawn. Target: median ≤ 50 ms.
2. **Bridge overhead per call.** A read-only tool called ``M`` times from code
   (timed inside the sandbox, so start-up is excluded) against ``M`` direct
   ``await run.asubmit([...])`` calls of the same tool on the same kind of gate.
   The overhead is the difference of the per-call medians. Target: ≤ 200 µs. Measured
   against both drivers: ``run.submit`` (synchronous, in a worker thread, as a
   synchronous application calls it) and ``await run.asubmit``; the code's own
   ``run_python`` call is driven each way too.
3. **Relay throughput.** A local TCP service sends ``--relay-mb`` MiB; code in the
   sandbox reads them through an admitted ``network_connect`` (one end of a socketpair,
   the host copying bytes to the real connection), timed inside. Baseline: the same
   read by the same interpreter unconfined, over a direct socket on loopback.

Run: ``.venv/bin/python benchmarks/sandbox.py [--runs 40] [--calls 300] [--relay-mb 128]
[--ballast-mb 400]``
(``--ballast-mb``: start from a host process holding that much memory, as an application
would; starting a process from a large one is where ``fork`` costs; ``--ablate``: also
time the bubblewrap command without each group of its options). Exits 0
with a message where bubblewrap cannot run. Writes nothing but stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from callgate import Authority, Gate, MemoryLedger, Registry, ToolCall, tool
from callgate.sandbox import (
    Limits,
    SandboxConfig,
    network_tool,
    python_tool,
    run_code,
    unavailable_reason,
)
from callgate.sandbox.launch import Files, bwrap_command, system_binds, unprivileged
from callgate.sandbox.seccomp import filter_program

FIRST = "import time; print(time.monotonic())"


def _uid(config: SandboxConfig) -> int | None:
    """The uid bubblewrap is started as here (as root: one of the sandbox range)."""
    return config.sandbox_uids[0] if os.geteuid() == 0 else None


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


async def _first(argv: list[str], **spawn: Any) -> float:
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(*argv, stdout=subprocess.PIPE, env={}, **spawn)
    out, _ = await proc.communicate()
    return (float(out) - started) * 1000


async def start_latency(runs: int) -> dict[str, list[float]]:
    """Milliseconds from spawn to the code's first instruction, interleaved: the sandbox,
    bubblewrap with a user namespace and ``/usr`` only, and the interpreter unconfined."""
    config = SandboxConfig(timeout=10)
    python = [config.python, "-I", "-S", "-c", FIRST]
    prefix, drop = unprivileged(_uid(config))
    minimal = [*prefix, "bwrap", "--unshare-user", *system_binds(), "--", *python]
    found: dict[str, list[float]] = {"sandbox": [], "bwrap minimal": [], "unconfined": []}
    await run_code(FIRST, config)  # warm-up (page cache, seccomp program)
    for _ in range(runs):
        result = await run_code(FIRST, config)
        found["sandbox"].append((float(result.stdout) - result.started_at) * 1000)
        found["bwrap minimal"].append(await _first(minimal, **drop))
        found["unconfined"].append(await _first(python))
    return found


async def user_switch(runs: int) -> None:
    """As root: starting /bin/true as the sandbox user by changing user in ``subprocess``
    (a full fork of this process) against through ``setpriv`` (a vfork)."""
    config = SandboxConfig()
    uid = config.sandbox_uids[0]
    prefix, _ = unprivileged(uid)
    ways: dict[str, tuple[list[str], dict[str, Any]]] = {
        "subprocess user=": (["/bin/true"], {"user": uid, "group": uid, "extra_groups": []}),
        "setpriv": ([*prefix, "/bin/true"], {}),
    }
    found: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(runs):
        for name, (argv, spawn) in ways.items():
            started = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(*argv, **spawn)
            await proc.wait()
            found[name].append((time.perf_counter() - started) * 1000)
    print("starting a process as the sandbox user (spawn to exit of /bin/true):")
    for name, values in found.items():
        print(f"  {name:17s} median {statistics.median(values):6.1f} ms")


# Options of the sandbox's bubblewrap command, removed one group at a time by --ablate
# (the option and how many words it takes; "option argument" removes that pair only).
ABLATIONS: dict[str, tuple[tuple[str, int], ...]] = {
    "cgroup namespace": (("--unshare-cgroup-try", 1),),
    "no nested user namespaces": (("--disable-userns", 1),),
    "seccomp filter": (("--seccomp", 2),),
    "network namespace": (("--unshare-net", 1),),
    "PID namespace": (("--unshare-pid", 1),),
    "IPC and UTS namespaces": (("--unshare-ipc", 1), ("--unshare-uts", 1), ("--hostname", 2)),
    "/proc": (("--proc", 2), ("--remount-ro /proc", 2)),
    "read-only root": (("--remount-ro", 2),),
}


AS_PID_1 = "with --as-pid-1 (no reaper)"


async def ablate(runs: int) -> None:
    """Start to first instruction of the sandbox's bubblewrap command running
    ``python -c`` (no guest), whole and without each group of options in turn."""
    config = SandboxConfig()
    program = filter_program()
    prefix, drop = unprivileged(_uid(config))

    async def once(removed: tuple[tuple[str, int], ...], added: tuple[str, ...] = ()) -> float:
        guest = os.memfd_create("guest", 0)
        bpf = os.memfd_create("bpf", 0)
        os.write(bpf, program or b"")
        os.lseek(bpf, 0, os.SEEK_SET)
        files = Files(guest=guest, compiled=False, seed=None, seccomp=bpf if program else None)
        argv = bwrap_command(config, files, 0, {})
        argv = argv[: argv.index("--")]
        words = dict(removed)
        kept: list[str] = []
        i = 0
        while i < len(argv):
            pair = " ".join(argv[i : i + 2])
            if pair in words or argv[i] in words:
                i += words.get(pair) or words[argv[i]]
                continue
            kept.append(argv[i])
            i += 1
        command = [*prefix, *kept, *added, "--", config.python, "-I", "-S", "-c", FIRST]
        try:
            return await _first(command, pass_fds=(guest, bpf), **drop)
        finally:
            os.close(guest)
            os.close(bpf)

    variants = {"whole command": (), **ABLATIONS}
    found: dict[str, list[float]] = {name: [] for name in [*variants, AS_PID_1]}
    for _ in range(runs):
        for name, removed in variants.items():
            found[name].append(await once(removed))
        # the guest as the namespace's init, without bubblewrap's reaper (what the sandbox
        # did before its lifetime was bound to the call): the reaper's cost
        found[AS_PID_1].append(await once((), ("--as-pid-1",)))
    whole = statistics.median(found["whole command"])
    print(f"the sandbox's bubblewrap options, one group removed at a time ({runs} runs each):")
    for name, values in found.items():
        median = statistics.median(values)
        label = name if name in ("whole command", AS_PID_1) else f"without {name}"
        print(f"  {label:38s} median {median:6.1f} ms  ({whole - median:+5.1f} ms)")


@tool(effects="read:orders")
def lookup(order_id: str) -> dict[str, str]:
    """Look up an order."""
    return {"id": order_id, "state": "shipped"}


def _gate() -> Gate:
    registry = Registry([lookup])
    registry.add(python_tool(tools=[lookup], timeout=120, limits=Limits(max_calls=1_000_000)))
    return Gate(registry, ledger=MemoryLedger())


AUTHORITY = Authority(principal="bench", grants=["exec:sandbox", "read:orders"])


async def direct_calls(calls: int) -> list[float]:
    """µs of each direct ``await run.asubmit`` of one lookup."""
    run = _gate().run(authority=AUTHORITY)
    times = []
    for i in range(calls):
        call = ToolCall(id=f"d{i}", name="lookup", arguments={"order_id": "A1"})
        started = time.perf_counter()
        await run.asubmit([call])
        times.append((time.perf_counter() - started) * 1e6)
    return times


def direct_sync_calls(calls: int) -> list[float]:
    """µs of each direct ``run.submit`` of one lookup (the synchronous driver)."""
    run = _gate().run(authority=AUTHORITY)
    times = []
    for i in range(calls):
        call = ToolCall(id=f"s{i}", name="lookup", arguments={"order_id": "A1"})
        started = time.perf_counter()
        run.submit([call])
        times.append((time.perf_counter() - started) * 1e6)
    return times


def _bridged_code(calls: int) -> str:
    return (
        "import time, tools\n"
        "tools.lookup(order_id='A1')\n"  # the first call imports json
        "times = []\n"
        f"for _ in range({calls}):\n"
        "    t = time.perf_counter(); tools.lookup(order_id='A1')\n"
        "    times.append((time.perf_counter() - t) * 1e6)\n"
        "print(' '.join(f'{x:.1f}' for x in times))\n"
    )


async def bridged_calls(calls: int) -> list[float]:
    """µs of each ``tools.lookup`` from code, timed inside; ``run_python`` by ``asubmit``."""
    run = _gate().run(authority=AUTHORITY)
    call = ToolCall(id="c", name="run_python", arguments={"code": _bridged_code(calls)})
    obs = await run.asubmit([call])
    result = json.loads(obs[0].content)
    return [float(x) for x in result["stdout"].split()]


def bridged_sync_calls(calls: int) -> list[float]:
    """The same, with ``run_python`` driven by the synchronous ``run.submit``."""
    run = _gate().run(authority=AUTHORITY)
    call = ToolCall(id="c", name="run_python", arguments={"code": _bridged_code(calls)})
    obs = run.submit([call])
    result = json.loads(obs[0].content)
    return [float(x) for x in result["stdout"].split()]


class Source:
    """A loopback TCP service that sends ``size`` bytes to each connection, then closes."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        chunk = b"x" * (1 << 20)
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                left = self.size
                while left > 0:
                    conn.sendall(chunk[: min(left, len(chunk))])
                    left -= len(chunk)


READ = """
import socket, time
buf = bytearray(1 << 16)
start = time.perf_counter()
total = 0
while n := conn.recv_into(buf):
    total += n
print(total, time.perf_counter() - start)
"""


async def relay_throughput(size_mb: int, repeats: int) -> None:
    """MB/s read through the relay against a direct socket on loopback, both read by the
    same interpreter (timed inside, from the first byte asked to the end of stream)."""
    source = Source(size_mb << 20)
    config = SandboxConfig()
    registry = Registry([network_tool(allow_private=True)])
    registry.add(python_tool(tools=["network_connect"], timeout=120))
    gate = Gate(registry, ledger=MemoryLedger())
    relayed = (
        f"import tools\nconn = tools.network_connect(host='127.0.0.1', port={source.port})\n" + READ
    )
    direct = (
        f"import socket\nconn = socket.create_connection(('127.0.0.1', {source.port}))\n" + READ
    )
    found: dict[str, list[float]] = {"relay (sandbox)": [], "direct socket": []}
    for i in range(repeats):
        run = gate.run(
            authority=Authority(principal="b", grants=["exec:sandbox", "network:127.0.0.1"]),
            trusted_values=["127.0.0.1"],
        )
        call = ToolCall(id=f"r{i}", name="run_python", arguments={"code": relayed})
        obs = await run.asubmit([call])
        total, seconds = json.loads(obs[0].content)["stdout"].split()
        assert int(total) == size_mb << 20, obs[0].content
        found["relay (sandbox)"].append(size_mb / float(seconds))
        proc = await asyncio.create_subprocess_exec(
            config.python, "-I", "-S", "-c", direct, stdout=subprocess.PIPE
        )
        out, _ = await proc.communicate()
        total, seconds = out.split()
        found["direct socket"].append(size_mb / float(seconds))
    source.server.close()
    print(f"reading {size_mb} MiB from a loopback service ({repeats} runs each, interleaved):")
    for name, values in found.items():
        print(f"  {name:16s} median {statistics.median(values):8.0f} MiB/s")
    ratio = statistics.median(found["relay (sandbox)"]) / statistics.median(found["direct socket"])
    print(f"  the relay reaches {ratio:.0%} of the direct socket")


async def main(runs: int, calls: int, repeats: int) -> None:
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"host process: {rss:.0f} MB resident at most")
    found = await start_latency(runs)
    print(f"start to first instruction ({runs} runs each, interleaved):")
    for name, values in found.items():
        print(
            f"  {name:14s} median {statistics.median(values):6.1f} ms   p95 {p95(values):6.1f} ms"
        )
    med, base = statistics.median(found["sandbox"]), statistics.median(found["unconfined"])
    print(
        f"  the sandbox adds {med - base:.1f} ms to the interpreter's start "
        f"(ratio {med / base:.2f})"
    )
    print("  target: sandbox median <= 50 ms")

    if os.geteuid() == 0:
        await user_switch(runs)

    await direct_calls(calls // 5)  # warm-up
    direct: list[float] = []
    direct_sync: list[float] = []
    bridged: list[float] = []
    bridged_sync: list[float] = []
    for _ in range(repeats):  # interleaved, so each sees the same machine
        direct += await direct_calls(calls)
        direct_sync += await asyncio.to_thread(direct_sync_calls, calls)
        bridged += await bridged_calls(calls)
        bridged_sync += await asyncio.to_thread(bridged_sync_calls, calls)
    d, ds = statistics.median(direct), statistics.median(direct_sync)
    b, bs = statistics.median(bridged), statistics.median(bridged_sync)
    print(f"tool call ({calls} calls x {repeats} repeats, per-call medians):")
    print(f"  direct run.submit        {ds:7.1f} us/call (p95 {p95(direct_sync):7.1f})")
    print(f"  direct await asubmit     {d:7.1f} us/call (p95 {p95(direct):7.1f})")
    print(f"  from code, run.submit    {bs:7.1f} us/call (p95 {p95(bridged_sync):7.1f})")
    print(f"  from code, asubmit       {b:7.1f} us/call (p95 {p95(bridged):7.1f})")
    print(f"  bridge overhead against run.submit  {bs - ds:7.1f} us/call; target <= 200 us")
    print(f"  bridge overhead against asubmit     {b - d:7.1f} us/call; target <= 200 us")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--relay-mb", type=int, default=128, help="MiB read through the relay")
    parser.add_argument(
        "--ablate", action="store_true", help="also time the command without each option group"
    )
    parser.add_argument(
        "--ballast-mb",
        type=int,
        default=0,
        help="touch this much memory first, as a large host application would hold",
    )
    args = parser.parse_args()
    ballast = bytearray(args.ballast_mb << 20)
    for page in range(0, len(ballast), 4096):
        ballast[page] = 1
    reason = unavailable_reason()
    if reason is not None:
        print(f"benchmarks/sandbox.py: skipped, the sandbox cannot run here: {reason}")
        sys.exit(0)
    asyncio.run(main(args.runs, args.calls, args.repeats))
    asyncio.run(relay_throughput(args.relay_mb, args.repeats))
    if args.ablate:
        asyncio.run(ablate(args.runs))

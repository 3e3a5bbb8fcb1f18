"""Why callgate's calls/s on PostgreSQL do or do not grow with worker processes (issue 31).

For each worker count (``--workers 1,2,4,8``), on a fresh database of a throwaway durable
cluster (`benchmarks/scale.py`'s), N processes submit side-effecting calls through a
`Gate` (scale.py's workload) for ``--seconds``, all starting together; meanwhile the
parent samples every ~10 ms the wait events of the workers' server sessions
(``pg_stat_activity``) and the ungranted locks (``pg_locks``). Printed per count:

* calls/s; worker CPU per call (``process_time`` of every worker), of it the journal
  fold (``JournalTruth.catch_up``); server CPU per call (the cluster's processes, from
  ``/proc``: clock ticks, so coarse for short windows);
* journal reads per call, rows per read, records folded per own call (others' records:
  each process folds the whole journal), transactions per call;
* wall time inside ledger transactions per call, voluntary and involuntary context
  switches per call;
* the wait events sampled (state:type:event, share of samples), ungranted locks per
  sample, PostgreSQL checkpoints and journal checkpoint records in the window.

Counting wraps a few functions of the ledger in the workers (not in the library).
Run: ``.venv/bin/python benchmarks/scale_diagnose.py --workers 1,2,4,8 --seconds 4``.
Nothing is written into the working tree.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale

WARMUP_CALLS = 30
SAMPLE_EVERY = 0.01


def child(dsn: str, name: str, seconds: float) -> None:
    """A worker: count what the ledger does, warm up, wait for the start, run, report."""
    from callgate.ledger import PostgresLedger, pg_dialect
    from callgate.ledger import postgres as pg_ledger
    from callgate.ledger import truth as truth_module

    stats: dict[str, float] = collections.defaultdict(float)
    since_rows = pg_dialect._since_rows

    def counted_since_rows(rows: Any, mark: Any) -> Any:
        stats["reads"] += 1
        stats["rows"] += sum(1 for r in rows if r[0] is not None)
        return since_rows(rows, mark)

    pg_dialect._since_rows = counted_since_rows
    truth_class = truth_module.JournalTruth
    fold, catch_up = truth_class.fold, truth_class.catch_up

    def counted_fold(self: Any, rec: Any) -> None:
        stats["folds"] += 1
        fold(self, rec)

    def timed_catch_up(self: Any, *args: Any, **kwargs: Any) -> None:
        begun = time.process_time()
        try:
            catch_up(self, *args, **kwargs)
        finally:
            stats["catch_up_cpu"] += time.process_time() - begun

    truth_class.fold = counted_fold  # type: ignore[method-assign]
    truth_class.catch_up = timed_catch_up  # type: ignore[method-assign]
    transact = pg_ledger.PostgresLedger._transact_once

    def timed_transact(self: Any, *args: Any, **kwargs: Any) -> Any:
        begun = time.perf_counter()
        try:
            return transact(self, *args, **kwargs)
        finally:
            stats["tx_wall"] += time.perf_counter() - begun
            stats["txs"] += 1

    pg_ledger.PostgresLedger._transact_once = timed_transact  # type: ignore[method-assign]
    ledger = PostgresLedger(dsn, worker=f"worker-{name}", min_size=1, max_size=2)
    with ledger._pool.connection() as conn:
        backend = conn.info.backend_pid
    calls = scale.GateCalls(scale.build_gate(ledger), name, 0)
    for n in range(WARMUP_CALLS):
        calls.call(-1 - n)
    stats.clear()
    print(json.dumps({"backend": backend}), flush=True)
    start = float(sys.stdin.readline())
    while time.time() < start:
        time.sleep(0.001)
    end, n = start + seconds, 0
    before, cpu = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
    while time.time() < end:
        calls.call(n)
        n += 1
    stats["cpu"] = time.process_time() - cpu
    after = resource.getrusage(resource.RUSAGE_SELF)
    stats["calls"] = n
    stats["vcsw"] = after.ru_nvcsw - before.ru_nvcsw
    stats["ivcsw"] = after.ru_nivcsw - before.ru_nivcsw
    ledger.close()
    print(json.dumps(stats), flush=True)


def cluster_cpu(postmaster: int) -> dict[int, float]:
    """CPU seconds of the postmaster and of each of its children, by pid."""
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == postmaster or int(fields[1]) == postmaster:
            found[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    return found


def measure(cluster: Any, postmaster: int, workers: int, seconds: float) -> list[str]:
    """One worker count: the lines of its report."""
    import psycopg

    from callgate.ledger import PostgresLedger

    dsn = cluster.create_database()
    PostgresLedger(dsn).close()
    argv = [sys.executable, __file__, "--child", "--dsn", dsn, "--seconds", str(seconds)]
    procs = [
        subprocess.Popen(
            [*argv, "--name", f"n{workers}w{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(workers)
    ]
    try:
        backends = [json.loads(p.stdout.readline())["backend"] for p in procs]  # type: ignore[union-attr]
        mon = psycopg.connect(dsn, autocommit=True)
        checkpoints = "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter"
        ck0 = mon.execute(checkpoints).fetchone()[0]  # type: ignore[index]
        start = time.time() + 0.3
        for p in procs:
            p.stdin.write(f"{start}\n")  # type: ignore[union-attr]
            p.stdin.flush()  # type: ignore[union-attr]
        while time.time() < start:
            time.sleep(0.001)
        cpu0 = cluster_cpu(postmaster)
        waits: collections.Counter[str] = collections.Counter()
        locks: collections.Counter[str] = collections.Counter()
        samples = 0
        while time.time() < start + seconds:
            for state, kind, event in mon.execute(
                "SELECT state, coalesce(wait_event_type, '-'), coalesce(wait_event, '-') "
                "FROM pg_stat_activity WHERE pid = ANY(%s)",
                (backends,),
            ):
                waits[f"{state}:{kind}:{event}"] += 1
            for locktype, mode in mon.execute(
                "SELECT locktype, mode FROM pg_locks WHERE NOT granted"
            ):
                locks[f"{locktype}:{mode}"] += 1
            samples += 1
            time.sleep(SAMPLE_EVERY)
        cpu1 = cluster_cpu(postmaster)
        server = sum(v - cpu0.get(pid, 0.0) for pid, v in cpu1.items())
        got = [json.loads(p.stdout.readline()) for p in procs]  # type: ignore[union-attr]
        ck1 = mon.execute(checkpoints).fetchone()[0]  # type: ignore[index]
        journal = mon.execute(
            "SELECT count(*) FILTER (WHERE kind = 'checkpoint') FROM journal"
        ).fetchone()[0]  # type: ignore[index]
        mon.close()
    finally:
        for p in procs:
            p.wait(60)
        cluster.drop_database(dsn)
    total = {k: sum(g.get(k, 0) for g in got) for k in got[0]}
    calls = max(1.0, total["calls"])
    reads = max(1.0, total["reads"])
    shares = sum(waits.values()) or 1
    fold = 1e3 * total["catch_up_cpu"] / calls
    return [
        f"workers {workers}: {calls / seconds:,.0f} calls/s; worker CPU/call "
        f"{1e3 * total['cpu'] / calls:.2f} ms (journal fold {fold:.2f}); "
        f"server CPU/call {1e3 * server / calls:.2f} ms",
        f"  journal reads/call {reads / calls:.2f}, rows/read {total['rows'] / reads:.1f}, "
        f"records folded/call {total['folds'] / calls:.1f}, transactions/call "
        f"{total['txs'] / calls:.2f}; in transactions {1e3 * total['tx_wall'] / calls:.1f} ms "
        f"of {1e3 * workers * seconds / calls:.1f} ms per call; context switches/call "
        f"{total['vcsw'] / calls:.1f} voluntary, {total['ivcsw'] / calls:.1f} involuntary; "
        f"load {os.getloadavg()[0]:.1f}",
        "  waits: " + ", ".join(f"{k} {100 * v / shares:.0f}%" for k, v in waits.most_common(6)),
        "  ungranted locks/sample: "
        + (", ".join(f"{k} {v / samples:.2f}" for k, v in locks.most_common(4)) or "none")
        + f"; PostgreSQL checkpoints {ck1 - ck0}; journal checkpoint records {journal}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dsn", help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.dsn, args.name, args.seconds)
        return
    pg = scale.load_pgcluster()
    cluster = scale.start_durable_cluster(pg)
    try:
        pid_file = Path(cluster.root) / "data" / "postmaster.pid"
        postmaster = int(pid_file.read_text().split()[0])
        for workers in (int(w) for w in args.workers.split(",")):
            for line in measure(cluster, postmaster, workers, args.seconds):
                print(line, flush=True)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()

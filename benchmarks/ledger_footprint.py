"""What one durable side-effecting call leaves behind: records, bytes, commits, WAL, syncs, CPU.

The figures behind the capacity model in docs/ledger.md. The same workers as
``benchmarks/scale.py`` (its child processes: a `Gate` over the ledger, one
side-effecting call with an idempotency key per ``run.submit``, each worker on
a run of its own; and the bare floor, two ``INSERT`` + ``COMMIT`` per call on
a table of the worker's own) run for ``--seconds`` on a fresh database of a
durable throwaway PostgreSQL 15 cluster (``fsync``, ``synchronous_commit``,
``full_page_writes`` on), at each worker count of ``--workers`` (default 1
and 8). Around the window, with every worker warmed up and idle:

* WAL: ``pg_current_wal_lsn()`` before and after (bytes per call), and
  ``pg_walinspect``'s ``pg_get_wal_stats`` over that range: records per call,
  full-page images' bytes, and transaction commit records (a commit that wrote
  something; read-only transactions write none);
* ``pg_stat_database.xact_commit`` (every committed transaction, read-only
  ones included) and ``pg_stat_wal.wal_sync`` (WAL flushes to disk, by the
  backends and the WAL writer), read after the workers exited and the
  statistics were flushed (they are reported at most once a second; the
  script waits);
* rows and bytes: per table, rows added (``count(*)``), the mean row size
  (``pg_column_size``) and the growth of ``pg_total_relation_size`` (heap,
  indexes, TOAST; no vacuum forced); journal records by ``kind`` when the
  ledger has a ``journal`` table with that column;
* CPU: the server's (the postmaster and its children, exited ones included:
  ``/proc``'s utime + stime + cutime + cstime) and the workers' own
  (``time.process_time``), per call.

A ``CHECKPOINT`` precedes each window, so its first write of each page carries
a full-page image: the WAL figure is that of a window of ``--seconds`` after a
checkpoint; the figure without images is the floor for long checkpoint
intervals. "Per call" divides by every call the workers made (the one running
past the window's end too).

SQLite (``--sqlite-calls``, one thread, in this process): journal records and
rows per call, bytes per call of each table (``dbstat``) and of the files,
bytes written (``/proc/self/io`` ``wchar``) and, with ``strace``, syncs per
call (the difference between N calls and none, in a child process).

Nothing is written into the working tree. Run:
``.venv/bin/python benchmarks/ledger_footprint.py`` (about two minutes), or
``--json OUT``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale  # benchmarks/scale.py: the workers and the durable cluster

SECONDS = 10.0
WORKERS = "1,8"
SQLITE_CALLS = 2000
STATS_SETTLE = 6.0
"""Seconds to wait for idle backends and the WAL writer to report their statistics."""


# -- PostgreSQL ------------------------------------------------------------------------


def _cpu_ticks_of_cluster(data: Path) -> int:
    """CPU ticks of the postmaster, its children alive and its children that exited."""
    pid = int((data / "postmaster.pid").read_text().split()[0])

    def fields(p: int | str) -> list[str]:
        text = Path(f"/proc/{p}/stat").read_text()
        return text[text.rindex(")") + 2 :].split()  # from the state on (field 3)

    own = fields(pid)
    total = sum(int(x) for x in own[11:15])  # utime stime cutime cstime
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            f = fields(entry)
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        if int(f[1]) == pid:  # ppid
            total += int(f[11]) + int(f[12])
    return total


class Snapshot:
    """What the database holds and has done, at one moment."""

    def __init__(self, conn: Any, data: Path, dbname: str) -> None:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        self.lsn = str(conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0])
        self.commits = int(
            conn.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (dbname,)
            ).fetchone()[0]
        )
        wal = conn.execute("SELECT wal_records, wal_fpi, wal_bytes, wal_sync FROM pg_stat_wal")
        self.wal_records, self.wal_fpi, self.wal_bytes, self.wal_sync = (
            int(x) for x in wal.fetchone()
        )
        self.cpu_ticks = _cpu_ticks_of_cluster(data)
        self.tables: dict[str, tuple[int, int]] = {}
        names = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        ).fetchall()
        for (name,) in names:
            rows = int(conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0])
            size = int(conn.execute("SELECT pg_total_relation_size(%s)", (name,)).fetchone()[0])
            self.tables[name] = (rows, size)
        self.kinds: dict[str, int] = {}
        has_kind = conn.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = 'public' "
            "AND table_name = 'journal' AND column_name = 'kind'"
        ).fetchone()
        if has_kind:
            for kind, n in conn.execute("SELECT kind, count(*) FROM journal GROUP BY kind"):
                self.kinds[str(kind)] = int(n)


def _row_sizes(conn: Any, tables: list[str]) -> dict[str, float]:
    sizes = {}
    for name in tables:
        value = conn.execute(f'SELECT avg(pg_column_size(t.*)) FROM "{name}" t').fetchone()[0]
        sizes[name] = float(value) if value is not None else 0.0
    return sizes


def _wal_stats(conn: Any, start: str, end: str) -> dict[str, float]:
    """Records, bytes and full-page images over an LSN range, and its commit records."""
    # Columns by position: PostgreSQL 15 names the first "resource_manager/record_type".
    rows = conn.execute("SELECT * FROM pg_get_wal_stats(%s, %s, true)", (start, end)).fetchall()
    out = {"records": 0.0, "record_bytes": 0.0, "fpi_bytes": 0.0, "bytes": 0.0, "commits": 0.0}
    for row in rows:
        name, count, record, fpi, combined = row[0], row[1], row[3], row[5], row[7]
        out["records"] += count
        out["record_bytes"] += record
        out["fpi_bytes"] += fpi
        out["bytes"] += combined
        if name in ("Transaction/COMMIT", "Transaction/COMMIT_PREPARED"):
            out["commits"] += count
    return out


def measure_pg(
    cluster: Any, kind: str, workers: int, seconds: float, log: Any, settle: float = STATS_SETTLE
) -> dict[str, Any]:
    """One window of ``workers`` processes of ``kind`` (bare or gate) on a fresh database."""
    import psycopg

    dsn = cluster.create_database()
    dbname = dsn.rsplit("dbname=", 1)[1]
    data = cluster.root / "data"
    try:
        if kind == "gate":
            from callgate.ledger import PostgresLedger

            PostgresLedger(dsn).close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            before: dict[str, Snapshot] = {}

            def snapshot_before() -> None:
                conn.execute("CHECKPOINT")
                time.sleep(settle)  # the warm-up's statistics reach the counters
                before["s"] = Snapshot(conn, data, dbname)

            def argv(i: int) -> list[str]:
                return [
                    *("--child", kind, "--backend", "postgres", "--target", dsn),
                    *("--name", f"fp{kind}{workers}w{i}", "--threads", "1"),
                    *("--calls-per-run", "0"),
                ]

            procs = scale.Workers(argv, workers, log)
            procs.run(seconds, before_go=snapshot_before)
            time.sleep(settle)  # exited backends' and the WAL writer's statistics
            after = Snapshot(conn, data, dbname)
            first = before["s"]
            made = sum(int(r["made"]) for r in procs.reports)
            client_cpu = sum(float(r["cpu_s"]) for r in procs.reports)
            wal = _wal_stats(conn, first.lsn, after.lsn)
            lsn_bytes = int(
                conn.execute("SELECT pg_wal_lsn_diff(%s, %s)", (after.lsn, first.lsn)).fetchone()[0]
            )
            sizes = _row_sizes(conn, list(after.tables))
    finally:
        cluster.drop_database(dsn)
    tick = os.sysconf("SC_CLK_TCK")
    tables: dict[str, dict[str, float]] = {}
    for name, (rows, size) in after.tables.items():
        rows0, size0 = first.tables.get(name, (0, 0))
        if rows != rows0 or size != size0:
            # the bare workers' tables (one each) are summed into one line
            key = "bare_* (every worker's)" if name.startswith("bare_") else name
            t = tables.setdefault(
                key,
                {
                    "rows_per_call": 0.0,
                    "mean_row_bytes": 0.0,
                    "relation_growth_bytes_per_call": 0.0,
                },
            )
            t["rows_per_call"] += (rows - rows0) / made
            t["mean_row_bytes"] = sizes.get(name, 0.0)
            t["relation_growth_bytes_per_call"] += (size - size0) / made
    kinds = {k: (n - first.kinds.get(k, 0)) / made for k, n in after.kinds.items()}
    return {
        "kind": kind,
        "workers": workers,
        "seconds": seconds,
        "calls": made,
        "calls_per_s": sum(int(r["calls"]) for r in procs.reports) / seconds,
        "wal_bytes_per_call": lsn_bytes / made,
        "wal_fpi_bytes_per_call": wal["fpi_bytes"] / made,
        "wal_bytes_without_fpi_per_call": (lsn_bytes - wal["fpi_bytes"]) / made,
        "wal_records_per_call": wal["records"] / made,
        "commit_records_per_call": wal["commits"] / made,
        "xact_commit_per_call": (after.commits - first.commits) / made,
        "wal_syncs_per_call": (after.wal_sync - first.wal_sync) / made,
        "server_cpu_us_per_call": (after.cpu_ticks - first.cpu_ticks) / tick / made * 1e6,
        "client_cpu_us_per_call": client_cpu / made * 1e6,
        "tables": tables,
        "journal_kinds_per_call": {k: v for k, v in kinds.items() if v},
    }


# -- SQLite ----------------------------------------------------------------------------


def _io() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/io").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = int(value)
    return out


def _sqlite_tables(path: str) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Rows per table, bytes per table and index (dbstat, if compiled in), journal kinds."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [
            str(r[0])
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        rows = {n: int(conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0]) for n in names}
        try:
            sizes = {
                str(name): int(size)
                for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")
            }
        except sqlite3.OperationalError:
            sizes = {}
        kinds: dict[str, int] = {}
        columns = [str(r[1]) for r in conn.execute("PRAGMA table_info(journal)")]
        if "kind" in columns:
            kinds = {
                str(k): int(n)
                for k, n in conn.execute("SELECT kind, count(*) FROM journal GROUP BY kind")
            }
        return rows, sizes, kinds
    finally:
        conn.close()


def sqlite_calls(path: str, calls: int) -> None:
    """``calls`` side-effecting calls through a `Gate` over a SQLite ledger at ``path``."""
    from callgate.ledger import SQLiteLedger

    ledger = SQLiteLedger(path, worker="footprint")
    work = scale.GateCalls(scale.build_gate(ledger), "fp", 0)
    for n in range(calls):
        work.call(n)
    ledger.close()


def _syncs(root: str, calls: int) -> float | None:
    """Syncs per call (fsync + fdatasync), N calls against none, in a child under strace."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    counts = []
    for n in (calls, 0):
        path = os.path.join(tempfile.mkdtemp(dir=root), "callgate.db")
        out = os.path.join(root, "strace.txt")
        subprocess.run(
            [
                *(strace, "-f", "-e", "trace=fsync,fdatasync", "-o", out),
                *(sys.executable, __file__, "--sqlite-child", path, "--sqlite-calls", str(n)),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        with open(out) as f:
            counts.append(len(re.findall(r"\bf(?:data)?sync\(", f.read())))
    return (counts[0] - counts[1]) / calls


def measure_sqlite(calls: int, root: str) -> dict[str, Any]:
    path = os.path.join(tempfile.mkdtemp(dir=root), "callgate.db")
    from callgate.ledger import SQLiteLedger

    warm = 30
    ledger = SQLiteLedger(path, worker="footprint")
    work = scale.GateCalls(scale.build_gate(ledger), "fp", 0)
    for n in range(warm):
        work.call(-1 - n)
    ledger.close()
    rows0, sizes0, kinds0 = _sqlite_tables(path)
    files0 = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    ledger = SQLiteLedger(path, worker="footprint")
    work = scale.GateCalls(scale.build_gate(ledger), "fp2", 0)
    io0, cpu0 = _io(), time.process_time()
    for n in range(calls):
        work.call(n)
    io1, cpu1 = _io(), time.process_time()
    ledger.close()
    rows1, sizes1, kinds1 = _sqlite_tables(path)
    files1 = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    tables = {}
    for name in sorted(set(rows1) | set(sizes1)):
        added = rows1.get(name, 0) - rows0.get(name, 0)
        grown = sizes1.get(name, 0) - sizes0.get(name, 0)
        if added or grown:
            tables[name] = {"rows_per_call": added / calls, "bytes_per_call": grown / calls}
    return {
        "calls": calls,
        "tables": tables,
        "journal_kinds_per_call": {
            k: (n - kinds0.get(k, 0)) / calls for k, n in kinds1.items() if n != kinds0.get(k, 0)
        },
        "file_growth_bytes_per_call": (files1 - files0) / calls,
        "written_bytes_per_call": (io1["wchar"] - io0["wchar"]) / calls,
        "write_syscalls_per_call": (io1["syscw"] - io0["syscw"]) / calls,
        "cpu_us_per_call": (cpu1 - cpu0) / calls * 1e6,
        "syncs_per_call": _syncs(root, max(calls // 4, 1)),
    }


# -- report ----------------------------------------------------------------------------


def pg_lines(results: list[dict[str, Any]]) -> list[str]:
    heads = [f"{r['kind']} x{r['workers']}" for r in results]
    rows = [
        ("calls measured", "calls", "{:,.0f}"),
        ("calls/s (in this window)", "calls_per_s", "{:,.0f}"),
        ("commit records (transactions that wrote)", "commit_records_per_call", "{:.3f}"),
        ("xact_commit (every committed transaction)", "xact_commit_per_call", "{:.3f}"),
        ("WAL syncs (pg_stat_wal.wal_sync)", "wal_syncs_per_call", "{:.3f}"),
        ("WAL records", "wal_records_per_call", "{:.1f}"),
        ("WAL bytes", "wal_bytes_per_call", "{:,.0f}"),
        ("  of which full-page images", "wal_fpi_bytes_per_call", "{:,.0f}"),
        ("  without full-page images", "wal_bytes_without_fpi_per_call", "{:,.0f}"),
        ("server CPU µs", "server_cpu_us_per_call", "{:,.0f}"),
        ("worker CPU µs", "client_cpu_us_per_call", "{:,.0f}"),
    ]
    out = ["| per call | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(results)]
    for label, key, fmt in rows:
        out.append(f"| {label} | " + " | ".join(fmt.format(r[key]) for r in results) + " |")
    names = sorted({t for r in results for t in r["tables"]})
    for name in names:
        cells = []
        for r in results:
            t = r["tables"].get(name)
            cells.append(
                "–"
                if t is None
                else f"{t['rows_per_call']:.2f} rows × {t['mean_row_bytes']:.0f} B; "
                f"+{t['relation_growth_bytes_per_call']:,.0f} B"
            )
        out.append(f"| table {name} | " + " | ".join(cells) + " |")
    kinds = sorted({k for r in results for k in r["journal_kinds_per_call"]})
    for kind in kinds:
        out.append(
            f"| journal {kind} | "
            + " | ".join(f"{r['journal_kinds_per_call'].get(kind, 0):.3f}" for r in results)
            + " |"
        )
    return out


def sqlite_lines(r: dict[str, Any]) -> list[str]:
    out = [f"SQLite, one thread, {r['calls']} calls (per call):"]
    for name, t in r["tables"].items():
        out.append(f"  {name}: {t['rows_per_call']:.2f} rows, {t['bytes_per_call']:,.0f} B")
    for kind, n in r["journal_kinds_per_call"].items():
        out.append(f"  journal {kind}: {n:.3f}")
    syncs = r["syncs_per_call"]
    out.append(
        f"  files +{r['file_growth_bytes_per_call']:,.0f} B; "
        f"written {r['written_bytes_per_call']:,.0f} B "
        f"in {r['write_syscalls_per_call']:.1f} write calls; "
        f"syncs {'n/a' if syncs is None else f'{syncs:.3f}'}; CPU {r['cpu_us_per_call']:,.0f} µs"
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default=WORKERS, help="'' skips PostgreSQL")
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument("--sqlite-calls", type=int, default=SQLITE_CALLS, help="0 skips SQLite")
    parser.add_argument(
        "--settle",
        type=float,
        default=STATS_SETTLE,
        help="seconds to wait for the statistics before and after a window",
    )
    parser.add_argument("--sqlite-child", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    if args.sqlite_child:
        sqlite_calls(args.sqlite_child, args.sqlite_calls)
        return
    import callgate

    print(f"callgate from {callgate.__file__}", file=sys.stderr, flush=True)
    counts = scale._counts(args.workers)
    results: list[dict[str, Any]] = []
    sqlite_result: dict[str, Any] | None = None
    settings: dict[str, str] = {}
    root = tempfile.mkdtemp(prefix="callgate-footprint-", dir=os.environ.get("BENCH_DIR"))
    cluster = None
    try:
        with open(os.path.join(root, "workers.log"), "a") as log:
            if counts:
                cluster = scale.start_durable_cluster(scale.load_pgcluster())
                settings = scale.server_settings(cluster.dsn())
                for n in counts:
                    for kind in ("bare", "gate"):
                        results.append(measure_pg(cluster, kind, n, args.seconds, log, args.settle))
                        r = results[-1]
                        print(
                            f"{kind} x{n}: {r['calls']} calls, {r['wal_bytes_per_call']:,.0f} WAL "
                            f"B/call, {r['commit_records_per_call']:.2f} commits/call",
                            file=sys.stderr,
                            flush=True,
                        )
        if args.sqlite_calls:
            sqlite_result = measure_sqlite(args.sqlite_calls, root)
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    if results:
        print(f"PostgreSQL {settings.get('server_version', '?')}, {args.seconds:g} s windows:")
        print("\n".join(pg_lines(results)))
    if sqlite_result is not None:
        print("\n".join(sqlite_lines(sqlite_result)))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "callgate": callgate.__file__,
                    "postgres": settings,
                    "pg": results,
                    "sqlite": sqlite_result,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()

"""Scale-out: durable side-effecting calls/s against the number of writers, beside the bare floor.

On a throwaway PostgreSQL 15 cluster (started like ``tests/pgcluster.py``, but
durable: ``fsync=on``, ``synchronous_commit=on``, ``full_page_writes=on``), for
each worker count N (``--workers 1,2,4,8``), in the same run:

* **bare**: N processes, each on a table of its own, each "call" an
  ``INSERT`` + ``COMMIT`` before the (no-op) effect and another after it: the
  floor of two durable commits per call with no shared row;
* **callgate**: N processes, each with its own `PostgresLedger` (its own
  ``worker=`` id) under a `Gate`, each on a run of its own, submitting one
  side-effecting call at a time (``run.submit``) of a tool with an idempotency
  key, through the whole public pipeline.

On SQLite, the same pair for 1, 2 and 4 threads in one process
(``--sqlite-threads``; callgate: one `SQLiteLedger` and `Gate` shared by the
threads, a run per thread) and 1, 2 and 4 processes (``--sqlite-procs``; an
`SQLiteLedger` per process on one file). The SQLite floor: each thread or
process does two ``INSERT`` + ``COMMIT`` per call on a file of its own, with
the settings the ledger uses (WAL, ``synchronous=FULL``, its checkpoint mark
and journal size limit).

Every cell runs in fresh worker processes on a fresh database (or directory);
they warm up, then all start at the same moment (a shared ``CLOCK_MONOTONIC``
deadline) and count the calls completed in ``--seconds``. Cells are
interleaved over ``--repeats`` (bare, then callgate, cell by cell), and the
table shows medians; the ratio is the median of each repeat's callgate / bare
from the same cell of the same repeat. A progress line per cell goes to
stderr, the table to stdout, ``--json OUT`` writes every sample. Nothing is
written into the working tree (a temporary directory, or ``$BENCH_DIR``).

Run: ``.venv/bin/python benchmarks/scale.py`` (about 10 minutes with the
defaults on 2 cores). Issue 31's target: callgate >= 0.5x the bare floor at
every worker count on PostgreSQL, and 4 workers >= 1 worker.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import IO, Any

REPO = Path(__file__).resolve().parents[1]
PGCLUSTER = REPO / "tests" / "pgcluster.py"

WORKERS = "1,2,4,8"
SQLITE_THREADS = "1,2,4"
SQLITE_PROCS = "1,2,4"
SECONDS = 5.0
REPEATS = 3
WARMUP_CALLS = 30
"""Calls each worker (each thread) makes before the clock starts: pools, caches, imports."""
START_DELAY = 0.3
"""Seconds between the last worker saying ready and the common start."""
READY_TIMEOUT = 120.0
PG_MAX_CONNECTIONS = 200


# -- the throwaway cluster -------------------------------------------------------------


def load_pgcluster() -> ModuleType:
    """``tests/pgcluster.py``, the throwaway PostgreSQL cluster the tests use."""
    name = "callgate_tests_pgcluster"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, PGCLUSTER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def start_durable_cluster(pg: ModuleType) -> Any:
    """A throwaway cluster like the tests' one, but with the durability a deployment has.

    ``tests/pgcluster.py`` turns ``fsync`` and ``full_page_writes`` off for speed; a
    benchmark of durable commits must not, so this starts the same cluster with
    PostgreSQL's defaults for both and ``synchronous_commit=on``. ``SCALE_PG_EXTRA`` in
    the environment adds server options (e.g. `` -c shared_preload_libraries=pg_stat_statements``
    to see where the server's time goes).
    """
    bindir = pg.find_bin()
    if bindir is None:
        raise SystemExit(f"cannot start PostgreSQL: {pg.missing_reason()}")
    # In the system's temporary directory, as tests/pgcluster.py does: when the server
    # runs as another user (we are root), it must reach its directory.
    root = Path(tempfile.mkdtemp(prefix="callgate-scale-pg-"))
    os.chmod(root, 0o755)
    cluster = pg.Cluster(root=root, bindir=bindir, user=pg._server_user())
    data = root / "data"
    cluster.socket_dir.mkdir()
    if cluster.user is not None:
        import pwd

        entry = pwd.getpwnam(cluster.user)
        for path in (root, cluster.socket_dir):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    options = (
        f"-k {cluster.socket_dir} -p {pg.PORT} -c listen_addresses='' "
        f"-c max_connections={PG_MAX_CONNECTIONS} -c fsync=on -c synchronous_commit=on "
        "-c full_page_writes=on " + os.environ.get("SCALE_PG_EXTRA", "")
    )
    try:
        cluster._run(
            "initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"
        )
        cluster._run(
            *("pg_ctl", "-D", str(data), "-o", options, "-l", str(root / "log")),
            *("-w", "-t", "60", "start"),
        )
    except subprocess.CalledProcessError as exc:
        log = root / "log"
        detail = log.read_text() if log.exists() else exc.stderr.decode(errors="replace")
        shutil.rmtree(root, ignore_errors=True)
        raise SystemExit(f"could not start a throwaway PostgreSQL: {detail}") from exc
    steady_pg_wal(cluster.dsn())
    return cluster


def steady_pg_wal(dsn: str) -> None:
    """Write and checkpoint about 100 MB of WAL, so that the cells find recycled WAL
    segments, as a server that has run a while does, instead of each new 16 MB segment
    being created and zero-filled in the middle of a commit."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE scale_wal_fill AS SELECT repeat('x', 900) AS x "
            "FROM generate_series(1, 100000)"
        )
        conn.execute("DROP TABLE scale_wal_fill")
        conn.execute("CHECKPOINT")
        conn.execute("SELECT pg_switch_wal()")
        conn.execute("CHECKPOINT")


def server_settings(dsn: str) -> dict[str, str]:
    """The server's version and the settings that decide what a commit costs."""
    import psycopg

    names = (
        "server_version",
        "fsync",
        "synchronous_commit",
        "full_page_writes",
        "wal_sync_method",
        "commit_delay",
        "shared_buffers",
        "max_wal_size",
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {n: str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]


# -- what a worker does ----------------------------------------------------------------


class Workload:
    """One worker thread's loop: ``setup``, then ``call`` until the deadline."""

    def call(self, n: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the workload holds."""


def sqlite_settings() -> tuple[int, int]:
    """The SQLite ledger's checkpoint mark and journal size limit (its defaults if absent)."""
    from callgate.ledger import sqlite as sqlite_ledger

    return (
        int(getattr(sqlite_ledger, "CHECKPOINT_PAGES", 1000)),
        int(getattr(sqlite_ledger, "WAL_LIMIT_BYTES", 4 * 1024 * 1024)),
    )


class BarePg(Workload):
    """Two ``INSERT`` + ``COMMIT`` per call on a table of this worker's own."""

    def __init__(self, dsn: str, name: str) -> None:
        import psycopg

        self.table = f"bare_{name}"
        self.conn = psycopg.connect(dsn, autocommit=False)
        with self.conn.cursor() as cur:
            cur.execute(
                f"CREATE TABLE {self.table} (id bigserial PRIMARY KEY, call_id text NOT NULL, "
                "kind text NOT NULL, at double precision NOT NULL)"
            )
        self.conn.commit()
        self.cur = self.conn.cursor()
        self.sql = f"INSERT INTO {self.table} (call_id, kind, at) VALUES (%s, %s, %s)"

    def call(self, n: int) -> None:
        call_id = f"c{n}"
        self.cur.execute(self.sql, (call_id, "attempt", time.time()))
        self.conn.commit()
        self.cur.execute(self.sql, (call_id, "outcome", time.time()))
        self.conn.commit()

    def close(self) -> None:
        self.conn.close()


def steady_wal(path: str) -> sqlite3.Connection:
    """Grow a SQLite file's WAL to the size it keeps in a long-running process; an open
    connection to hold it (when the last connection closes, SQLite deletes the WAL).

    A fresh WAL grows with every commit, and syncing a file that grew also syncs its size
    (a commit of the file system's journal); once the WAL has wrapped after its first
    checkpoint, commits rewrite it in place, which syncs faster (on the development VM,
    one writer appending a 4 KiB page and syncing: 120-130 syncs/s growing the file,
    160-280 rewriting it). A ledger writes several pages per commit and wraps within a
    few hundred calls, the bare floor's one page per commit takes a thousand: left
    fresh, the two would be measured in different regimes. So both start wrapped: one
    checkpoint mark's worth of pages written, checkpointed, and the file kept at the
    ledger's journal size limit.
    """
    checkpoint, limit = sqlite_settings()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute(f"PRAGMA journal_size_limit={limit}")
    page = int(conn.execute("PRAGMA page_size").fetchone()[0])
    conn.execute("CREATE TABLE scale_wal_fill (b BLOB)")
    conn.execute("BEGIN IMMEDIATE")
    for _ in range(checkpoint + 50):
        conn.execute("INSERT INTO scale_wal_fill VALUES (zeroblob(?))", (page - 200,))
    conn.execute("COMMIT")
    conn.execute("DROP TABLE scale_wal_fill")
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    return conn


class BareSqlite(Workload):
    """Two ``INSERT`` + ``COMMIT`` per call on a SQLite file of this worker's own."""

    def __init__(self, path: str) -> None:
        checkpoint, limit = sqlite_settings()
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute(f"PRAGMA wal_autocheckpoint={checkpoint}")
        self.conn.execute(f"PRAGMA journal_size_limit={limit}")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS bare (id INTEGER PRIMARY KEY, call_id TEXT NOT NULL, "
            "kind TEXT NOT NULL, at REAL NOT NULL)"
        )
        self.cur = self.conn.cursor()

    def call(self, n: int) -> None:
        call_id = f"c{n}"
        for kind in ("attempt", "outcome"):
            self.cur.execute("BEGIN IMMEDIATE")
            self.cur.execute(
                "INSERT INTO bare (call_id, kind, at) VALUES (?, ?, ?)",
                (call_id, kind, time.time()),
            )
            self.cur.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


def build_gate(ledger: Any) -> Any:
    """A `Gate` over ``ledger`` with one side-effecting tool keyed by its operation id."""
    from callgate import Gate, Registry

    registry = Registry()

    @registry.tool(
        effects="spend:USD", writes="charge:{operation_id}", idempotency_key="{operation_id}"
    )
    def charge(operation_id: str, amount: int) -> dict[str, Any]:
        """Charge a card (a no-op: the benchmark measures what surrounds the effect)."""
        return {"operation_id": operation_id, "amount": amount}

    return Gate(registry, ledger=ledger)


class GateCalls(Workload):
    """One run of a shared `Gate`, one side-effecting call per ``run.submit``."""

    def __init__(self, gate: Any, name: str, calls_per_run: int) -> None:
        self.gate = gate
        self.name = name
        self.calls_per_run = calls_per_run
        self.runs = 0
        self.run = self._new_run()

    def _new_run(self) -> Any:
        from callgate import Authority

        self.runs += 1
        return self.gate.run(
            authority=Authority(principal="bench", grants=["spend:USD"]),
            run_id=f"scale-{self.name}-{os.getpid()}-{self.runs}",
        )

    def call(self, n: int) -> None:
        from callgate import ToolCall

        if self.calls_per_run and n and n % self.calls_per_run == 0:
            self.run = self._new_run()
        op = f"{self.name}-{os.getpid()}-{n}"
        [obs] = self.run.submit(
            [ToolCall(id=f"c{n}", name="charge", arguments={"operation_id": op, "amount": 1})]
        )
        if obs.status.value != "ok":
            raise RuntimeError(
                f"worker {self.name}: call {n} ended {obs.status.value}, expected ok: "
                f"{obs.content[:300]}"
            )


def open_ledger(backend: str, target: str, worker: str) -> Any:
    from callgate.ledger import PostgresLedger, SQLiteLedger

    if backend == "postgres":
        return PostgresLedger(target, worker=worker, min_size=1, max_size=2)
    return SQLiteLedger(target, worker=worker)


def child(args: argparse.Namespace) -> None:
    """A worker process: build the workloads, warm up, say ready, run the window, report."""
    threads = args.threads
    name = args.name
    workloads: list[Workload] = []
    ledger = None
    if args.kind == "bare":
        for t in range(threads):
            if args.backend == "postgres":
                workloads.append(BarePg(args.target, f"{name}_{t}"))
            else:
                workloads.append(BareSqlite(os.path.join(args.target, f"bare-{name}-{t}.db")))
    else:
        ledger = open_ledger(args.backend, args.target, f"worker-{name}")
        gate = build_gate(ledger)
        for t in range(threads):
            workloads.append(GateCalls(gate, f"{name}t{t}", args.calls_per_run))
    for w in workloads:
        for n in range(WARMUP_CALLS):
            w.call(-1 - n)
    print("ready", flush=True)
    line = sys.stdin.readline().split()
    if not line or line[0] != "go":
        raise SystemExit(f"expected 'go START END' on stdin, got {line!r}")
    start, end = float(line[1]), float(line[2])
    counts = [0] * threads
    made = [0] * threads
    errors: list[BaseException] = []

    def loop(t: int) -> None:
        w = workloads[t]
        delay = start - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        n = 0
        try:
            while time.monotonic() < end:
                w.call(n)
                n += 1
                if time.monotonic() <= end:
                    counts[t] += 1
        except BaseException as exc:
            errors.append(exc)
        made[t] = n

    pool = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    cpu = time.process_time()
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    cpu = time.process_time() - cpu
    for w in workloads:
        w.close()
    if ledger is not None:
        ledger.close()
    if errors:
        raise errors[0]
    # calls: completed inside the window (throughput); made: all, the one that ran past
    # the window's end too (what the ledger holds; benchmarks/ledger_footprint.py)
    report = {"calls": sum(counts), "made": sum(made), "cpu_s": cpu, "per_thread": counts}
    print(json.dumps(report), flush=True)


# -- the parent ------------------------------------------------------------------------


def _probe_writer(path: Path, end: float, counts: list[int], t: int) -> None:
    """Rewrite one 4 KiB page of a file of its own and sync it, until ``end``."""
    page = b"x" * 4096
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.write(fd, page * 64)
        os.fsync(fd)
        while time.monotonic() < end:
            os.pwrite(fd, page, (counts[t] % 64) * 4096)
            os.fdatasync(fd)
            counts[t] += 1
    finally:
        os.close(fd)
        path.unlink()


def disk_probe(
    root: Path, seconds: float, levels: tuple[int, ...] = (1, 2, 4, 8)
) -> dict[int, float]:
    """Syncs/s of the disk under ``root`` with 1, 2, 4, 8 threads, each rewriting a 4 KiB
    page of a file of its own and ``fdatasync``-ing it: what the floor can reach."""
    rates = {}
    for level in levels:
        counts = [0] * level
        end = time.monotonic() + seconds
        pool = [
            threading.Thread(target=_probe_writer, args=(root / f"probe-{t}", end, counts, t))
            for t in range(level)
        ]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
        rates[level] = sum(counts) / seconds
    return rates


@dataclass
class Cell:
    """One row of a table: a backend, a way of running N writers, its samples."""

    backend: str
    mode: str  # "processes" or "threads"
    writers: int
    bare: list[float] = field(default_factory=list)
    gate: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    """Repeats in which a side failed (its workers' last error line): left out of the medians."""

    @property
    def label(self) -> str:
        return f"{self.backend} {self.writers} {self.mode}"

    def ratios(self) -> list[float]:
        return [g / b for g, b in zip(self.gate, self.bare, strict=False) if b > 0]

    def summary(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "mode": self.mode,
            "writers": self.writers,
            "bare_calls_per_s": self.bare,
            "callgate_calls_per_s": self.gate,
            "ratios": self.ratios(),
            "median_bare": _median(self.bare),
            "median_callgate": _median(self.gate),
            "median_ratio": _median(self.ratios()),
            "failures": self.failures,
        }


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


class Workers:
    """The processes of one cell's measurement."""

    def __init__(self, argv_for: Callable[[int], list[str]], count: int, log: IO[str]) -> None:
        self.procs = [
            subprocess.Popen(
                [sys.executable, __file__, *argv_for(i)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
            for i in range(count)
        ]

    def run(self, seconds: float, before_go: Callable[[], None] | None = None) -> int:
        """Wait until all are ready, start them together, and sum the calls they completed
        in the window (`reports` keeps each worker's whole report)."""
        self.reports: list[dict[str, Any]] = []
        try:
            for p in self.procs:
                assert p.stdout is not None
                line = _readline(p.stdout, READY_TIMEOUT)
                if line.strip() != "ready":
                    raise RuntimeError(f"a worker did not get ready (said {line!r})")
            if before_go is not None:
                before_go()
            start = time.monotonic() + START_DELAY
            for p in self.procs:
                assert p.stdin is not None
                p.stdin.write(f"go {start!r} {start + seconds!r}\n")
                p.stdin.flush()
            total = 0
            for p in self.procs:
                assert p.stdout is not None
                line = _readline(p.stdout, seconds + READY_TIMEOUT)
                if not line.startswith("{"):
                    raise RuntimeError(f"a worker failed (said {line!r})")
                self.reports.append(json.loads(line))
                total += int(self.reports[-1]["calls"])
            for p in self.procs:
                if p.wait(60) != 0:
                    raise RuntimeError(f"a worker exited {p.returncode}")
            return total
        finally:
            for p in self.procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()


def _readline(stream: IO[str], timeout: float) -> str:
    """One line from a worker, or an error after ``timeout`` seconds."""
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not box:
        raise RuntimeError(f"no answer from a worker in {timeout:.0f} s")
    return box[0]


class CellFailed(Exception):
    """A side of a cell did not finish: a worker failed or did not answer."""


class Bench:
    """The whole run: the cluster, the temporary directory, the cells."""

    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.args = args
        self.root = root
        self.cluster: Any = None
        self.log_path = root / "workers.log"
        self.log = self.log_path.open("a")
        self.serial = 0

    def measure(self, cell: Cell, kind: str) -> float:
        """One sample of one side of a cell: calls/s of all its writers together."""
        self.serial += 1
        tag = f"{kind}{self.serial}"
        if cell.backend == "postgres":
            target = self.cluster.create_database()
            if kind == "gate":
                from callgate.ledger import PostgresLedger

                PostgresLedger(target).close()  # the schema, before the workers race for it
        processes = cell.writers if cell.mode == "processes" else 1
        threads = 1 if cell.mode == "processes" else cell.writers
        keep: list[sqlite3.Connection] = []  # hold each SQLite file's grown WAL
        if cell.backend == "sqlite":
            target = str(self.root / tag)
            os.mkdir(target)
            if kind == "gate":
                from callgate.ledger import SQLiteLedger

                target = os.path.join(target, "callgate.db")
                SQLiteLedger(target).close()
                keep.append(steady_wal(target))
            else:
                for i in range(processes):
                    for t in range(threads):
                        keep.append(steady_wal(os.path.join(target, f"bare-{tag}w{i}-{t}.db")))

        def argv(i: int) -> list[str]:
            return [
                *("--child", kind, "--backend", cell.backend, "--target", target),
                *("--name", f"{tag}w{i}", "--threads", str(threads)),
                *("--calls-per-run", str(self.args.calls_per_run)),
            ]

        try:
            calls = Workers(argv, processes, self.log).run(self.args.seconds)
        except RuntimeError as exc:
            self.log.flush()
            lines = self.log_path.read_text().strip().splitlines()
            last = lines[-1] if lines else ""
            raise CellFailed(f"{kind}: {exc}; the workers' last error: {last[:400]}") from exc
        finally:
            for conn in keep:
                conn.close()
            if cell.backend == "postgres":
                self.cluster.drop_database(target)
            else:
                shutil.rmtree(os.path.dirname(target) if kind == "gate" else target)
        return calls / self.args.seconds

    def run_cells(self, cells: list[Cell]) -> None:
        for repeat in range(self.args.repeats):
            for cell in cells:
                try:
                    bare = self.measure(cell, "bare")
                    gate = self.measure(cell, "gate")
                except CellFailed as exc:
                    cell.failures.append(str(exc))
                    print(
                        f"[repeat {repeat + 1}/{self.args.repeats}] {cell.label}: FAILED {exc}",
                        file=sys.stderr,
                        flush=True,
                    )
                    continue
                cell.bare.append(bare)
                cell.gate.append(gate)
                load = os.getloadavg()[0]
                print(
                    f"[repeat {repeat + 1}/{self.args.repeats}] {cell.label}: bare "
                    f"{bare:,.0f} calls/s, callgate {gate:,.0f} calls/s, "
                    f"ratio {gate / bare if bare else float('nan'):.2f} (load {load:.1f})",
                    file=sys.stderr,
                    flush=True,
                )

    def close(self) -> None:
        self.log.close()
        if self.cluster is not None:
            self.cluster.stop()


def table(cells: list[Cell], first: str) -> list[str]:
    lines = [
        f"| {first} | bare calls/s | callgate calls/s | callgate / bare |",
        "|---|---:|---:|---:|",
    ]
    for cell in cells:
        b, g, r = _median(cell.bare), _median(cell.gate), _median(cell.ratios())
        lines.append(
            f"| {cell.writers} | {b or 0:,.0f} | {g or 0:,.0f} | "
            f"{r or 0:.2f} ({min(cell.ratios(), default=0):.2f}–"
            f"{max(cell.ratios(), default=0):.2f}) |"
            + (f" **{len(cell.failures)} repeat(s) failed**" if cell.failures else "")
        )
    for cell in cells:
        for failure in cell.failures:
            lines.append(f"- {cell.label} failed: {failure}")
    return lines


def _counts(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()] if text else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default=WORKERS, help="PostgreSQL worker processes")
    parser.add_argument("--sqlite-threads", default=SQLITE_THREADS, help="'' skips them")
    parser.add_argument("--sqlite-procs", default=SQLITE_PROCS, help="'' skips them")
    parser.add_argument("--seconds", type=float, default=SECONDS, help="per sample")
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument(
        "--calls-per-run",
        type=int,
        default=0,
        help="start a new run every N calls (default 0: one run per worker thread)",
    )
    parser.add_argument(
        "--disk-probe",
        type=float,
        default=2.0,
        help="seconds per level of the disk's sync probe (0 skips it)",
    )
    parser.add_argument("--json", help="also write every sample to this file")
    parser.add_argument("--child", choices=("bare", "gate"), help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.kind = args.child
        child(args)
        return
    # A TERM stops the cluster and removes the files on the way out, as an interrupt does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    import callgate

    cells = [Cell("postgres", "processes", n) for n in _counts(args.workers)]
    cells += [Cell("sqlite", "threads", n) for n in _counts(args.sqlite_threads)]
    cells += [Cell("sqlite", "processes", n) for n in _counts(args.sqlite_procs)]
    root = Path(tempfile.mkdtemp(prefix="callgate-scale-", dir=os.environ.get("BENCH_DIR")))
    bench = Bench(args, root)
    settings: dict[str, str] = {}
    disk: dict[int, float] = {}
    started = time.monotonic()
    print(f"callgate from {callgate.__file__}", file=sys.stderr, flush=True)
    try:
        if any(c.backend == "postgres" for c in cells):
            pg = load_pgcluster()
            reason = pg.missing_reason()
            if reason is not None:
                raise SystemExit(f"cannot run the PostgreSQL part: {reason}; or pass --workers ''")
            bench.cluster = start_durable_cluster(pg)
            settings = server_settings(bench.cluster.dsn())
            print(f"PostgreSQL: {settings}", file=sys.stderr, flush=True)
        if args.disk_probe > 0:
            disk = disk_probe(root, args.disk_probe)
            print(f"disk: fdatasync/s by concurrent writers {disk}", file=sys.stderr, flush=True)
        bench.run_cells(cells)
    finally:
        bench.close()
        shutil.rmtree(root, ignore_errors=True)
    elapsed = time.monotonic() - started
    out: list[str] = []
    groups = [
        ("postgres", "processes", "PostgreSQL, worker processes"),
        ("sqlite", "threads", "SQLite, threads of one process"),
        ("sqlite", "processes", "SQLite, processes on one file"),
    ]
    for backend, mode, title in groups:
        chosen = [c for c in cells if c.backend == backend and c.mode == mode]
        if chosen:
            out += [f"{title}:", "", *table(chosen, mode), ""]
    out.append(
        f"medians of {args.repeats} repeats of {args.seconds:g} s per cell; ratio: median of "
        "each repeat's callgate / bare (min–max); "
        f"{os.cpu_count()} CPUs, {elapsed:.0f} s in all"
    )
    if settings:
        out.append(
            "PostgreSQL "
            + ", ".join(f"{k}={v}" for k, v in settings.items() if k != "server_version")
            + f" ({settings.get('server_version', '?')})"
        )
    if disk:
        out.append(
            "disk: fdatasync/s of 1, 2, 4, 8 concurrent writers, each on a file of its own: "
            + ", ".join(f"{v:,.0f}" for v in disk.values())
        )
    print("\n".join(out))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "callgate": callgate.__file__,
                    "python": platform.python_version(),
                    "cpus": os.cpu_count(),
                    "seconds": args.seconds,
                    "repeats": args.repeats,
                    "calls_per_run": args.calls_per_run,
                    "postgres": settings,
                    "disk_syncs_per_s": disk,
                    "cells": [c.summary() for c in cells],
                },
                indent=2,
            )
        )
    if any(c.failures for c in cells):
        sys.exit(1)


if __name__ == "__main__":
    main()

"""The SIGKILL crash test at scale: two competing workers, a separate payment service, many kills.

Two worker processes (``tests/integration/charge_worker.py``, ids ``w1`` and
``w2``) send non-idempotent charges through a callgate `Gate` to a payment
service in a process of its own (``tests/integration/payment_service.py``,
which keeps its own durable record and honours idempotency keys). Both are
handed the same operations, so they race for the same idempotency keys. Each
worker is SIGKILLed a short random time after it is ready (most kills land
inside a call, many between "attempt recorded" and "outcome recorded"), or
sometimes at a random moment of its start-up and crash recovery, and started
again at once; on start it recovers the calls it left running
(`Gate.recover`). When enough kills are done, both workers recover, then both
submit every operation handed out, and finish. Then, against the service's
record:

* duplicates: operations the service charged twice (must be 0);
* double executions: operations whose handler sent its charge twice, which the
  service's idempotency key absorbed (must be 0: the gate never ran one twice);
* lost: operations requested but never charged while the ledger says nothing
  or ``ok`` about them (must be 0);
* ledger = provider record: each operation's recorded ``ok`` outcomes, and every
  ``ok`` a worker was told (replays too), name the one charge the service made;
* the audit chain verifies (``ledger.verify().ok``); no call is left non-terminal;
* SQLite: the ``-wal`` file's size, sampled after each kill and every 100 ms,
  its maximum and its size at the end of the kill phase, against the bound the
  ledger states (``callgate.ledger.sqlite.WAL_BOUND_BYTES``; 16 MiB if none).

Kills inside a call are counted from the recovery reports: each call a new
life of a worker settles is one its killed predecessor left between attempt
and outcome; the service's ``reconcile`` requests tell how many of those the
kill caught before the charge was made.

Run: ``.venv/bin/python benchmarks/crash.py`` (1,000 kills on SQLite, 300 on a
throwaway PostgreSQL cluster started like ``tests/pgcluster.py``; about
10-15 minutes on 2 cores). ``--sqlite-kills 0`` or ``--pg-kills 0`` skips a
backend. Progress goes to stderr, the report to stdout; exit status 1 when a
target is missed. The kill moments are seeded (``--seed``), the machine's
timing is not, so two runs differ in detail.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from callgate.ledger import CallState, Ledger, PostgresLedger, SQLiteLedger
from callgate.ledger import sqlite as sqlite_ledger

REPO = Path(__file__).resolve().parents[1]
WORKER = REPO / "tests" / "integration" / "charge_worker.py"
SERVICE = REPO / "tests" / "integration" / "payment_service.py"
PGCLUSTER = REPO / "tests" / "pgcluster.py"

SQLITE_KILLS = 1000
PG_KILLS = 300
SEED = 20260114
WORKERS = ("w1", "w2")
WINDOW = 24
"""Operations handed to one life of a worker, from the lowest one not yet charged."""
MAX_DELAY = 0.12
"""The longest a worker lives after it is ready (seconds); the kill moment is uniform below."""
EARLY = 0.1
"""The share of lives killed at a random moment of start-up or crash recovery instead."""
EARLY_WINDOW = (0.05, 0.5)
"""When such an early kill comes, in seconds after the start (a start takes about 0.3 s)."""
DEFAULT_WAL_BOUND = 16 * 1024 * 1024
"""The WAL bound when `callgate.ledger.sqlite` states none (``WAL_BOUND_BYTES``)."""
POLL = 0.1
"""Seconds between samples of the WAL's size besides those after each kill."""
PROGRESS_EVERY = 50
START_TIMEOUT = 60.0
FINISH_TIMEOUT = 600.0


def wal_bound() -> tuple[int, str]:
    """The WAL bound and where it comes from."""
    bound = getattr(sqlite_ledger, "WAL_BOUND_BYTES", None)
    if bound is None:
        return DEFAULT_WAL_BOUND, "16 MiB: callgate.ledger.sqlite states no WAL_BOUND_BYTES"
    return int(bound), "callgate.ledger.sqlite.WAL_BOUND_BYTES"


def mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def op_id(index: int) -> str:
    return f"op-{index:06d}"


def op_index(op: str) -> int:
    return int(op.removeprefix("op-"))


def load_pgcluster() -> ModuleType:
    """``tests/pgcluster.py``, the throwaway PostgreSQL cluster the tests use."""
    spec = importlib.util.spec_from_file_location("callgate_tests_pgcluster", PGCLUSTER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class Service:
    """The payment service process."""

    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVICE), str(db)], stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("port "):
            self.stop()
            raise RuntimeError(f"the payment service did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=60) as resp:
            return json.loads(resp.read())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class Life:
    """One life of a worker process: its output read as it comes, until it ends."""

    def __init__(
        self,
        ledger: str,
        service: str,
        ops: Path,
        name: str,
        start: int,
        count: int,
        log: IO[str],
        on_line: Callable[[dict[str, Any]], None],
        *extra: str,
    ) -> None:
        self.name = name
        self.on_line = on_line
        self.ready = threading.Event()
        self.done = threading.Event()
        self.ended = threading.Event()
        self.recovered: list[list[str]] = []
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                "--ledger",
                ledger,
                "--service",
                service,
                "--ops",
                str(ops),
                "--worker",
                name,
                "--start",
                str(start),
                "--count",
                str(count),
                *extra,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for raw in self.proc.stdout:
                line = raw.strip()
                if line == "ready":
                    self.ready.set()
                elif line == "done":
                    self.done.set()
                elif line.startswith("{"):
                    value = json.loads(line)
                    if "recovered" in value:
                        self.recovered = value["recovered"]
                    else:
                        self.on_line(value)
        finally:
            self.ended.set()

    def kill(self) -> bool:
        """SIGKILL the process if it still runs; whether it did."""
        if self.proc.poll() is not None:
            return False
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        return True

    def join(self, what: str, log: Path) -> None:
        """Wait for the end of the output; a process that failed by itself is an error."""
        self.ended.wait(30)
        code = self.proc.wait(30)
        if code not in (0, -signal.SIGKILL):
            raise RuntimeError(
                f"worker {self.name} exited {code} during {what}; its stderr is in {log}"
            )


@dataclass
class Figures:
    """What one backend's run measured."""

    backend: str
    kills: int = 0
    early_kills: int = 0
    lives: int = 0
    finished_lives: int = 0
    operations: int = 0
    in_call_kills: int = 0
    recovered: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    reconcile_posts: int = 0
    duplicates: list[str] = field(default_factory=list)
    double_executions: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    failed_honestly: list[str] = field(default_factory=list)
    unrequested: list[str] = field(default_factory=list)
    ledger_mismatches: list[str] = field(default_factory=list)
    told_mismatches: list[str] = field(default_factory=list)
    call_states: Counter[str] = field(default_factory=Counter)
    non_terminal: int = 0
    audit_ok: bool = False
    audit_records: int = 0
    audit_problems: tuple[str, ...] = ()
    wal_bound: int | None = None
    wal_bound_source: str = ""
    wal_max_after_kill: int = 0
    wal_max_polled: int = 0
    wal_end_of_kills: int = 0
    wal_after_finish: int = 0
    db_size: int = 0
    kill_seconds: float = 0.0
    seconds: float = 0.0

    def failures(self) -> list[str]:
        out = []
        for name in ("duplicates", "double_executions", "lost", "ledger_mismatches"):
            if getattr(self, name):
                out.append(f"{name.replace('_', ' ')}: {len(getattr(self, name))}")
        if self.told_mismatches:
            out.append(f"told mismatches: {len(self.told_mismatches)}")
        if self.non_terminal:
            out.append(f"calls not terminal: {self.non_terminal}")
        if not self.audit_ok:
            out.append("audit chain broken")
        if self.wal_bound is not None:
            worst = max(self.wal_max_after_kill, self.wal_max_polled, self.wal_end_of_kills)
            if worst > self.wal_bound:
                out.append(f"WAL {mb(worst)} over its bound {mb(self.wal_bound)}")
        return out


class Scenario:
    """One backend's run: kill phase, finish phase, checks."""

    def __init__(
        self, backend: str, ledger: str, kills: int, seed: int, root: Path, wal: Path | None
    ) -> None:
        self.backend = backend
        self.ledger = ledger
        self.target = kills
        self.seed = seed
        self.root = root
        self.wal = wal
        self.fig = Figures(backend=backend)
        if wal is not None:
            self.fig.wal_bound, self.fig.wal_bound_source = wal_bound()
        self.lock = threading.Lock()
        self.charged: set[int] = set()
        self.frontier = 0
        self.handed_out = 0
        self.told: dict[str, set[str | None]] = {}
        self.errors: list[BaseException] = []
        self.total_ops = kills * WINDOW + 4 * WINDOW
        self.ops = root / "ops.json"
        self.ops.write_text(
            json.dumps(
                [{"operation_id": op_id(i), "amount": 100 + i % 900} for i in range(self.total_ops)]
            )
        )
        self.started = time.monotonic()

    # -- shared state ------------------------------------------------------------

    def on_line(self, line: dict[str, Any]) -> None:
        with self.lock:
            status = line["status"] + (f" ({line['rule']})" if line.get("rule") else "")
            self.fig.statuses[status] += 1
            if line["status"] == "ok":
                self.charged.add(op_index(line["op"]))
                self.told.setdefault(line["op"], set()).add(line.get("charge"))

    def next_window(self, rng: random.Random) -> int:
        with self.lock:
            while self.frontier in self.charged:
                self.frontier += 1
            start = max(0, self.frontier - rng.randint(0, 3))
            start = min(start, self.total_ops - WINDOW)
            self.handed_out = max(self.handed_out, start + WINDOW)
            return start

    def wal_size(self) -> int:
        if self.wal is None:
            return 0
        try:
            return self.wal.stat().st_size
        except FileNotFoundError:
            return 0

    def settle_life(self, life: Life, killed: bool, early: bool) -> None:
        with self.lock:
            self.fig.lives += 1
            for _, status, how in life.recovered:
                self.fig.recovered[f"{status} ({how})"] += 1
            self.fig.in_call_kills += len(life.recovered)
            for call_id, status, _ in life.recovered:
                if status == "ok":
                    self.charged.add(op_index(call_id))
            if killed:
                self.fig.kills += 1
                self.fig.early_kills += early
                self.fig.wal_max_after_kill = max(self.fig.wal_max_after_kill, self.wal_size())
                if self.fig.kills % PROGRESS_EVERY == 0:
                    self.progress()
            else:
                self.fig.finished_lives += 1

    def progress(self) -> None:
        wal = f", WAL max {mb(self.fig.wal_max_after_kill)}" if self.wal is not None else ""
        print(
            f"[{self.backend}] {self.fig.kills}/{self.target} kills, "
            f"{self.fig.in_call_kills} inside a call, {len(self.charged)} operations charged"
            f"{wal}, {time.monotonic() - self.started:.0f} s",
            file=sys.stderr,
            flush=True,
        )

    # -- phases ------------------------------------------------------------------

    def worker_loop(self, name: str, service: str, log_path: Path) -> None:
        rng = random.Random(f"{self.seed}-{self.backend}-{name}")
        with log_path.open("a") as log:
            while not self.errors:
                with self.lock:
                    if self.fig.kills >= self.target:
                        return
                start = self.next_window(rng)
                life = Life(self.ledger, service, self.ops, name, start, WINDOW, log, self.on_line)
                early = rng.random() < EARLY
                if early:
                    life.ended.wait(rng.uniform(*EARLY_WINDOW))
                else:
                    if not life.ready.wait(START_TIMEOUT):
                        life.kill()
                        raise RuntimeError(
                            f"worker {name} was not ready after {START_TIMEOUT:.0f} s; "
                            f"its stderr is in {log_path}"
                        )
                    life.ended.wait(rng.uniform(0.0, MAX_DELAY))
                killed = life.kill()
                life.join("the kill phase", log_path)
                self.settle_life(life, killed, early)

    def poll_wal(self, stop: threading.Event) -> None:
        while not stop.wait(POLL):
            size = self.wal_size()
            with self.lock:
                self.fig.wal_max_polled = max(self.fig.wal_max_polled, size)

    def kill_phase(self, service: str) -> None:
        stop = threading.Event()
        poller = threading.Thread(target=self.poll_wal, args=(stop,), daemon=True)
        poller.start()

        def guarded(name: str) -> None:
            try:
                self.worker_loop(name, service, self.root / f"{name}.log")
            except BaseException as exc:
                self.errors.append(exc)

        threads = [threading.Thread(target=guarded, args=(n,)) for n in WORKERS]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stop.set()
        poller.join()
        if self.errors:
            raise self.errors[0]
        self.fig.wal_end_of_kills = self.wal_size()
        self.fig.kill_seconds = time.monotonic() - self.started

    def finish_phase(self, service: str) -> None:
        """Both workers recover, then both submit every operation handed out, unkilled."""
        self.fig.operations = self.handed_out
        logs = [(self.root / f"{name}.log").open("a") for name in WORKERS]
        try:
            lives = [
                Life(
                    self.ledger,
                    service,
                    self.ops,
                    name,
                    0,
                    self.handed_out,
                    log,
                    self.on_line,
                    "--wait-go",
                )
                for name, log in zip(WORKERS, logs, strict=True)
            ]
            for life in lives:
                if not life.ready.wait(START_TIMEOUT):
                    raise RuntimeError(f"worker {life.name} was not ready for the finish phase")
            for life in lives:
                assert life.proc.stdin is not None
                life.proc.stdin.write("go\n")
                life.proc.stdin.flush()
            for life in lives:
                if not life.ended.wait(FINISH_TIMEOUT):
                    raise RuntimeError(f"worker {life.name} did not finish the finish phase")
                life.join("the finish phase", self.root / f"{life.name}.log")
                if not life.done.is_set():
                    raise RuntimeError(f"worker {life.name} ended without 'done'")
                self.settle_life(life, killed=False, early=False)
        finally:
            for log in logs:
                log.close()
        self.fig.wal_after_finish = self.wal_size()

    # -- checks ------------------------------------------------------------------

    def check(self, service: Service, ledger: Ledger) -> None:
        fig = self.fig
        requested = {op_id(i) for i in range(self.handed_out)}
        charges = service.get("/charges")
        requests = service.get("/requests")
        by_op: Counter[str] = Counter(c["operation_id"] for c in charges)
        made: dict[str, set[str | None]] = {}
        for c in charges:
            made.setdefault(c["operation_id"], set()).add(c["charge_id"])
        fig.duplicates = sorted(op for op, n in by_op.items() if n > 1)
        fig.unrequested = sorted(set(by_op) - requested)
        handler = Counter(r["key"] for r in requests if r["source"] == "handler")
        fig.double_executions = sorted(k for k, n in handler.items() if n > 1)
        fig.reconcile_posts = sum(1 for r in requests if r["source"] == "reconcile")

        calls = [c for c in ledger.calls() if c.tool == "charge"]
        fig.call_states = Counter(c.state.value for c in calls)
        fig.non_terminal = sum(1 for c in calls if not c.state.terminal)
        states: dict[str, set[CallState]] = {}
        outcomes: dict[str, set[str | None]] = {}
        for c in calls:
            states.setdefault(c.call_id, set()).add(c.state)
            if c.state is not CallState.OK or c.attempts == 0:
                continue  # a replay has no attempt of its own
            for a in ledger.attempts(c.run_id, c.call_id):
                if a.outcome is not None and a.outcome.status == "ok":
                    outcomes.setdefault(c.call_id, set()).add(named_charge(a.outcome.content))
        for op in sorted(requested - set(by_op)):
            said = states.get(op, set())
            if said & {CallState.ERROR, CallState.UNKNOWN}:
                fig.failed_honestly.append(op)
            else:
                fig.lost.append(op)
        for op, by_service in sorted(made.items()):
            if outcomes.get(op, set()) != by_service:
                fig.ledger_mismatches.append(op)
            if not self.told.get(op, set()) <= by_service:
                fig.told_mismatches.append(op)
        check = ledger.verify()
        fig.audit_ok, fig.audit_records, fig.audit_problems = (
            check.ok,
            check.records,
            check.problems,
        )

    def run(self) -> Figures:
        service = Service(self.root / "bank.db")
        try:
            self.kill_phase(service.url)
            print(
                f"[{self.backend}] {self.fig.kills} kills in {self.fig.kill_seconds:.0f} s; "
                f"finishing: both workers submit all {self.handed_out} operations",
                file=sys.stderr,
                flush=True,
            )
            self.finish_phase(service.url)
            ledger = open_ledger(self.ledger)
            try:
                self.check(service, ledger)
            finally:
                ledger.close()
        finally:
            service.stop()
        if self.wal is not None:
            self.fig.db_size = self.wal.with_name(self.wal.name.removesuffix("-wal")).stat().st_size
        self.fig.seconds = time.monotonic() - self.started
        return self.fig


def named_charge(content: str) -> str | None:
    try:
        value = json.loads(content)
    except ValueError:
        return None
    charge = value.get("charge_id") if isinstance(value, dict) else None
    return charge if isinstance(charge, str) else None


def open_ledger(spec: str) -> Ledger:
    kind, _, target = spec.partition(":")
    return SQLiteLedger(target) if kind == "sqlite" else PostgresLedger(target)


def report(fig: Figures) -> list[str]:
    def some(ops: list[str]) -> str:
        return f"{len(ops)}" + (f" (e.g. {', '.join(ops[:5])})" if ops else "")

    reached_before = fig.in_call_kills - fig.reconcile_posts
    lines = [
        f"{fig.backend}: {fig.kills} kills ({fig.early_kills} during start-up or recovery), "
        f"{fig.lives} worker lives, 2 competing workers, {fig.operations} operations, "
        f"{fig.seconds:.0f} s ({fig.kill_seconds:.0f} s killing)",
        f"  kills inside a call (attempt recorded, outcome not): {fig.in_call_kills} "
        f"(charge not yet made: {fig.reconcile_posts}, made: {reached_before})",
        f"  recovery settled: {dict(fig.recovered.most_common())}",
        f"  worker observations: {dict(fig.statuses.most_common())}",
        f"  duplicates (an operation charged twice): {some(fig.duplicates)}",
        f"  double executions (a handler sent a charge twice): {some(fig.double_executions)}",
        f"  lost (never charged; ledger says nothing or ok): {some(fig.lost)}",
        f"  not charged, ledger says error/unknown: {some(fig.failed_honestly)}",
        f"  charges for operations never requested: {some(fig.unrequested)}",
        f"  ledger = provider record: {fig.operations - len(fig.ledger_mismatches)}/"
        f"{fig.operations} operations; mismatches {some(fig.ledger_mismatches)}; "
        f"workers told another charge: {some(fig.told_mismatches)}",
        f"  calls: {dict(fig.call_states.most_common())}; not terminal: {fig.non_terminal}",
        f"  audit chain intact: {'yes' if fig.audit_ok else 'NO'} ({fig.audit_records} records)"
        + (f"; {fig.audit_problems[:3]}" if fig.audit_problems else ""),
    ]
    if fig.wal_bound is not None:
        worst = max(fig.wal_max_after_kill, fig.wal_max_polled, fig.wal_end_of_kills)
        lines.append(
            f"  WAL: max {mb(fig.wal_max_after_kill)} after a kill, {mb(fig.wal_max_polled)} "
            f"polled, {mb(fig.wal_end_of_kills)} at the end of the kill phase, "
            f"{mb(fig.wal_after_finish)} after the clean finish (database {mb(fig.db_size)}); "
            f"bound {mb(fig.wal_bound)} ({fig.wal_bound_source}): "
            + ("under" if worst <= fig.wal_bound else "OVER")
        )
    failures = fig.failures()
    lines.append(f"  result: {'PASS' if not failures else 'FAIL: ' + '; '.join(failures)}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sqlite-kills", type=int, default=SQLITE_KILLS)
    parser.add_argument("--pg-kills", type=int, default=PG_KILLS)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--root",
        help="directory for the ledgers, the service's record and the workers' logs "
        "(kept); default: a temporary directory, removed after the run",
    )
    parser.add_argument("--json", help="also write the figures to this file as JSON")
    args = parser.parse_args()
    pg: ModuleType | None = None
    if args.pg_kills > 0:
        pg = load_pgcluster()
        reason = pg.missing_reason()
        if reason is not None:
            raise SystemExit(f"cannot run the PostgreSQL part: {reason}; or pass --pg-kills 0")
    root = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="callgate-crash-"))
    root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results: list[Figures] = []
    try:
        if args.sqlite_kills > 0:
            where = root / "sqlite"
            where.mkdir(exist_ok=True)
            db = where / "callgate.db"
            SQLiteLedger(db).close()  # the schema, before two workers race to create it
            scenario = Scenario(
                "sqlite", f"sqlite:{db}", args.sqlite_kills, args.seed, where, Path(f"{db}-wal")
            )
            results.append(scenario.run())
        if pg is not None:
            where = root / "postgres"
            where.mkdir(exist_ok=True)
            cluster = pg.acquire()
            try:
                dsn = cluster.create_database()
                PostgresLedger(dsn).close()
                scenario = Scenario(
                    "postgres", f"postgres:{dsn}", args.pg_kills, args.seed, where, None
                )
                results.append(scenario.run())
            finally:
                pg.release()
    finally:
        if not args.root:
            shutil.rmtree(root, ignore_errors=True)
    for fig in results:
        print("\n".join(report(fig)))
    print(f"total {time.monotonic() - started:.0f} s; seed {args.seed}; {os.cpu_count()} CPUs")
    if args.json:
        Path(args.json).write_text(
            json.dumps([figures_json(f) for f in results], indent=2, default=list)
        )
    if any(f.failures() for f in results):
        sys.exit(1)


def figures_json(fig: Figures) -> dict[str, Any]:
    out = dict(vars(fig))
    out["failures"] = fig.failures()
    return out


if __name__ == "__main__":
    main()

"""What durability costs: calls per second through the SQLite ledger, and syncs per call.

Baselines, measured in the same run on the same disk: a *bare* SQLite ledger
(WAL, ``synchronous=FULL``) that commits an attempt row before the effect and
an outcome row after it (two syncs per call), and the same with 16 calls
sharing each of the two commits.

callgate rows:

* ``ledger side`` / ``ledger read``: the execute stage as the gate drives it
  (admission record, attempt claim, handler, outcome) through `SQLiteLedger`,
  for a side-effecting and a read-only tool, one call at a time;
* ``ledger API side x16``: 16 concurrent side-effecting calls through the
  ledger's own API only (decision, ``abegin_attempt``, effect,
  ``afinish_attempt``; group commit), reported per call;
* ``ledger side x16``: the same through the execute stage's async driver;
* ``gate ...``: the whole pipeline (``run.submit`` / ``run.asubmit``: parse,
  validate, authorize, ledger, execute), with `SQLiteLedger` and, for
  reference, with `MemoryLedger`; ``gate side sqlite async`` is a lone call at
  a time through ``run.asubmit`` (its sync handler in a worker thread, one hop a
  call), ``gate side sqlite async, async tool`` the same with the ``async def``
  twin of the tool, which runs on the loop (no hop).

Syncs (``fsync`` + ``fdatasync``) are counted with ``strace -f -y`` when it
is installed: each row runs once more in a child process, with N calls and
with none, and the difference is divided by N. A sync of the database file
marks a checkpoint (copying the WAL back): those are reported apart, doubled
for the WAL sync that comes with each.

SQLite statements per call (``stmts/call``) are counted with the connection's trace
callback in a run of their own (a run of N calls less one of N/2): the CPU a durable
call costs beyond the bare ledger is mostly statements and the Python around them.

Run: ``.venv/bin/python benchmarks/ledger.py`` (about a minute). Targets:
read-only calls add no synchronous sync; a side-effecting call costs at most
2 syncs and at most 1.2x the bare ledger; at most 40 µs per call in batches
of 16.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import anyio

from callgate import Authority, Gate, MemoryLedger, Registry, ToolCall
from callgate.canonical import digest
from callgate.evidence import Evidence
from callgate.execute import Admitted, ExecutionSettings, execute_async, execute_sync
from callgate.ledger import AttemptFinish, AttemptStart, CallRecord, CallState, Ledger, Outcome
from callgate.ledger.sqlite import SQLiteLedger
from callgate.redact import Redactor
from callgate.tools import ToolSpec

SEQ_CALLS = 1500
BATCHES = 60
BATCH = 16
REPEATS = 5
CLOCK = {"clock": time.perf_counter}
"""What a row times: wall time, or this process's CPU time (``--cpu``)."""
STATEMENTS: list[int] = []
"""While a row runs to count statements (`count_statements`): one entry per statement its
SQLite connections sent (those SQLite runs inside one, traced as ``-- ...``, left out)."""
COUNTING = {"on": False}


def _clock() -> float:
    return CLOCK["clock"]()


registry = Registry()


@registry.tool(effects="spend:USD", writes="charge:{operation_id}")
def charge(operation_id: str, amount: int) -> dict[str, Any]:
    """Charge a card (a no-op here: the benchmark measures what surrounds the effect)."""
    return {"operation_id": operation_id, "amount": amount}


@registry.tool(effects="spend:USD", writes="charge:{operation_id}")
async def charge_async(operation_id: str, amount: int) -> dict[str, Any]:
    """The async twin of `charge`."""
    return {"operation_id": operation_id, "amount": amount}


@registry.tool(effects="read:orders")
def lookup(operation_id: str, amount: int) -> dict[str, Any]:
    """A read-only tool."""
    return {"operation_id": operation_id, "amount": amount}


AUTHORITY = Authority(principal="bench", grants=["spend:USD", "read:orders"])
REDACTOR = Redactor()
SETTINGS = ExecutionSettings()


def _tmpdb(root: str, name: str) -> str:
    return os.path.join(tempfile.mkdtemp(dir=root), name)


# -- bare baseline ----------------------------------------------------------------


def _traced(conn: sqlite3.Connection) -> None:
    """Count the statements ``conn`` sends while `COUNTING` is on."""
    if COUNTING["on"]:
        conn.set_trace_callback(lambda s: None if s.startswith("--") else STATEMENTS.append(1))


def _bare(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    _traced(conn)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(
        "CREATE TABLE attempts (id INTEGER PRIMARY KEY, call_id TEXT NOT NULL, "
        "started_at REAL NOT NULL, status TEXT, finished_at REAL)"
    )
    return conn


def bare_seq(root: str, n: int) -> float:
    conn = _bare(_tmpdb(root, "bare.db"))
    cur = conn.cursor()
    t0 = _clock()
    for i in range(n):
        cur.execute("BEGIN IMMEDIATE")
        cur.execute("INSERT INTO attempts (call_id, started_at) VALUES (?, ?)", (f"c{i}", 1.0))
        rowid = cur.lastrowid
        cur.execute("COMMIT")
        charge.fn(f"op{i}", 1)
        cur.execute("BEGIN IMMEDIATE")
        cur.execute("UPDATE attempts SET status = 'ok', finished_at = ? WHERE id = ?", (2.0, rowid))
        cur.execute("COMMIT")
    elapsed = _clock() - t0
    conn.close()
    return elapsed / max(n, 1) * 1e6


def bare_batch(root: str, batches: int) -> float:
    conn = _bare(_tmpdb(root, "bare16.db"))
    cur = conn.cursor()
    t0 = _clock()
    for b in range(batches):
        cur.execute("BEGIN IMMEDIATE")
        ids = []
        for i in range(BATCH):
            cur.execute(
                "INSERT INTO attempts (call_id, started_at) VALUES (?, ?)", (f"c{b}_{i}", 1.0)
            )
            ids.append(cur.lastrowid)
        cur.execute("COMMIT")
        for i in range(BATCH):
            charge.fn(f"op{b}_{i}", 1)
        cur.execute("BEGIN IMMEDIATE")
        for rowid in ids:
            cur.execute(
                "UPDATE attempts SET status = 'ok', finished_at = ? WHERE id = ?", (2.0, rowid)
            )
        cur.execute("COMMIT")
    elapsed = _clock() - t0
    conn.close()
    return elapsed / max(batches * BATCH, 1) * 1e6


# -- callgate's execute stage -------------------------------------------------------


def _admitted(spec: ToolSpec, run_id: str, call_id: str, operation_id: str) -> Admitted:
    """An admitted call, as the gate hands it to the execute stage."""
    arguments = spec.arguments_model(operation_id=operation_id, amount=1)
    canonical = arguments.model_dump_json()
    now = time.time()
    key = f"{run_id}/{call_id}"
    record = CallRecord(
        run_id=run_id,
        call_id=call_id,
        tool=spec.name,
        tool_version=spec.version,
        principal=AUTHORITY.principal,
        arguments=canonical,
        state=CallState.ADMITTED,
        stage="policy",
        request_hash=digest(spec.name, canonical),
        idempotency_key=key,
        decided_by="granted",
        created_at=now,
        updated_at=now,
    )
    return Admitted(
        record=record,
        call=ToolCall(id=call_id, name=spec.name, arguments=canonical),
        spec=spec,
        arguments=arguments,
        run_id=run_id,
        principal=AUTHORITY.principal,
        idempotency_key=key,
        request_hash=digest(spec.name, canonical),
    )


def _spec(name: str) -> ToolSpec:
    spec = registry.get(name)
    assert spec is not None
    return spec


def ledger_seq(ledger: Ledger, tool: str, n: int) -> float:
    spec = _spec(tool)
    items = [_admitted(spec, "run", f"c{i}", f"op{i}") for i in range(n)]
    evidence = Evidence()
    t0 = _clock()
    for item in items:
        assert item.record is not None
        ledger.record_decision(item.record)
        execute_sync(item, ledger, evidence, REDACTOR, SETTINGS)
    elapsed = _clock() - t0
    ledger.close()
    return elapsed / max(n, 1) * 1e6


def ledger_batch(ledger: Ledger, batches: int) -> float:
    spec = _spec("charge_async")
    groups = [
        [_admitted(spec, "run", f"c{b}_{i}", f"op{b}_{i}") for i in range(BATCH)]
        for b in range(batches)
    ]
    evidence = Evidence()

    async def main() -> float:
        t0 = _clock()
        for group in groups:
            async with anyio.create_task_group() as tg:
                for item in group:
                    assert item.record is not None
                    ledger.record_decision(item.record)
                    tg.start_soon(execute_async, item, ledger, evidence, REDACTOR, SETTINGS)
        return _clock() - t0

    elapsed = anyio.run(main)
    ledger.close()
    return elapsed / max(batches * BATCH, 1) * 1e6


def ledger_api_batch(ledger: Ledger, batches: int) -> float:
    """16 concurrent calls through the ledger's own API (decision, attempt, outcome) only."""
    spec = _spec("charge_async")
    groups = [
        [_admitted(spec, "run", f"c{b}_{i}", f"op{b}_{i}") for i in range(BATCH)]
        for b in range(batches)
    ]

    async def one(item: Admitted) -> None:
        assert item.record is not None
        ledger.record_decision(item.record)
        now = time.time()
        start = AttemptStart(
            run_id=item.run_id,
            call_id=item.call.id,
            tool=spec.name,
            tool_version=spec.version,
            attempt=1,
            idempotency_key=item.idempotency_key,
            request_hash=item.request_hash,
            started_at=now,
            key_expires_at=now + spec.key_retention,
            side_effecting=True,
        )
        await ledger.abegin_attempt(start)
        result = await charge_async.fn(item.call.id, 1)
        outcome = Outcome(status="ok", content=json.dumps(result), finished_at=time.time())
        await ledger.afinish_attempt(
            AttemptFinish(
                run_id=start.run_id,
                call_id=start.call_id,
                attempt=1,
                idempotency_key=start.idempotency_key,
                outcome=outcome,
            )
        )

    async def main() -> float:
        t0 = _clock()
        for group in groups:
            async with anyio.create_task_group() as tg:
                for item in group:
                    tg.start_soon(one, item)
        return _clock() - t0

    elapsed = anyio.run(main)
    ledger.close()
    return elapsed / max(batches * BATCH, 1) * 1e6


# -- the whole gate -----------------------------------------------------------------


def gate_seq(ledger: Ledger, tool: str, n: int) -> float:
    run = Gate(registry, ledger=ledger).run(authority=AUTHORITY)
    calls = [
        ToolCall(id=f"c{i}", name=tool, arguments={"operation_id": f"op{i}", "amount": 1})
        for i in range(n)
    ]
    t0 = _clock()
    for call in calls:
        run.submit([call])
    elapsed = _clock() - t0
    ledger.close()
    return elapsed / max(n, 1) * 1e6


def gate_aseq(ledger: Ledger, tool: str, n: int) -> float:
    """`gate_seq` through ``run.asubmit``: one lone call at a time on an event loop."""
    run = Gate(registry, ledger=ledger).run(authority=AUTHORITY)
    calls = [
        ToolCall(id=f"c{i}", name=tool, arguments={"operation_id": f"op{i}", "amount": 1})
        for i in range(n)
    ]

    async def main() -> float:
        t0 = _clock()
        for call in calls:
            await run.asubmit([call])
        return _clock() - t0

    elapsed = anyio.run(main)
    ledger.close()
    return elapsed / max(n, 1) * 1e6


def gate_batch(ledger: Ledger, batches: int) -> float:
    run = Gate(registry, ledger=ledger).run(authority=AUTHORITY)
    groups = [
        [
            ToolCall(
                id=f"c{b}_{i}",
                name="charge_async",
                arguments={"operation_id": f"op{b}_{i}", "amount": 1},
            )
            for i in range(BATCH)
        ]
        for b in range(batches)
    ]

    async def main() -> float:
        t0 = _clock()
        for group in groups:
            await run.asubmit(group)
        return _clock() - t0

    elapsed = anyio.run(main)
    ledger.close()
    return elapsed / max(batches * BATCH, 1) * 1e6


# -- rows -------------------------------------------------------------------------

Row = Callable[[str, int], float]


def _sqlite(root: str) -> SQLiteLedger:
    ledger = SQLiteLedger(_tmpdb(root, "callgate.db"))
    _traced(ledger._conn)
    return ledger


ROWS: dict[str, tuple[Row, str]] = {
    "bare 2 commits": (bare_seq, "seq"),
    "bare 2 commits x16": (bare_batch, "batch"),
    "ledger side": (lambda r, n: ledger_seq(_sqlite(r), "charge", n), "seq"),
    "ledger read": (lambda r, n: ledger_seq(_sqlite(r), "lookup", n), "seq"),
    "ledger API side x16": (lambda r, n: ledger_api_batch(_sqlite(r), n), "batch"),
    "ledger side x16": (lambda r, n: ledger_batch(_sqlite(r), n), "batch"),
    "gate side sqlite": (lambda r, n: gate_seq(_sqlite(r), "charge", n), "seq"),
    "gate read sqlite": (lambda r, n: gate_seq(_sqlite(r), "lookup", n), "seq"),
    "gate side sqlite async": (lambda r, n: gate_aseq(_sqlite(r), "charge", n), "seq"),
    "gate side sqlite async, async tool": (
        lambda r, n: gate_aseq(_sqlite(r), "charge_async", n),
        "seq",
    ),
    "gate side x16 sqlite": (lambda r, n: gate_batch(_sqlite(r), n), "batch"),
    "gate side memory": (lambda r, n: gate_seq(MemoryLedger(), "charge", n), "seq"),
    "gate side x16 memory": (lambda r, n: gate_batch(MemoryLedger(), n), "batch"),
}


def _size(kind: str, scale: float) -> int:
    return max(1, int((SEQ_CALLS if kind == "seq" else BATCHES) * scale))


def count_statements(name: str, root: str) -> float | None:
    """SQLite statements per call of one row (its setup and warm-up excluded: a run of N
    calls less a run of N/2, divided by N/2); None for a row without SQLite."""
    row, kind = ROWS[name]
    n = _size(kind, 0.2)
    counts = []
    for size in (n, n // 2):
        STATEMENTS.clear()
        COUNTING["on"] = True
        try:
            row(root, size)
        finally:
            COUNTING["on"] = False
        counts.append(len(STATEMENTS))
    calls = (n - n // 2) * (1 if kind == "seq" else BATCH)
    return (counts[0] - counts[1]) / calls if counts[0] else None


def count_syncs(name: str, root: str, scale: float) -> tuple[float, float] | None:
    """Syncs per call of one row, counted by strace in a child process: those of commits,
    and those of checkpoints (a checkpoint syncs the WAL and then the database file)."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    _, kind = ROWS[name]
    n = _size(kind, scale)
    calls = n if kind == "seq" else n * BATCH
    counts = []
    for size in (n, 0):
        out = os.path.join(root, "strace.txt")
        subprocess.run(
            [
                *(strace, "-f", "-y", "-e", "trace=fsync,fdatasync", "-o", out),
                *(sys.executable, __file__, "--only", name, "--size", str(size), "--root", root),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        with open(out) as f:
            paths = re.findall(r"f(?:data)?sync\(\d+<([^>]*)>\)", f.read())
        wal = sum(p.endswith("-wal") for p in paths)
        db = len(paths) - wal
        counts.append((wal - db, 2 * db))
    commit = (counts[0][0] - counts[1][0]) / calls
    checkpoint = (counts[0][1] - counts[1][1]) / calls
    return commit, checkpoint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the call counts")
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="time each row by this process's CPU time, not wall time: what callgate adds "
        "over the bare ledger without the wait for the disk",
    )
    parser.add_argument("--only", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cpu:
        CLOCK["clock"] = time.process_time
    if args.only:  # child process for strace: run one row once
        ROWS[args.only][0](args.root, args.size)
        return
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as root:
        samples: dict[str, list[float]] = {name: [] for name in ROWS}
        for row, kind in ROWS.values():  # warm-up
            row(root, max(1, _size(kind, args.scale) // 10))
        for _ in range(args.repeats):  # interleaved, so that disk noise hits every row alike
            for name, (row, kind) in ROWS.items():
                samples[name].append(row(root, _size(kind, args.scale)))
        medians = {name: statistics.median(v) for name, v in samples.items()}
        syncs = {name: count_syncs(name, root, args.scale / 3) for name in ROWS}
        statements = {name: count_statements(name, root) for name in ROWS}
    base = {"seq": medians["bare 2 commits"], "batch": medians["bare 2 commits x16"]}
    print("µs/call: CPU time of this process (--cpu)" if args.cpu else "µs/call: wall time")
    print(
        f"{'row':<34} {'µs/call':>9} {'calls/s':>9} {'vs bare':>8} "
        f"{'syncs/call':>11} {'+checkpoint':>12} {'stmts/call':>11}"
    )
    for name, (_, kind) in ROWS.items():
        us = medians[name]
        counted = syncs[name]
        commit = "n/a" if counted is None else f"{counted[0]:.3f}"
        background = "n/a" if counted is None else f"{counted[1]:.3f}"
        sent = statements[name]
        shown = "-" if sent is None else f"{sent:.2f}"
        print(
            f"{name:<34} {us:>9.1f} {1e6 / us:>9.0f} {us / base[kind]:>7.2f}x "
            f"{commit:>11} {background:>12} {shown:>11}"
        )
    seq, batch = _size("seq", args.scale), _size("batch", args.scale)
    print(
        f"medians of {args.repeats} interleaved repeats; sequential rows {seq} calls, "
        f"x16 rows {batch} batches of {BATCH}; syncs/call: in commits (the caller waits), "
        "+checkpoint: copying the WAL back (SQLite's automatic checkpoint in both; callgate's "
        "light commits only past 3,000 WAL pages); stmts/call: SQLite statements sent per "
        "call (sqlite3 trace callback, counted in a run of their own)"
    )
    print(
        "targets: read-only 0 syncs; side-effecting <= 2 syncs and <= 1.20x bare; x16 <= 40 µs/call"
    )


if __name__ == "__main__":
    main()

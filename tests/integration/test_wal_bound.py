"""The SQLite ledger's WAL stays under its bound whatever the processes writing it do.

Many processes write side-effecting calls to one SQLite ledger, a few at a
time. Half of them stop without ``close()`` (``os._exit`` after their last
call), half are SIGKILLed at a random moment (seeded), some of them while a
call is between "attempt recorded" and "outcome recorded". Checkpoints must
not depend on a process living long enough to run one: the size of the
``-wal`` file is sampled while the processes run and after each one ends, and
every sample, and the size at the end, must be under the bound the ledger
states (``callgate.ledger.sqlite.WAL_BOUND_BYTES``; 16 MiB if it states none).

Then the ledger verifies, and every call is terminal or recoverable: crash
recovery settles each call a killed process left running by its reconcile
hook, which reads the call's effect (a marker file, written by the handler)
and never guesses; afterwards every call is ``ok`` or ``error``, an ``ok``
call's effect exists and an ``error`` call's does not.

Run as a script, this module is one such writer process:
``python test_wal_bound.py LEDGER EFFECTS_DIR NAME CALLS``.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from callgate import Authority, CallContext, Gate, Registry, ToolCall, ToolFailure
from callgate.ledger import CallState, SQLiteLedger
from callgate.ledger import sqlite as sqlite_ledger

pytestmark = pytest.mark.integration

PROCESSES = 40
CALLS = 100
PARALLEL = 4
SEED = 20260114
DEFAULT_BOUND = 16 * 1024 * 1024
"""The bound when `callgate.ledger.sqlite` states none (``WAL_BOUND_BYTES``)."""
SAMPLE_EVERY = 0.02
"""Seconds between samples of the WAL's size while processes run."""


def wal_bound() -> int:
    """The WAL bound the SQLite ledger states, or `DEFAULT_BOUND`."""
    bound = getattr(sqlite_ledger, "WAL_BOUND_BYTES", None)
    return DEFAULT_BOUND if bound is None else int(bound)


def build_registry(effects: Path) -> Registry:
    """One side-effecting tool whose effect is a marker file named by its idempotency key."""
    registry = Registry()

    def marker(ctx: CallContext) -> Path:
        return effects / ctx.idempotency_key.replace("/", "_")

    def reconcile(args: Any, ctx: CallContext) -> dict[str, Any]:
        """The effect happened if its marker exists; otherwise it never did."""
        if marker(ctx).exists():
            return {"marked": args.n}
        raise ToolFailure("no marker: the effect did not happen")

    @registry.tool(effects="write:marker", idempotency_key="{name}-{n}", reconcile=reconcile)
    def mark(name: str, n: int, ctx: CallContext) -> dict[str, Any]:
        """Write the call's marker file."""
        marker(ctx).write_text(str(n))
        return {"marked": n}

    return registry


def writer(ledger_path: str, effects: str, name: str, calls: int) -> None:
    """Submit ``calls`` side-effecting calls one at a time, printing ``n`` after each, then
    stop without ``close()``."""
    ledger = SQLiteLedger(ledger_path, worker=name)
    gate = Gate(build_registry(Path(effects)), ledger=ledger)
    run = gate.run(authority=Authority(principal="wal", grants=["write:*"]), run_id=name)
    for n in range(calls):
        call = ToolCall(id=f"c{n}", name="mark", arguments={"name": name, "n": n})
        [obs] = run.submit([call])
        if obs.status.value != "ok":
            print(f"call {n}: {obs.status.value}: {obs.content}", file=sys.stderr, flush=True)
            os._exit(3)
        print(n, flush=True)
    os._exit(0)  # no close(): no last checkpoint


class Sampler:
    """The largest sizes of the WAL file seen, sampled from a thread."""

    def __init__(self, wal: Path) -> None:
        self.wal = wal
        self.samples: list[tuple[str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self, when: str) -> int:
        size = self.wal.stat().st_size if self.wal.exists() else 0
        self.samples.append((when, size))
        return size

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY):
            self.sample("while running")

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_process(
    ledger: Path, effects: Path, name: str, kill_after: int | None, delay: float
) -> tuple[str, int]:
    """One writer: let it exit by itself, or SIGKILL it ``delay`` s after its
    ``kill_after``-th call. How it ended and how many calls it reported."""
    proc = subprocess.Popen(
        [sys.executable, __file__, str(ledger), str(effects), name, str(CALLS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    done = 0
    if kill_after is not None:
        while done < kill_after and proc.stdout.readline():
            done += 1
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        return "killed", done
    done = sum(1 for _ in proc.stdout)
    code = proc.wait(60)
    assert proc.stderr is not None
    assert code == 0, f"{name} exited {code}: {proc.stderr.read()}"
    return "exited", done


def test_wal_stays_bounded_when_processes_exit_without_close_or_are_killed(
    tmp_path: Path,
) -> None:
    """40 processes that exit without close() or are SIGKILLed never grow the WAL past its bound,
    and every call ends terminal or recoverable."""
    ledger_path = tmp_path / "callgate.db"
    effects = tmp_path / "effects"
    effects.mkdir()
    SQLiteLedger(ledger_path).close()  # the schema, before the processes race to create it
    bound = wal_bound()
    rng = random.Random(SEED)
    plans = [
        (f"p{i:02d}", None if i % 2 == 0 else rng.randrange(1, CALLS), rng.uniform(0, 0.004))
        for i in range(PROCESSES)
    ]
    ended: dict[str, tuple[str, int]] = {}
    errors: list[BaseException] = []

    def one(name: str, kill_after: int | None, delay: float) -> None:
        try:
            ended[name] = run_process(ledger_path, effects, name, kill_after, delay)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            sampler.sample(f"after {name} ended")

    with Sampler(Path(f"{ledger_path}-wal")) as sampler:
        for start in range(0, PROCESSES, PARALLEL):
            threads = [
                threading.Thread(target=one, args=plan) for plan in plans[start : start + PARALLEL]
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    assert not errors, errors
    assert sorted(ended) == [name for name, _, _ in plans]
    after_all = sampler.sample("after every process ended")

    ledger = SQLiteLedger(ledger_path)
    try:
        check = ledger.verify()
        assert check.ok, check
        killed = {name for name, (how, _) in ended.items() if how == "killed"}
        running = ledger.calls(state=CallState.RUNNING)
        assert {c.run_id for c in running} <= killed, "a process that exited left a call running"
        assert running, "no kill landed inside a call: recovery was not exercised"
        report = Gate(build_registry(effects), ledger=ledger).recover()
        assert len(report.calls) == len(running)
        calls = ledger.calls()
        states = {c.state for c in calls}
        assert states <= {CallState.OK, CallState.ERROR}, states
        for c in calls:
            marked = (effects / (c.idempotency_key or "").replace("/", "_")).exists()
            assert marked == (c.state is CallState.OK), (c.call_id, c.state, marked)
        for name, (how, done) in ended.items():
            ok = sum(1 for c in calls if c.run_id == name and c.state is CallState.OK)
            assert ok >= done, f"{name} ({how}) reported {done} calls, the ledger has {ok} ok"
        assert ledger.verify().ok, "the ledger no longer verifies after recovery"
    finally:
        ledger.close()
    at_end = sampler.sample("at the end (after recovery and close)")

    over = [(when, size) for when, size in sampler.samples if size > bound]
    largest = max(size for _, size in sampler.samples)
    assert not over, (
        f"the WAL grew past its bound of {bound} bytes in {len(over)} of "
        f"{len(sampler.samples)} samples (largest {largest} bytes; first {over[0][0]}; "
        f"after every process ended {after_all} bytes, at the end {at_end} bytes): "
        "a checkpoint must not depend on a process living long enough to run it"
    )


if __name__ == "__main__":
    writer(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))

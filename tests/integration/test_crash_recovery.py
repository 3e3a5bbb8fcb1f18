"""Real processes, real kills: no charge made twice, no requested charge lost.

A worker process (charge_worker.py) sends a stream of non-idempotent charges
through a gate to a payment service in another process (payment_service.py),
which keeps its own durable record and honours idempotency keys. The test
kills the worker with SIGKILL at random moments (seeded), starts it again,
and finally lets it finish. Then:

* every call in the ledger is terminal (nothing left running or unknown);
* the service made exactly one charge per requested operation, and no other;
* no operation's handler sent its charge twice (the gate never ran it twice);
* the ledger agrees with the service: each operation's recorded outcome
  names the charge the service made.

The same against SQLite and PostgreSQL. A second test starts two workers on
one PostgreSQL ledger submitting the same idempotency key at the same moment:
exactly one executes.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from callgate.ledger import CallState, Ledger, PostgresLedger, SQLiteLedger

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent
OPERATIONS = 40
KILLS = 10
SEED = 20260105


@pytest.fixture
def service(tmp_path: Path) -> Iterator[str]:
    """The payment service process; its base URL."""
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "payment_service.py"), str(tmp_path / "bank.db")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("port "), line
    yield f"http://127.0.0.1:{int(line.split()[1])}"
    proc.terminate()
    proc.wait(10)


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def worker(ledger: str, service: str, ops: Path, name: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            str(HERE / "charge_worker.py"),
            "--ledger",
            ledger,
            "--service",
            service,
            "--ops",
            str(ops),
            "--worker",
            name,
            *extra,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def wait_for(proc: subprocess.Popen[str], word: str) -> list[str]:
    """Lines the worker printed up to ``word``."""
    assert proc.stdout is not None
    lines = []
    while True:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"worker exited ({proc.wait()}) before {word!r}: {lines}")
        lines.append(line.strip())
        if line.strip() == word:
            return lines


def crash_and_finish(ledger: str, service: str, tmp_path: Path) -> dict[str, int]:
    """Kill the worker KILLS times at random moments, then let it finish."""
    ops = tmp_path / "ops.json"
    requested = [{"operation_id": f"op-{i:03d}", "amount": 100 + i} for i in range(OPERATIONS)]
    ops.write_text(json.dumps(requested))
    rng = random.Random(SEED)
    recovered: Counter[str] = Counter()
    for _ in range(KILLS + 1):
        proc = worker(ledger, service, ops, "w1")
        for line in wait_for(proc, "ready"):
            if line.startswith("{"):
                recovered.update(status for _, status, _ in json.loads(line)["recovered"])
        if _ < KILLS:
            time.sleep(rng.uniform(0.0, 0.1))
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        else:
            wait_for(proc, "done")
            assert proc.wait(30) == 0
    return dict(recovered)


def check(ledger: Ledger, service: str) -> None:
    charges = get(f"{service}/charges")
    requests = get(f"{service}/requests")
    by_op = Counter(c["operation_id"] for c in charges)
    assert sorted(by_op) == [f"op-{i:03d}" for i in range(OPERATIONS)], "a charge was lost"
    assert set(by_op.values()) == {1}, f"charged twice: {by_op}"
    handler_posts = Counter(r["key"] for r in requests if r["source"] == "handler")
    assert set(handler_posts.values()) <= {1}, f"a handler ran twice: {handler_posts}"

    calls = [c for c in ledger.calls() if c.tool == "charge"]
    assert all(c.state.terminal for c in calls)
    assert {c.state for c in calls} <= {CallState.OK}, Counter(c.state for c in calls)
    charge_of = {c["operation_id"]: c["charge_id"] for c in charges}
    for op, charge_id in charge_of.items():
        outcomes = {
            json.loads(a.outcome.content)["charge_id"]
            for c in calls
            if c.call_id == op
            for a in ledger.attempts(c.run_id, c.call_id)
            if a.outcome is not None and a.outcome.status == "ok"
        }
        assert outcomes == {charge_id}, f"{op}: ledger {outcomes}, service {charge_id}"
    assert ledger.verify().ok


def test_sigkilled_sqlite_worker_neither_loses_nor_doubles_a_charge(
    service: str, tmp_path: Path
) -> None:
    """SIGKILLed SQLite workers, then recovery: no charge lost or doubled; a kill hit a call."""
    path = tmp_path / "callgate.db"
    recovered = crash_and_finish(f"sqlite:{path}", service, tmp_path)
    ledger = SQLiteLedger(path)
    try:
        check(ledger, service)
    finally:
        ledger.close()
    assert recovered.get("ok", 0) >= 1, f"no kill landed inside a call: {recovered}"


def test_sigkilled_postgres_worker_neither_loses_nor_doubles_a_charge(
    service: str, tmp_path: Path, pg_dsn: str
) -> None:
    """SIGKILLed PostgreSQL workers, then recovery: no charge lost or doubled; a kill hit a call."""
    recovered = crash_and_finish(f"postgres:{pg_dsn}", service, tmp_path)
    ledger = PostgresLedger(pg_dsn)
    try:
        check(ledger, service)
    finally:
        ledger.close()
    assert recovered.get("ok", 0) >= 1, f"no kill landed inside a call: {recovered}"


def test_two_workers_with_the_same_key_at_once_execute_it_once(
    service: str, tmp_path: Path, pg_dsn: str
) -> None:
    """Two workers with one key at once: one ok, one idempotency_in_progress, one charge."""
    ops = tmp_path / "one.json"
    ops.write_text(json.dumps([{"operation_id": "op-same", "amount": 42}]))
    spec = f"postgres:{pg_dsn}"
    procs = [worker(spec, service, ops, f"w{i}", "--hold", "0.5", "--wait-go") for i in (1, 2)]
    for proc in procs:
        wait_for(proc, "ready")
    for proc in procs:  # as close to the same moment as two pipes allow
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = []
    for proc in procs:
        lines = wait_for(proc, "done")
        results.append(json.loads(lines[-2]))
        assert proc.wait(30) == 0
    statuses = sorted((r["status"], r["rule"]) for r in results)
    assert statuses == [("ok", None), ("rejected", "idempotency_in_progress")], results
    assert len(get(f"{service}/charges")) == 1
    assert [r["source"] for r in get(f"{service}/requests")] == ["handler"]
    ledger = PostgresLedger(pg_dsn)
    try:
        attempts = [a for c in ledger.calls() for a in ledger.attempts(c.run_id, c.call_id)]
        assert len(attempts) == 1
    finally:
        ledger.close()

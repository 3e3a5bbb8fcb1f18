"""Real processes: A submits and exits with the refund pending; a person approves it with
``callgate approvals approve``; B resumes the run from the ledger and the refund runs once.
Two resumers started at the same moment: exactly one execution.

On SQLite (one file) and PostgreSQL. Executions are counted in the effects
file the tool appends to, across processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from approval_domain import effects
from typer.testing import CliRunner

from callgate.cli import app
from callgate.ledger import Ledger

BACKENDS = ["sqlite", "postgres"]
WORKER = Path(__file__).with_name("approval_worker.py")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def ledger_spec(make_ledger: Callable[..., Ledger]) -> str:
    return f"{make_ledger.backend}:{make_ledger.target}"  # type: ignore[attr-defined]


def worker(
    command: str, make_ledger: Callable[..., Ledger], effects_file: Path, run_id: str, *extra: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            str(WORKER),
            command,
            "--ledger",
            ledger_spec(make_ledger),
            "--effects",
            str(effects_file),
            "--run",
            run_id,
            *extra,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def finish(proc: subprocess.Popen[str]) -> list[dict[str, Any]]:
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return [json.loads(line) for line in out.splitlines() if line]


def approve(make_ledger: Callable[..., Ledger], approval_id: str) -> None:
    target: str = make_ledger.target  # type: ignore[attr-defined]
    where = ["--dsn", target] if make_ledger.backend == "postgres" else ["--db", target]  # type: ignore[attr-defined]
    result = CliRunner().invoke(app, ["approvals", "approve", approval_id, "--by", "maria", *where])
    assert result.exit_code == 0, result.output


def submit_in_a_process(make_ledger: Callable[..., Ledger], effects_file: Path) -> str:
    """Process A: the read runs, the refund waits; A exits. The approval id."""
    lines = finish(worker("submit", make_ledger, effects_file, "run-A"))
    assert [(o["call_id"], o["status"]) for o in lines] == [
        ("read-1", "ok"),
        ("refund-1", "pending"),
    ]
    approval_id: str = lines[1]["approval_id"]
    return approval_id


def test_a_run_stopped_in_one_process_resumes_in_another_and_runs_once(
    make_ledger: Callable[..., Ledger], tmp_path: Path
) -> None:
    """A run paused in one process resumes in another once approved, runs once, ledger verifies."""
    effects_file = tmp_path / "effects.jsonl"
    approval_id = submit_in_a_process(make_ledger, effects_file)
    assert effects(effects_file) == []

    still = finish(worker("resume", make_ledger, effects_file, "run-A"))
    assert still == [{"ready": [approval_id]}]  # not decided yet: nothing runs, it stays

    approve(make_ledger, approval_id)
    resumed = finish(worker("resume", make_ledger, effects_file, "run-A"))
    again = finish(worker("resume", make_ledger, effects_file, "run-A"))

    assert [(o.get("call_id"), o.get("status")) for o in resumed[1:]] == [("refund-1", "ok")]
    assert again == [{"ready": []}]
    assert effects(effects_file) == [{"tool": "refund", "order_id": "o1", "amount": 20.0}]
    ledger = make_ledger()
    call = ledger.get_call("run-A", "refund-1")
    assert call is not None
    assert call.state.value == "ok"
    assert ledger.verify().ok


def test_two_processes_resuming_at_once_execute_the_call_once(
    make_ledger: Callable[..., Ledger], tmp_path: Path
) -> None:
    """Two processes resuming one approved call at once: one ok, one rejected, one effect."""
    effects_file = tmp_path / "effects.jsonl"
    approval_id = submit_in_a_process(make_ledger, effects_file)
    approve(make_ledger, approval_id)
    procs = [worker("resume", make_ledger, effects_file, "run-A", "--wait-go") for _ in range(2)]
    for proc in procs:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline()) == {"ready": [approval_id]}
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()

    results = [finish(proc) for proc in procs]

    statuses = sorted(line["status"] for lines in results for line in lines)
    assert statuses == ["ok", "rejected"], results
    assert effects(effects_file) == [{"tool": "refund", "order_id": "o1", "amount": 20.0}]

"""benchmarks/scale.py runs end to end at a tiny size: every cell measured, both sides.

One worker, one thread, one process, one repeat of one second each, on the script's
own throwaway PostgreSQL cluster and SQLite files in a temporary directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "scale.py"


def _pg_missing() -> str | None:
    pgcluster = sys.modules["callgate_tests_pgcluster"]  # loaded by tests/conftest.py
    reason: str | None = pgcluster.missing_reason()
    return reason


def test_scale_benchmark_measures_every_cell_beside_its_floor(tmp_path: Path) -> None:
    """A tiny run prints the three tables and writes every sample, bare and callgate, to --json."""
    reason = _pg_missing()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and PostgreSQL is required: {reason}")
        pytest.skip(reason)
    out = tmp_path / "scale.json"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    done = subprocess.run(
        [
            *(sys.executable, str(SCRIPT), "--workers", "1", "--sqlite-threads", "1"),
            *("--sqlite-procs", "1", "--seconds", "1", "--repeats", "1", "--json", str(out)),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "BENCH_DIR": str(scratch)},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for title in ("PostgreSQL, worker processes", "SQLite, threads", "SQLite, processes"):
        assert title in done.stdout
    progress = [line for line in done.stderr.splitlines() if line.startswith("[repeat 1/1]")]
    assert len(progress) == 3, done.stderr
    figures = json.loads(out.read_text())
    cells = {(c["backend"], c["mode"], c["writers"]) for c in figures["cells"]}
    assert cells == {
        ("postgres", "processes", 1),
        ("sqlite", "threads", 1),
        ("sqlite", "processes", 1),
    }
    for cell in figures["cells"]:
        assert len(cell["bare_calls_per_s"]) == len(cell["callgate_calls_per_s"]) == 1
        assert cell["median_bare"] > 0
        assert cell["median_callgate"] > 0
        assert cell["median_ratio"] == cell["median_callgate"] / cell["median_bare"]
    assert figures["postgres"]["fsync"] == "on"
    assert figures["postgres"]["synchronous_commit"] == "on"
    assert list(scratch.iterdir()) == []  # its cluster and files were removed


FOOTPRINT = SCRIPT.with_name("ledger_footprint.py")


def test_footprint_benchmark_reports_every_figure_of_the_capacity_model(tmp_path: Path) -> None:
    """A tiny ledger_footprint.py run gives commits, WAL, syncs, rows and CPU per call."""
    reason = _pg_missing()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and PostgreSQL is required: {reason}")
        pytest.skip(reason)
    out = tmp_path / "footprint.json"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    done = subprocess.run(
        [
            *(sys.executable, str(FOOTPRINT), "--workers", "1", "--seconds", "1"),
            *("--settle", "1", "--sqlite-calls", "20", "--json", str(out)),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "BENCH_DIR": str(scratch)},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert [(r["kind"], r["workers"]) for r in figures["pg"]] == [("bare", 1), ("gate", 1)]
    for r in figures["pg"]:
        assert r["calls"] > 0
        for key in (
            "commit_records_per_call",
            "wal_bytes_per_call",
            "wal_records_per_call",
            "xact_commit_per_call",
            "server_cpu_us_per_call",
        ):
            assert r[key] > 0, key
        assert r["tables"], "no table grew"
    gate = figures["pg"][1]
    assert "journal" in gate["tables"]
    sqlite = figures["sqlite"]
    assert sqlite["calls"] == 20
    assert sqlite["tables"]["journal"]["rows_per_call"] > 0
    assert sqlite["written_bytes_per_call"] > 0
    assert list(scratch.iterdir()) == []

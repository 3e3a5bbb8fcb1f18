"""The lab's own cost, against what it cannot avoid, measured in one run.

1. **A lab run against its verifier.** The reference solution (policy
   ``oracle-fast``) played through the fine and coarse surfaces on 14 tasks of
   the shipped set, recorded in a SQLite ledger in a temporary directory.
   Baseline: the verifier's own pytest run (inside bubblewrap where the
   sandbox can run), timed inside the same run (``eval.verdict`` records its
   seconds). Prints the median seconds of a
   whole run (repository generated, agent loop, every call through the gate,
   verification, records) and of its verifier, and their ratio.
2. **The funnel against reading the ledger.** ``read_runs`` + ``funnel``
   (1000 bootstrap resamples) over that ledger against ``ledger.audit()``
   alone, median of 5 repeats, and their ratio.

Run: ``.venv/bin/python benchmarks/lab.py``. Nothing is written outside a
temporary directory.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from callgate.eval import funnel, load_tasks, policy_named, read_runs, run_lab
from callgate.ledger import SQLiteLedger

REPEATS = 5


def main() -> None:
    """Run both measurements and print them."""
    with tempfile.TemporaryDirectory(prefix="callgate-bench-lab-") as tmp:
        ledger = SQLiteLedger(Path(tmp) / "lab.db")
        tasks = load_tasks("repo:14")
        oracle = policy_named("oracle-fast")
        runs = run_lab(tasks, ["fine", "coarse"], oracle.model, ledger, workdir=Path(tmp))
        verifier = [float(r.data["seconds"]) for r in ledger.audit() if r.kind == "eval.verdict"]
        whole = [r.seconds for r in runs]
        passed = sum(r.passed for r in runs)
        print(f"lab: {len(runs)} runs of 14 tasks x 2 surfaces, {passed} passed")
        w, v = statistics.median(whole), statistics.median(verifier)
        print(f"  whole run   median {w * 1000:7.1f} ms")
        print(f"  verifier    median {v * 1000:7.1f} ms (its pytest, in the sandbox here)")
        print(f"  ratio       {w / v:.2f}x")
        audit_times, funnel_times = [], []
        for _ in range(REPEATS):
            start = time.perf_counter()
            ledger.audit()
            audit_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            funnel(read_runs(ledger), reps=1000)
            funnel_times.append(time.perf_counter() - start)
        records = len(ledger.audit())
        a, f = statistics.median(audit_times), statistics.median(funnel_times)
        print(f"funnel over {records} records ({len(runs)} runs), median of {REPEATS}:")
        print(
            f"  ledger.audit()        {a * 1000:7.1f} ms\n"
            f"  read_runs + funnel    {f * 1000:7.1f} ms\n"
            f"  ratio                 {f / a:.2f}x"
        )
        ledger.close()


if __name__ == "__main__":
    main()

"""The console's page times on a ledger of many runs, against reading the same data bare.

Builds a SQLite ledger of RUNS runs (8 reads each, a refund waiting for a person in
every fourth), then, in one process and run, takes the median of 15 requests of each
page through Starlette's test client, and of the ledger reads each page makes on its
own (the baseline). The run and call pages reuse the chain's verification while the
journal's head is unchanged (`create_app(verify_every=...)`); the first view after a
change pays `Ledger.verify()`, measured on its own. (Diagnostic: no target.)

    .venv/bin/python benchmarks/console.py [RUNS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from callgate import Authority, Gate, Policy, Registry, SQLiteLedger, ToolCall, allow, ask
from callgate.console import NoAuth, create_app


def _median_ms(fn: Callable[[], Any], n: int = 15) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main(runs: int) -> None:
    registry = Registry()

    @registry.tool(effects="read:orders", risk="read")
    def get_order(order_id: str) -> dict[str, Any]:
        """Read an order."""
        return {"order_id": order_id, "total": 60.0}

    @registry.tool(effects="spend:USD={amount}")
    def refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        return "refunded"

    policy = Policy([allow("get_order"), ask("refund")])
    authority = Authority(principal="bot", grants=["read:orders", "spend:USD<=100"])
    with tempfile.TemporaryDirectory() as tmp:
        ledger = SQLiteLedger(Path(tmp) / "calls.db")
        gate = Gate(registry, policy=policy, ledger=ledger)
        ids = []
        for i in range(runs):
            run = gate.run(authority=authority)
            run.submit(
                [
                    ToolCall(id=f"r{j}", name="get_order", arguments={"order_id": f"o-{j}"})
                    for j in range(8)
                ]
            )
            if i % 4 == 0:
                run.submit(
                    [ToolCall(id="f", name="refund", arguments={"order_id": "o-1", "amount": 5})]
                )
            ids.append(run.id)
        records, calls = len(ledger.audit()), len(ledger.calls())
        pending = len(ledger.approvals().list())
        client = TestClient(create_app(ledger, auth=NoAuth("bench")))
        run_id = ids[len(ids) // 2]
        pages = {
            "/approvals": (
                lambda: client.get("/approvals"),
                lambda: [
                    ledger.records(run_id=r.run_id, call_id=r.call_id)
                    for r in ledger.approvals().list()
                ],
            ),
            "/runs": (lambda: client.get("/runs"), lambda: ledger.calls(newest=2000)),
            "/run": (
                lambda: client.get("/run", params={"id": run_id}),
                lambda: (ledger.records(run_id=run_id), ledger.calls(run_id=run_id)),
            ),
            "/call": (
                lambda: client.get("/call", params={"run": run_id, "id": "r0"}),
                lambda: (
                    ledger.get_call(run_id, "r0"),
                    ledger.records(run_id=run_id, call_id="r0"),
                    ledger.attempts(run_id, "r0"),
                ),
            ),
        }
        print(f"{runs} runs: {records} records, {calls} calls, {pending} approval requests")
        print(
            f"Ledger.verify() (the first run or call page after a change): "
            f"{_median_ms(ledger.verify, 5):.1f} ms"
        )
        print(f"{'page':<11} {'page ms':>8} {'bare reads ms':>14} {'ratio':>6}")
        for path, (page, bare) in pages.items():
            assert page().status_code == 200
            p, b = _median_ms(page), _median_ms(bare)
            print(f"{path:<11} {p:>8.1f} {b:>14.1f} {p / b:>6.1f}")
        ledger.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 250)

"""Budgets (issue 28): ``spend:USD<=50/run`` bounds the sum over a run, and
``spend:USD<=100/day`` the sum over a principal's day across runs, as well as each call.

The budget is kept in the ledger (the charge is in the ``attempt.started`` record) and
checked in the transaction that starts the attempt, so concurrent calls never both see
the same remaining budget. Before budgets, ``spend:USD<=50`` was per call: ten refunds
of 50 in one run all ran.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from callgate import Authority, Gate, Registry, Status, ToolCall, ToolFailure
from callgate.ledger import Ledger


class Refunds:
    """A refund service that counts what it refunded; ``fail`` makes the next one fail."""

    def __init__(self) -> None:
        self.done: list[float] = []
        self.fail = False
        self.lock = threading.Lock()

    def gate(self, ledger: Ledger) -> Gate:
        registry = Registry()

        @registry.tool(effects="spend:{currency}={amount}")
        def refund(order_id: str, amount: float, currency: str) -> dict[str, Any]:
            """Refund an order."""
            with self.lock:
                if self.fail:
                    self.fail = False
                    raise ToolFailure("the card was declined; nothing was refunded")
                self.done.append(amount)
            return {"refunded": amount}

        return Gate(registry, ledger=ledger)


def refund(n: int, amount: float = 50) -> ToolCall:
    return ToolCall(
        id=f"r{n}",
        name="refund",
        arguments={"order_id": f"o{n}", "amount": amount, "currency": "USD"},
    )


PER_RUN = Authority(principal="ana", grants=["spend:USD<=50/run"])


def test_ten_refunds_of_50_in_one_batch_run_once(make_ledger: Callable[..., Ledger]) -> None:
    """Ten concurrent refunds of 50 under ``spend:USD<=50/run``: one runs, nine are refused
    before their handler, saying which budget."""
    refunds = Refunds()
    ledger = make_ledger()
    run = refunds.gate(ledger).run(authority=PER_RUN)
    observations = run.submit([refund(n) for n in range(10)])
    assert refunds.done == [50]
    assert ledger.verify().ok, ledger.verify().problems
    assert sorted(o.status.value for o in observations) == ["ok"] + ["rejected"] * 9
    refused = [o for o in observations if o.status is Status.REJECTED]
    assert all("over budget" in o.content and "spend:USD<=50/run" in o.content for o in refused)


def test_a_budget_is_per_run_and_a_call_over_the_bound_is_refused(
    make_ledger: Callable[..., Ledger],
) -> None:
    """Another run has its own 50; a single refund of 60 is over the bound itself."""
    refunds = Refunds()
    gate = refunds.gate(make_ledger())
    first, second = gate.run(authority=PER_RUN), gate.run(authority=PER_RUN)
    assert [o.status for o in first.submit([refund(1, 30)])] == [Status.OK]
    assert [o.status for o in first.submit([refund(2, 30)])] == [Status.REJECTED]
    assert [o.status for o in first.submit([refund(3, 20)])] == [Status.OK]
    assert [o.status for o in second.submit([refund(1, 60)])] == [Status.REJECTED]
    assert [o.status for o in second.submit([refund(4, 50)])] == [Status.OK]
    assert refunds.done == [30, 20, 50]


def test_a_failed_refund_gives_its_budget_back(make_ledger: Callable[..., Ledger]) -> None:
    """An attempt that ends ``error`` (the effect did not happen) spends nothing."""
    refunds = Refunds()
    run = refunds.gate(make_ledger()).run(authority=PER_RUN)
    refunds.fail = True
    assert [o.status for o in run.submit([refund(1)])] == [Status.ERROR]
    assert [o.status for o in run.submit([refund(2)])] == [Status.OK]
    assert refunds.done == [50]


def test_a_daily_budget_holds_across_concurrent_runs_and_ledger_objects(
    make_ledger: Callable[..., Ledger],
) -> None:
    """``spend:USD<=100/day``: six runs of one principal, each on its own ledger object (as
    separate processes would be) on the same database, refunding 50 at once: two run."""
    refunds = Refunds()
    daily = Authority(principal="ana", grants=["spend:USD<=100/day"])
    gates = [refunds.gate(make_ledger()) for _ in range(6)]
    start = threading.Barrier(len(gates))
    statuses: list[Status] = []

    def one(n: int) -> None:
        run = gates[n].run(authority=daily)
        start.wait()
        statuses.extend(o.status for o in run.submit([refund(n)]))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(len(gates))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert refunds.done == [50, 50]
    assert sorted(s.value for s in statuses) == ["ok", "ok"] + ["rejected"] * 4
    other = Authority(principal="ben", grants=["spend:USD<=100/day"])
    assert [o.status for o in gates[0].run(authority=other).submit([refund(9)])] == [Status.OK]

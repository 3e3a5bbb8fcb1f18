"""Budgets: a bound per run or per principal per day (``spend:USD<=50/run``), kept in the
ledger and checked atomically with the attempt that spends it.

A grant with ``/run`` or ``/day`` (`callgate.effects.Grant.per`) bounds each call, as
any bounded grant does, and also the sum over the calls of a run (or of a principal's
UTC day) whose effect names it matches. The gate hands each side-effecting attempt its
charges (`BudgetCharge`: the budget's key, the amount, the limit); the ledger, in the
transaction that takes the idempotency key, adds them to what the journal says was
spent and refuses the attempt (`ClaimKind.OVER_BUDGET`) when a sum would pass its
limit. The charge is written in the ``attempt.started`` record, so it is the journal's,
not a row's; an attempt that ends ``error`` (the effect did not happen) gives its charge
back. Concurrent runs on SQLite and PostgreSQL take turns on the journal's head, so two
attempts never both see the same remaining budget.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from callgate.effects import Effect, Grant, star_match

__all__ = ["BudgetBook", "BudgetCharge", "budget_grants", "budget_key", "charges_for"]


def budget_grants(grants: Iterable[str | Grant]) -> tuple[Grant, ...]:
    """The grants among ``grants`` that are budgets (``/run``, ``/day``); cheap when none is."""
    found: list[Grant] = []
    for g in grants:
        text = g if isinstance(g, str) else g.text
        if text.rstrip().endswith(("/run", "/day")):
            grant = g if isinstance(g, Grant) else Grant(g)
            if grant.per is not None:
                found.append(grant)
    return tuple(found)


def charges_for(
    budgets: Iterable[Grant], effects: Iterable[Effect], *, owner: str, run_id: str
) -> tuple[BudgetCharge, ...]:
    """What a call with ``effects`` spends of each budget whose pattern its effects match
    (whichever grant admitted it): an effect without a quantity spends nothing."""
    found = []
    for grant in budgets:
        assert grant.per is not None
        assert grant.bound is not None
        for effect in effects:
            if effect.quantity is not None and star_match(grant.parts, effect.name):
                key = budget_key(grant.text, grant.per, owner, run_id)
                found.append(BudgetCharge(key, float(effect.quantity), grant.bound))
    return tuple(found)


class BudgetCharge(NamedTuple):
    """What one attempt spends of one budget."""

    key: str
    """The budget: its grant, its owner and its run (or day); see `budget_key`."""
    amount: float
    limit: float


def budget_key(grant: str, per: str, owner: str, run_id: str, at: float | None = None) -> str:
    """The key of one budget: ``grant`` per run (``run_id``) or per UTC day of ``owner``."""
    if per == "day":
        day = time.strftime("%Y-%m-%d", time.gmtime(time.time() if at is None else at))
        return f"{grant}|day|{owner}|{day}"
    return f"{grant}|run|{owner}|{run_id}"


class BudgetBook:
    """What has been spent of each budget, and what each attempt charged (to give back)."""

    __slots__ = ("charged", "spent")

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.charged: dict[tuple[str, str], list[tuple[str, float]]] = {}

    def refusal(
        self, charges: Iterable[BudgetCharge], extra: Mapping[str, float] = {}
    ) -> str | None:
        """Why ``charges`` would pass a limit (None: they fit); ``extra``: spent in a
        transaction not yet folded."""
        for c in charges:
            spent = self.spent.get(c.key, 0.0) + extra.get(c.key, 0.0)
            if spent + c.amount > c.limit + 1e-9:
                grant, per = c.key.split("|", 2)[:2]
                return (
                    f"the budget {grant} is {_n(c.limit)} per {per}; {_n(spent)} is spent, so "
                    f"{_n(c.amount)} more would pass it"
                )
        return None

    def charge(self, run_id: str, call_id: str, charges: Iterable[Sequence[Any]]) -> None:
        """Count an attempt's charges (from its ``attempt.started`` record)."""
        for key, amount in ((str(c[0]), float(c[1])) for c in charges):
            self.spent[key] = self.spent.get(key, 0.0) + amount
            self.charged.setdefault((run_id, call_id), []).append((key, amount))

    def give_back(self, run_id: str, call_id: str) -> None:
        """The attempt ended ``error``: its effect did not happen, its charges return."""
        for key, amount in self.charged.pop((run_id, call_id), ()):
            self.spent[key] = self.spent.get(key, 0.0) - amount


def _n(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)

"""The intervals of the grammar decision: an estimate with its 95 % interval, interval
arithmetic for the two sides of the rule, and the ratio with tasks as the unit.

`clustered` is Σ numerator / Σ denominator over rows grouped by task, with a
percentile bootstrap that resamples tasks (`callgate.eval.stats.ratio_bootstrap`):
the calls of one task are not independent, so they are never resampled apart.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from callgate.eval import stats

__all__ = ["Interval", "clustered", "wilson"]


@dataclass(frozen=True, slots=True)
class Interval:
    """An estimate and its 95 % interval."""

    value: float
    low: float
    high: float

    def __str__(self) -> str:
        if math.isnan(self.low) and math.isnan(self.high) and not math.isnan(self.value):
            return f"{_fmt(self.value)} (no interval)"
        return f"{_fmt(self.value)} [{_fmt(self.low)}, {_fmt(self.high)}]"

    def __add__(self, other: Interval) -> Interval:
        return Interval(self.value + other.value, self.low + other.low, self.high + other.high)

    def times(self, other: Interval) -> Interval:
        """The product, with the interval of every corner (signs may differ)."""
        corners = [a * b for a in (self.low, self.high) for b in (other.low, other.high)]
        return Interval(self.value * other.value, min(corners), max(corners))

    def scaled(self, factor: float) -> Interval:
        """This interval times a known constant."""
        ends = sorted((self.low * factor, self.high * factor))
        return Interval(self.value * factor, ends[0], ends[1])


def _fmt(x: float) -> str:
    if math.isnan(x):
        return "n/a"
    if abs(x) < 1e-9:
        return "0"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def wilson(successes: int, total: int) -> Interval:
    """The rate ``successes/total`` with its 95 % Wilson score interval (`stats.wilson`)."""
    found = stats.wilson(successes, total)
    return Interval(found.value, found.low, found.high)


def clustered(
    rows: Sequence[tuple[str, float, float]], seed: int, *, rate: bool = False
) -> tuple[Interval, int]:
    """Σ numerator / Σ denominator over ``(task, numerator, denominator)`` rows, with a
    percentile bootstrap resampling tasks (a task's rows stay together); and the number of
    tasks with a non-zero denominator. For a ``rate`` (a share of calls) at 0 or 1 every
    resample gives the same value and the bootstrap's interval is a point; the interval is
    then Wilson's over the tasks, each one trial (56 tasks without a failure: [0, 0.064])."""
    num: dict[str, float] = defaultdict(float)
    den: dict[str, float] = defaultdict(float)
    for task, n, d in rows:
        num[task] += n
        den[task] += d
    tasks = [t for t in den if den[t] > 0]
    if not tasks:
        return Interval(math.nan, math.nan, math.nan), 0
    found = stats.ratio_bootstrap([num[t] for t in tasks], [den[t] for t in tasks], seed=seed)
    if rate and found.value in (0.0, 1.0):
        edge = stats.wilson(len(tasks) if found.value == 1.0 else 0, len(tasks))
        low, high = min(found.low, edge.low), max(found.high, edge.high)
        return Interval(found.value, low, high), len(tasks)
    return Interval(found.value, found.low, found.high), len(tasks)

"""The statistics of the funnel and the lab, on numpy and scipy.

* `wilson`: a binomial proportion's interval (good at small n and near 0 or 1);
* `bootstrap`: a percentile interval of any statistic, resampling whole
  tasks (the unit the runs are paired on);
* `paired_bootstrap`: the mean difference of paired per-task values, its
  interval and a two-sided p-value (the null by shifting the differences to
  mean zero);
* `interaction`: the complexity × surface interaction as a difference of
  paired differences, resampled within each stratum;
* `holm`: Holm's step-down adjustment (controls the family-wise error rate);
* `paired_power` / `pairs_for_power`: the power of a two-sided paired t-test
  (noncentral t), for the effect sizes observed.

``tests/eval/test_stats.py`` holds each to a known answer: coverage near
nominal on simulated data, family-wise error under the level, power against
the textbook value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "Estimate",
    "bootstrap",
    "holm",
    "interaction",
    "paired_bootstrap",
    "paired_power",
    "pairs_for_power",
    "ratio_bootstrap",
    "wilson",
]


def _sps() -> Any:
    """``scipy.stats``, imported on first use: importing it takes a second or more, and
    every process that imports callgate.eval (the test collection too) would pay it."""
    from scipy import stats  # type: ignore[import-untyped]

    return stats


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    """A point estimate, its interval at ``level``, and a p-value where one was tested."""

    value: float
    low: float
    high: float
    level: float = 0.95
    p: float | None = None
    n: int = 0

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {
            "value": _finite(self.value),
            "low": _finite(self.low),
            "high": _finite(self.high),
            "level": self.level,
            "p": None if self.p is None else _finite(self.p),
            "n": self.n,
        }


def _finite(x: float) -> float | None:
    return None if math.isnan(x) else round(float(x), 6)


def wilson(successes: int, n: int, level: float = 0.95) -> Estimate:
    """The Wilson score interval of ``successes`` out of ``n`` (NaN when n is 0)."""
    if n <= 0:
        return Estimate(value=math.nan, low=math.nan, high=math.nan, level=level, n=0)
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be within [0, n={n}], got {successes}")
    z = float(_sps().norm.ppf(0.5 + level / 2))
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Estimate(
        value=p, low=max(0.0, centre - half), high=min(1.0, centre + half), level=level, n=n
    )


def _rng(seed: int | np.random.Generator) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def bootstrap(
    n: int,
    statistic: Callable[[NDArray[np.intp]], float],
    *,
    reps: int = 2000,
    level: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> Estimate:
    """A percentile interval of ``statistic(indices)`` over ``reps`` resamples of ``n`` units.

    ``statistic`` receives an array of unit indices (drawn with replacement)
    and returns the statistic of that resample; the point estimate is its value
    on ``range(n)``. Resamples where it is NaN (e.g. a ratio with nothing
    under it) are left out.
    """
    if n <= 0:
        return Estimate(value=math.nan, low=math.nan, high=math.nan, level=level, n=0)
    rng = _rng(seed)
    value = statistic(np.arange(n))
    draws = np.array([statistic(rng.integers(0, n, n)) for _ in range(reps)], dtype=float)
    draws = draws[~np.isnan(draws)]
    if draws.size == 0:
        return Estimate(value=value, low=math.nan, high=math.nan, level=level, n=n)
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return Estimate(value=value, low=float(low), high=float(high), level=level, n=n)


def ratio_bootstrap(
    numerator: ArrayLike,
    denominator: ArrayLike,
    *,
    reps: int = 2000,
    level: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> Estimate:
    """Σ numerator / Σ denominator over units, with a percentile interval resampling units
    (vectorised; resamples whose denominator sums to zero are left out)."""
    num = np.asarray(numerator, dtype=float)
    den = np.asarray(denominator, dtype=float)
    n = num.size
    if n == 0 or den.sum() == 0:
        return Estimate(value=math.nan, low=math.nan, high=math.nan, level=level, n=n)
    idx = _rng(seed).integers(0, n, size=(reps, n))
    tops, bottoms = num[idx].sum(axis=1), den[idx].sum(axis=1)
    keep = bottoms > 0
    draws = tops[keep] / bottoms[keep]
    low, high = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    value = float(num.sum() / den.sum())
    return Estimate(value=value, low=float(low), high=float(high), level=level, n=n)


def paired_bootstrap(
    a: ArrayLike,
    b: ArrayLike,
    *,
    reps: int = 4000,
    level: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> Estimate:
    """The mean of ``a - b`` over paired units, its percentile interval, and a two-sided
    p-value for "no difference" (resampling the differences shifted to mean zero)."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if d.ndim != 1:
        raise ValueError("paired_bootstrap takes two one-dimensional arrays of equal length")
    n = d.size
    if n == 0:
        return Estimate(value=math.nan, low=math.nan, high=math.nan, level=level, p=math.nan)
    rng = _rng(seed)
    idx = rng.integers(0, n, size=(reps, n))
    means = d[idx].mean(axis=1)
    observed = float(d.mean())
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    null = (d - observed)[idx].mean(axis=1)
    p = float((np.sum(np.abs(null) >= abs(observed) - 1e-12) + 1) / (reps + 1))
    return Estimate(value=observed, low=float(low), high=float(high), level=level, p=p, n=n)


def interaction(
    diff: ArrayLike,
    group: ArrayLike,
    *,
    reps: int = 4000,
    level: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> Estimate:
    """Mean paired difference in group 1 minus that in group 0 (a difference in differences).

    ``diff`` holds one paired difference per task (surface X minus surface Y),
    ``group`` 1 for composition tasks and 0 for single ones. Tasks are
    resampled within their group; the p-value resamples each group's
    differences shifted to the pooled mean (no interaction).
    """
    d = np.asarray(diff, dtype=float)
    g = np.asarray(group).astype(bool)
    d1, d0 = d[g], d[~g]
    if d1.size == 0 or d0.size == 0:
        return Estimate(value=math.nan, low=math.nan, high=math.nan, level=level, p=math.nan)
    rng = _rng(seed)
    observed = float(d1.mean() - d0.mean())
    i1 = rng.integers(0, d1.size, size=(reps, d1.size))
    i0 = rng.integers(0, d0.size, size=(reps, d0.size))
    boot = d1[i1].mean(axis=1) - d0[i0].mean(axis=1)
    low, high = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    pooled = float(d.mean())
    null = (d1 - d1.mean() + pooled)[i1].mean(axis=1) - (d0 - d0.mean() + pooled)[i0].mean(axis=1)
    p = float((np.sum(np.abs(null) >= abs(observed) - 1e-12) + 1) / (reps + 1))
    return Estimate(value=observed, low=float(low), high=float(high), level=level, p=p, n=d.size)


def holm(pvalues: Mapping[str, float], alpha: float = 0.05) -> dict[str, tuple[float, bool]]:
    """Holm's step-down adjustment: each name's adjusted p-value and whether it is rejected.

    NaN p-values (a test that could not be computed) are never rejected and do
    not count in the family.
    """
    named = sorted(
        ((name, p) for name, p in pvalues.items() if not math.isnan(p)), key=lambda x: x[1]
    )
    m = len(named)
    out: dict[str, tuple[float, bool]] = dict.fromkeys(pvalues, (math.nan, False))
    running = 0.0
    still = True
    for rank, (name, p) in enumerate(named):
        adjusted = min(1.0, max(running, (m - rank) * p))
        running = adjusted
        still = still and p <= alpha / (m - rank)
        out[name] = (adjusted, still)
    return out


def paired_power(effect: float, sd: float, n: int, alpha: float = 0.05) -> float:
    """The power of a two-sided paired t-test at level ``alpha`` for a true mean difference
    ``effect`` with differences of standard deviation ``sd``, over ``n`` pairs."""
    if n < 2 or sd <= 0 or math.isnan(effect) or math.isnan(sd):
        return math.nan
    df = n - 1
    ncp = effect / sd * math.sqrt(n)
    crit = float(_sps().t.ppf(1 - alpha / 2, df))
    return float(_sps().nct.sf(crit, df, ncp) + _sps().nct.cdf(-crit, df, ncp))


def pairs_for_power(
    effect: float, sd: float, power: float = 0.8, alpha: float = 0.05, limit: int = 100_000
) -> int | None:
    """The fewest pairs giving ``power`` for the effect (None: not within ``limit`` or no
    effect to detect)."""
    if sd <= 0 or effect == 0 or math.isnan(effect) or math.isnan(sd):
        return None
    lo, hi = 2, 2
    while paired_power(effect, sd, hi, alpha) < power:
        hi *= 2
        if hi > limit:
            return None
    while lo < hi:
        mid = (lo + hi) // 2
        if paired_power(effect, sd, mid, alpha) >= power:
            hi = mid
        else:
            lo = mid + 1
    return lo


def mean_or_nan(values: Sequence[float]) -> float:
    """The mean of ``values``, NaN when there are none."""
    return float(np.mean(values)) if len(values) else math.nan

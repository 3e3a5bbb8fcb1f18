"""The statistics of the funnel and the lab, on numpy and scipy.

* `wilson`: a binomial proportion's interval (good at small n and near 0 or 1);
* `bootstrap`: a percentile interval of any statistic, resampling whole
  tasks (the unit the runs are paired on);
* `paired_bootstrap`: the mean difference of paired per-task values, its
  percentile interval and a two-sided sign-flip randomization p-value (exact
  for up to 12 pairs, so three pairs can never give less than 0.25);
* `interaction`: the complexity × surface interaction as a difference of
  paired differences, its interval resampled within each stratum and its
  p-value a permutation test of the complexity labels (exact where the
  splits are few);
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
    p-value for "no difference": the share of sign flips of the differences whose mean is at
    least as far from 0 as the one observed (a randomization test, valid when the differences
    are symmetric about 0 under the null). Up to `EXACT_PAIRS` pairs every flip is counted, so
    the p-value is exact (three pairs all of one sign give 0.25, where the bootstrap shifted
    to mean zero gave 1/(reps+1)); beyond, ``reps`` random flips."""
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
    return Estimate(
        value=observed, low=float(low), high=float(high), level=level, p=_sign_flip_p(d, reps, rng),
        n=n,
    )  # fmt: skip


EXACT_PAIRS = 12
"""Up to this many pairs the sign-flip p-value counts all 2ⁿ flips (4096 at 12)."""


def _at_least(observed: float) -> float:
    """The bar a resampled statistic must reach to count as extreme as ``observed``: its
    size less a rounding margin (the same sum added in another order differs in its last
    bits)."""
    return abs(observed) * (1 - 1e-9) - 1e-12


def _sign_flip_p(d: NDArray[np.float64], reps: int, rng: np.random.Generator) -> float:
    n = d.size
    target = _at_least(float(d.mean()))
    if n <= EXACT_PAIRS:
        signs = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) * 2 - 1
        return float(np.mean(np.abs(signs @ d) / n >= target))
    signs = rng.choice(np.array([-1.0, 1.0]), size=(reps, n))
    hits = int(np.sum(np.abs(signs @ d) / n >= target))
    return (hits + 1) / (reps + 1)


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
    ``group`` 1 for composition tasks and 0 for single ones. The interval
    resamples tasks within their group; the p-value is a permutation test of
    the labels (no interaction: the differences are exchangeable between the
    groups), counting every split where there are at most ``reps`` of them
    (3 single and 2 composition tasks: 10 splits, so never under 0.1), else
    ``reps`` random ones.
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
    p = _permutation_p(np.concatenate([d1, d0]), d1.size, observed, reps, rng)
    return Estimate(value=observed, low=float(low), high=float(high), level=level, p=p, n=d.size)


def _permutation_p(
    d: NDArray[np.float64], k: int, observed: float, reps: int, rng: np.random.Generator
) -> float:
    """Two-sided p of a difference of group means, ``k`` units in group 1."""
    n = d.size
    target = _at_least(observed)
    total = float(d.sum())
    if math.comb(n, k) <= reps:
        from itertools import combinations

        sums = np.array([d[list(c)].sum() for c in combinations(range(n), k)])
        stat = sums / k - (total - sums) / (n - k)
        return float(np.mean(np.abs(stat) >= target))
    order = rng.permuted(np.tile(np.arange(n), (reps, 1)), axis=1)[:, :k]
    sums = d[order].sum(axis=1)
    stat = sums / k - (total - sums) / (n - k)
    return (int(np.sum(np.abs(stat) >= target)) + 1) / (reps + 1)


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

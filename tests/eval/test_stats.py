"""The lab's statistics against known answers: textbook values and simulations with a planted
effect and with none (numpy draws, scipy's tests)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from callgate.eval.stats import (
    bootstrap,
    holm,
    interaction,
    paired_bootstrap,
    paired_power,
    pairs_for_power,
    ratio_bootstrap,
    wilson,
)


def test_wilson_matches_the_textbook_interval() -> None:
    """8 of 10 at 95% is [0.490, 0.943] (Wilson 1927; Newcombe 1998, table I)."""
    e = wilson(8, 10)
    assert e.value == pytest.approx(0.8)
    assert e.low == pytest.approx(0.4902, abs=5e-4)
    assert e.high == pytest.approx(0.9433, abs=5e-4)


def test_wilson_stays_inside_zero_and_one_at_the_edges() -> None:
    """0 of 20 and 20 of 20 give intervals inside [0, 1] that exclude the far edge."""
    zero, full = wilson(0, 20), wilson(20, 20)
    assert zero.low == 0.0
    assert 0.1 < zero.high < 0.2
    assert full.high == 1.0
    assert 0.8 < full.low < 0.9
    assert math.isnan(wilson(0, 0).value)


def test_wilson_refuses_more_successes_than_trials() -> None:
    """A count above n is a caller's bug, named with both numbers."""
    with pytest.raises(ValueError, match="within"):
        wilson(11, 10)


def _paired_binary(rng: np.random.Generator, n: int, p_a: float, p_b: float):
    """Paired success indicators with a shared task difficulty (correlated pairs)."""
    from scipy import stats as sps

    difficulty = rng.normal(0, 1, n)
    a = rng.random(n) < sps.norm.cdf(sps.norm.ppf(p_a) + 0.8 * difficulty)
    b = rng.random(n) < sps.norm.cdf(sps.norm.ppf(p_b) + 0.8 * difficulty)
    return a.astype(float), b.astype(float)


def test_paired_bootstrap_interval_covers_the_true_difference_near_nominally() -> None:
    """Over 300 simulated labs of 60 paired tasks, the 95% interval holds the true difference
    (computed by integration, not by the bootstrap) in 90-99% of them."""
    from scipy import stats as sps

    rng = np.random.default_rng(7)
    p_a, p_b = 0.7, 0.55
    z = rng.normal(0, 1, 400_000)
    truth = float(
        np.mean(
            sps.norm.cdf(sps.norm.ppf(p_a) + 0.8 * z) - sps.norm.cdf(sps.norm.ppf(p_b) + 0.8 * z)
        )
    )
    covered = 0
    sims = 300
    for _ in range(sims):
        a, b = _paired_binary(rng, 60, p_a, p_b)
        e = paired_bootstrap(a, b, reps=1000, seed=rng)
        covered += e.low <= truth <= e.high
    assert 0.90 <= covered / sims <= 0.99


def test_paired_bootstrap_p_value_rejects_at_about_alpha_without_an_effect() -> None:
    """With no planted effect, p <= 0.05 in 1-10% of 300 simulated labs; with a planted
    effect it rejects about as often as scipy's paired t-test on the same data (within 0.1)."""
    from scipy import stats as sps

    rng = np.random.default_rng(11)
    null = [
        paired_bootstrap(*_paired_binary(rng, 60, 0.6, 0.6), reps=1000, seed=rng).p
        for _ in range(300)
    ]
    rate = float(np.mean(np.array(null) <= 0.05))
    assert 0.01 <= rate <= 0.10
    boot, ttest = [], []
    for _ in range(200):
        a, b = _paired_binary(rng, 60, 0.8, 0.55)
        boot.append(paired_bootstrap(a, b, reps=1000, seed=rng).p <= 0.05)
        ttest.append(sps.ttest_rel(a, b).pvalue <= 0.05)
    assert float(np.mean(boot)) >= 0.4
    assert float(np.mean(boot)) == pytest.approx(float(np.mean(ttest)), abs=0.1)


def test_bootstrap_of_a_mean_agrees_with_the_normal_interval() -> None:
    """The percentile interval of a mean of 400 normal draws is within 0.02 of x̄ ± 1.96 s/√n."""
    rng = np.random.default_rng(3)
    x = rng.normal(2.0, 1.0, 400)
    e = bootstrap(x.size, lambda i: float(x[i].mean()), reps=2000, seed=1)
    half = 1.96 * x.std(ddof=1) / math.sqrt(x.size)
    assert e.low == pytest.approx(x.mean() - half, abs=0.02)
    assert e.high == pytest.approx(x.mean() + half, abs=0.02)


def test_holm_adjusts_as_the_step_down_procedure_defines() -> None:
    """p = (0.005, 0.01, 0.03, 0.04) at 0.05: adjusted (0.02, 0.03, 0.06, 0.06); the first two
    are rejected, and a NaN test neither counts nor is rejected."""
    out = holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005, "e": math.nan}, 0.05)
    assert out["d"] == (pytest.approx(0.02), True)
    assert out["a"] == (pytest.approx(0.03), True)
    assert out["c"] == (pytest.approx(0.06), False)
    assert out["b"] == (pytest.approx(0.06), False)
    assert math.isnan(out["e"][0])
    assert out["e"][1] is False


def test_holm_controls_the_family_wise_error_rate() -> None:
    """Four true null hypotheses (paired t-tests on simulated data), 2000 families: at least
    one rejection in at most 6% of families, where unadjusted tests reach about 19%."""
    from scipy import stats as sps

    rng = np.random.default_rng(5)
    x = rng.normal(0, 1, (2000, 4, 20))
    y = x + rng.normal(0, 1, (2000, 4, 20))  # the same mean: every null is true
    pvalues = sps.ttest_rel(x, y, axis=2).pvalue
    any_holm = any_raw = 0
    for family in pvalues:
        ps = {str(i): float(p) for i, p in enumerate(family)}
        any_holm += any(r for _, r in holm(ps, 0.05).values())
        any_raw += any(p <= 0.05 for p in ps.values())
    assert any_holm / 2000 <= 0.06
    assert any_raw / 2000 >= 0.12


def test_power_matches_the_textbook_sample_size() -> None:
    """A paired t-test for d = 0.5 needs 34 pairs for 80% power at α = 0.05 (Cohen 1988;
    G*Power gives 0.808 at n = 34)."""
    assert paired_power(0.5, 1.0, 34) == pytest.approx(0.808, abs=0.005)
    assert pairs_for_power(0.5, 1.0) == 34
    assert pairs_for_power(0.0, 1.0) is None


def test_power_agrees_with_simulated_rejections() -> None:
    """The computed power for d = 0.4 over 30 pairs is within 0.04 of the rejection rate of
    scipy's paired t-test on 3000 simulated labs."""
    from scipy import stats as sps

    rng = np.random.default_rng(9)
    diffs = rng.normal(0.4, 1.0, (3000, 30))
    rejected = np.mean(sps.ttest_1samp(diffs, 0, axis=1).pvalue <= 0.05)
    assert paired_power(0.4, 1.0, 30) == pytest.approx(float(rejected), abs=0.04)


def test_interaction_finds_a_planted_interaction_and_not_a_missing_one() -> None:
    """A surface that wins composition tasks and loses single ones by 0.4 gives an interaction
    near 0.8 with p < 0.01; equal differences in both strata give p <= 0.05 in at most 10% of
    200 simulated labs."""
    rng = np.random.default_rng(13)
    group = np.array([0] * 30 + [1] * 30)
    diff = np.where(group == 1, 0.4, -0.4) + rng.normal(0, 0.5, 60)
    e = interaction(diff, group, reps=2000, seed=1)
    assert e.value == pytest.approx(0.8, abs=0.3)
    assert e.p is not None
    assert e.p < 0.01
    assert e.low > 0
    false = 0
    for _ in range(200):
        d = rng.normal(0.1, 0.5, 60)
        false += (interaction(d, group, reps=500, seed=rng).p or 1) <= 0.05
    assert false / 200 <= 0.10


def test_ratio_bootstrap_of_unit_denominators_is_the_mean_interval() -> None:
    """With every denominator 1 the ratio is the mean, and its interval is within 0.02 of
    x̄ ± 1.96 s/√n; units whose denominators are all zero give no estimate."""
    rng = np.random.default_rng(21)
    x = rng.normal(0.5, 1.0, 400)
    e = ratio_bootstrap(x, np.ones(400), reps=4000, seed=2)
    half = 1.96 * x.std(ddof=1) / math.sqrt(x.size)
    assert e.value == pytest.approx(x.mean())
    assert e.low == pytest.approx(x.mean() - half, abs=0.02)
    assert e.high == pytest.approx(x.mean() + half, abs=0.02)
    assert math.isnan(ratio_bootstrap([1.0], [0.0]).value)


def test_a_paired_p_value_from_three_pairs_is_never_below_the_exact_minimum() -> None:
    """Three pairs all differing the same way (H4 on a five-task lab): of the 2³ sign flips two
    are as extreme, so no valid two-sided test gives p under 0.25; the p-value is the exact
    sign-flip one (the shifted bootstrap said 0.0002)."""
    e = paired_bootstrap([1500.0, 1800.0, 2100.0], [300.0, 350.0, 420.0], reps=4000, seed=0)
    assert e.value == pytest.approx((1200 + 1450 + 1680) / 3)
    assert e.p == pytest.approx(0.25)


def test_the_paired_p_value_is_the_exact_sign_flip_one_on_small_samples() -> None:
    """Eight differences: the p-value is the share of the 256 sign patterns whose mean is at
    least as far from 0 as the one observed, counted here by brute force."""
    import itertools

    d = np.array([0.9, 0.4, -0.2, 1.1, 0.3, 0.7, -0.5, 0.6])
    means = [abs(np.mean(d * s)) for s in itertools.product((1, -1), repeat=d.size)]
    exact = float(np.mean(np.array(means) >= abs(d.mean()) - 1e-12))
    assert paired_bootstrap(d, np.zeros(d.size), seed=3).p == pytest.approx(exact)


def test_an_interaction_from_five_tasks_is_never_below_the_exact_minimum() -> None:
    """Three single and two composition tasks can be split ten ways: the interaction's p-value
    is the exact share of splits at least as extreme, never under 1/10 (the shifted bootstrap
    said 0.0002)."""
    e = interaction([-1.0, -1.0, -1.0, 1.0, 1.0], [0, 0, 0, 1, 1], reps=4000, seed=0)
    assert e.value == pytest.approx(2.0)
    assert e.p == pytest.approx(0.1)

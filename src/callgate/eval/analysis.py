"""The pre-registered analysis of a lab: hypotheses fixed before the data, tested as planned.

A pre-registration (`Prereg`, a TOML file; ``examples/lab/prereg.toml``)
names the surfaces, the level, the bootstrap, the cache-hit assumption and
the surfaces each hypothesis is about:

* **H1** (complexity × surface): surface ``better`` minus ``than`` in task
  success is larger on composition tasks than on single ones. Test: the
  interaction (difference of paired differences), stratified bootstrap.
* **H2** (specification cost): ``highest`` has the highest mean η. Test: the
  paired bootstrap of η(highest) − η(other) for each other surface; the
  hypothesis's p-value is the largest (intersection–union).
* **H3** (error recovery): ``best`` has the highest recovery rate: of the runs
  with at least one failed call, the share whose task passed. Test: Fisher's
  exact test against each other surface, the largest p-value.
* **H4** (token cost): on single tasks ``cheapest_single`` has the fewest
  tokens per run (schema + calls + results). Test: paired bootstrap against
  each other surface, the largest p-value.

The four p-values are adjusted together (Holm). For every pair of surfaces
the success difference is estimated with a paired bootstrap, and the power of
a paired test for the observed effect (and the pairs that 80% power would
need) is reported. Anything that could not be done as registered — a
surface that was not run, a hypothesis about it — is listed as a deviation.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from callgate.eval.funnel import call_stage, program_failed
from callgate.eval.prereg import Prereg
from callgate.eval.record import CallView, RunView
from callgate.eval.stats import (
    Estimate,
    bootstrap,
    holm,
    interaction,
    paired_bootstrap,
    paired_power,
    pairs_for_power,
    wilson,
)
from callgate.eval.tokens import (
    ETA_CAVEATS,
    ETA_ESTIMATOR,
    Tokenizer,
    entropy_by_surface,
    eta,
    run_tokens,
)

__all__ = ["Analysis", "Prereg", "analyse"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Hypothesis:
    """One pre-registered hypothesis: what it claims, its estimate, its test."""

    name: str
    claim: str
    estimate: Estimate | None
    p: float
    p_holm: float = math.nan
    supported: bool = False
    agrees: bool = False
    """Whether the estimates point the way the claim says (needed, with the test, to support it)."""
    note: str = ""
    comparison: str = ""
    """The one comparison the estimate, its interval and the p-value all come from."""

    @property
    def verdict(self) -> str:
        """``supported``; ``opposite direction, significant`` (rejected after Holm, but the
        estimate points against the claim); ``direction as claimed, not significant``;
        ``opposite direction, not significant``; ``no difference, not significant`` (an
        estimate of exactly 0); or ``not tested``."""
        if math.isnan(self.p):
            return "not tested"
        significant = not math.isnan(self.p_holm) and self.p_holm <= self.alpha
        if self.estimate is not None and self.estimate.value == 0 and not significant:
            return "no difference, not significant"
        if significant:
            return "supported" if self.agrees else "opposite direction, significant"
        return (
            "direction as claimed, not significant"
            if self.agrees
            else "opposite direction, not significant"
        )

    alpha: float = 0.05
    """The family-wise level the Holm-adjusted p-value is held to."""


@dataclass(kw_only=True)
class Analysis:
    """Everything the report states (`callgate.eval.report`)."""

    prereg: Prereg
    surfaces: list[str]
    tasks: int
    runs: int
    success: dict[str, dict[str, Estimate]]
    """Success by surface and complexity (``all``, ``single``, ``composition``)."""
    differences: dict[str, Estimate]
    power: dict[str, dict[str, Any]]
    eta: dict[str, Estimate]
    entropy: dict[str, dict[str, float]]
    recovery: dict[str, Estimate]
    tokens: dict[str, dict[str, dict[str, float]]]
    """Mean tokens per run by surface, complexity and part (schema, calls, results)."""
    hypotheses: list[Hypothesis]
    deviations: list[str]
    tokenizer: str
    per_run: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {
            "title": self.prereg.title,
            "surfaces": self.surfaces,
            "tasks": self.tasks,
            "runs": self.runs,
            "success": {s: {k: e.as_dict() for k, e in v.items()} for s, v in self.success.items()},
            "differences": {k: e.as_dict() for k, e in self.differences.items()},
            "power": self.power,
            "eta": {s: e.as_dict() for s, e in self.eta.items()},
            "eta_estimator": ETA_ESTIMATOR,
            "eta_caveats": list(ETA_CAVEATS),
            "cache_hit": self.prereg.cache_hit,
            "entropy_bits": self.entropy,
            "recovery": {s: e.as_dict() for s, e in self.recovery.items()},
            "tokens": self.tokens,
            "tokenizer": self.tokenizer,
            "hypotheses": [
                {
                    "name": h.name,
                    "claim": h.claim,
                    "estimate": None if h.estimate is None else h.estimate.as_dict(),
                    "p": None if math.isnan(h.p) else h.p,
                    "p_holm": None if math.isnan(h.p_holm) else h.p_holm,
                    "supported": h.supported,
                    "agrees": h.agrees,
                    "verdict": h.verdict,
                    "comparison": h.comparison,
                    "note": h.note,
                }
                for h in self.hypotheses
            ],
            "deviations": self.deviations,
            "runs_detail": self.per_run,
        }


def _paired(
    runs: Sequence[RunView], a: str, b: str, value: Mapping[str, float], only: str | None = None
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], list[str]]:
    """Per-task values of surfaces ``a`` and ``b`` for the tasks run on both (a task run
    more than once on a surface, in pooled labs, counts the mean of its runs)."""
    by: dict[tuple[str, str], list[float]] = {}
    complexity: dict[str, str] = {}
    for r in runs:
        if r.run_id in value:
            by.setdefault((r.task, r.surface), []).append(value[r.run_id])
            complexity[r.task] = r.complexity
    tasks = sorted(
        t
        for t in complexity
        if (t, a) in by and (t, b) in by and (only is None or complexity[t] == only)
    )
    x = np.array([_mean_nan(by[(t, a)]) for t in tasks], dtype=float)
    y = np.array([_mean_nan(by[(t, b)]) for t in tasks], dtype=float)
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep], [t for t, k in zip(tasks, keep, strict=True) if k]


def _failed(call: CallView, run: RunView) -> bool:
    """Whether the funnel counts ``call`` as failed (A, B or C: a crashed program too)."""
    if run.tools:
        return call_stage(call, run.tools) != "ok"
    return call.status != "ok" or program_failed(call)


def _mean_nan(values: Sequence[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return float(np.mean(kept)) if kept else math.nan


def _task_success(
    runs: Sequence[RunView], level: float, reps: int, rng: np.random.Generator
) -> Estimate:
    """Task success with tasks as the unit: Wilson when each task ran once, else the mean of
    per-task success rates with a bootstrap over tasks (runs of one task are not
    independent)."""
    by: dict[str, list[float]] = {}
    for r in runs:
        by.setdefault(r.task or r.run_id, []).append(float(bool(r.passed)))
    if all(len(v) == 1 for v in by.values()):
        return wilson(int(sum(v[0] for v in by.values())), len(by), level)
    rates = np.array([np.mean(v) for v in by.values()])
    return bootstrap(rates.size, _mean_of(rates), reps=reps, level=level, seed=rng)


def a_priori_power(effect: float, pairs: int, alpha: float) -> dict[str, Any]:
    """The power of the paired test of success over ``pairs`` tasks for a true difference
    ``effect``, and the pairs 80 % power needs. The standard deviation of a paired success
    difference (values in {-1, 0, 1}) with mean δ is at most sqrt(1 − δ²), so both are
    computed at that bound: conservative, and fixed before the data."""
    sd = math.sqrt(1 - effect * effect)
    return {
        "min_effect": effect,
        "sd_bound": round(sd, 6),
        "pairs": pairs,
        "power": _num(paired_power(effect, sd, pairs, alpha)),
        "pairs_for_80pct": pairs_for_power(effect, sd, 0.8, alpha),
    }


def newcombe(k1: int, n1: int, k2: int, n2: int, level: float = 0.95) -> Estimate:
    """The difference of two independent proportions k1/n1 − k2/n2 with Newcombe's hybrid
    score interval (from the two Wilson intervals)."""
    a, b = wilson(k1, n1, level), wilson(k2, n2, level)
    if n1 == 0 or n2 == 0:
        return Estimate(value=math.nan, low=math.nan, high=math.nan, level=level)
    d = a.value - b.value
    low = d - math.sqrt((a.value - a.low) ** 2 + (b.high - b.value) ** 2)
    high = d + math.sqrt((a.high - a.value) ** 2 + (b.value - b.low) ** 2)
    return Estimate(value=d, low=low, high=high, level=level, n=n1 + n2)


def analyse(
    runs: Sequence[RunView],
    prereg: Prereg,
    tokenizer: Tokenizer,
    *,
    deviations: Sequence[str] = (),
) -> Analysis:
    """Analyse ``runs`` as ``prereg`` says (see the module docstring); ``deviations`` are
    those only the caller knows of (a task set or budget other than the registered one)."""
    rng = np.random.default_rng(prereg.seed)
    level, reps = prereg.level, prereg.reps
    ran = sorted({r.surface for r in runs})
    deviations = list(deviations)
    missing = [s for s in prereg.surfaces if s not in ran]
    if missing:
        deviations.append(
            f"surface(s) {', '.join(missing)} were registered but not run; every comparison "
            "involving them is left out"
        )
    extra = [s for s in ran if s not in prereg.surfaces]
    if extra:
        deviations.append(f"surface(s) {', '.join(extra)} were run but not registered")
    unverified = [r.run_id for r in runs if r.passed is None]
    if prereg.min_effect is None:
        deviations.append(
            "the pre-registration states no min_effect: no a priori power is reported "
            "(post-hoc power at the observed effect says nothing the p-value does not)"
        )
    if unverified:
        deviations.append(f"{len(unverified)} run(s) have no verdict and count as failures")
    passed = {r.run_id: float(bool(r.passed)) for r in runs}

    repeated = Counter((r.task, r.surface) for r in runs)
    twice = sum(1 for n in repeated.values() if n > 1)
    if twice:
        deviations.append(
            f"{twice} (task, surface) pair(s) ran more than once: each task's runs are "
            "averaged, so every table and test counts tasks, not runs"
        )
    success: dict[str, dict[str, Estimate]] = {}
    for s in ran:
        success[s] = {}
        for c in ("all", "single", "composition"):
            sel = [r for r in runs if r.surface == s and (c == "all" or r.complexity == c)]
            success[s][c] = _task_success(sel, level, reps, rng)

    differences: dict[str, Estimate] = {}
    power: dict[str, dict[str, Any]] = {}
    for a, b in itertools.combinations(ran, 2):
        x, y, _ = _paired(runs, a, b, passed)
        est = paired_bootstrap(x, y, reps=reps, level=level, seed=rng)
        differences[f"{a}-{b}"] = est
        sd = float(np.std(x - y, ddof=1)) if x.size > 1 else math.nan
        power[f"{a}-{b}"] = {
            "effect": _num(est.value),
            "sd": _num(sd),
            "pairs": int(x.size),
            "observed_power": _num(paired_power(est.value, sd, int(x.size), prereg.alpha)),
            "a_priori": None
            if prereg.min_effect is None
            else a_priori_power(prereg.min_effect, int(x.size), prereg.alpha),
        }

    # Tokens and eta, per run.
    entropy = entropy_by_surface(runs)
    tokens_of = {r.run_id: run_tokens(r, tokenizer, cache_hit=prereg.cache_hit) for r in runs}
    eta_of = {r.run_id: eta(tokens_of[r.run_id], entropy[r.surface]) for r in runs if r.calls}
    total_of = {rid: t.schema + t.calls + t.results for rid, t in tokens_of.items()}
    eta_by: dict[str, Estimate] = {}
    for s in ran:
        values = np.array([eta_of[r.run_id] for r in runs if r.surface == s and r.run_id in eta_of])
        values = values[~np.isnan(values)]
        eta_by[s] = bootstrap(values.size, _mean_of(values), reps=reps, level=level, seed=rng)
    tokens: dict[str, dict[str, dict[str, float]]] = {}
    for s in ran:
        tokens[s] = {}
        for c in ("single", "composition", "all"):
            counted = [
                tokens_of[r.run_id]
                for r in runs
                if r.surface == s and (c == "all" or r.complexity == c)
            ]
            tokens[s][c] = {
                "runs": len(counted),
                "schema": _mean([t.schema for t in counted]),
                "calls": _mean([t.calls for t in counted]),
                "results": _mean([t.results for t in counted]),
                "n_calls": _mean([t.n_calls for t in counted]),
                "call_tokens_per_call": _round(
                    sum(t.calls for t in counted) / max(1, sum(t.n_calls for t in counted))
                ),
            }

    recovery: dict[str, Estimate] = {}
    recovered: dict[str, tuple[int, int]] = {}
    for s in ran:
        hit = [r for r in runs if r.surface == s and any(_failed(c, r) for c in r.calls)]
        k = sum(1 for r in hit if r.passed)
        recovered[s] = (k, len(hit))
        recovery[s] = wilson(k, len(hit), level)

    hypotheses = _hypotheses(
        runs, prereg, ran, passed, eta_of, total_of, recovered, recovery, rng, deviations
    )
    per_run = [
        {
            "run_id": r.run_id,
            "task": r.task,
            "surface": r.surface,
            "complexity": r.complexity,
            "passed": r.passed,
            "calls": len(r.calls),
            "failed_calls": sum(1 for c in r.calls if c.status != "ok"),
            "eta": _num(eta_of.get(r.run_id, math.nan)),
            "schema_tokens": tokens_of[r.run_id].schema,
            "call_tokens": tokens_of[r.run_id].calls,
            "result_tokens": tokens_of[r.run_id].results,
        }
        for r in runs
    ]
    return Analysis(
        prereg=prereg,
        surfaces=ran,
        tasks=len({r.task for r in runs}),
        runs=len(runs),
        success=success,
        differences=differences,
        power=power,
        eta=eta_by,
        entropy={
            s: {"H(T|C)": e.tool, "H(A|T,C)": e.arguments, "calls": e.n} for s, e in entropy.items()
        },
        recovery=recovery,
        tokens=tokens,
        hypotheses=hypotheses,
        deviations=deviations,
        tokenizer=tokenizer.name,
        per_run=per_run,
    )


def _hypotheses(
    runs: Sequence[RunView],
    prereg: Prereg,
    ran: list[str],
    passed: Mapping[str, float],
    eta_of: Mapping[str, float],
    total_of: Mapping[str, float],
    recovered: Mapping[str, tuple[int, int]],
    recovery: Mapping[str, Estimate],
    rng: np.random.Generator,
    deviations: list[str],
) -> list[Hypothesis]:
    level, reps = prereg.level, prereg.reps
    out: list[Hypothesis] = []

    better, than = prereg.h1
    claim1 = f"{better} minus {than} in task success is larger on composition tasks than on single"
    if better in ran and than in ran:
        x, y, tasks = _paired(runs, better, than, passed)
        comp = {r.task: r.complexity == "composition" for r in runs}
        est = interaction(x - y, [comp[t] for t in tasks], reps=reps, level=level, seed=rng)
        agrees = est.value > 0
        out.append(
            Hypothesis(
                name="H1",
                claim=claim1,
                estimate=est,
                p=_nan(est.p),
                agrees=agrees,
                comparison=f"({better} − {than} | composition) − ({better} − {than} | single)",
            )
        )
    else:
        deviations.append(f"H1 not tested: it compares {better} and {than}, not both run")
        out.append(
            Hypothesis(name="H1", claim=claim1, estimate=None, p=math.nan, note="not tested")
        )

    others = [s for s in ran if s != prereg.h2]
    claim2 = f"{prereg.h2} has the highest interface inefficiency (eta)"
    if prereg.h2 in ran and others:
        ests = {
            o: paired_bootstrap(
                *_paired(runs, prereg.h2, o, eta_of)[:2], reps=reps, level=level, seed=rng
            )
            for o in others
        }
        out.append(
            _intersection_union(
                "H2", claim2, prereg.h2, ests, lambda e: e.value > 0, "{:+.3f}", deviations
            )
        )
    else:
        deviations.append(f"H2 not tested: {prereg.h2} or every other surface was not run")
        out.append(
            Hypothesis(name="H2", claim=claim2, estimate=None, p=math.nan, note="not tested")
        )

    claim3 = (
        f"{prereg.h3} has the highest error-recovery rate (runs with a failed call, a crashed "
        "program included, whose task passed)"
    )
    others = [s for s in ran if s != prereg.h3]
    if prereg.h3 in ran and others and recovered[prereg.h3][1]:
        k, n = recovered[prereg.h3]
        diffs: dict[str, Estimate] = {}
        for o in others:
            ko, no = recovered[o]
            if no == 0:
                deviations.append(
                    f"H3: the comparison of {prereg.h3} with {o} is dropped: no run of {o} "
                    "had a failed call"
                )
                continue
            table = [[k, n - k], [ko, no - ko]]
            from scipy import stats as sps  # type: ignore[import-untyped]  # slow import

            p_o = float(sps.fisher_exact(table, alternative="two-sided")[1])
            est = newcombe(k, n, ko, no, level)
            diffs[o] = Estimate(
                value=est.value, low=est.low, high=est.high, level=level, p=p_o, n=n + no
            )
        if diffs:
            h = _intersection_union(
                "H3", claim3, prereg.h3, diffs, lambda e: e.value > 0, "{:+.3f}", deviations
            )
            counts = "; ".join(
                f"{o}: {recovered[o][0]}/{recovered[o][1]}" for o in [prereg.h3, *diffs]
            )
            out.append(
                Hypothesis(
                    name=h.name,
                    claim=h.claim,
                    estimate=h.estimate,
                    p=h.p,
                    agrees=h.agrees,
                    note=f"{h.note} (recovered/with a failure: {counts})",
                    comparison=h.comparison,
                )
            )
        else:
            out.append(
                Hypothesis(name="H3", claim=claim3, estimate=None, p=math.nan, note="not tested")
            )
    else:
        deviations.append(
            f"H3 not tested: no run of {prereg.h3} had a failed call, or it was not run"
        )
        out.append(
            Hypothesis(name="H3", claim=claim3, estimate=None, p=math.nan, note="not tested")
        )

    claim4 = f"{prereg.h4} has the lowest token cost per run on single tasks"
    others = [s for s in ran if s != prereg.h4]
    if prereg.h4 in ran and others:
        ests = {
            o: paired_bootstrap(
                *_paired(runs, prereg.h4, o, total_of, only="single")[:2],
                reps=reps,
                level=level,
                seed=rng,
            )
            for o in others
        }
        out.append(
            _intersection_union(
                "H4", claim4, prereg.h4, ests, lambda e: e.value < 0, "{:+.0f} tokens", deviations
            )
        )
    else:
        deviations.append(f"H4 not tested: {prereg.h4} or every other surface was not run")
        out.append(
            Hypothesis(name="H4", claim=claim4, estimate=None, p=math.nan, note="not tested")
        )

    adjusted = holm({h.name: h.p for h in out}, prereg.alpha)
    final = []
    for h in out:
        p_holm, reject = adjusted[h.name]
        final.append(
            Hypothesis(
                name=h.name,
                claim=h.claim,
                estimate=h.estimate,
                p=h.p,
                p_holm=p_holm,
                supported=bool(reject and h.agrees),
                agrees=h.agrees,
                note=h.note,
                comparison=h.comparison,
                alpha=prereg.alpha,
            )
        )
    return final


def _intersection_union(
    name: str,
    claim: str,
    subject: str,
    ests: Mapping[str, Estimate],
    as_claimed: Callable[[Estimate], bool],
    fmt: str,
    deviations: list[str],
) -> Hypothesis:
    """A claim that ``subject`` beats every other surface: it holds only if every comparison
    does, so the decisive comparison is the one with the largest p-value, and the row's
    estimate, interval and p all come from that one comparison (named)."""
    tested = {o: e for o, e in ests.items() if not math.isnan(_nan(e.p))}
    for o in ests:
        if o not in tested:
            deviations.append(
                f"{name}: the comparison of {subject} with {o} is dropped: no paired data"
            )
    note = "; ".join(
        f"vs {o}: " + fmt.format(e.value) + f" (p {_nan(e.p):.4f})" for o, e in tested.items()
    )
    if not tested:
        return Hypothesis(name=name, claim=claim, estimate=None, p=math.nan, note="not tested")
    # Any comparison pointing against the claim decides it; else the weakest (largest p).
    against = [o for o, e in tested.items() if not as_claimed(e)]
    pool = against or list(tested)
    decisive = max(pool, key=lambda o: (_nan(tested[o].p), -abs(tested[o].value)))
    est = tested[decisive]
    return Hypothesis(
        name=name,
        claim=claim,
        estimate=est,
        p=_nan(est.p),
        agrees=not against,
        note=note,
        comparison=f"{subject} − {decisive}",
    )


def _nan(x: float | None) -> float:
    return math.nan if x is None else float(x)


def _num(x: float) -> float | None:
    return None if x is None or math.isnan(x) else round(float(x), 6)


def _mean_of(values: np.ndarray[Any, Any]) -> Callable[[np.ndarray[Any, Any]], float]:
    """The statistic "mean of the resampled values" for `bootstrap`."""

    def stat(idx: np.ndarray[Any, Any]) -> float:
        return float(values[idx].mean())

    return stat


def _round(x: float) -> float:
    return round(float(x), 3)


def _mean(values: Sequence[float]) -> float:
    return round(float(np.mean(values)), 3) if values else 0.0

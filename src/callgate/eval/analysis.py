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
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps  # type: ignore[import-untyped]

from callgate.errors import DefinitionError
from callgate.eval.record import RunView
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
class Prereg:
    """A pre-registration; see the module docstring and ``examples/lab/prereg.toml``."""

    title: str = "three-surface lab"
    surfaces: tuple[str, ...] = ("coarse", "fine", "code")
    alpha: float = 0.05
    level: float = 0.95
    reps: int = 4000
    seed: int = 0
    cache_hit: float = 0.0
    h1: tuple[str, str] = ("code", "fine")
    h2: str = "coarse"
    h3: str = "fine"
    h4: str = "fine"
    tasks: str | None = None
    """The task set registered (``repo``, ``repo:N`` or a file), if any."""
    steps: int | None = None
    """The model calls per run registered, if any."""
    text: str = ""

    @classmethod
    def from_toml(cls, path: Path) -> Prereg:
        """Read a pre-registration; `DefinitionError` names the file and the bad field."""
        try:
            raw = path.read_text(encoding="utf-8")
            data = tomllib.loads(raw)
        except OSError as exc:
            raise DefinitionError(f"--prereg {path}: cannot read it: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise DefinitionError(f"--prereg {path}: not valid TOML: {exc}") from None
        return cls.from_mapping(data, source=str(path), text=raw)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "", text: str = "") -> Prereg:
        """A pre-registration from decoded TOML data."""
        known = {"title", "surfaces", "tasks", "steps", "analysis", "hypotheses"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise DefinitionError(
                f"prereg {source}: unknown field(s) {unknown}; expected {sorted(known)}"
            )
        analysis = data.get("analysis", {})
        hyp = data.get("hypotheses", {})
        base = cls()
        try:
            h1 = hyp.get("H1", {})
            prereg = cls(
                title=str(data.get("title", base.title)),
                surfaces=tuple(str(s) for s in data.get("surfaces", base.surfaces)),
                alpha=float(analysis.get("alpha", base.alpha)),
                level=float(analysis.get("confidence", base.level)),
                reps=int(analysis.get("bootstrap_reps", base.reps)),
                seed=int(analysis.get("seed", base.seed)),
                cache_hit=float(analysis.get("cache_hit", base.cache_hit)),
                h1=(str(h1.get("better", "code")), str(h1.get("than", "fine"))),
                h2=str(hyp.get("H2", {}).get("highest", base.h2)),
                h3=str(hyp.get("H3", {}).get("best", base.h3)),
                h4=str(hyp.get("H4", {}).get("cheapest_single", base.h4)),
                tasks=None if data.get("tasks") is None else str(data["tasks"]),
                steps=None if data.get("steps") is None else int(data["steps"]),
                text=text,
            )
        except (TypeError, ValueError, AttributeError) as exc:
            raise DefinitionError(f"prereg {source}: {exc}") from None
        if not 0 < prereg.alpha < 1 or not 0 < prereg.level < 1:
            raise DefinitionError(f"prereg {source}: alpha and confidence must be within (0, 1)")
        if prereg.reps < 100:
            raise DefinitionError(f"prereg {source}: bootstrap_reps must be at least 100")
        if not 0 <= prereg.cache_hit <= 1:
            raise DefinitionError(f"prereg {source}: cache_hit must be within [0, 1]")
        return prereg


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
    """Per-task values of surfaces ``a`` and ``b`` for the tasks run on both."""
    by: dict[tuple[str, str], float] = {}
    complexity: dict[str, str] = {}
    for r in runs:
        if r.run_id in value:
            by[(r.task, r.surface)] = value[r.run_id]
            complexity[r.task] = r.complexity
    tasks = sorted(
        t
        for t in complexity
        if (t, a) in by and (t, b) in by and (only is None or complexity[t] == only)
    )
    x = np.array([by[(t, a)] for t in tasks], dtype=float)
    y = np.array([by[(t, b)] for t in tasks], dtype=float)
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep], [t for t, k in zip(tasks, keep, strict=True) if k]


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
    if unverified:
        deviations.append(f"{len(unverified)} run(s) have no verdict and count as failures")
    passed = {r.run_id: float(bool(r.passed)) for r in runs}

    success: dict[str, dict[str, Estimate]] = {}
    for s in ran:
        success[s] = {}
        for c in ("all", "single", "composition"):
            sel = [r for r in runs if r.surface == s and (c == "all" or r.complexity == c)]
            success[s][c] = wilson(sum(1 for r in sel if r.passed), len(sel), level)

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
            "power": _num(paired_power(est.value, sd, int(x.size), prereg.alpha)),
            "pairs_for_80pct": pairs_for_power(est.value, sd, 0.8, prereg.alpha),
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
        hit = [r for r in runs if r.surface == s and any(c.status != "ok" for c in r.calls)]
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
        out.append(Hypothesis(name="H1", claim=claim1, estimate=est, p=_nan(est.p), agrees=agrees))
    else:
        deviations.append(f"H1 not tested: it compares {better} and {than}, not both run")
        out.append(
            Hypothesis(name="H1", claim=claim1, estimate=None, p=math.nan, note="not tested")
        )

    others = [s for s in ran if s != prereg.h2]
    claim2 = f"{prereg.h2} has the highest interface inefficiency (eta)"
    if prereg.h2 in ran and others:
        ests = [
            paired_bootstrap(
                *_paired(runs, prereg.h2, o, eta_of)[:2], reps=reps, level=level, seed=rng
            )
            for o in others
        ]
        worst = min(ests, key=lambda e: _nan(e.value))
        p = max(_nan(e.p) for e in ests)
        note = "; ".join(f"vs {o}: {e.value:+.3f}" for o, e in zip(others, ests, strict=True))
        agrees = all(e.value > 0 for e in ests)
        out.append(
            Hypothesis(name="H2", claim=claim2, estimate=worst, p=p, note=note, agrees=agrees)
        )
    else:
        deviations.append(f"H2 not tested: {prereg.h2} or every other surface was not run")
        out.append(
            Hypothesis(name="H2", claim=claim2, estimate=None, p=math.nan, note="not tested")
        )

    claim3 = f"{prereg.h3} has the highest error-recovery rate"
    others = [s for s in ran if s != prereg.h3]
    if prereg.h3 in ran and others and recovered[prereg.h3][1]:
        k, n = recovered[prereg.h3]
        ps, notes = [], []
        agrees = True
        for o in others:
            ko, no = recovered[o]
            if no == 0:
                notes.append(f"vs {o}: no run of {o} hit an error")
                continue
            table = [[k, n - k], [ko, no - ko]]
            ps.append(float(sps.fisher_exact(table, alternative="two-sided")[1]))
            agrees = agrees and k / n > ko / no
            notes.append(f"vs {o}: {k}/{n} against {ko}/{no}")
        p = max(ps) if ps else math.nan
        out.append(
            Hypothesis(
                name="H3",
                claim=claim3,
                estimate=recovery[prereg.h3],
                p=p,
                note="; ".join(notes),
                agrees=agrees and bool(ps),
            )
        )
    else:
        deviations.append(f"H3 not tested: no run of {prereg.h3} hit an error, or it was not run")
        out.append(
            Hypothesis(name="H3", claim=claim3, estimate=None, p=math.nan, note="not tested")
        )

    claim4 = f"{prereg.h4} has the lowest token cost per run on single tasks"
    others = [s for s in ran if s != prereg.h4]
    if prereg.h4 in ran and others:
        ests = [
            paired_bootstrap(
                *_paired(runs, prereg.h4, o, total_of, only="single")[:2],
                reps=reps,
                level=level,
                seed=rng,
            )
            for o in others
        ]
        worst = max(ests, key=lambda e: _nan(e.value))
        p = max(_nan(e.p) for e in ests)
        pairs = zip(others, ests, strict=True)
        note = "; ".join(f"vs {o}: {e.value:+.0f} tokens" for o, e in pairs)
        agrees = all(e.value < 0 for e in ests)
        out.append(
            Hypothesis(name="H4", claim=claim4, estimate=worst, p=p, note=note, agrees=agrees)
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
            )
        )
    return final


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

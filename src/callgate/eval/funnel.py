"""The stage funnel: where a tool-using agent fails, from the ledger alone.

The notes factor success by the chain rule (exact, no independence assumed):
P(A∩B∩C∩D) = P(A)·P(B|A)·P(C|A,B)·P(D|A,B,C). The unit is one proposed call:

* **A, the tool**: the call names a tool the run was shown (otherwise the
  gate rejects it as an unknown tool, at the schema stage);
* **B, the arguments** (given A): the call was not rejected at the ``parse``
  or ``validate`` stage (``schema`` or ``semantic`` in older ledgers);
* **C, execution** (given A, B): the call ran and ended ``ok`` — a rejection
  at ``policy``, ``approval``, ``schedule`` or ``execute``, an ``error``, an
  ``unknown`` or a ``pending`` fails it, and so does a ``run_python`` program
  that exited non-zero or timed out (counted under ``program``);
* **D, the task** (given A, B, C): the verifier passed the run the call served.

Calls of one task are not independent (a model that misreads a task misreads
it on every call), so every rate and the product have a percentile bootstrap
interval resampling tasks: the calls of a task stay together (where every
task passes, or every one fails, that interval is a point, and Wilson's over
the tasks stands in). A stage no call
reached has no rate (NaN, "not reached"), never a rate of 0. Every failed call is
also counted by the stage that stopped it (``rejected_by``). Rows are per
surface and tool (the coarse ``do`` by operation: ``do(write)``), per
surface, and over everything.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from callgate.eval.record import CallView, RunView, parse_arguments
from callgate.eval.stats import Estimate, ratio_bootstrap, wilson

__all__ = ["ARGUMENT_STAGES", "Funnel", "FunnelRow", "call_stage", "funnel", "funnel_png"]

TOOL_WIDTH = 32
"""The widest tool name the text table prints whole (a model may invent any name)."""
ARGUMENT_STAGES = frozenset({"parse", "validate", "schema", "semantic"})
"""Where a call's arguments are rejected: ``parse`` and ``validate``, which older ledgers
record as ``schema`` (the schema) and ``semantic`` (the tool's own checks)."""


def call_stage(call: CallView, shown: Sequence[str]) -> str:
    """The funnel stage a call failed at (``A``, ``B``, ``C``) or ``ok`` if it executed.

    A program (``run_python``) that ended with a non-zero exit code or timed out
    did not execute successfully, though the tool call itself ended ``ok``.
    """
    if call.tool not in shown:
        return "A"
    if call.status == "rejected" and call.stage in ARGUMENT_STAGES:
        return "B"
    if call.status != "ok" or program_failed(call):
        return "C"
    return "ok"


def program_failed(call: CallView) -> bool:
    """Whether ``call`` ran a program that exited non-zero or timed out (the code surface)."""
    if call.tool != "run_python" or not call.content.startswith("{"):
        return False
    result = parse_arguments(call.content)
    if not isinstance(result, dict):
        return False
    return bool(result.get("timed_out")) or result.get("exit_code") not in (0, None)


@dataclass(frozen=True, slots=True, kw_only=True)
class FunnelRow:
    """The four conditional rates of one group of calls, and their product."""

    surface: str
    tool: str
    calls: int
    tasks: int
    a: Estimate
    b: Estimate
    c: Estimate
    d: Estimate
    product: Estimate
    rejected_by: dict[str, int] = field(default_factory=dict)
    reached: tuple[int, ...] = ()
    """Calls that reached A (all), B, C, D, and that passed D: the rates' denominators."""

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {
            "surface": self.surface,
            "tool": self.tool,
            "calls": self.calls,
            "tasks": self.tasks,
            "A": self.a.as_dict(),
            "B|A": self.b.as_dict(),
            "C|A,B": self.c.as_dict(),
            "D|A,B,C": self.d.as_dict(),
            "product": self.product.as_dict(),
            "rejected_by": dict(sorted(self.rejected_by.items())),
            "reached": dict(zip(("A", "B", "C", "D", "passed"), self.reached, strict=False)),
            "interval": "percentile bootstrap over tasks (calls of a task kept together)",
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Funnel:
    """The funnel table and the runs it came from."""

    rows: tuple[FunnelRow, ...]
    runs: int
    unverified: int
    """Runs without a verdict (left out of D)."""

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON data (``callgate eval funnel --json``)."""
        return {
            "unit": "proposed call; D is the verdict of the run the call served",
            "runs": self.runs,
            "unverified_runs": self.unverified,
            "rows": [r.as_dict() for r in self.rows],
        }

    def text(self) -> str:
        """The table as fixed-width text."""
        # a tool name whole up to TOOL_WIDTH characters, else cut with a visible "…"
        width = max([14, *(min(len(r.tool), TOOL_WIDTH) for r in self.rows)])
        head = (
            f"{'surface':<8} {'tool':<{width}} {'calls':>5}  {'A':>15}  {'B|A':>15}  "
            f"{'C|A,B':>15}  {'D|A,B,C':>15}  {'product':>15}  rejected by"
        )
        lines = [head, "-" * len(head)]
        for r in self.rows:
            cells = [_cell(e) for e in (r.a, r.b, r.c, r.d, r.product)]
            stages = ", ".join(f"{k} {v}" for k, v in sorted(r.rejected_by.items())) or "-"
            tool = r.tool if len(r.tool) <= TOOL_WIDTH else r.tool[: TOOL_WIDTH - 1] + "…"
            lines.append(
                f"{r.surface:<8} {tool:<{width}} {r.calls:>5}  " + "  ".join(cells) + f"  {stages}"
            )
        return "\n".join(lines)


def _cell(e: Estimate) -> str:
    if math.isnan(e.value):
        return f"{'not reached':>15}"
    if math.isnan(e.low):
        return f"{e.value:.2f}".rjust(15)
    return f"{e.value:.2f} [{e.low:.2f},{e.high:.2f}]".rjust(15)


# One observation per call: (task index, A, B, C, D) with -1 for "not reached".
_Obs = tuple[int, bool, bool, bool, bool]


def _rates(obs: Sequence[_Obs]) -> tuple[tuple[int, int], ...]:
    a = list(obs)
    b = [o for o in a if o[1]]
    c = [o for o in b if o[2]]
    d = [o for o in c if o[3]]
    return (
        (len(b), len(a)),
        (len(c), len(b)),
        (len(d), len(c)),
        (sum(1 for o in d if o[4]), len(d)),
    )


def _rate(num: np.ndarray[Any, Any], den: np.ndarray[Any, Any], reps: int, seed: int) -> Estimate:
    """A stage's rate over the tasks that reached it, bootstrapped over tasks. Where every
    task passes (or every one fails) each resample gives the same rate and the percentile
    interval collapses to a point, [1, 1] from ten tasks as from a thousand; the interval is
    then Wilson's over those tasks, each one trial (ten tasks: [0.72, 1])."""
    e = ratio_bootstrap(num, den, reps=reps, seed=seed)
    units = int(np.count_nonzero(den))
    if math.isnan(e.value) or units == 0 or e.value not in (0.0, 1.0):
        return e
    w = wilson(units if e.value == 1.0 else 0, units, e.level)
    return Estimate(value=e.value, low=min(e.low, w.low), high=max(e.high, w.high), level=e.level,
                    n=e.n)  # fmt: skip


def _row(
    surface: str, tool: str, obs: list[_Obs], stages: Counter[str], reps: int, seed: int
) -> FunnelRow:
    tasks = sorted({o[0] for o in obs})
    position = {t: i for i, t in enumerate(tasks)}
    # Per task: calls, and calls through A, A∩B, A∩B∩C, A∩B∩C∩D.
    counts = np.zeros((5, len(tasks)))
    for o in obs:
        i = position[o[0]]
        counts[0, i] += 1
        counts[1, i] += o[1]
        counts[2, i] += o[1] and o[2]
        counts[3, i] += o[1] and o[2] and o[3]
        counts[4, i] += o[1] and o[2] and o[3] and o[4]
    rates = [_rate(counts[k + 1], counts[k], reps, seed + k) for k in range(4)]
    product = _rate(counts[4], counts[0], reps, seed)
    return FunnelRow(
        surface=surface,
        tool=tool,
        calls=len(obs),
        tasks=len(tasks),
        a=rates[0],
        b=rates[1],
        c=rates[2],
        d=rates[3],
        product=product,
        rejected_by=dict(stages),
        reached=tuple(int(c) for c in counts.sum(axis=1)),
    )


def funnel(runs: Sequence[RunView], *, reps: int = 1000, seed: int = 0) -> Funnel:
    """The funnel of ``runs`` (see the module docstring); runs without a verdict count for
    A, B and C but not for D."""
    task_index: dict[str, int] = {}
    groups: dict[tuple[str, str], list[_Obs]] = {}
    stages: dict[tuple[str, str], Counter[str]] = {}
    unverified = 0
    for run in runs:
        if run.passed is None:
            unverified += 1
        t = task_index.setdefault(run.task or run.run_id, len(task_index))
        for call in run.calls:
            where = call_stage(call, run.tools)
            reached_d = where == "ok" and run.passed is not None
            o: _Obs = (
                t,
                where != "A",
                where not in ("A", "B"),
                where == "ok",
                bool(reached_d and run.passed),
            )
            if where == "ok" and run.passed is None:
                continue  # no verdict: D cannot be judged, and the product would be biased
            for key in ((run.surface, call.label), (run.surface, "all"), ("all", "all")):
                groups.setdefault(key, []).append(o)
                counter = stages.setdefault(key, Counter())
                if where == "A":
                    counter["unknown_tool"] += 1
                elif where != "ok":
                    counter["program" if program_failed(call) else (call.stage or call.status)] += 1
    order = sorted(groups, key=lambda k: (k[0] == "all", k[0], k[1] == "all", k[1]))
    rows = tuple(_row(s, t, groups[(s, t)], stages[(s, t)], reps, seed) for s, t in order)
    return Funnel(rows=rows, runs=len(runs), unverified=unverified)


def funnel_png(f: Funnel, path: Path) -> Path | None:
    """A bar chart of each surface's four rates and product with their intervals (Agg), the
    calls under each bar written on it and a stage no call reached marked "not reached"
    (not drawn as 0). None, and nothing written, when no call was proposed."""
    rows = [r for r in f.rows if r.tool == "all"]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = ["A", "B|A", "C|A,B", "D|A,B,C", "product"]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / max(1, len(rows))
    for i, r in enumerate(rows):
        est = [r.a, r.b, r.c, r.d, r.product]
        under = [*r.reached[:4], r.calls]
        x = np.arange(len(labels)) + i * width
        vals = np.array([0.0 if math.isnan(e.value) else e.value for e in est])
        lo = np.array([0.0 if math.isnan(e.low) else e.value - e.low for e in est])
        hi = np.array([0.0 if math.isnan(e.high) else e.high - e.value for e in est])
        bars = ax.bar(
            x, vals, width, yerr=[np.maximum(lo, 0), np.maximum(hi, 0)], capsize=2, label=r.surface
        )
        for xi, e, n, bar in zip(x, est, under, bars, strict=True):
            if math.isnan(e.value):
                ax.text(xi, 0.02, "not\nreached", ha="center", va="bottom", fontsize=7)
                bar.set_hatch("//")
            else:  # above the interval's top, where no error bar or cap can cross it
                top = e.value if math.isnan(e.high) else max(e.value, e.high)
                ax.text(xi, top + 0.015, f"n={n}", ha="center", va="bottom", fontsize=7,
                        rotation=90)  # fmt: skip
    ax.set_xticks(np.arange(len(labels)) + width * (len(rows) - 1) / 2, labels)
    ax.set_ylim(0, 1.25)
    ax.set_yticks(np.linspace(0, 1, 6))  # a rate: the room above 1 is for the n labels
    ax.set_ylabel("rate (95% interval, bootstrap over tasks)")
    ax.set_title("Stage funnel: conditional success by stage (n = calls under the rate)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="surface")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

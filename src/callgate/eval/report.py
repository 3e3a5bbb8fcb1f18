"""The lab's report: Markdown with PNG plots (matplotlib, Agg) and the JSON beside them.

`write_report` writes into one directory: ``report.md``, ``analysis.json``,
``funnel.json``, ``funnel.png``, ``success.png`` (success by surface and
complexity), ``eta.png`` (η by surface) and ``tokens.png`` (tokens per run by
surface and complexity, split into schema, calls and results).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from callgate.eval.analysis import Analysis
from callgate.eval.funnel import Funnel, funnel_png
from callgate.eval.stats import Estimate
from callgate.eval.tokens import ETA_CAVEATS, ETA_ESTIMATOR

__all__ = ["markdown", "write_report"]


def _e(e: Estimate | None, digits: int = 2) -> str:
    if e is None or math.isnan(e.value):
        return "—"
    if math.isnan(e.low):
        return f"{e.value:.{digits}f}"
    return f"{e.value:.{digits}f} [{e.low:.{digits}f}, {e.high:.{digits}f}]"


def _p(p: float) -> str:
    return "—" if math.isnan(p) else f"{p:.4f}"


def markdown(a: Analysis, f: Funnel, *, extra: str = "", notes: Sequence[str] = ()) -> str:
    """The report's Markdown text; ``notes`` say which figures were not drawn and why."""
    pr = a.prereg
    level = f"{pr.level:.0%}"
    out = [
        f"# {pr.title}",
        "",
        f"{a.tasks} tasks × {len(a.surfaces)} surfaces ({', '.join(a.surfaces)}), "
        f"{a.runs} runs, paired by task. Intervals are {level}; p-values are two-sided; "
        f"Holm-adjusted over the {len(a.hypotheses)} hypotheses at α = {pr.alpha}. "
        "Each hypothesis row's estimate, interval and p-value come from the one comparison "
        "it names.",
    ]
    if extra:
        out += ["", "## Labs and models", "", extra]
    if notes:
        out += ["", *(f"**{n}**" for n in notes)]
    out += ["", "## Deviations from the pre-registration", ""]
    out += [f"- {d}" for d in a.deviations] or ["- none"]
    out += [
        "",
        "## Hypotheses",
        "",
        "| | claim | comparison | estimate [interval] | p | p (Holm) | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for h in a.hypotheses:
        out.append(
            f"| {h.name} | {h.claim} | {h.comparison or '—'} | {_e(h.estimate, 3)} | "
            f"{_p(h.p)} | {_p(h.p_holm)} | {h.verdict} |"
        )
    out += ["", "Notes: " + " ".join(f"{h.name}: {h.note}." for h in a.hypotheses if h.note)]
    out += [
        "",
        "## Task success by surface and complexity",
        "",
        "| surface | all | single | composition |",
        "|---|---|---|---|",
    ]
    for s, by in a.success.items():
        out.append(f"| {s} | {_e(by['all'])} | {_e(by['single'])} | {_e(by['composition'])} |")
    out += [
        "",
        "Success counts tasks (a task run more than once on a surface counts the mean of "
        "its runs): Wilson intervals when each task ran once, else a bootstrap over tasks.",
        "",
        "Paired differences in success (bootstrap over tasks) and a priori power "
        + (
            f"for the registered minimum effect {pr.min_effect:g} "
            "(at the bound sd = sqrt(1 − δ²) of a paired success difference):"
            if pr.min_effect is not None
            else "(none: the pre-registration states no min_effect):"
        ),
        "",
        "| pair | difference | p | pairs | power for min_effect | pairs for 80% power |",
        "|---|---|---|---|---|---|",
    ]
    for pair, est in a.differences.items():
        pw = a.power[pair]
        prior = pw.get("a_priori") or {}
        power = "—" if prior.get("power") is None else f"{prior['power']:.2f}"
        out.append(
            f"| {pair} | {_e(est, 3)} | {_p(_nanp(est.p))} | {pw['pairs']} | {power} | "
            f"{prior.get('pairs_for_80pct') or '—'} |"
        )
    out += [
        "",
        "![success](success.png)",
        "",
        "## The stage funnel",
        "",
        "```",
        f.text(),
        "```",
        "",
        "![funnel](funnel.png)",
        "",
        "## Interface inefficiency η",
        "",
        "| surface | mean η | Ĥ(T|C) bits | Ĥ(A|T,C) bits | calls |",
        "|---|---|---|---|---|",
    ]
    for s, est in a.eta.items():
        ent = a.entropy.get(s, {})
        out.append(
            f"| {s} | {_e(est)} | {ent.get('H(T|C)', math.nan):.2f} | "
            f"{ent.get('H(A|T,C)', math.nan):.2f} | {int(ent.get('calls', 0))} |"
        )
    out += [
        "",
        f"Estimator: {ETA_ESTIMATOR} Tokenizer: {a.tokenizer}. "
        f"Assumed prefix-cache hit rate: {pr.cache_hit:g}.",
        "",
        "Caveats:",
        "",
    ]
    out += list(ETA_CAVEATS)
    out += [
        "",
        "![eta](eta.png)",
        "",
        "## Tokens per run",
        "",
        "| surface | complexity | runs | schema | calls | results | calls per run |"
        " call tokens per call |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s, parts in a.tokens.items():
        for c, t in parts.items():
            out.append(
                f"| {s} | {c} | {int(t['runs'])} | {t['schema']:.0f} | {t['calls']:.0f} | "
                f"{t['results']:.0f} | {t['n_calls']:.1f} | {t['call_tokens_per_call']:.1f} |"
            )
    out += [
        "",
        "![tokens](tokens.png)",
        "",
        "## Error recovery",
        "",
        "Of the runs with at least one failed call, the share whose task passed:",
        "",
    ]
    out += [f"- {s}: {_e(e)} (n={e.n})" for s, e in a.recovery.items()]
    out += [
        "",
        "A failed call is one the funnel fails (A, B or C): a `run_python` program that "
        "exited non-zero or timed out counts.",
    ]
    if pr.text:
        out += ["", "## The pre-registration, as registered", "", "```toml", pr.text.strip(), "```"]
    return "\n".join(out) + "\n"


def _nanp(p: float | None) -> float:
    return math.nan if p is None else p


def _plots(a: Analysis, out: Path) -> list[str]:
    """Draw success, η and tokens into ``out``; the sentences standing for a figure that had
    nothing to draw (no run, no call): nothing is drawn from an empty lab."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    notes: list[str] = []
    surfaces = a.surfaces
    x = np.arange(len(surfaces))
    levels = ("single", "composition")
    if not surfaces:
        return ["No run was recorded: no figure is drawn."]
    fig, ax = plt.subplots(figsize=(8, 4))
    for i, c in enumerate(levels):
        ests = [a.success[s][c] for s in surfaces]
        vals = np.array([0.0 if math.isnan(e.value) else e.value for e in ests])
        err = np.array(
            [
                [max(0.0, e.value - e.low), max(0.0, e.high - e.value)]
                if not math.isnan(e.value) and not math.isnan(e.low)
                else [0.0, 0.0]
                for e in ests
            ]
        ).T
        bars = ax.bar(x + i * 0.4, vals, 0.4, yerr=err, capsize=3, label=c)
        for xi, e, bar in zip(x + i * 0.4, ests, bars, strict=True):
            if math.isnan(e.value):
                bar.set_hatch("//")
                ax.text(xi, 0.05, "no task", ha="center", va="bottom", fontsize=8)
            else:  # above the interval's top, where no error bar or cap can cross it
                top = e.value if math.isnan(e.high) else max(e.value, e.high)
                ax.text(xi, top + 0.02, f"n={e.n}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x + 0.2, surfaces)
    ax.set_ylim(0, 1.15)
    ax.set_yticks(np.linspace(0, 1, 6))  # a rate: the room above 1 is for the n labels
    ax.set_ylabel("task success (95% interval)")
    ax.set_title("Success by surface and task complexity (n = tasks)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="complexity")
    fig.tight_layout()
    fig.savefig(out / "success.png", dpi=100)
    plt.close(fig)

    data = [
        [r["eta"] for r in a.per_run if r["surface"] == s and r["eta"] is not None]
        for s in surfaces
    ]
    if any(data):
        fig, ax = plt.subplots(figsize=(9, 4))
        rng = np.random.default_rng(0)
        for i, (s, d) in enumerate(zip(surfaces, data, strict=True)):
            if d:
                ax.scatter(i + rng.uniform(-0.12, 0.12, len(d)), d, s=12, alpha=0.45, color="grey")
            e = a.eta[s]
            if not math.isnan(e.value):
                yerr = [[e.value - e.low], [e.high - e.value]] if not math.isnan(e.low) else None
                ax.errorbar(
                    i + 0.25, e.value, yerr=yerr, fmt="o", color="C0", capsize=4,
                    label="mean η (95% bootstrap interval)" if i == 0 else None,
                )  # fmt: skip
        # n under each surface's name, where no point can cover it
        ticks = [f"{s}\nn={len(d)}" for s, d in zip(surfaces, data, strict=True)]
        ax.set_xticks(range(len(surfaces)), ticks)
        ax.set_xlim(-0.5, len(surfaces) - 0.5)
        ax.set_ylabel("η per run (grey: one run)")
        ax.set_title("Interface inefficiency by surface (n = runs with a call)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.tight_layout()
        fig.savefig(out / "eta.png", dpi=100)
        plt.close(fig)
    else:
        notes.append("No run proposed a call: η is not defined and eta.png is not drawn.")

    fig, ax = plt.subplots(figsize=(9, 4))
    labels = [f"{s}\n{c}" for s in surfaces for c in levels]
    bottom = np.zeros(len(labels))
    for part in ("schema", "calls", "results"):
        vals = np.array([a.tokens[s][c][part] for s in surfaces for c in levels])
        ax.bar(labels, vals, bottom=bottom, label=part)
        bottom += vals
    for i, (s, c) in enumerate((s, c) for s in surfaces for c in levels):
        runs = int(a.tokens[s][c]["runs"])
        ax.text(i, bottom[i], f"n={runs}" if runs else "no run", ha="center", va="bottom",
                fontsize=8)  # fmt: skip
    ax.set_ylim(0, max(1.0, float(bottom.max())) * 1.12)
    ax.set_ylabel(f"mean tokens per run ({a.tokenizer.split(' ')[0]})")
    ax.set_title(f"Token cost by part (cache hit {a.prereg.cache_hit:g}; n = runs)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="part")
    fig.tight_layout()
    fig.savefig(out / "tokens.png", dpi=100)
    plt.close(fig)
    return notes


def write_report(a: Analysis, f: Funnel, out: Path, *, extra: str = "") -> Path:
    """Write the report, its plots and its JSON into ``out``; the path of ``report.md``."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("funnel.png", "success.png", "eta.png", "tokens.png"):
        (out / stale).unlink(missing_ok=True)  # a figure not drawn this time must not linger
    notes = _plots(a, out)
    if funnel_png(f, out / "funnel.png") is None:
        notes.append("No call was proposed: the funnel has no rate and funnel.png is not drawn.")
    (out / "analysis.json").write_text(json.dumps(a.as_dict(), indent=2, default=_json))
    (out / "funnel.json").write_text(json.dumps(f.as_dict(), indent=2))
    path = out / "report.md"
    text = markdown(a, f, extra=extra, notes=notes)
    for figure in ("funnel", "success", "eta", "tokens"):
        if not (out / f"{figure}.png").exists():
            text = text.replace(f"![{figure}]({figure}.png)\n", "")
    path.write_text(text, encoding="utf-8")
    return path


def _json(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return str(value)

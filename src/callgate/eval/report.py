"""The lab's report: Markdown with PNG plots (matplotlib, Agg) and the JSON beside them.

`write_report` writes into one directory: ``report.md``, ``analysis.json``,
``funnel.json``, ``funnel.png``, ``success.png`` (success by surface and
complexity), ``eta.png`` (η by surface) and ``tokens.png`` (tokens per run by
surface and complexity, split into schema, calls and results).
"""

from __future__ import annotations

import json
import math
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


def markdown(a: Analysis, f: Funnel, *, extra: str = "") -> str:
    """The report's Markdown text."""
    pr = a.prereg
    level = f"{pr.level:.0%}"
    out = [
        f"# {pr.title}",
        "",
        f"{a.tasks} tasks × {len(a.surfaces)} surfaces ({', '.join(a.surfaces)}), "
        f"{a.runs} runs, paired by task. Intervals are {level}; p-values are two-sided; "
        f"Holm-adjusted over the {len(a.hypotheses)} hypotheses at α = {pr.alpha}.",
    ]
    if extra:
        out += ["", extra]
    out += ["", "## Deviations from the pre-registration", ""]
    out += [f"- {d}" for d in a.deviations] or ["- none"]
    out += [
        "",
        "## Hypotheses",
        "",
        "| | claim | estimate | p | p (Holm) | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for h in a.hypotheses:
        if math.isnan(h.p):
            verdict = "not tested"
        elif h.supported:
            verdict = "supported"
        elif h.agrees:
            verdict = "direction as claimed, not significant"
        else:
            verdict = "not supported"
        out.append(
            f"| {h.name} | {h.claim} | {_e(h.estimate, 3)} | {_p(h.p)} | {_p(h.p_holm)} "
            f"| {verdict} |"
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
        "Paired differences in success (bootstrap over tasks) and power:",
        "",
        "| pair | difference | p | power at n | pairs for 80% power |",
        "|---|---|---|---|---|",
    ]
    for pair, est in a.differences.items():
        pw = a.power[pair]
        power = "—" if pw["power"] is None else f"{pw['power']:.2f} (n={pw['pairs']})"
        out.append(
            f"| {pair} | {_e(est, 3)} | {_p(_nanp(est.p))} | {power} | "
            f"{pw['pairs_for_80pct'] or '—'} |"
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
    if pr.text:
        out += ["", "## The pre-registration, as registered", "", "```toml", pr.text.strip(), "```"]
    return "\n".join(out) + "\n"


def _nanp(p: float | None) -> float:
    return math.nan if p is None else p


def _plots(a: Analysis, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    surfaces = a.surfaces
    x = np.arange(len(surfaces))
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, c in enumerate(("single", "composition")):
        ests = [a.success[s][c] for s in surfaces]
        vals = np.array([0.0 if math.isnan(e.value) else e.value for e in ests])
        err = np.array(
            [
                [max(0.0, e.value - e.low), max(0.0, e.high - e.value)]
                if not math.isnan(e.value)
                else [0.0, 0.0]
                for e in ests
            ]
        ).T
        ax.bar(x + i * 0.4, vals, 0.4, yerr=err, label=c)
    ax.set_xticks(x + 0.2, surfaces)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("task success (Wilson interval)")
    ax.set_title("Success by surface and task complexity")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "success.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    data = [
        [r["eta"] for r in a.per_run if r["surface"] == s and r["eta"] is not None]
        for s in surfaces
    ]
    ax.boxplot([d if d else [math.nan] for d in data], tick_labels=surfaces)
    ax.set_ylabel("η per run")
    ax.set_title("Interface inefficiency by surface")
    fig.tight_layout()
    fig.savefig(out / "eta.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 4))
    labels = [f"{s}\n{c}" for s in surfaces for c in ("single", "composition")]
    bottom = np.zeros(len(labels))
    for part in ("schema", "calls", "results"):
        vals = np.array([a.tokens[s][c][part] for s in surfaces for c in ("single", "composition")])
        ax.bar(labels, vals, bottom=bottom, label=part)
        bottom += vals
    ax.set_ylabel(f"tokens per run ({a.tokenizer.split(' ')[0]})")
    ax.set_title(f"Token cost by part (cache hit {a.prereg.cache_hit:g})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "tokens.png", dpi=100)
    plt.close(fig)


def write_report(a: Analysis, f: Funnel, out: Path, *, extra: str = "") -> Path:
    """Write the report, its plots and its JSON into ``out``; the path of ``report.md``."""
    out.mkdir(parents=True, exist_ok=True)
    funnel_png(f, out / "funnel.png")
    _plots(a, out)
    (out / "analysis.json").write_text(json.dumps(a.as_dict(), indent=2, default=_json))
    (out / "funnel.json").write_text(json.dumps(f.as_dict(), indent=2))
    path = out / "report.md"
    path.write_text(markdown(a, f, extra=extra), encoding="utf-8")
    return path


def _json(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return str(value)

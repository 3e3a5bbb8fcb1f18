"""``callgate eval grammar-decision``: is grammar-constrained decoding worth it, from the record.

``callgate eval grammar-decision --db LEDGER`` reads the agent runs in a
ledger and prints, per model and tool set, the terms of the decision rule
``p_f·c_r > c_g + q`` (`callgate.eval.grammar_decision`) with their 95 %
intervals and the verdict: "constrain", "do not constrain" or "undecided".
``--success-value`` prices a success in seconds (q's unit); ``--json``
writes the decisions as data. ``--lab ID`` (repeatable: a free lab and a
constrained lab of one model) keeps the runs of those labs: success is then
the lab verifier's verdict, and c_g comes from the decodes the lab recorded.
A term drawn from fewer than ``MIN_TASKS`` tasks makes the verdict "not
enough data", with the runs still needed.

Exit codes: 0 success; 2 bad usage or input (no ledger there, no agent runs
in it); 3 the ledger could not be read.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from callgate.cli.ledger import open_ledger
from callgate.cli.plain import fail, plain
from callgate.ledger.sqlite import DEFAULT_PATH

if TYPE_CHECKING:  # callgate.eval needs the eval extra: imported when the command runs
    from callgate.eval.grammar_decision import Decision

__all__ = ["app", "grammar_decision", "render"]

DEFAULT_DB = Path(os.environ.get("CALLGATE_DB", DEFAULT_PATH))

app = typer.Typer(
    name="grammar",
    help="The grammar decision p_f·c_r > c_g + q, from the runs in a ledger.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main() -> None:
    """The grammar decision p_f·c_r > c_g + q, from the runs in a ledger."""


def render(decision: Decision) -> str:
    """One decision as the lines the command prints."""
    d = decision
    runs = ", ".join(f"{mode}: {n}" for mode, n in d.runs.items())
    lines = [
        f"model {d.model or '(unnamed)'} with {len(d.tools)} tools ({', '.join(d.tools)})",
        f"  runs: {runs}",
        f"  p_f  failures of free decoding: {d.shape_failures}/{d.proposed} = {d.p_f}",
        f"       ({d.p_f_unit})",
    ]
    for mode, rate in d.failure_rates.items():
        cut = d.cut_off.get(mode, 0)
        cut_note = f"; {cut} of them cut off at the output token limit" if cut else ""
        shown = "no call proposed" if math.isnan(rate.value) else f"{rate}{cut_note}"
        lines.append(f"       parse+schema failures per call proposed ({mode}): {shown}")
    if d.c_r is not None:
        tokens = f", {d.c_r_tokens} tokens" if d.c_r_tokens is not None else ""
        lines.append(f"  c_r  a retry: {d.c_r} s{tokens} ({d.c_r_source})")
    else:
        lines.append("  c_r  not measured: no model turn on record")
    if d.c_g is not None:
        parts = ", ".join(f"{k} {v:.4g}" for k, v in d.c_g_parts.items())
        lines.append(f"  c_g  constraining, per call: {d.c_g} s ({parts})")
    else:
        lines.append("  c_g  not measured: no model.decode event of a constrained run")
    for mode, rate in d.success.items():
        lines.append(f"       success rate ({mode}): {rate}")
    if d.q_rate is not None:
        lines.append(
            f"  q    grammar tax: success free − constrained = {d.q_rate} over "
            f"{d.paired_tasks} paired tasks, × {d.success_value:g} s a success = {d.q} s"
        )
    else:
        lines.append("  q    not measured: no task ran both free and constrained")
    units = ", ".join(f"{k} {v}" for k, v in d.units.items())
    if units:
        lines.append(f"  tasks behind each term (the intervals' unit): {units}")
    lines.append(f"  verdict: {d.verdict.upper()}: {d.reason}")
    if d.break_even is not None:
        lines.append(
            f"  constraining stops paying where a success is worth more than "
            f"{d.break_even:.3g} s (at the point estimates)"
        )
    return "\n".join(lines)


@app.command("grammar-decision")
def grammar_decision(
    db: Annotated[
        Path,
        typer.Option("--db", help="The SQLite ledger (default $CALLGATE_DB or ./callgate.db)."),
    ] = DEFAULT_DB,
    dsn: Annotated[
        str | None,
        typer.Option("--dsn", envvar="CALLGATE_DSN", help="A PostgreSQL ledger instead."),
    ] = None,
    success_value: Annotated[
        float,
        typer.Option(
            "--success-value",
            min=0.0,
            help="What one successful task is worth, in seconds: q's unit (default 60).",
        ),
    ] = 60.0,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the decisions as JSON here.")
    ] = None,
    lab: Annotated[
        list[str] | None,
        typer.Option(
            "--lab", help="Only the runs of this lab (repeat for a free and a constrained lab)."
        ),
    ] = None,
) -> None:
    """Print p_f, c_r, c_g and q with 95 % intervals, and whether p_f·c_r > c_g + q."""
    from callgate.cli.eval import require_eval

    require_eval("callgate eval grammar-decision")
    from callgate.eval.grammar_decision import decide, decisions_json

    with open_ledger(db, dsn) as ledger:
        records = list(ledger.audit())
    decisions = decide(records, success_value=success_value, labs=lab or None)
    if not decisions and lab:
        raise fail(
            f"no agent runs of lab(s) {', '.join(plain(x) for x in lab)} in the ledger: "
            "'callgate lab run --lab ID' records them",
            code=2,
        )
    if not decisions:
        raise fail(
            f"no agent runs in the ledger at {db if dsn is None else 'the DSN'}: the rule needs "
            "agent.started events (runs of callgate.Agent); run a task set first, e.g. "
            "python examples/local/evaluate.py --db LEDGER",
            code=2,
        )
    if lab:
        from callgate.eval.record import labs_from_records

        for found in labs_from_records(records):
            if found.lab in lab:
                typer.echo(plain(f"lab {found.lab}: model {found.model_line()}"))
    for decision in decisions:
        for line in render(decision).splitlines():
            typer.echo(plain(line))  # model and tool names come from the ledger: shown, not obeyed
    if json_out is not None:
        json_out.write_text(decisions_json(decisions) + "\n", encoding="utf-8")

"""``callgate eval``: evaluation from the record.

``callgate eval funnel --db lab.db`` reads the evaluation runs in a ledger
(those the lab recorded, ``eval.run`` and ``eval.verdict`` events beside the
agent's transcript) and prints the stage funnel: per surface and tool, the
rates P(A), P(B|A), P(C|A,B), P(D|A,B,C) with Wilson intervals, their
product with a bootstrap interval over tasks, and the stage each failed call
was stopped at. ``--png`` and ``--json`` write the chart and the data;
``--tasks`` adds the BFCL-style check of each run's calls against the
task's expected calls, where the task set has them.

Needs the ``eval`` extra (numpy, scipy, matplotlib), imported when a command
runs, so that the rest of the ``callgate`` command works without it.

Exit codes: 0 success; 2 bad usage or input (no ledger there, no evaluation
runs in it, an unreadable task set, the ``eval`` extra missing); 3 the ledger
could not be read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from callgate.cli.extras import require
from callgate.cli.ledger import open_ledger
from callgate.cli.plain import fail, plain
from callgate.errors import DefinitionError
from callgate.ledger.sqlite import DEFAULT_PATH

if TYPE_CHECKING:
    from callgate.eval.record import RunView

__all__ = ["app", "expected_call_check", "require_eval"]

DEFAULT_DB = Path(os.environ.get("CALLGATE_DB", DEFAULT_PATH))

app = typer.Typer(
    name="eval",
    help="Evaluation from the record: the stage funnel of the runs in a ledger.",
    no_args_is_help=True,
    add_completion=False,
)


def require_eval(what: str) -> None:
    """Exit 2 naming the ``eval`` extra unless its packages import."""
    require("eval", what, "numpy", "scipy", "matplotlib")


@app.callback()
def main() -> None:
    """Evaluation from the record: the stage funnel of the runs in a ledger."""


def expected_call_check(runs: list[RunView], spec: str) -> dict[str, dict[str, float]]:
    """Per surface: runs checked against expected calls, exact matches, mean recall and
    precision (runs whose task has no expected calls for their surface are left out)."""
    from callgate.eval.checker import check_calls
    from callgate.eval.record import parse_arguments
    from callgate.eval.repo_tasks import load_tasks

    tasks = {t.id: t for t in load_tasks(spec)}
    out: dict[str, dict[str, float]] = {}
    for run in runs:
        task = tasks.get(run.task)
        expected = task.expected_calls.get(run.surface) if task else None
        if not expected:
            continue
        actual = []
        for call in run.calls:
            args = parse_arguments(call.arguments)
            actual.append((call.tool, args if isinstance(args, dict) else {}))
        check = check_calls(expected, actual)
        row = out.setdefault(run.surface, {"runs": 0, "exact": 0, "recall": 0.0, "precision": 0.0})
        row["runs"] += 1
        row["exact"] += int(check.exact)
        row["recall"] += check.recall
        row["precision"] += check.precision
    for row in out.values():
        row["recall"] = round(row["recall"] / row["runs"], 4)
        row["precision"] = round(row["precision"] / row["runs"], 4)
    return out


@app.command("funnel")
def funnel_command(
    db: Annotated[
        Path,
        typer.Option("--db", help="The SQLite ledger the runs were recorded in."),
    ] = DEFAULT_DB,
    dsn: Annotated[
        str | None, typer.Option("--dsn", help="A PostgreSQL ledger instead of --db.")
    ] = None,
    lab: Annotated[
        list[str] | None,
        typer.Option("--lab", help="The lab's runs (repeat with --pool to pool several)."),
    ] = None,
    pool: Annotated[
        bool, typer.Option("--pool", help="Pool the labs named (or every lab) on purpose.")
    ] = False,
    tasks: Annotated[
        str | None,
        typer.Option(
            "--tasks",
            help="The task set ('repo', 'repo:N' or a JSON file) for the expected-call check.",
        ),
    ] = None,
    png: Annotated[Path | None, typer.Option("--png", help="Write the chart here.")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the data here.")] = None,
    reps: Annotated[int, typer.Option("--reps", min=100, help="Bootstrap resamples.")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="The bootstrap's seed.")] = 0,
) -> None:
    """Print the stage funnel of the evaluation runs in a ledger."""
    require_eval("callgate eval funnel")
    from callgate.eval.funnel import funnel, funnel_png
    from callgate.eval.record import labs_from_records, runs_from_records

    with open_ledger(db, dsn) as ledger:
        records = list(ledger.audit())
    labs = [x.lab for x in labs_from_records(records)]
    if ((not lab and len(labs) > 1) or (lab and len(lab) > 1)) and not pool:
        raise fail(
            f"the ledger holds labs {', '.join(plain(x) for x in labs)}: name one with --lab ID, "
            "or pool several on purpose with --pool",
            2,
        )
    runs = runs_from_records(records, lab=lab or None)
    if not runs:
        which = f" of lab {', '.join(lab)}" if lab else ""
        raise fail(
            f"no evaluation runs{which} in the ledger (runs are recorded by "
            "'callgate lab run', which writes eval.run events)",
            2,
        )
    result = funnel(runs, reps=reps, seed=seed)
    typer.echo(plain(result.text(), multiline=True))
    data = result.as_dict()
    if tasks is not None:
        try:
            checked = expected_call_check(runs, tasks)
        except DefinitionError as exc:
            raise fail(str(exc), 2) from None
        data["expected_calls"] = checked
        typer.echo("\nexpected calls (BFCL-style check):")
        for surface, row in sorted(checked.items()):
            typer.echo(
                f"  {surface}: {int(row['exact'])}/{int(row['runs'])} runs exact, "
                f"recall {row['recall']:.2f}, precision {row['precision']:.2f}"
            )
    if result.unverified:
        typer.echo(f"\n{result.unverified} run(s) without a verdict: left out of D")
    if png is not None:
        if funnel_png(result, png) is None:
            typer.echo("no call was proposed: no funnel chart is drawn")
        else:
            typer.echo(f"wrote {png}")
    if json_out is not None:
        json_out.write_text(json.dumps(data, indent=2), encoding="utf-8")
        typer.echo(f"wrote {json_out}")

"""``callgate lab``: the three-surface lab, run and analysed as pre-registered.

``callgate lab run --surfaces coarse,fine --model policy:planted --tasks repo
--prereg examples/lab/prereg.toml --db lab.db --out lab-report`` runs every
task on every surface (paired), records every run in the ledger, then writes
the pre-registered analysis (``report.md``, PNG plots, JSON) into ``--out``.
``--model`` is any ``callgate`` model spec (see ``callgate run --help``), read
as ``callgate run`` reads it: ``local``, ``local:smollm2`` or ``local:PATH``,
optionally ``+llguidance``, ``+gbnf`` or ``+none``, is a GGUF model run in this
process by llama.cpp (``--constrain`` gives the constraint when the spec does
not); ``policy:NAME`` is a scripted policy with known behaviour (``oracle``,
``oracle-fast``, ``planted``, ``clumsy``).
``callgate lab analyse`` analyses the runs already in a ledger again.

Needs the ``eval`` extra (numpy, scipy, matplotlib), imported when a command
runs. Exit codes: 0 success; 2 bad usage or input (an unknown surface, model,
policy or task set, an unreadable pre-registration, the ``eval`` extra
missing); 3 the ledger could not be read.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from callgate.agent.state import Budgets
from callgate.cli.eval import require_eval
from callgate.cli.ledger import check_ledger, open_ledger
from callgate.cli.plain import fail, plain
from callgate.errors import DefinitionError
from callgate.ledger.sqlite import SQLiteLedger
from callgate.llms import CONSTRAINTS, model_from_spec, parse_local_spec

if TYPE_CHECKING:  # callgate.eval needs the eval extra: imported when a command runs
    from callgate.eval.analysis import Prereg
    from callgate.eval.lab import LabRun, ModelFor

__all__ = ["app", "model_for_spec"]

app = typer.Typer(
    name="lab",
    help="The three-surface lab: every task on every surface, analysed as pre-registered.",
    no_args_is_help=True,
    add_completion=False,
)


def model_for_spec(
    spec: str, *, seed: int = 0, constrain: str | None = None, max_tokens: int = 256
) -> ModelFor:
    """The model of each run: ``policy:NAME`` (a scripted policy per task and surface),
    a local spec read by `parse_local_spec` (``local``, ``local:smollm2``, ``local:PATH``,
    each optionally ``+CONSTRAINT``: a GGUF model run by llama.cpp, `callgate.llms.local`,
    that must call a tool at each step; ``constrain`` applies when the spec names none),
    or any other ``--model`` spec (one model for every run)."""
    if spec.startswith("policy:"):
        from callgate.eval.policies import policy_named

        policy = policy_named(spec[7:])
        return lambda task, surface: policy.model(task, surface, seed=seed)
    if spec == "local" or spec.startswith(("local:", "local+")):
        from callgate.llms.local import LocalModel

        if constrain is not None and constrain not in CONSTRAINTS:
            raise DefinitionError(f"--constrain {constrain!r}: use llguidance, gbnf or none")
        path, named = parse_local_spec(spec)
        if named is not None and constrain is not None and named != constrain:
            raise DefinitionError(
                f"--model {spec!r} says +{named} and --constrain says {constrain}: "
                "give the constraint once"
            )
        local = LocalModel(
            path,
            constrain=named or constrain or "llguidance",  # type: ignore[arg-type]  # checked
            answer=False,
            max_tokens=max_tokens,
            seed=seed,
        )
        return lambda task, surface: local
    model = model_from_spec(spec)
    return lambda task, surface: model


def _report(
    db: Path,
    lab_id: str | None,
    prereg: Prereg,
    tokenizer: str,
    out: Path,
    extra: str,
    deviations: list[str] | None = None,
) -> Path:
    from callgate.eval.analysis import analyse
    from callgate.eval.funnel import funnel
    from callgate.eval.record import read_runs
    from callgate.eval.report import write_report
    from callgate.eval.tokens import tokenizer_from

    with open_ledger(db, None) as ledger:
        runs = read_runs(ledger, lab=lab_id)
    if not runs:
        raise fail(f"no evaluation runs{' of lab ' + lab_id if lab_id else ''} in {db}", 2)
    try:
        tok = tokenizer_from(tokenizer)
    except DefinitionError as exc:
        raise fail(str(exc), 2) from None
    analysis = analyse(runs, prereg, tok, deviations=deviations or [])
    result = funnel(runs, reps=min(prereg.reps, 2000), seed=prereg.seed)
    path = write_report(analysis, result, out, extra=extra)
    for h in analysis.hypotheses:
        verdict = (
            "supported" if h.supported else ("not tested" if math.isnan(h.p) else "not supported")
        )
        typer.echo(plain(f"{h.name}: {verdict} (p={h.p:.4f}, Holm {h.p_holm:.4f}) — {h.claim}"))
    for d in analysis.deviations:
        typer.echo(plain(f"deviation: {d}"))
    typer.echo(f"wrote {path}")
    return path


@app.command("run")
def run_command(
    model: Annotated[str, typer.Option("--model", help="A model spec, or policy:NAME.")],
    prereg_path: Annotated[Path, typer.Option("--prereg", help="The pre-registration (TOML).")],
    surfaces: Annotated[
        str | None,
        typer.Option("--surfaces", help="Comma-separated surfaces (default: the prereg's)."),
    ] = None,
    tasks: Annotated[
        str, typer.Option("--tasks", help="'repo', 'repo:N' or a JSON task file.")
    ] = "repo",
    db: Annotated[Path, typer.Option("--db", help="The SQLite ledger to record in.")] = Path(
        "lab.db"
    ),
    out: Annotated[Path, typer.Option("--out", help="The report's directory.")] = Path(
        "lab-report"
    ),
    tokenizer: Annotated[
        str, typer.Option("--tokenizer", help="'approx' or 'gguf:PATH' (a local model file).")
    ] = "approx",
    steps: Annotated[int, typer.Option("--steps", min=1, help="Model calls per run.")] = 30,
    seed: Annotated[int, typer.Option("--seed", help="The policies' seed.")] = 0,
    constrain: Annotated[
        str | None,
        typer.Option(
            "--constrain",
            help="local models: llguidance (the default), gbnf or none; or +CONSTRAINT in --model.",
        ),
    ] = None,
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", min=16, help="local models: tokens per step.")
    ] = 256,
) -> None:
    """Run every task on every surface, record it, and report the pre-registered analysis."""
    require_eval("callgate lab run")
    from callgate.eval.analysis import Prereg
    from callgate.eval.lab import run_lab
    from callgate.eval.repo_tasks import load_tasks
    from callgate.eval.tokens import tokenizer_from

    try:
        prereg = Prereg.from_toml(prereg_path)
        chosen = [s.strip() for s in (surfaces or ",".join(prereg.surfaces)).split(",") if s]
        task_list = load_tasks(tasks)
        model_for = model_for_spec(model, seed=seed, constrain=constrain, max_tokens=max_tokens)
        tokenizer_from(tokenizer)  # refused before the lab runs, not after
    except DefinitionError as exc:
        raise fail(str(exc), 2) from None
    check_ledger(db, missing_ok=True)
    ledger = SQLiteLedger(db, worker="callgate-lab")
    lab_id = time.strftime("%Y%m%d-%H%M%S")
    start = time.perf_counter()

    def progress(run: LabRun) -> None:
        mark = "pass" if run.passed else "FAIL"
        typer.echo(
            plain(
                f"{mark} {run.surface:<7} {run.task:<34} {run.reason:<10} "
                f"{run.tool_calls:>3} calls {run.seconds:5.1f} s"
            )
        )

    try:
        done = run_lab(
            task_list,
            chosen,
            model_for,
            ledger,
            budgets=Budgets(steps=steps, tool_calls=4 * steps, seconds=900),
            lab_id=lab_id,
            on_run=progress,
        )
    except DefinitionError as exc:
        raise fail(str(exc), 2) from None
    finally:
        ledger.close()
    elapsed = time.perf_counter() - start
    extra = (
        f"Lab {lab_id}: model {model}, task set {tasks}, {len(done)} runs in "
        f"{elapsed:.1f} s (wall clock)."
    )
    typer.echo(plain(extra))
    deviations = []
    if prereg.tasks is not None and prereg.tasks != tasks:
        deviations.append(f"the task set was {tasks!r}; {prereg.tasks!r} was registered")
    if prereg.steps is not None and prereg.steps != steps:
        deviations.append(f"runs had {steps} model calls each; {prereg.steps} were registered")
    _report(db, lab_id, prereg, tokenizer, out, extra, deviations)


@app.command("analyse")
def analyse_command(
    prereg_path: Annotated[Path, typer.Option("--prereg", help="The pre-registration (TOML).")],
    db: Annotated[Path, typer.Option("--db", help="The ledger the lab recorded in.")] = Path(
        "lab.db"
    ),
    lab: Annotated[str | None, typer.Option("--lab", help="Only the runs of this lab id.")] = None,
    out: Annotated[Path, typer.Option("--out", help="The report's directory.")] = Path(
        "lab-report"
    ),
    tokenizer: Annotated[
        str, typer.Option("--tokenizer", help="'approx' or 'gguf:PATH' (a local model file).")
    ] = "approx",
) -> None:
    """Analyse the runs already in a ledger as the pre-registration says."""
    require_eval("callgate lab analyse")
    from callgate.eval.analysis import Prereg

    try:
        prereg = Prereg.from_toml(prereg_path)
    except DefinitionError as exc:
        raise fail(str(exc), 2) from None
    _report(db, lab, prereg, tokenizer, out, "")

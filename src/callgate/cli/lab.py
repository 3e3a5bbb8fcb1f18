"""``callgate lab``: the three-surface lab, run and analysed as pre-registered.

``callgate lab run --model policy:planted --tasks repo --prereg
examples/lab/prereg.toml --db lab.db --out lab-report`` runs every task on
every registered surface (paired; ``--surfaces`` picks others), records
every run in the ledger, then writes the pre-registered analysis
(``report.md``, PNG plots, JSON) into ``--out``.
``--model`` is any ``callgate`` model spec (see ``callgate run --help``), read
as ``callgate run`` reads it: ``local``, ``local:smollm2`` or ``local:PATH``,
optionally ``+llguidance``, ``+gbnf`` or ``+none``, is a GGUF model run in this
process by llama.cpp (``--constrain`` gives the constraint when the spec does
not); ``policy:NAME`` is a scripted policy with known behaviour (``oracle``,
``oracle-fast``, ``planted``, ``clumsy``).
``callgate lab analyse --lab ID`` analyses one lab's runs again, with the
deviations and the model its ``lab run`` recorded; a ledger holding several
labs is never pooled unless ``--pool`` says so (``--lab A --lab B --pool``).

Needs the ``eval`` extra (numpy, scipy, matplotlib), imported when a command
runs. Exit codes: 0 success; 2 bad usage or input (an unknown surface, model,
policy or task set, an unreadable pre-registration, the ``eval`` extra
missing); 3 the ledger could not be read.
"""

from __future__ import annotations

import re
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
    labs: list[str],
    prereg: Prereg,
    tokenizer: str,
    out: Path,
    extra: str,
    *,
    pool: bool = False,
) -> Path:
    """Analyse the runs of ``labs`` (every lab with ``pool``) and write the report.

    A ledger holding several labs is never pooled silently: without ``--lab`` or
    ``--pool`` the command names the labs and stops; with several ``--lab`` and no
    ``--pool`` it stops too. The deviations each lab recorded are reported with it.
    """
    from callgate.eval.analysis import analyse
    from callgate.eval.funnel import funnel
    from callgate.eval.record import labs_from_records, runs_from_records
    from callgate.eval.report import write_report
    from callgate.eval.tokens import tokenizer_from

    with open_ledger(db, None) as ledger:
        records = list(ledger.audit())
    known = labs_from_records(records)
    ids = [lab.lab for lab in known]
    listing = "; ".join(f"{lab.lab} ({lab.model_line()})" for lab in known) or "none recorded"
    if not labs and len(ids) > 1 and not pool:
        raise fail(
            f"{db} holds {len(ids)} labs: {plain(listing)}. Name one with --lab ID (or several "
            "with --lab A --lab B --pool, to pool them on purpose)",
            2,
        )
    if len(labs) > 1 and not pool:
        raise fail(
            f"--lab was given {len(labs)} times ({', '.join(labs)}): labs are analysed one at "
            "a time; add --pool to pool them on purpose",
            2,
        )
    unknown = [lab for lab in labs if lab not in ids]
    runs = runs_from_records(records, lab=labs or None)
    if unknown and not runs:
        raise fail(f"no lab {', '.join(unknown)} in {db}; labs there: {plain(listing)}", 2)
    if not runs:
        raise fail(f"no evaluation runs{' of lab ' + ', '.join(labs) if labs else ''} in {db}", 2)
    chosen = [lab for lab in known if not labs or lab.lab in labs]
    deviations: list[str] = []
    for lab in chosen:
        prefix = f"lab {lab.lab}: " if len(chosen) > 1 else ""
        deviations += [prefix + d for d in lab.deviations]
    if len(chosen) > 1:
        deviations.append(
            f"{len(chosen)} labs pooled on request (--pool): {', '.join(x.lab for x in chosen)}"
        )
        if len({lab.model_line() for lab in chosen}) > 1:
            deviations.append("the pooled labs ran different models (see Labs and models)")
    if not chosen:
        deviations.append(
            "no eval.lab record for these runs (a ledger from before labs were recorded): "
            "the model is named only as each run recorded it"
        )
    models = [f"Lab {lab.lab}: model {lab.model_line()}" for lab in chosen] or [
        "Model(s) as the runs recorded them: " + ", ".join(sorted({r.model for r in runs}))
    ]
    try:
        tok = tokenizer_from(tokenizer)
    except DefinitionError as exc:
        raise fail(str(exc), 2) from None
    analysis = analyse(runs, prereg, tok, deviations=deviations)
    result = funnel(runs, reps=min(prereg.reps, 2000), seed=prereg.seed)
    text = "\n\n".join(x for x in ("\n".join(f"- {m}" for m in models), extra) if x)
    path = write_report(analysis, result, out, extra=text)
    for m in models:
        typer.echo(plain(m))
    for h in analysis.hypotheses:
        typer.echo(plain(f"{h.name}: {h.verdict} (p={h.p:.4f}, Holm {h.p_holm:.4f}) — {h.claim}"))
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
    lab_name: Annotated[
        str | None,
        typer.Option("--lab", help="This lab's id (default: the start time, YYYYmmdd-HHMMSS)."),
    ] = None,
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
        if lab_name is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", lab_name):
            raise DefinitionError(
                f"--lab {lab_name[:80]!r}: use 1 to 64 letters, digits, '.', '_' or '-'"
            )
    except DefinitionError as exc:
        raise fail(str(exc), 2) from None
    deviations = []
    if prereg.tasks is not None and prereg.tasks != tasks:
        deviations.append(f"the task set was {tasks!r}; {prereg.tasks!r} was registered")
    if prereg.steps is not None and prereg.steps != steps:
        deviations.append(f"runs had {steps} model calls each; {prereg.steps} were registered")
    check_ledger(db, missing_ok=True)
    ledger = SQLiteLedger(db, worker="callgate-lab")
    lab_id = lab_name or time.strftime("%Y%m%d-%H%M%S")
    from callgate.eval.record import read_labs

    if any(found.lab == lab_id for found in read_labs(ledger)):
        ledger.close()
        raise fail(
            f"{db} already holds a lab {lab_id!r}: give this one another --lab ID "
            "(its runs would be mixed with that lab's)",
            2,
        )
    start = time.perf_counter()

    def progress(run: LabRun) -> None:
        mark = "pass" if run.passed else "FAIL"
        typer.echo(
            plain(
                f"{mark} {run.surface:<7} {run.task:<34} {run.reason:<10} "
                f"{run.tool_calls:>3} calls {run.seconds:5.1f} s"
            )
        )

    model_info = None
    if task_list and chosen:
        from callgate.eval.lab import describe_model
        from callgate.eval.surfaces import get_surface

        try:
            get_surface(chosen[0])
            model_info = describe_model(model_for(task_list[0], chosen[0]), model)
        except DefinitionError as exc:
            ledger.close()
            raise fail(str(exc), 2) from None
    try:
        done = run_lab(
            task_list,
            chosen,
            model_for,
            ledger,
            budgets=Budgets(steps=steps, tool_calls=4 * steps, seconds=900),
            lab_id=lab_id,
            on_run=progress,
            model_info=model_info,
            task_set=tasks,
            deviations=deviations,
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
    _report(db, [lab_id], prereg, tokenizer, out, extra)


@app.command("analyse")
def analyse_command(
    prereg_path: Annotated[Path, typer.Option("--prereg", help="The pre-registration (TOML).")],
    db: Annotated[Path, typer.Option("--db", help="The ledger the lab recorded in.")] = Path(
        "lab.db"
    ),
    lab: Annotated[
        list[str] | None,
        typer.Option("--lab", help="The lab to analyse (repeat with --pool to pool several)."),
    ] = None,
    pool: Annotated[
        bool, typer.Option("--pool", help="Pool the labs named (or every lab) on purpose.")
    ] = False,
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
    _report(db, list(lab or []), prereg, tokenizer, out, "", pool=pool)

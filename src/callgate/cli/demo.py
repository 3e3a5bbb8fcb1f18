"""``callgate demo``: the Harbor support-assistant scenario, offline or with a real model.

    callgate demo                          # offline, a scripted model (what `make demo` runs)
    callgate demo --model openai:gpt-4.1   # the same tools, policy and person, a real model

The scenario lives in ``examples/harbor`` of callgate's source tree; run the
command from a checkout (or pass ``--examples PATH``).

Exit codes:
    0  the run answered and every check held (one refund despite the timeout,
       no email to the injected address, a verified audit chain, ...)
    1  the run ended otherwise, or a check failed
    2  bad usage: an unknown --model, a missing API key, no examples/harbor
"""

from __future__ import annotations

import importlib
import io
import sys
from pathlib import Path
from types import ModuleType
from typing import Annotated

import typer
from rich.console import Console

from callgate.cli.plain import cell, fail, plain_json
from callgate.llms import FORMATS, SPEC_HELP, Model, ScriptedModel

__all__ = ["HELP", "demo", "find_examples"]

OK, FAILED, USAGE = 0, 1, 2

HELP = (
    "Run Harbor, a support assistant for a fictional shop, end to end.\n\n"
    "You see parallel reads, a schema rejection and the model's correction, a refund approved "
    "by a person and resumed, a timeout after commit reconciled without a second refund, an "
    "injected instruction the policy refuses, and a summary of every call by status and "
    "stage. The shop's data and the ledger are created fresh in --workdir.\n\n"
    "Exit codes: 0 every check held; 1 a check failed or the run did not answer; 2 bad usage "
    "(an unknown --model, a missing API key, no examples/harbor)."
)


def find_examples(explicit: Path | None = None) -> Path | None:
    """The ``examples`` directory holding ``harbor``: given, in the working directory, or
    next to the source tree callgate is installed from (an editable install)."""
    import callgate

    candidates = [explicit] if explicit is not None else []
    candidates += [
        Path.cwd() / "examples",
        Path(callgate.__file__).resolve().parents[2] / "examples",
    ]
    for base in candidates:
        if base is not None and (base / "harbor" / "demo.py").is_file():
            return base
    return None


def _harbor(examples: Path | None) -> ModuleType:
    found = find_examples(examples)
    if found is None:
        raise fail(
            "the Harbor example ships with callgate's source repository "
            "(examples/harbor); run from a checkout or pass --examples PATH",
            USAGE,
        )
    if str(found) not in sys.path:
        sys.path.insert(0, str(found))
    return importlib.import_module("harbor.demo")


def demo(
    model: Annotated[
        str,
        typer.Option(help=f"'scripted' (offline, the default), or a real model: {SPEC_HELP}."),
    ] = "scripted",
    format: Annotated[
        str,
        typer.Option(help=f"Provider format of the scripted model: {', '.join(sorted(FORMATS))}."),
    ] = "openai_chat",
    workdir: Annotated[
        Path, typer.Option(help="Where the shop's data and the ledger are created, fresh.")
    ] = Path(".harbor"),
    examples: Annotated[
        Path | None, typer.Option(help="The examples directory, if not found by itself.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print only a JSON report (no transcript).")
    ] = False,
) -> None:
    """Run Harbor end to end (the help text is `HELP`)."""
    harbor = _harbor(examples)
    if model == "scripted":
        if format not in FORMATS:
            raise fail(f"unknown format '{format}'; use one of {', '.join(sorted(FORMATS))}", USAGE)
        script = importlib.import_module("harbor.script").HarborScript()
        chosen: Model = ScriptedModel(script, format=format, name=f"scripted ({format})")
    else:
        from callgate.cli.run import load_model

        chosen = load_model(model)
    # Harbor prints every value as plain text (callgate.cli.plain); no value turns
    # into an emoji either.
    console = Console(file=io.StringIO()) if as_json else Console(emoji=False)
    report = harbor.run_scenario(chosen, workdir=workdir, console=console)
    if as_json:
        sys.stdout.write(plain_json(report.as_json(), indent=2) + "\n")
    else:
        ledger = workdir / "ledger.db"
        console.print(
            cell(f"\nThe run's record: callgate ledger list --db {ledger}"), highlight=False
        )
        console.print(cell(f"                  callgate ledger verify --db {ledger}"))
    raise typer.Exit(OK if report.passed else FAILED)

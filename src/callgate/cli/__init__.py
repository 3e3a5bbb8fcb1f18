"""The ``callgate`` command: one typer app, one sub-app per concern.

Sub-apps live in their own modules (``ledger``, ``approvals``, ``policy``,
``mcp``, ...) and are added here. Exit codes: 0 success, 1 the command ran
and found a problem (e.g. a tampered ledger), 2 bad usage or input (a file
that is not a callgate ledger included), 3 a ledger that could not be read
(damaged). Values from models, tools and files are printed as plain text
(`callgate.cli.plain`). Every optional extra stays optional: a command module
imports an extra's packages only when one of its commands runs, and a missing
one is exit 2 naming the extra (`callgate.cli.extras`).
"""

from __future__ import annotations

import typer

from callgate.cli.extras import extra_of, missing_extra

__all__ = ["app", "main"]

app = typer.Typer(
    name="callgate",
    help="callgate: authorize and execute the tool calls a language model proposes.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """callgate: authorize and execute the tool calls a language model proposes."""


@app.command()
def version() -> None:
    """Print callgate's version."""
    from callgate import __version__

    typer.echo(__version__)


def _add_sub_apps() -> None:
    from callgate.cli import mcp, policy

    app.add_typer(policy.app, name="policy")
    app.add_typer(mcp.app, name="mcp")
    from callgate.cli.ledger import app as ledger_app

    app.add_typer(ledger_app, name="ledger")
    from callgate.cli.approvals import app as approvals_app

    app.add_typer(approvals_app, name="approvals")
    from callgate.cli import demo, run

    app.add_typer(run.app, name="run")
    app.command("demo", help=demo.HELP)(demo.demo)
    from callgate.cli import console

    app.command("console", help=console.HELP)(console.serve)
    from callgate.cli import eval as eval_cli
    from callgate.cli import grammar as grammar_cli
    from callgate.cli import lab

    eval_cli.app.command("grammar-decision")(grammar_cli.grammar_decision)
    app.add_typer(eval_cli.app, name="eval")
    app.add_typer(lab.app, name="lab")
    from callgate.cli import lint as lint_cli
    from callgate.cli import openapi as openapi_cli

    app.add_typer(openapi_cli.app, name="openapi")
    app.add_typer(lint_cli.app, name="lint")


_add_sub_apps()


def main() -> None:
    """Entry point of the ``callgate`` console script.

    A package of an optional extra that a command imports without asking
    (`callgate.cli.extras.require`) and finds missing is exit 2 naming the extra,
    not a traceback.
    """
    try:
        app()
    except ModuleNotFoundError as exc:
        extra = extra_of(exc.name)
        if extra is None:
            raise
        raise SystemExit(missing_extra(extra, str(exc.name), "this command").exit_code) from None

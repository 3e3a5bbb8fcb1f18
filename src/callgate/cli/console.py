"""``callgate console``: serve the web console over a ledger.

The ledger is ``--db PATH`` (SQLite; default ``$CALLGATE_DB`` or
``./callgate.db``) or ``--dsn DSN`` (PostgreSQL; default ``$CALLGATE_DSN``), an
existing callgate ledger only, as for ``callgate approvals``. People sign in
with the tokens of ``--auth-file`` (lines ``name:token``, mode 600); without
one the console refuses to start, unless ``--no-auth`` is given and it is
bound to a loopback address (then everyone who reaches it is ``--user``).

Exit codes:
    0  the server stopped normally
    2  bad usage or input: no ledger there, a file that is not a callgate
       ledger, no authentication configured, ``--no-auth`` on an address
       other machines can reach, a credentials file others can read
    3  the ledger could not be read
"""

from __future__ import annotations

import getpass
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from callgate.cli.ledger import DbOption, DsnOption, bad_usage, open_ledger
from callgate.cli.plain import plain
from callgate.errors import DefinitionError
from callgate.ledger.base import LedgerQueries
from callgate.ledger.sqlite import DEFAULT_PATH

if TYPE_CHECKING:  # the console extra is imported when the command runs
    from callgate.console import NoAuth, TokenAuth
    from callgate.console.views import Evaluation

__all__ = ["HELP", "app", "banner", "evaluation_funnel", "serve"]

HELP = (
    "Serve the web console: the approvals inbox, runs, run timelines and calls.\n\n"
    "People sign in with the tokens of --auth-file (lines 'name:token', mode 600); every "
    "decision is recorded under their name. Without --auth-file the console refuses to "
    "start, unless --no-auth is given on a loopback address.\n\n"
    "Exit codes: 0 stopped; 2 bad usage or input (no ledger there, not a callgate ledger, "
    "no authentication, --no-auth on a reachable address, a credentials file others can "
    "read); 3 the ledger could not be read."
)

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
EVAL_REPS = 200
"""Bootstrap resamples of the evaluation funnel's product interval on the runs page."""


def evaluation_funnel() -> Callable[[LedgerQueries], Evaluation | None] | None:
    """The runs page's evaluation funnel, computed by `callgate.eval` (None when that, or
    numpy and scipy, is not installed: the page then shows the stage funnel alone)."""
    try:
        from callgate.console.views import Evaluation, Rate, RateRow
        from callgate.eval.funnel import funnel
        from callgate.eval.record import read_runs
    except ImportError:
        return None

    def measure(ledger: LedgerQueries) -> Evaluation | None:
        runs = read_runs(ledger)
        if not runs:
            return None
        found = funnel(runs, reps=EVAL_REPS)
        rows = []
        for row in found.rows:
            if row.tool != "all":
                continue
            named = [
                ("A (tool)", row.a),
                ("B|A (arguments)", row.b),
                ("C|A,B (ran ok)", row.c),
                ("D|A,B,C (task)", row.d),
                ("product", row.product),
            ]
            rates = tuple(Rate(name=n, value=e.value, low=e.low, high=e.high) for n, e in named)
            label = "all surfaces" if row.surface == "all" else f"surface {row.surface}"
            rows.append(RateRow(label=label, calls=row.calls, rates=rates))
        return Evaluation(runs=found.runs, unverified=found.unverified, rows=tuple(rows))

    return measure


def _local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "local"


def banner(host: str, port: int, where: str, auth: TokenAuth | NoAuth) -> list[str]:
    """What the command says when it starts: where it listens, over which ledger, and, with
    ``--no-auth``, that anyone reaching the address decides as the local principal."""
    from callgate.console.auth import NoAuth

    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    lines = [f"callgate console on http://{shown}:{port} over {where}"]
    if isinstance(auth, NoAuth):
        lines.append(
            "WARNING: no authentication (--no-auth): anyone who can reach this address on "
            f"this machine decides approvals as {auth.principal.name!r}"
        )
    else:
        lines.append("sign in with a name and token from the --auth-file")
    return lines


def serve(
    db: DbOption = Path(DEFAULT_PATH),
    dsn: DsnOption = None,
    host: Annotated[
        str, typer.Option("--host", help="The address to listen on.", show_default=True)
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="The port.", show_default=True)
    ] = 8765,
    auth_file: Annotated[
        Path | None,
        typer.Option(
            "--auth-file",
            envvar="CALLGATE_CONSOLE_AUTH_FILE",
            help="Who may sign in: lines 'name:token' (tokens of 16+ characters), mode 600.",
        ),
    ] = None,
    no_auth: Annotated[
        bool,
        typer.Option(
            "--no-auth",
            help="Development only: no sign-in, everyone is --user; refused unless --host is "
            "a loopback address.",
        ),
    ] = False,
    user: Annotated[
        str | None,
        typer.Option("--user", help="With --no-auth: the name decisions are recorded under."),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="A Host name the console answers to (repeat it); by default the names of a "
            "loopback address, or any name when listening on another address.",
        ),
    ] = None,
    secure_cookies: Annotated[
        bool,
        typer.Option("--secure-cookies", help="Mark the session cookie Secure (behind HTTPS)."),
    ] = False,
) -> None:
    """Serve the web console over the ledger until interrupted."""
    try:
        import uvicorn

        from callgate.console import (
            Credentials,
            NoAuth,
            TokenAuth,
            check_binding,
            create_app,
            is_loopback,
        )
    except ImportError as exc:
        raise bad_usage(
            f"the console needs the console extra ({exc.name or exc} is missing): "
            "pip install 'callgate[console]'"
        ) from None

    if auth_file is not None and no_auth:
        raise bad_usage("pass either --auth-file or --no-auth, not both")
    try:
        auth: TokenAuth | NoAuth | None = None
        if auth_file is not None:
            auth = TokenAuth(Credentials.from_file(auth_file))
        elif no_auth:
            auth = NoAuth(user or _local_user())
        check_binding(host, auth)
    except DefinitionError as exc:
        raise bad_usage(str(exc)) from None
    assert auth is not None
    hosts = allowed_host or (list(LOCAL_HOSTS) if is_loopback(host) else None)
    with open_ledger(db, dsn, write=True) as ledger:
        app = create_app(
            ledger,
            auth=auth,
            key=secrets.token_bytes(32),
            allowed_hosts=hosts,
            secure_cookies=secure_cookies,
            evaluation=evaluation_funnel(),
        )
        where = "the PostgreSQL ledger (--dsn)" if dsn else str(db)
        for line in banner(host, port, where, auth):
            sys.stderr.write(plain(line) + "\n")
        uvicorn.run(app, host=host.strip("[]"), port=port, log_level="warning", access_log=False)


app = typer.Typer(name="console", help=HELP, add_completion=False)
app.command(help=HELP)(serve)

"""``GET /runs``: runs, most recent first, the stage funnel and, if any, the evaluation."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from callgate.console import views
from callgate.console.auth import Principal
from callgate.console.site import Console

__all__ = ["RUNS_SHOWN", "runs"]

RUNS_SHOWN = 2000
"""The runs list and funnel read the newest this many calls."""


def runs(console: Console, request: Request, principal: Principal) -> Response:
    """The runs of the newest `RUNS_SHOWN` calls and their funnel."""
    calls = list(console.ledger.calls(newest=RUNS_SHOWN))
    measured = console.evaluation(console.ledger) if console.evaluation is not None else None
    return console.page(
        "runs.html",
        principal,
        evaluation=measured,
        runs=views.runs(calls, console.approval_states(calls)),
        legend=views.STATES,
        funnel=views.funnel(calls) if calls else None,
        shown_calls=len(calls),
        limit=RUNS_SHOWN,
    )

"""``GET /run?id=``: a run's timeline (model turns, proposals, outcomes...) in journal order."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from callgate.console import views
from callgate.console.auth import Principal
from callgate.console.site import Console

__all__ = ["run"]


def run(console: Console, request: Request, principal: Principal) -> Response:
    """The run named by ``id``, its calls, and the chain's verification."""
    run_id = request.query_params.get("id", "")
    records = console.ledger.records(run_id=run_id)
    calls = list(console.ledger.calls(run_id=run_id))
    if not records and not calls:
        return console.problem(
            principal,
            404,
            "No such run",
            f"the ledger has no record of run {run_id[:80]!r}; open the runs list",
        )
    check, checked_at = console.chain()
    return console.page(
        "run.html",
        principal,
        checked_at=checked_at,
        run_id=run_id,
        events=views.timeline(records, check.first_bad_seq),
        calls=calls,
        shown=console.approval_states(calls),
        legend=views.STATES,
        funnel=views.funnel(calls) if calls else None,
        check=check,
    )

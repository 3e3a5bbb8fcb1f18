"""``GET /call?run=&id=``: one call, its attempts, its records and the chain's verification."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from callgate.console import views
from callgate.console.auth import Principal
from callgate.console.site import Console

__all__ = ["call"]


def call(console: Console, request: Request, principal: Principal) -> Response:
    """The call named by ``run`` and ``id`` (404 when the ledger has none)."""
    ledger = console.ledger
    run_id = request.query_params.get("run", "")
    call_id = request.query_params.get("id", "")
    found = ledger.get_call(run_id, call_id)
    if found is None:
        return console.problem(
            principal,
            404,
            "No such call",
            f"no call {call_id[:80]!r} in run {run_id[:80]!r}; open the run's timeline",
        )
    records = ledger.records(run_id=run_id, call_id=call_id)
    check, checked_at = console.chain()
    return console.page(
        "call.html",
        principal,
        checked_at=checked_at,
        call=found,
        attempts=ledger.attempts(run_id, call_id),
        events=views.timeline(records, check.first_bad_seq),
        findings=views.provenance_findings(records),
        check=check,
        approval_request=ledger.approvals().get(found.approval_id) if found.approval_id else None,
    )

"""``GET /approval?id=``: one approval request, its decision and its records."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from callgate.console import views
from callgate.console.auth import Principal
from callgate.console.guard import done_notice
from callgate.console.site import Console

__all__ = ["approval"]


def approval(console: Console, request: Request, principal: Principal) -> Response:
    """The request named by ``id`` (404 when the ledger has none of that id)."""
    approval_id = request.query_params.get("id", "")
    r = console.ledger.approvals().get(approval_id)
    if r is None:
        return console.problem(
            principal,
            404,
            "No such approval",
            f"no approval request has the id {approval_id[:80]!r}; open the inbox to see "
            "the pending ones",
        )
    records = console.ledger.records(run_id=r.run_id, call_id=r.call_id)
    findings = views.provenance_findings(records)
    return console.page(
        "approval.html",
        principal,
        request_=r,
        state=r.state().value,
        parts=views.approval_fields(r),
        findings=findings,
        confirm=views.confirmation_reasons(r, findings),
        events=views.timeline([x for x in records if x.kind.startswith("approval.")]),
        done=done_notice(request.query_params.get("done", ""), r, principal),
    )

"""``POST /approval/decide``: approve or deny one request as the signed-in principal.

The checks run in this order, each refusing with nothing decided: signed in
(401), not posted from another site (403), a bounded form (400), this session's
CSRF token (403), a well-formed decision (400), the request exists (404), an
explicit confirmation where the approval needs one (400). Then the ledger's
approval store decides, under its single-decision rule (409 for a second one).
"""

from __future__ import annotations

import urllib.parse

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from callgate.console import views
from callgate.console.auth import Principal
from callgate.console.guard import (
    Decision,
    Refusal,
    origin_refusal,
    own_origin,
    read_decision,
    read_form,
    token_refusal,
)
from callgate.console.site import Console
from callgate.errors import ApprovalError, LedgerError

__all__ = ["decide"]


async def decide(console: Console, request: Request) -> Response:
    """Record the decision the form asks for, then show the request (303)."""
    principal = console.principal_of(request)
    if principal is None:
        return console.problem(
            None, 401, "Not signed in", "sign in before deciding; nothing was decided"
        )
    refused = origin_refusal(request.headers, own_origin(request), title="Form refused")
    if refused is not None:
        message = f"{refused.message}; decide from the console's own page. Nothing was decided"
        return console.problem(principal, 403, refused.title, message)
    form = await read_form(request)
    if isinstance(form, str):
        return console.problem(principal, 400, "Form refused", form)
    refused = token_refusal(console.key, principal, form)
    if refused is not None:
        return console.refuse(principal, refused)
    decision = read_decision(form)
    if isinstance(decision, Refusal):
        return console.refuse(principal, decision)
    try:
        return await run_in_threadpool(_apply, console, principal, decision)
    except LedgerError as exc:
        return console.problem(
            principal,
            503,
            "The ledger could not be written",
            f"{exc}; nothing may have been decided: reload the request to see its state",
        )


def _apply(console: Console, principal: Principal, decision: Decision) -> Response:
    """The decision recorded through the approval store (in a worker thread: it writes)."""
    store = console.ledger.approvals()
    approval_id = decision.approval_id
    found = store.get(approval_id)
    if found is None:
        return console.problem(
            principal,
            404,
            "No such approval",
            f"no approval request has the id {approval_id[:80]!r}; nothing was decided",
        )
    if decision.approve and not decision.confirmed:
        records = console.ledger.records(run_id=found.run_id, call_id=found.call_id)
        reasons = views.confirmation_reasons(found, views.provenance_findings(records))
        if reasons:
            return console.problem(
                principal,
                400,
                "Confirm first",
                "this approval needs an explicit confirmation ("
                + "; ".join(reasons)
                + "): go back, read the arguments, tick the confirmation box and "
                "approve again. Nothing was decided",
            )
    try:
        store.decide(
            approval_id,
            approve=decision.approve,
            by=principal.name,
            reason=decision.reason or None,
        )
    except ApprovalError as exc:
        return console.problem(principal, 409, "Not decided", str(exc))
    done = "approved" if decision.approve else "denied"
    return RedirectResponse(
        f"/approval?id={urllib.parse.quote(approval_id, safe='')}&done={done}",
        status_code=303,
    )

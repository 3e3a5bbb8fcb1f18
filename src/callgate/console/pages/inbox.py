"""``GET /approvals``: the inbox, each pending request with what a person reads to decide it."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response

from callgate.approvals import ApprovalStatus
from callgate.console import views
from callgate.console.auth import Principal
from callgate.console.site import Console

__all__ = ["DECIDED_SHOWN", "inbox"]

DECIDED_SHOWN = 20
"""The most recently decided requests listed under the pending ones."""


def inbox(console: Console, request: Request, principal: Principal) -> Response:
    """The pending requests, oldest first, then the latest decided ones."""
    ledger = console.ledger
    now = time.time()
    requests = list(ledger.approvals().list())
    pending = [r for r in requests if r.state(now) is ApprovalStatus.PENDING]
    decided = [r for r in requests if r.state(now) is not ApprovalStatus.PENDING]
    decided.sort(key=lambda r: r.decided_at or r.created_at, reverse=True)
    items = []
    for r in pending:
        records = ledger.records(run_id=r.run_id, call_id=r.call_id)
        findings = views.provenance_findings(records)
        run_calls = list(ledger.calls(run_id=r.run_id))
        items.append(
            {
                "request": r,
                "fields": views.approval_fields(r),
                "findings": findings,
                "confirm": views.confirmation_reasons(r, findings),
                "user": views.user_request(ledger.records(run_id=r.run_id)),
                "place": views.place_in_run(
                    run_calls, r.call_id, console.approval_states(run_calls)
                ),
            }
        )
    return console.page(
        "inbox.html",
        principal,
        items=items,
        decided=decided[:DECIDED_SHOWN],
        states={r.id: r.state(now).value for r in decided},
    )

"""The console's web application: Starlette routes over one ledger, pages from Jinja2 templates.

``create_app(ledger, auth=...)`` builds it; ``callgate console`` serves it with
uvicorn. Pages are rendered on the server; there is no script on any page.

* ``GET /approvals``: the inbox, each pending request with its exact effect, its
  arguments, its provenance findings and the approve / deny form;
* ``GET /approval?id=``: one request, its decision and its records;
* ``POST /approval/decide``: approve or deny (CSRF-checked), recorded as the
  signed-in principal;
* ``GET /runs``: runs, most recent first, and the stage funnel of their calls;
* ``GET /run?id=``: a run's timeline (model turns, proposals, rejections,
  attempts, outcomes, reconciliations, security events, in journal order);
* ``GET /call?run=&id=``: one call, its attempts, its journal records and the
  chain's verification;
* ``GET /login``, ``POST /login``, ``POST /logout``: sign-in with the operator's
  credentials (`callgate.console.auth`).

Decisions go through the ledger's approval store (`Ledger.approvals().decide`),
the same rule the CLI applies: a request is decided once, only while pending
and unexpired; a second decision is refused with who decided first.
"""

from __future__ import annotations

import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from callgate.approvals import ApprovalRequest, ApprovalStatus
from callgate.console import views
from callgate.console.auth import SESSION_COOKIE, NoAuth, Principal, Sessions, TokenAuth
from callgate.console.csrf import FIELD, cross_site, csrf_token, valid_token
from callgate.console.headers import CSP, SecurityHeaders
from callgate.console.templating import Shown, environment
from callgate.console.templating import stylesheet as read_stylesheet
from callgate.errors import ApprovalError, LedgerError
from callgate.ledger.base import AuditCheck, Ledger, LedgerQueries

__all__ = ["CSP", "MAX_FORM_BYTES", "MAX_REASON_CHARS", "RUNS_SHOWN", "VERIFY_EVERY", "create_app"]

MAX_FORM_BYTES = 8192
MAX_REASON_CHARS = 1000
VERIFY_EVERY = 30.0
"""Seconds a verification of the whole chain is reused while the journal's head is unchanged."""
RUNS_SHOWN = 2000
"""The runs list and funnel read the newest this many calls."""


def create_app(
    ledger: Ledger,
    *,
    auth: TokenAuth | NoAuth,
    key: bytes | None = None,
    allowed_hosts: Sequence[str] | None = None,
    secure_cookies: bool = False,
    evaluation: Callable[[LedgerQueries], views.Evaluation | None] | None = None,
    verify_every: float = VERIFY_EVERY,
) -> Starlette:
    """The console over ``ledger``: every decision is recorded as the signed-in principal.

    Args:
        ledger: where the requests and records are (an open ledger; not closed here).
        auth: `TokenAuth` (operator's credentials) or `NoAuth` (one local principal;
            serve it on a loopback address only, see `callgate.console.auth.check_binding`).
        key: signs session cookies and CSRF tokens (32 bytes or more); a fresh random key
            by default, so restarting the console signs everyone out.
        allowed_hosts: the ``Host`` names served (others get 400), against DNS
            rebinding; None serves any.
        secure_cookies: mark the session cookie ``Secure`` (serve over HTTPS).
        evaluation: reads the evaluation funnel from the ledger (None when it holds no
            evaluation run); the runs page draws it. ``callgate console`` passes one
            built on `callgate.eval` when that is installed.
        verify_every: how long (seconds) a verification of the whole chain is shown before
            it runs again, unless the journal grew; each record shown is also checked
            against its own hash on every page.
    """
    key = key or secrets.token_bytes(32)
    sessions = Sessions(key)
    env = environment()
    css = read_stylesheet()

    checks: list[tuple[tuple[int, str] | None, float, AuditCheck]] = []
    checking = threading.Lock()

    def chain() -> tuple[AuditCheck, float]:
        """The chain's verification and when it ran: run again when the journal's head moved
        or ``verify_every`` seconds passed (it reads the whole journal)."""
        with checking:
            head = ledger.audit_head()
            if checks:
                seen, at, check = checks[0]
                if seen == head and time.time() - at < verify_every:
                    return check, at
            at = time.time()
            check = ledger.verify()
            checks[:] = [(head, at, check)]
            return check, at

    def principal_of(request: Request) -> Principal | None:
        if isinstance(auth, NoAuth):
            return auth.principal
        header = request.headers.get("authorization")
        if header:
            return auth.from_headers(header)
        cookie = request.cookies.get(SESSION_COOKIE)
        return auth.from_session(sessions.read(cookie)) if cookie else None

    def page(
        request: Request,
        template: str,
        principal: Principal | None,
        status: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        html = env.get_template(template).render(
            principal=principal,
            csrf=Shown(csrf_token(key, principal.binding)) if principal else "",
            csrf_field=FIELD,
            login_required=auth.login_required,
            now=time.time(),
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def problem(
        request: Request, principal: Principal | None, status: int, title: str, message: str
    ) -> HTMLResponse:
        return page(request, "error.html", principal, status, title=title, message=message)

    def sign_in(request: Request) -> Response:
        target = "/login?next=" + urllib.parse.quote(
            request.url.path + ("?" + request.url.query if request.url.query else ""), safe=""
        )
        return RedirectResponse(target, status_code=303)

    def reader(
        view: Callable[[Request, Principal], Response],
    ) -> Callable[[Request], Response]:
        """A page that needs a signed-in principal and reads the ledger."""

        def endpoint(request: Request) -> Response:
            principal = principal_of(request)
            if principal is None:
                if request.headers.get("authorization"):
                    return problem(
                        request,
                        None,
                        401,
                        "Not signed in",
                        "the credentials sent were not accepted; check the name and token",
                    )
                return sign_in(request)
            try:
                return view(request, principal)
            except LedgerError as exc:
                return problem(
                    request,
                    principal,
                    503,
                    "The ledger could not be read",
                    f"{exc}; check the database, then reload the page",
                )

        return endpoint

    # -- pages ---------------------------------------------------------------------------

    def approval_states(calls: Sequence[Any]) -> dict[str, str]:
        """The current state of the approval of each call still recorded ``pending``: a
        decided call is shown decided at once, not when its run resumes."""
        store = ledger.approvals()
        now = time.time()
        found: dict[str, str] = {}
        for c in calls:
            if c.state.value == "pending" and c.approval_id and c.approval_id not in found:
                r = store.get(c.approval_id)
                if r is not None:
                    found[c.approval_id] = r.state(now).value
        return found

    def inbox(request: Request, principal: Principal) -> Response:
        store = ledger.approvals()
        now = time.time()
        requests = list(store.list())
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
                    "place": views.place_in_run(run_calls, r.call_id, approval_states(run_calls)),
                }
            )
        return page(
            request,
            "inbox.html",
            principal,
            items=items,
            decided=decided[:20],
            states={r.id: r.state(now).value for r in decided},
        )

    def approval(request: Request, principal: Principal) -> Response:
        approval_id = request.query_params.get("id", "")
        r = ledger.approvals().get(approval_id)
        if r is None:
            return problem(
                request,
                principal,
                404,
                "No such approval",
                f"no approval request has the id {approval_id[:80]!r}; open the inbox to see "
                "the pending ones",
            )
        records = ledger.records(run_id=r.run_id, call_id=r.call_id)
        findings = views.provenance_findings(records)
        return page(
            request,
            "approval.html",
            principal,
            request_=r,
            state=r.state().value,
            parts=views.approval_fields(r),
            findings=findings,
            confirm=views.confirmation_reasons(r, findings),
            events=views.timeline([x for x in records if x.kind.startswith("approval.")]),
            done=_done(request.query_params.get("done", ""), r, principal),
        )

    def runs_page(request: Request, principal: Principal) -> Response:
        calls = list(ledger.calls(newest=RUNS_SHOWN))
        measured = evaluation(ledger) if evaluation is not None else None
        return page(
            request,
            "runs.html",
            principal,
            evaluation=measured,
            runs=views.runs(calls, approval_states(calls)),
            legend=views.STATES,
            funnel=views.funnel(calls) if calls else None,
            shown_calls=len(calls),
            limit=RUNS_SHOWN,
        )

    def run_page(request: Request, principal: Principal) -> Response:
        run_id = request.query_params.get("id", "")
        records = ledger.records(run_id=run_id)
        calls = list(ledger.calls(run_id=run_id))
        if not records and not calls:
            return problem(
                request,
                principal,
                404,
                "No such run",
                f"the ledger has no record of run {run_id[:80]!r}; open the runs list",
            )
        check, checked_at = chain()
        return page(
            request,
            "run.html",
            principal,
            checked_at=checked_at,
            run_id=run_id,
            events=views.timeline(records, check.first_bad_seq),
            calls=calls,
            shown=approval_states(calls),
            legend=views.STATES,
            funnel=views.funnel(calls) if calls else None,
            check=check,
        )

    def call_page(request: Request, principal: Principal) -> Response:
        run_id = request.query_params.get("run", "")
        call_id = request.query_params.get("id", "")
        call = ledger.get_call(run_id, call_id)
        if call is None:
            return problem(
                request,
                principal,
                404,
                "No such call",
                f"no call {call_id[:80]!r} in run {run_id[:80]!r}; open the run's timeline",
            )
        records = ledger.records(run_id=run_id, call_id=call_id)
        check, checked_at = chain()
        return page(
            request,
            "call.html",
            principal,
            checked_at=checked_at,
            call=call,
            attempts=ledger.attempts(run_id, call_id),
            events=views.timeline(records, check.first_bad_seq),
            findings=views.provenance_findings(records),
            check=check,
            approval_request=ledger.approvals().get(call.approval_id) if call.approval_id else None,
        )

    # -- forms ---------------------------------------------------------------------------

    async def read_form(request: Request) -> dict[str, str] | str:
        """The posted fields, or why the form is refused."""
        length = request.headers.get("content-length")
        if length is None or not length.isdigit() or int(length) > MAX_FORM_BYTES:
            return f"the form must be at most {MAX_FORM_BYTES} bytes, with its length given"
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/x-www-form-urlencoded":
            return f"expected a form (application/x-www-form-urlencoded), got {kind[:60]!r}"
        form = await request.form(max_files=0, max_fields=8)
        return {k: v for k, v in form.items() if isinstance(v, str)}

    def own_origin(request: Request) -> str:
        return f"{request.url.scheme}://{request.headers.get('host', '')}"

    async def decide(request: Request) -> Response:
        principal = principal_of(request)
        if principal is None:
            return problem(
                request,
                None,
                401,
                "Not signed in",
                "sign in before deciding; nothing was decided",
            )
        refused = cross_site(request.headers, own_origin(request))
        if refused:
            return problem(
                request,
                principal,
                403,
                "Form refused",
                f"{refused}; decide from the console's own page. Nothing was decided",
            )
        form = await read_form(request)
        if isinstance(form, str):
            return problem(request, principal, 400, "Form refused", form)
        if principal.ambient and not valid_token(key, principal.binding, form.get(FIELD)):
            return problem(
                request,
                principal,
                403,
                "Form refused",
                "the form's CSRF token is missing or is not this session's; reload the page "
                "and decide again. Nothing was decided",
            )
        approval_id = form.get("id", "")
        decision = form.get("decision", "")
        reason = form.get("reason", "").strip()
        if decision not in ("approve", "deny"):
            return problem(
                request,
                principal,
                400,
                "Form refused",
                f"decision must be 'approve' or 'deny', got {decision[:40]!r}",
            )
        if decision == "deny" and not reason:
            return problem(
                request,
                principal,
                400,
                "Say why",
                "a denial needs a reason (the model is told it); go back and write one",
            )
        if len(reason) > MAX_REASON_CHARS:
            return problem(
                request,
                principal,
                400,
                "Reason too long",
                f"the reason has {len(reason)} characters, at most {MAX_REASON_CHARS} are kept",
            )

        def apply() -> Response:
            store = ledger.approvals()
            found = store.get(approval_id)
            if found is None:
                return problem(
                    request,
                    principal,
                    404,
                    "No such approval",
                    f"no approval request has the id {approval_id[:80]!r}; nothing was decided",
                )
            if decision == "approve" and form.get("confirm") != "yes":
                records = ledger.records(run_id=found.run_id, call_id=found.call_id)
                reasons = views.confirmation_reasons(found, views.provenance_findings(records))
                if reasons:
                    return problem(
                        request,
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
                    approve=decision == "approve",
                    by=principal.name,
                    reason=reason or None,
                )
            except ApprovalError as exc:
                return problem(request, principal, 409, "Not decided", str(exc))
            done = "approved" if decision == "approve" else "denied"
            return RedirectResponse(
                f"/approval?id={urllib.parse.quote(approval_id, safe='')}&done={done}",
                status_code=303,
            )

        try:
            return await run_in_threadpool(apply)
        except LedgerError as exc:
            return problem(
                request,
                principal,
                503,
                "The ledger could not be written",
                f"{exc}; nothing may have been decided: reload the request to see its state",
            )

    def login_form(request: Request) -> Response:
        if isinstance(auth, NoAuth):
            return RedirectResponse("/approvals", status_code=303)
        return page(request, "login.html", None, next=_safe_next(request.query_params.get("next")))

    async def login(request: Request) -> Response:
        if isinstance(auth, NoAuth):
            return RedirectResponse("/approvals", status_code=303)
        refused = cross_site(request.headers, own_origin(request))
        form = refused if refused else await read_form(request)
        if isinstance(form, str):
            return problem(request, None, 403, "Sign-in refused", form)
        name = form.get("name", "").strip()
        found = auth.credentials.check(name, form.get("token", "").strip())
        target = _safe_next(form.get("next"))
        if found is None:
            return page(
                request,
                "login.html",
                None,
                401,
                next=target,
                error="that name and token do not match the console's credentials",
            )
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            sessions.issue(found, auth.credentials.fingerprint(found)),
            max_age=int(sessions.lifetime),
            httponly=True,
            samesite="strict",
            secure=secure_cookies,
            path="/",
        )
        return response

    async def logout(request: Request) -> Response:
        principal = principal_of(request)
        form = await read_form(request)
        if (
            principal is not None
            and not isinstance(form, str)
            and valid_token(key, principal.binding, form.get(FIELD))
        ):
            response = RedirectResponse("/login", status_code=303)
            response.delete_cookie(SESSION_COOKIE, path="/")
            return response
        return problem(request, principal, 403, "Sign-out refused", "reload the page and try again")

    def stylesheet(request: Request) -> Response:
        return Response(css, media_type="text/css")

    def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    def home(request: Request) -> Response:
        return RedirectResponse("/approvals", status_code=303)

    routes = [
        Route("/", home),
        Route("/healthz", health),
        Route("/static/console.css", stylesheet),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/approvals", reader(inbox)),
        Route("/approval", reader(approval)),
        Route("/approval/decide", decide, methods=["POST"]),
        Route("/runs", reader(runs_page)),
        Route("/run", reader(run_page)),
        Route("/call", reader(call_page)),
    ]
    middleware = [Middleware(SecurityHeaders)]
    if allowed_hosts is not None:
        middleware.append(
            Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts), www_redirect=False)
        )
    return Starlette(routes=routes, middleware=middleware)


def _done(value: str, request: ApprovalRequest, principal: Principal) -> str:
    """The notice after a decision ("You approved this request"): only when the request was
    decided that way by the person reading, whatever a crafted link says."""
    decided = request.status.value if request.decided_by == principal.name else ""
    return value if value in ("approved", "denied") and value == decided else ""


def _safe_next(value: str | None) -> str:
    """Where to go after signing in: a path of this console only (never another site)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/approvals"
    if any(ord(c) < 0x21 for c in value):
        return "/approvals"
    return value

"""The console's web application: one route per page, over one ledger.

``create_app(ledger, auth=...)`` builds it; ``callgate console`` serves it with
uvicorn. Pages are rendered on the server from Jinja2 templates; there is no
script on any page. The parts, each a module of its own:

* the pages, one module each (`callgate.console.pages`: the inbox, a request,
  the decision form, the runs, a run, a call, sign-in and sign-out);
* what they share (`callgate.console.site.Console`: the ledger, the templates,
  the cached verification of the chain, `callgate.console.chain`);
* the security checks, each callable on its own: who is signed in, forms from
  other sites, CSRF tokens, bounded forms, safe redirects
  (`callgate.console.guard`, `callgate.console.auth`, `callgate.console.csrf`),
  and the headers every response carries (`callgate.console.headers`).

Decisions go through the ledger's approval store (`Ledger.approvals().decide`),
the same rule the CLI applies: a request is decided once, only while pending
and unexpired; a second decision is refused with who decided first.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable, Sequence

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import Route

from callgate.console import views
from callgate.console.auth import NoAuth, TokenAuth
from callgate.console.chain import VERIFY_EVERY
from callgate.console.guard import MAX_FORM_BYTES, MAX_REASON_CHARS
from callgate.console.headers import CSP, SecurityHeaders
from callgate.console.pages import approval, call, decide, inbox, plain, run, runs, session
from callgate.console.pages.runs import RUNS_SHOWN
from callgate.console.site import Console
from callgate.ledger.base import Ledger, LedgerQueries

__all__ = ["CSP", "MAX_FORM_BYTES", "MAX_REASON_CHARS", "RUNS_SHOWN", "VERIFY_EVERY", "create_app"]


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
    console = Console(
        ledger=ledger,
        auth=auth,
        key=key or secrets.token_bytes(32),
        secure_cookies=secure_cookies,
        evaluation=evaluation,
        verify_every=verify_every,
    )
    bind = functools.partial
    routes = [
        Route("/", bind(plain.home, console)),
        Route("/healthz", bind(plain.health, console)),
        Route("/static/console.css", bind(plain.stylesheet, console)),
        Route("/login", bind(session.login_form, console), methods=["GET"]),
        Route("/login", bind(session.login, console), methods=["POST"]),
        Route("/logout", bind(session.logout, console), methods=["POST"]),
        Route("/approvals", console.signed_in(inbox.inbox)),
        Route("/approval", console.signed_in(approval.approval)),
        Route("/approval/decide", bind(decide.decide, console), methods=["POST"]),
        Route("/runs", console.signed_in(runs.runs)),
        Route("/run", console.signed_in(run.run)),
        Route("/call", console.signed_in(call.call)),
    ]
    middleware = [Middleware(SecurityHeaders)]
    if allowed_hosts is not None:
        middleware.append(
            Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts), www_redirect=False)
        )
    return Starlette(routes=routes, middleware=middleware)

"""What every page of the console shares: the ledger, who may sign in, the templates, the chain.

`Console` is built once by `callgate.console.app.create_app`; each page
(`callgate.console.pages`) is a function of it, the request and the signed-in
`Principal`. `Console.signed_in` wraps such a page: a visitor nobody signed in
is sent to the sign-in form (or gets 401 for credentials that were refused),
and a ledger that cannot be read is a 503 page, not a traceback.
"""

from __future__ import annotations

import secrets
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from callgate.console import views
from callgate.console.auth import NoAuth, Principal, Sessions, TokenAuth
from callgate.console.chain import VERIFY_EVERY, ChainCheck
from callgate.console.csrf import FIELD, csrf_token
from callgate.console.guard import Refusal, identify
from callgate.console.templating import Shown, environment, stylesheet
from callgate.errors import LedgerError
from callgate.ledger.base import Ledger, LedgerQueries

__all__ = ["Console", "Page"]

Page = Callable[["Console", Request, Principal], Response]
"""A page of the console: a function of the console, the request and who signed in."""


@dataclass(kw_only=True)
class Console:
    """The state one console application serves from (see `create_app` for each field)."""

    ledger: Ledger
    auth: TokenAuth | NoAuth
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    secure_cookies: bool = False
    evaluation: Callable[[LedgerQueries], views.Evaluation | None] | None = None
    verify_every: float = VERIFY_EVERY
    chain: ChainCheck = field(init=False)
    sessions: Sessions = field(init=False)
    env: jinja2.Environment = field(init=False)
    css: bytes = field(init=False)

    def __post_init__(self) -> None:
        self.sessions = Sessions(self.key)
        self.env = environment()
        self.css = stylesheet()
        self.chain = ChainCheck(self.ledger, verify_every=self.verify_every)

    def principal_of(self, request: Request) -> Principal | None:
        """Who sent ``request`` (`callgate.console.guard.identify`)."""
        return identify(self.auth, self.sessions, request.headers, request.cookies)

    def page(
        self, template: str, principal: Principal | None, status: int = 200, **context: Any
    ) -> HTMLResponse:
        """``template`` rendered for ``principal``, with its CSRF token for the forms."""
        html = self.env.get_template(template).render(
            principal=principal,
            csrf=Shown(csrf_token(self.key, principal.binding)) if principal else "",
            csrf_field=FIELD,
            login_required=self.auth.login_required,
            now=time.time(),
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def problem(
        self, principal: Principal | None, status: int, title: str, message: str
    ) -> HTMLResponse:
        """The error page: what went wrong and what to do."""
        return self.page("error.html", principal, status, title=title, message=message)

    def refuse(self, principal: Principal | None, refusal: Refusal) -> HTMLResponse:
        """The error page of a `Refusal`."""
        return self.problem(principal, refusal.status, refusal.title, refusal.message)

    def signed_in(self, view: Page) -> Callable[[Request], Response]:
        """``view`` as an endpoint that needs a signed-in principal and reads the ledger."""

        def endpoint(request: Request) -> Response:
            principal = self.principal_of(request)
            if principal is None:
                if request.headers.get("authorization"):
                    return self.problem(
                        None,
                        401,
                        "Not signed in",
                        "the credentials sent were not accepted; check the name and token",
                    )
                return _to_sign_in(request)
            try:
                return view(self, request, principal)
            except LedgerError as exc:
                return self.problem(
                    principal,
                    503,
                    "The ledger could not be read",
                    f"{exc}; check the database, then reload the page",
                )

        return endpoint

    def approval_states(self, calls: Sequence[Any]) -> dict[str, str]:
        """The current state of the approval of each call still recorded ``pending``: a
        decided call is shown decided at once, not when its run resumes."""
        store = self.ledger.approvals()
        now = time.time()
        found: dict[str, str] = {}
        for c in calls:
            if c.state.value == "pending" and c.approval_id and c.approval_id not in found:
                r = store.get(c.approval_id)
                if r is not None:
                    found[c.approval_id] = r.state(now).value
        return found


def _to_sign_in(request: Request) -> Response:
    """A redirect to the sign-in form that comes back to this page afterwards."""
    target = "/login?next=" + urllib.parse.quote(
        request.url.path + ("?" + request.url.query if request.url.query else ""), safe=""
    )
    return RedirectResponse(target, status_code=303)

"""``GET /login``, ``POST /login``, ``POST /logout``: sign-in with the operator's credentials.

A signed-in person gets a session cookie signed with the console's key
(HttpOnly, SameSite=Strict; ``Secure`` when the console is served over HTTPS).
Sign-in and sign-out forms from another site are refused (`callgate.console.guard`).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from callgate.console.auth import SESSION_COOKIE, NoAuth
from callgate.console.csrf import FIELD, valid_token
from callgate.console.guard import origin_refusal, own_origin, read_form, safe_next
from callgate.console.site import Console

__all__ = ["login", "login_form", "logout"]


def login_form(console: Console, request: Request) -> Response:
    """The sign-in form (straight to the inbox with ``--no-auth``)."""
    if isinstance(console.auth, NoAuth):
        return RedirectResponse("/approvals", status_code=303)
    target = safe_next(request.query_params.get("next"))
    return console.page("login.html", None, next=target)


async def login(console: Console, request: Request) -> Response:
    """Check the name and token posted; on a match set the session cookie and go on."""
    auth = console.auth
    if isinstance(auth, NoAuth):
        return RedirectResponse("/approvals", status_code=303)
    refused = origin_refusal(request.headers, own_origin(request), title="Sign-in refused")
    form = refused.message if refused else await read_form(request)
    if isinstance(form, str):
        return console.problem(None, 403, "Sign-in refused", form)
    name = form.get("name", "").strip()
    found = auth.credentials.check(name, form.get("token", "").strip())
    target = safe_next(form.get("next"))
    if found is None:
        return console.page(
            "login.html",
            None,
            401,
            next=target,
            error="that name and token do not match the console's credentials",
        )
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        console.sessions.issue(found, auth.credentials.fingerprint(found)),
        max_age=int(console.sessions.lifetime),
        httponly=True,
        samesite="strict",
        secure=console.secure_cookies,
        path="/",
    )
    return response


async def logout(console: Console, request: Request) -> Response:
    """End the session: only from this session's own form (its CSRF token)."""
    principal = console.principal_of(request)
    form = await read_form(request)
    if (
        principal is not None
        and not isinstance(form, str)
        and valid_token(console.key, principal.binding, form.get(FIELD))
    ):
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response
    return console.problem(principal, 403, "Sign-out refused", "reload the page and try again")

"""``/`` (to the inbox), ``/healthz`` and the stylesheet: no ledger, no sign-in."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from callgate.console.site import Console

__all__ = ["health", "home", "stylesheet"]


def home(console: Console, request: Request) -> Response:
    """The console opens on the inbox."""
    return RedirectResponse("/approvals", status_code=303)


def health(console: Console, request: Request) -> Response:
    """``ok``: the process answers (it does not read the ledger)."""
    return PlainTextResponse("ok")


def stylesheet(console: Console, request: Request) -> Response:
    """The console's one stylesheet (the only thing a page loads besides itself)."""
    return Response(console.css, media_type="text/css")

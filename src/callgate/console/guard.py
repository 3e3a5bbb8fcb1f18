"""The console's security checks, each a function of what a request carries.

Who is asking (`identify`), whether a posted form may be read (`form_refusal`,
`origin_refusal`), whether it is this session's (`token_refusal`), what a decision
form says (`read_decision`), and where a link may lead (`safe_next`,
`done_notice`). None of them reads the ledger or needs a running application:
the pages in `callgate.console.pages` call them in order, and the tests call
them on their own (tests/console/test_console_guard.py).

A refusal is a `Refusal` (status, title, message), never an exception: what a
visitor sends is hostile input, whatever it holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from starlette.requests import Request

from callgate.approvals import ApprovalRequest
from callgate.console.auth import SESSION_COOKIE, NoAuth, Principal, Sessions, TokenAuth
from callgate.console.csrf import FIELD, cross_site, valid_token

__all__ = [
    "MAX_FORM_BYTES",
    "MAX_REASON_CHARS",
    "Decision",
    "Refusal",
    "done_notice",
    "form_refusal",
    "identify",
    "origin_refusal",
    "own_origin",
    "read_decision",
    "read_form",
    "safe_next",
    "token_refusal",
]

MAX_FORM_BYTES = 8192
MAX_REASON_CHARS = 1000


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is refused: the HTTP status, the page's title and what to do."""

    status: int
    title: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What a well-formed decision form asks: approve or deny one request, and why."""

    approval_id: str
    approve: bool
    reason: str
    confirmed: bool
    """Whether the person ticked the confirmation box (needed for some approvals)."""


def identify(
    auth: TokenAuth | NoAuth,
    sessions: Sessions,
    headers: Mapping[str, str],
    cookies: Mapping[str, str],
) -> Principal | None:
    """Who sent the request: an ``Authorization`` header first, then the session cookie
    (None: nobody the console knows). With `NoAuth` everyone is the local principal."""
    if isinstance(auth, NoAuth):
        return auth.principal
    header = headers.get("authorization")
    if header:
        return auth.from_headers(header)
    cookie = cookies.get(SESSION_COOKIE)
    return auth.from_session(sessions.read(cookie)) if cookie else None


def own_origin(request: Request) -> str:
    """The origin the request was sent to (scheme and ``Host``), which a form must come from."""
    return f"{request.url.scheme}://{request.headers.get('host', '')}"


def origin_refusal(headers: Mapping[str, str], origin: str, *, title: str) -> Refusal | None:
    """A 403 when the headers say the form was posted from another site."""
    refused = cross_site(headers, origin)
    return Refusal(403, title, refused) if refused else None


def form_refusal(headers: Mapping[str, str]) -> str | None:
    """Why the body of a form is not read: no length, too long, or not a form."""
    length = headers.get("content-length")
    if length is None or not length.isdigit() or int(length) > MAX_FORM_BYTES:
        return f"the form must be at most {MAX_FORM_BYTES} bytes, with its length given"
    kind = headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        return f"expected a form (application/x-www-form-urlencoded), got {kind[:60]!r}"
    return None


async def read_form(request: Request) -> dict[str, str] | str:
    """The posted fields, or why the form is refused (`form_refusal`)."""
    refused = form_refusal(request.headers)
    if refused is not None:
        return refused
    form = await request.form(max_files=0, max_fields=8)
    return {k: v for k, v in form.items() if isinstance(v, str)}


def token_refusal(key: bytes, principal: Principal, form: Mapping[str, str]) -> Refusal | None:
    """A 403 when a credential the browser sends by itself comes without this session's
    CSRF token (a Bearer request needs none: no browser adds that header on its own)."""
    if principal.ambient and not valid_token(key, principal.binding, form.get(FIELD)):
        return Refusal(
            403,
            "Form refused",
            "the form's CSRF token is missing or is not this session's; reload the page "
            "and decide again. Nothing was decided",
        )
    return None


def read_decision(form: Mapping[str, str]) -> Decision | Refusal:
    """The decision a form asks for, or a 400 naming the field that is wrong."""
    decision = form.get("decision", "")
    reason = form.get("reason", "").strip()
    if decision not in ("approve", "deny"):
        return Refusal(
            400, "Form refused", f"decision must be 'approve' or 'deny', got {decision[:40]!r}"
        )
    if decision == "deny" and not reason:
        return Refusal(
            400,
            "Say why",
            "a denial needs a reason (the model is told it); go back and write one",
        )
    if len(reason) > MAX_REASON_CHARS:
        return Refusal(
            400,
            "Reason too long",
            f"the reason has {len(reason)} characters, at most {MAX_REASON_CHARS} are kept",
        )
    return Decision(
        approval_id=form.get("id", ""),
        approve=decision == "approve",
        reason=reason,
        confirmed=form.get("confirm") == "yes",
    )


def done_notice(value: str, request: ApprovalRequest, principal: Principal) -> str:
    """The notice after a decision ("You approved this request"): only when the request was
    decided that way by the person reading, whatever a crafted link says."""
    decided = request.status.value if request.decided_by == principal.name else ""
    return value if value in ("approved", "denied") and value == decided else ""


def safe_next(value: str | None) -> str:
    """Where to go after signing in: a path of this console only (never another site)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/approvals"
    if any(ord(c) < 0x21 for c in value):
        return "/approvals"
    return value

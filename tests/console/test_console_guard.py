"""The console's security checks on their own: no application, no server, no browser.

Each check is a function of what a request carries (`callgate.console.guard`), of the
ledger's chain (`callgate.console.chain`), or plain ASGI (`callgate.console.headers`);
tests/console/test_console_http.py checks the same rules through the routes.
"""

from __future__ import annotations

import asyncio
import base64
import sqlite3
from pathlib import Path
from typing import Any

import console_support as cs
from hypothesis import given
from hypothesis import strategies as st

from callgate.console.auth import SESSION_COOKIE, Credentials, NoAuth, Sessions, TokenAuth
from callgate.console.chain import ChainCheck
from callgate.console.csrf import FIELD, csrf_token
from callgate.console.guard import (
    MAX_FORM_BYTES,
    MAX_REASON_CHARS,
    Decision,
    Refusal,
    form_refusal,
    identify,
    origin_refusal,
    read_decision,
    safe_next,
    token_refusal,
)
from callgate.console.headers import CSP, SecurityHeaders
from callgate.ledger import SQLiteLedger
from callgate.ledger.base import AuditCheck

KEY = b"k" * 32
AUTH = TokenAuth(Credentials({"maria": cs.TOKEN}))
SESSIONS = Sessions(KEY)
FORM = {"content-length": "40", "content-type": "application/x-www-form-urlencoded"}


def _basic(name: str, token: str) -> str:
    return "Basic " + base64.b64encode(f"{name}:{token}".encode()).decode()


def test_identify_reads_bearer_basic_and_the_session_cookie() -> None:
    """A Bearer token, Basic credentials and a session cookie each name the principal, with
    the method that says whether the credential is ambient (needs CSRF)."""
    bearer = identify(AUTH, SESSIONS, {"authorization": f"Bearer {cs.TOKEN}"}, {})
    basic = identify(AUTH, SESSIONS, {"authorization": _basic("maria", cs.TOKEN)}, {})
    cookie = SESSIONS.issue("maria", AUTH.credentials.fingerprint("maria"))
    session = identify(AUTH, SESSIONS, {}, {SESSION_COOKIE: cookie})
    assert bearer is not None
    assert (bearer.name, bearer.ambient) == ("maria", False)
    assert basic is not None
    assert (basic.name, basic.ambient) == ("maria", True)
    assert session is not None
    assert (session.name, session.method) == ("maria", "session")


def test_identify_refuses_wrong_credentials_and_never_falls_back_to_the_cookie() -> None:
    """A wrong token, a forged cookie or a refused header is nobody: a refused
    ``Authorization`` header is not rescued by a valid session cookie sent with it."""
    cookie = SESSIONS.issue("maria", AUTH.credentials.fingerprint("maria"))
    assert identify(AUTH, SESSIONS, {"authorization": "Bearer tok-wrong-0123456789"}, {}) is None
    assert identify(AUTH, SESSIONS, {"authorization": _basic("maria", "nope")}, {}) is None
    assert identify(AUTH, SESSIONS, {}, {SESSION_COOKIE: cookie[:-2] + "xx"}) is None
    assert identify(AUTH, Sessions(b"o" * 32), {}, {SESSION_COOKIE: cookie}) is None
    headers = {"authorization": "Bearer tok-wrong-0123456789"}
    assert identify(AUTH, SESSIONS, headers, {SESSION_COOKIE: cookie}) is None


def test_identify_without_auth_is_the_local_principal() -> None:
    """``--no-auth``: every visitor is the one local principal, whatever they send."""
    local = NoAuth("me")
    assert identify(local, SESSIONS, {"authorization": "Bearer x"}, {}) is local.principal


def test_form_refusal_bounds_the_body_and_its_type() -> None:
    """A form is read only with its length given, at most MAX_FORM_BYTES, and as a form."""
    assert form_refusal(FORM) is None
    assert form_refusal({**FORM, "content-type": "application/x-www-form-urlencoded; a=b"}) is None
    for headers in (
        {"content-type": FORM["content-type"]},
        {**FORM, "content-length": str(MAX_FORM_BYTES + 1)},
        {**FORM, "content-length": "-1"},
        {**FORM, "content-type": "multipart/form-data"},
        {**FORM, "content-type": "application/json"},
    ):
        refused = form_refusal(headers)
        assert refused is not None, headers
        assert "bytes" in refused or "expected a form" in refused


def test_origin_refusal_refuses_other_sites_only() -> None:
    """A form from another origin, or one the browser labels cross-site or same-site, is a
    403; the console's own origin and a request without those headers are read."""
    own = "http://console.test"
    assert origin_refusal({"origin": own}, own, title="t") is None
    assert origin_refusal({}, own, title="t") is None
    assert origin_refusal({"sec-fetch-site": "same-origin"}, own, title="t") is None
    for headers in (
        {"origin": "https://attacker.example"},
        {"origin": "null"},
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},
    ):
        refused = origin_refusal(headers, own, title="Form refused")
        assert refused is not None, headers
        assert refused.status == 403


def test_token_refusal_needs_this_sessions_token_for_ambient_credentials() -> None:
    """A cookie or Basic principal must send the CSRF token of its own binding; a Bearer
    principal (no browser adds that header) needs none."""
    basic = identify(AUTH, SESSIONS, {"authorization": _basic("maria", cs.TOKEN)}, {})
    bearer = identify(AUTH, SESSIONS, {"authorization": f"Bearer {cs.TOKEN}"}, {})
    assert basic is not None
    assert bearer is not None
    own = csrf_token(KEY, basic.binding)
    assert token_refusal(KEY, basic, {FIELD: own}) is None
    for form in ({}, {FIELD: csrf_token(KEY, "session:other")}, {FIELD: own.upper()}):
        refused = token_refusal(KEY, basic, form)
        assert refused is not None, form
        assert refused.status == 403
    assert token_refusal(b"x" * 32, basic, {FIELD: own}) is not None
    assert token_refusal(KEY, bearer, {}) is None


def test_read_decision_names_the_field_that_is_wrong() -> None:
    """Only approve or deny; a denial needs a reason; a reason is at most MAX_REASON_CHARS."""
    ok = read_decision({"id": "apr_1", "decision": "deny", "reason": " no ", "confirm": "yes"})
    assert ok == Decision(approval_id="apr_1", approve=False, reason="no", confirmed=True)
    cases = [
        ({"decision": "maybe"}, "decision must be 'approve' or 'deny'"),
        ({"decision": "deny", "reason": "  "}, "a denial needs a reason"),
        ({"decision": "approve", "reason": "x" * (MAX_REASON_CHARS + 1)}, "at most 1000"),
    ]
    for form, says in cases:
        refused = read_decision(form)
        assert isinstance(refused, Refusal), form
        assert refused.status == 400
        assert says in refused.message


_NEXT = st.builds(
    str.__add__,
    st.sampled_from(["", "/", "//", "/\\", "\\", "https://", "/ ", "/\t"]),
    st.text(st.sampled_from("/\\:.a?# \t\x00") | st.characters(), max_size=30),
)
"""A ``next`` a visitor may send: prefixes that lead elsewhere, then anything."""


@given(_NEXT)
def test_safe_next_never_leaves_the_console(value: str) -> None:
    """Whatever ``next`` a visitor sends, sign-in leads to a path of this console: one slash,
    no backslash, no control character or space."""
    target = safe_next(value)
    assert target.startswith("/")
    assert not target.startswith("//")
    assert "\\" not in target
    assert all(ord(c) >= 0x21 for c in target)


def test_safe_next_keeps_a_console_path_and_refuses_other_sites() -> None:
    """A path of the console is kept; another site, a protocol-relative or backslash URL is
    replaced by the inbox."""
    assert safe_next("/run?id=r1") == "/run?id=r1"
    for value in ("https://evil.example", "//evil.example", "/\\evil.example", "/a b", None):
        assert safe_next(value) == "/approvals"


class _Ledger:
    """A ledger's chain as the console reads it: a head and a verification, counted."""

    def __init__(self) -> None:
        self.head: tuple[int, str] | None = (1, "h1")
        self.verified = 0

    def audit_head(self) -> tuple[int, str] | None:
        return self.head

    def verify(self) -> AuditCheck:
        self.verified += 1
        return AuditCheck(ok=True, records=self.verified, head=str(self.head))


def test_the_chain_check_is_reused_until_the_head_moves_or_it_is_old() -> None:
    """The chain is verified once, reused while the journal's head is unchanged and younger
    than verify_every, and verified again when either changes."""
    ledger, now = _Ledger(), [100.0]
    check = ChainCheck(ledger, verify_every=30, clock=lambda: now[0])  # type: ignore[arg-type]
    first, at = check()
    assert (ledger.verified, at) == (1, 100.0)
    now[0] = 129.0
    assert check() == (first, 100.0)
    assert ledger.verified == 1
    ledger.head = (2, "h2")
    assert check()[1] == 129.0
    assert ledger.verified == 2
    now[0] = 159.0
    assert check()[1] == 159.0
    assert ledger.verified == 3


def test_the_chain_check_of_a_keyed_ledger_finds_an_edited_record(tmp_path: Path) -> None:
    """A keyed journal verifies under the ledger's own key through the console's check, and a
    record edited in the file is reported, from its sequence number on."""
    path = tmp_path / "calls.db"
    with SQLiteLedger(path, chain_key=b"c" * 32) as ledger:
        run = cs.play(ledger).run
        check = ChainCheck(ledger, verify_every=0)
        assert check()[0].ok
        first = ledger.records(run_id=run.id, call_id="call_1")[0].seq
        with sqlite3.connect(path) as db:
            db.execute(
                "UPDATE journal SET data = replace(data, 'o-1', 'o-9') WHERE seq = ?", (first,)
            )
        broken, _ = check()
        assert not broken.ok
        assert broken.first_bad_seq == first


def test_security_headers_are_on_every_response_of_any_asgi_app() -> None:
    """The middleware sets the CSP, no framing, nosniff and no-store on any response (the
    app's own headers of those names replaced); the stylesheet alone may be cached."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"cache-control", b"public"), (b"x-frame-options", b"ALLOW")],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    def headers_of(path: str) -> dict[bytes, bytes]:
        sent: list[dict[str, Any]] = []

        async def send(message: Any) -> None:
            sent.append(message)

        scope = {"type": "http", "path": path}
        asyncio.run(SecurityHeaders(app)(scope, None, send))  # type: ignore[arg-type]
        return dict(sent[0]["headers"])

    page = headers_of("/approvals")
    assert page[b"content-security-policy"] == CSP.encode()
    assert page[b"x-frame-options"] == b"DENY"
    assert page[b"cache-control"] == b"no-store"
    assert page[b"x-content-type-options"] == b"nosniff"
    assert headers_of("/static/console.css")[b"cache-control"] == b"public, max-age=3600"

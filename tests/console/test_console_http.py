"""The console over HTTP (Starlette's TestClient on the real app and a real SQLite ledger):
sign-in, decisions, CSRF, pages and headers."""

from __future__ import annotations

import base64
import html
import sqlite3
import time
from pathlib import Path

import console_support as cs
import pytest
from starlette.testclient import TestClient

from callgate.approvals import ApprovalStatus
from callgate.console import CSP, Credentials, NoAuth, TokenAuth, create_app
from callgate.ledger import SQLiteLedger
from conftest import KEY, csrf_of, sign_in


def _basic(name: str, token: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{token}".encode()).decode()}


# -- signing in ------------------------------------------------------------------------------


def test_a_page_without_sign_in_redirects_to_the_login_form(client: TestClient) -> None:
    """No credential: the inbox answers with a redirect to /login, never with ledger data."""
    response = client.get("/approvals")
    assert response.status_code == 303
    assert response.headers["location"] == "/login?next=%2Fapprovals"
    assert "apr_" not in response.text


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Authorization": f"Bearer {cs.TOKEN}"}, 200),
        ({"Authorization": "Bearer tok-not-anyones-0123456789"}, 401),
        (_basic("maria", cs.TOKEN), 200),
        (_basic("omar", cs.TOKEN), 401),  # maria's token under another name
        (_basic("maria", "wrong-token-0123456789"), 401),
        ({"Authorization": "Basic !!notbase64"}, 401),
    ],
)
def test_bearer_and_basic_credentials(
    client: TestClient, scenario: cs.Scenario, headers: dict[str, str], status: int
) -> None:
    """The operator's tokens work as Bearer and as Basic (name and token); anything else is 401."""
    response = client.get("/approvals", headers=headers)
    assert response.status_code == status
    assert (scenario.refund_approval in response.text) is (status == 200)


def test_the_login_form_sets_a_strict_http_only_session(client: TestClient) -> None:
    """A right name and token open a session cookie (HttpOnly, SameSite=Strict); a wrong one not."""
    wrong = client.post("/login", data={"name": "maria", "token": "x" * 20, "next": "/runs"})
    assert wrong.status_code == 401
    assert "do not match" in wrong.text
    assert "set-cookie" not in wrong.headers
    right = client.post("/login", data={"name": "maria", "token": cs.TOKEN, "next": "/runs"})
    assert right.status_code == 303
    assert right.headers["location"] == "/runs"
    cookie = right.headers["set-cookie"].lower()
    assert "httponly" in cookie
    assert "samesite=strict" in cookie
    assert client.get("/runs").status_code == 200


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example", "/\\evil", ""])
def test_sign_in_never_redirects_off_the_console(client: TestClient, target: str) -> None:
    """The ``next`` of the login form is a path of this console, or the inbox."""
    response = client.post("/login", data={"name": "maria", "token": cs.TOKEN, "next": target})
    assert response.headers["location"] == "/approvals"


def test_an_edited_session_cookie_is_refused(client: TestClient) -> None:
    """A cookie whose payload was changed (another name) no longer signs anyone in."""
    sign_in(client)
    value = client.cookies["callgate_session"]
    payload, _, signature = value.partition(".")
    forged = base64.urlsafe_b64encode(
        base64.urlsafe_b64decode(payload + "==").replace(b"maria", b"omar!")
    ).decode()
    client.cookies.clear()
    client.cookies.set("callgate_session", f"{forged.rstrip('=')}.{signature}")
    assert client.get("/approvals").status_code == 303
    client.cookies.clear()
    client.cookies.set("callgate_session", value)
    assert client.get("/approvals").status_code == 200  # the unedited cookie still works


def test_a_changed_token_ends_the_sessions_opened_with_the_old_one(
    ledger: SQLiteLedger, scenario: cs.Scenario
) -> None:
    """The session is bound to the token: after the operator changes maria's token (and the
    console restarts with the same key), her old cookie is refused."""
    before = TestClient(
        create_app(ledger, auth=TokenAuth(Credentials({"maria": cs.TOKEN})), key=KEY),
        follow_redirects=False,
    )
    sign_in(before)
    after = TestClient(
        create_app(
            ledger, auth=TokenAuth(Credentials({"maria": "tok-new-0123456789abc"})), key=KEY
        ),
        follow_redirects=False,
    )
    after.cookies.set("callgate_session", before.cookies["callgate_session"])
    assert after.get("/approvals").status_code == 303


# -- deciding --------------------------------------------------------------------------------


def test_approving_records_the_signed_in_principal_and_the_reason(
    client: TestClient, ledger: SQLiteLedger, scenario: cs.Scenario
) -> None:
    """An approval from the inbox is decided once, as the signed-in person, with the reason, and
    audited in the ledger's chain."""
    csrf = sign_in(client)
    response = client.post(
        "/approval/decide",
        data={
            "csrf": csrf,
            "id": scenario.refund_approval,
            "decision": "approve",
            "confirm": "yes",
            "reason": "ok",
        },
    )
    assert response.status_code == 303
    assert response.headers["location"].endswith("done=approved")
    stored = ledger.approvals().get(scenario.refund_approval)
    assert stored is not None
    assert stored.status is ApprovalStatus.APPROVED
    assert stored.decided_by == "maria"
    assert stored.reason == "ok"
    audit = [r for r in ledger.audit() if r.kind == "approval.approved"]
    assert [(r.data["actor"], r.data["approval_id"]) for r in audit] == [
        ("maria", scenario.refund_approval)
    ]
    assert ledger.verify().ok
    assert scenario.effects == []  # deciding executes nothing


def test_an_approval_is_decided_once(client: TestClient, scenario: cs.Scenario) -> None:
    """A second decision (another person, or the same form sent twice) is refused with who decided
    first, and changes nothing."""
    csrf = sign_in(client)
    form = {
        "csrf": csrf,
        "id": scenario.refund_approval,
        "decision": "approve",
        "confirm": "yes",
        "reason": "",
    }
    assert client.post("/approval/decide", data=form).status_code == 303
    other = TestClient(client.app, follow_redirects=False)
    second = other.post(
        "/approval/decide",
        data={
            **form,
            "csrf": sign_in(other, "omar", "tok-omar-9876543210abcdef"),
            "decision": "deny",
            "reason": "no",
        },
    )
    assert second.status_code == 409
    assert "already approved by maria" in second.text
    page = client.get("/approval", params={"id": scenario.refund_approval}).text
    assert 'id="state">approved<' in page


def test_a_denial_needs_a_reason_and_reaches_the_model(
    client: TestClient, ledger: SQLiteLedger, scenario: cs.Scenario
) -> None:
    """Deny without a reason is refused (still pending); with one, the resumed run rejects the
    call at stage approve with that reason, and nothing runs."""
    csrf = sign_in(client)
    form = {"csrf": csrf, "id": scenario.refund_approval, "decision": "deny", "reason": "  "}
    refused = client.post("/approval/decide", data=form)
    assert refused.status_code == 400
    assert "needs a reason" in refused.text
    stored = ledger.approvals().get(scenario.refund_approval)
    assert stored is not None
    assert stored.status is ApprovalStatus.PENDING
    form["reason"] = "photo shows no damage"
    assert client.post("/approval/decide", data=form).status_code == 303
    [obs] = scenario.run.resume()
    assert (obs.status.value, obs.stage.value) == ("rejected", "approve")
    assert "photo shows no damage" in obs.content
    assert scenario.effects == []


def test_an_unknown_or_expired_request_is_not_decided(
    tmp_path: Path, credentials: Credentials
) -> None:
    """An id no request has is 404; a request past its expiry is 409 and stays undecided."""
    with SQLiteLedger(tmp_path / "short.db") as ledger:
        effects: list[dict[str, object]] = []
        gate = cs.Gate(cs.registry(effects), policy=cs.POLICY, ledger=ledger, approval_ttl=0.05)
        run = gate.run(authority=cs.AUTHORITY, trusted=[cs.CUSTOMER])
        [obs] = run.submit(
            [
                cs.ToolCall(
                    id="c1",
                    name="refund",
                    arguments={"order_id": "o-1", "amount": 5.0, "reason": "r"},
                )
            ]
        )
        assert obs.approval_id is not None
        client = TestClient(
            create_app(ledger, auth=TokenAuth(credentials), key=KEY), follow_redirects=False
        )
        csrf = sign_in(client)
        missing = client.post(
            "/approval/decide",
            data={"csrf": csrf, "id": "apr_nope", "decision": "approve", "confirm": "yes"},
        )
        assert missing.status_code == 404
        time.sleep(0.1)
        expired = client.post(
            "/approval/decide",
            data={"csrf": csrf, "id": obs.approval_id, "decision": "approve", "confirm": "yes"},
        )
        assert expired.status_code == 409
        assert "expired" in expired.text
        stored = ledger.approvals().get(obs.approval_id)
        assert stored is not None
        assert stored.decided_by is None


# -- CSRF ------------------------------------------------------------------------------------


def _still_pending(ledger: SQLiteLedger, approval_id: str) -> bool:
    stored = ledger.approvals().get(approval_id)
    return stored is not None and stored.status is ApprovalStatus.PENDING


@pytest.mark.parametrize(
    ("csrf", "headers", "why"),
    [
        (None, {}, "CSRF token is missing"),
        ("0" * 64, {}, "CSRF token is missing"),
        ("own", {"Origin": "http://evil.example"}, "sent from 'http://evil.example'"),
        ("own", {"Origin": "null"}, "sent from 'null'"),
        ("own", {"Sec-Fetch-Site": "cross-site"}, "came from a cross-site page"),
    ],
)
def test_a_forged_form_decides_nothing(
    client: TestClient,
    ledger: SQLiteLedger,
    scenario: cs.Scenario,
    csrf: str | None,
    headers: dict[str, str],
    why: str,
) -> None:
    """A form without this session's token, or sent from another site, is refused (403) and the
    request stays pending, although the session cookie came along."""
    own = sign_in(client)
    data = {"id": scenario.refund_approval, "decision": "approve", "confirm": "yes"}
    if csrf is not None:
        data["csrf"] = own if csrf == "own" else csrf
    response = client.post("/approval/decide", data=data, headers=headers)
    assert response.status_code == 403
    assert why in html.unescape(response.text)
    assert _still_pending(ledger, scenario.refund_approval)


def test_another_sessions_token_is_refused(
    client: TestClient, ledger: SQLiteLedger, scenario: cs.Scenario
) -> None:
    """A CSRF token is bound to its session: omar's token does not pass in maria's session."""
    other = TestClient(client.app, follow_redirects=False)
    omars = sign_in(other, "omar", "tok-omar-9876543210abcdef")
    sign_in(client)
    data = {"csrf": omars, "id": scenario.refund_approval, "decision": "approve", "confirm": "yes"}
    assert client.post("/approval/decide", data=data).status_code == 403
    assert _still_pending(ledger, scenario.refund_approval)


def test_basic_auth_needs_the_token_but_bearer_does_not(
    client: TestClient, ledger: SQLiteLedger, scenario: cs.Scenario
) -> None:
    """Browsers send Basic credentials by themselves, so a Basic form needs its CSRF token; a
    Bearer header is never ambient, so a script decides without one."""
    data = {"id": scenario.refund_approval, "decision": "approve", "confirm": "yes"}
    basic = client.post("/approval/decide", data=data, headers=_basic("maria", cs.TOKEN))
    assert basic.status_code == 403
    assert _still_pending(ledger, scenario.refund_approval)
    bearer = client.post(
        "/approval/decide", data=data, headers={"Authorization": f"Bearer {cs.TOKEN}"}
    )
    assert bearer.status_code == 303
    stored = ledger.approvals().get(scenario.refund_approval)
    assert stored is not None
    assert stored.decided_by == "maria"


def test_an_oversized_or_non_form_body_is_refused(
    client: TestClient, ledger: SQLiteLedger, scenario: cs.Scenario
) -> None:
    """The decision endpoint reads only small URL-encoded forms."""
    csrf = sign_in(client)
    big = {
        "csrf": csrf,
        "id": scenario.refund_approval,
        "decision": "approve",
        "confirm": "yes",
        "reason": "x" * 9000,
    }
    assert client.post("/approval/decide", data=big).status_code == 400
    as_json = client.post(
        "/approval/decide",
        json={
            "csrf": csrf,
            "id": scenario.refund_approval,
            "decision": "approve",
            "confirm": "yes",
        },
    )
    assert as_json.status_code == 400
    assert _still_pending(ledger, scenario.refund_approval)


# -- pages and headers -----------------------------------------------------------------------


def test_every_page_sends_the_security_headers(client: TestClient, scenario: cs.Scenario) -> None:
    """CSP without any script source, no framing, no sniffing, and no-store on data pages."""
    sign_in(client)
    pages = [
        "/approvals",
        "/runs",
        f"/run?id={scenario.run.id}",
        f"/call?run={scenario.run.id}&id=call_3",
        f"/approval?id={scenario.refund_approval}",
        "/login",
        "/approval?id=apr_missing",
    ]
    for path in pages:
        response = client.get(path)
        assert response.headers["content-security-policy"] == CSP, path
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["cache-control"] == "no-store"
    assert "script-src" not in CSP
    assert "unsafe-inline" not in CSP
    assert "frame-ancestors 'none'" in CSP
    assert "<script" not in client.get("/approvals").text.lower()
    css = client.get("/static/console.css")
    assert css.headers["content-type"].startswith("text/css")
    assert css.headers["cache-control"].startswith("public")


def test_the_inbox_shows_the_exact_effect_redacted_arguments_and_provenance(
    client: TestClient, scenario: cs.Scenario
) -> None:
    """Each pending request shows preview, effects, arguments with secrets redacted, and the
    provenance finding that escalated it; secret values never reach the page."""
    sign_in(client)
    page = client.get("/approvals").text
    assert "refund 60.00 USD on o-1" in page
    assert "write:orders, spend:USD=60" in page
    assert "[redacted]" in page
    assert cs.SMTP_PASSWORD not in page
    assert cs.API_KEY not in page
    assert "Provenance findings" in page
    assert cs.INJECTED_EMAIL in page
    assert page.count('action="/approval/decide"') == 2


def test_the_timeline_lists_every_record_of_the_run_in_order(
    client: TestClient, ledger: SQLiteLedger, scenario: cs.Scenario
) -> None:
    """Model turns, admissions, the schema rejection, attempts, outcomes, approvals and the
    security event appear once each, in journal order."""
    sign_in(client)
    page = client.get("/run", params={"id": scenario.run.id}).text
    import re

    seqs = [int(s) for s in re.findall(r'<li class="event [^"]*" id="r(\d+)"', page)]
    expected = [r.seq for r in ledger.records(run_id=scenario.run.id)]
    assert seqs == expected
    for title in (
        "model turn 1",
        "rejected at stage validate",
        "attempt 1 started",
        "outcome ok",
        "approval requested",
        "security event: provenance.untrusted_sink",
    ):
        assert title in page, title
    assert 'id="chain">chain verified' in page


def test_the_runs_list_and_its_funnel(client: TestClient, scenario: cs.Scenario) -> None:
    """The runs page lists the run with its states and draws the funnel: 4 proposed, 3 past
    validation, 1 past the approval (two wait), 1 ok."""
    sign_in(client)
    page = client.get("/runs").text
    assert scenario.run.id in page
    assert "pending 2" in page
    import re

    counts = re.findall(r'class="count">([^<]*)<', page)
    assert counts == ["4", "4", "3 (−1)", "3", "1 (−2)", "1", "1", "1"]


def test_a_tampered_journal_turns_the_badge_red(
    client: TestClient, ledger: SQLiteLedger, scenario: cs.Scenario, tmp_path: Path
) -> None:
    """An edited record makes the call page say the chain is broken and mark records from the
    first bad one as suspect."""
    sign_in(client)
    first = ledger.records(run_id=scenario.run.id, call_id="call_1")[0].seq
    with sqlite3.connect(tmp_path / "calls.db") as db:
        db.execute(
            "UPDATE journal SET data = replace(data, 'get_order', 'get_0rder') WHERE seq = ?",
            (first,),
        )
    page = client.get("/call", params={"run": scenario.run.id, "id": "call_1"}).text
    assert "chain broken" in page
    assert f"record {first}: its content does not match its hash" in page
    assert 'class="event proposal suspect"' in page


def test_unknown_run_call_and_approval_are_404(client: TestClient) -> None:
    """Pages for ids the ledger does not have say so, with what to do."""
    sign_in(client)
    for path in ("/run?id=run_x", "/call?run=run_x&id=c", "/approval?id=apr_x"):
        response = client.get(path)
        assert response.status_code == 404
        assert "open the" in response.text


def test_a_host_not_allowed_is_refused(ledger: SQLiteLedger, scenario: cs.Scenario) -> None:
    """With allowed hosts (the default on loopback), another Host (DNS rebinding) gets 400."""
    from callgate.cli.console import LOCAL_HOSTS

    app = create_app(ledger, auth=NoAuth("dev"), key=KEY, allowed_hosts=LOCAL_HOSTS)
    client = TestClient(app, base_url="http://127.0.0.1")
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LOCALHOST"):
        assert client.get("/approvals", headers={"Host": host}).status_code == 200, host
    for host in ("evil.example", "evil.example:8765", "127.0.0.1.evil.example", "www.localhost"):
        assert client.get("/approvals", headers={"Host": host}).status_code == 400, host


def test_without_auth_everyone_is_the_local_principal(
    ledger: SQLiteLedger, scenario: cs.Scenario
) -> None:
    """--no-auth: no sign-in, the page says so, decisions are recorded as the local name and
    still need the CSRF token."""
    client = TestClient(create_app(ledger, auth=NoAuth("dev"), key=KEY), follow_redirects=False)
    page = client.get("/approvals").text
    assert "no authentication" in page
    data = {"id": scenario.refund_approval, "decision": "approve", "confirm": "yes"}
    assert client.post("/approval/decide", data=data).status_code == 403
    data["csrf"] = csrf_of(page)
    assert client.post("/approval/decide", data=data).status_code == 303
    stored = ledger.approvals().get(scenario.refund_approval)
    assert stored is not None
    assert stored.decided_by == "dev"


def test_the_headers_named_in_the_docs(client: TestClient) -> None:
    """Referrer and opener policies are same-origin; the session cookie lives 8 hours."""
    response = client.get("/login")
    assert response.headers["referrer-policy"] == "same-origin"
    assert response.headers["cross-origin-opener-policy"] == "same-origin"
    signed = client.post("/login", data={"name": "maria", "token": cs.TOKEN, "next": "/"})
    assert "max-age=28800" in signed.headers["set-cookie"].lower()


def test_a_reason_over_1000_characters_is_refused(
    client: TestClient, ledger: SQLiteLedger, scenario: cs.Scenario
) -> None:
    """A reason is kept whole or refused: 1001 characters are refused, nothing is decided."""
    csrf = sign_in(client)
    data = {"csrf": csrf, "id": scenario.refund_approval, "decision": "deny", "reason": "r" * 1001}
    response = client.post("/approval/decide", data=data)
    assert response.status_code == 400
    assert "at most 1000" in response.text
    assert _still_pending(ledger, scenario.refund_approval)


def test_signing_out_ends_the_session_in_the_browser(client: TestClient) -> None:
    """Sign-out (a CSRF-checked form) removes the cookie; the inbox asks for sign-in again."""
    csrf = sign_in(client)
    assert client.post("/logout", data={"csrf": "0" * 64}).status_code == 403
    response = client.post("/logout", data={"csrf": csrf})
    assert response.status_code == 303
    client.cookies.clear()
    for name, value in response.cookies.items():
        client.cookies.set(name, value)
    assert client.get("/approvals").status_code == 303


def test_a_restarted_console_signs_everyone_out(
    ledger: SQLiteLedger, scenario: cs.Scenario, credentials: Credentials
) -> None:
    """Without a key of their own, two consoles draw different keys: a cookie of one is refused
    by the other."""
    first = TestClient(create_app(ledger, auth=TokenAuth(credentials)), follow_redirects=False)
    sign_in(first)
    second = TestClient(create_app(ledger, auth=TokenAuth(credentials)), follow_redirects=False)
    second.cookies.set("callgate_session", first.cookies["callgate_session"])
    assert second.get("/approvals").status_code == 303


def test_credentials_keep_no_token_in_memory(credentials: Credentials) -> None:
    """Only the tokens' SHA-256 digests are kept."""
    kept = repr(vars(credentials))
    assert cs.TOKEN not in kept
    assert repr(cs.TOKEN.encode())[2:-1] not in kept


@pytest.mark.parametrize("backend", ["memory", "postgres"])
def test_deciding_on_other_ledgers(
    backend: str, request: pytest.FixtureRequest, credentials: Credentials
) -> None:
    """The inbox decides on a memory ledger and on PostgreSQL (``--dsn``) as on SQLite."""
    from callgate.ledger import MemoryLedger, PostgresLedger

    ledger = (
        MemoryLedger() if backend == "memory" else PostgresLedger(request.getfixturevalue("pg_dsn"))
    )
    try:
        scenario = cs.play(ledger)
        client = TestClient(
            create_app(ledger, auth=TokenAuth(credentials), key=KEY), follow_redirects=False
        )
        csrf = sign_in(client)
        assert scenario.email_approval in client.get("/approvals").text
        data = {
            "csrf": csrf,
            "id": scenario.refund_approval,
            "decision": "approve",
            "confirm": "yes",
        }
        assert client.post("/approval/decide", data=data).status_code == 303
        assert client.post("/approval/decide", data=data).status_code == 409
        [obs] = scenario.run.resume()
        assert obs.status.value == "ok"
        page = client.get("/run", params={"id": scenario.run.id}).text
        assert 'id="chain">chain verified' in page
    finally:
        ledger.close()


def test_the_notice_after_a_decision_says_only_what_the_console_wrote(
    client: TestClient, scenario: cs.Scenario
) -> None:
    """A crafted link cannot make the approval page claim a decision that was not the reader's."""
    csrf = sign_in(client)
    for done in ("paid", "denied", "approved"):
        page = client.get("/approval", params={"id": scenario.refund_approval, "done": done}).text
        assert 'id="notice"' not in page, done
    data = {"csrf": csrf, "id": scenario.refund_approval, "decision": "deny", "reason": "no"}
    shown = client.get(client.post("/approval/decide", data=data).headers["location"]).text
    assert "You denied this request." in shown
    page = client.get("/approval", params={"id": scenario.refund_approval, "done": "approved"}).text
    assert 'id="notice"' not in page

"""The run timeline and concurrent decisions, on a real SQLite ledger."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import console_support as cs
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from callgate import Authority, Gate, OutcomeUnknown, Registry, ToolCall
from callgate.console import Credentials, TokenAuth, create_app
from callgate.console.auth import Sessions
from callgate.console.csrf import valid_token
from callgate.ledger import SQLiteLedger
from conftest import KEY, sign_in


def test_an_unknown_outcome_and_its_reconciliation_appear_in_order(
    ledger: SQLiteLedger, credentials: Credentials
) -> None:
    """A payment that timed out is ``outcome unknown``; a person's resolution follows it as a
    reconciled outcome, with who resolved it and their note."""
    registry = Registry()

    @registry.tool(effects="spend:USD={amount}")
    def pay(amount: float) -> str:
        """Pay."""
        raise OutcomeUnknown("the provider timed out after the request was sent")

    gate = Gate(registry, ledger=ledger)
    run = gate.run(authority=Authority(principal="bot", grants=["spend:USD<=100"]))
    [obs] = run.submit([ToolCall(id="p1", name="pay", arguments={"amount": 10})])
    assert obs.status.value == "unknown"
    ledger.resolve(run.id, "p1", status="ok", by="ops-lead", note="provider shows charge ch_42")
    client = TestClient(
        create_app(ledger, auth=TokenAuth(credentials), key=KEY), follow_redirects=False
    )
    sign_in(client)
    page = client.get("/run", params={"id": run.id}).text
    titles = re.findall(r'<div class="title">([^<]*)</div>', page)
    assert titles == ["admitted", "attempt 1 started", "outcome unknown", "outcome ok (reconciled)"]
    assert 'class="event reconciliation' in page
    assert "ops-lead" in page
    assert "provider shows charge ch_42" in page
    call = client.get("/call", params={"run": run.id, "id": "p1"}).text
    assert "ok (reconciled)" in call


def test_two_reviewers_at_once_decide_one_approval_once(
    client: TestClient, ledger: SQLiteLedger, scenario: cs.Scenario
) -> None:
    """Two people press approve and deny on the same request at the same moment: one decision is
    recorded, the other is refused (409)."""
    maria = TestClient(client.app, follow_redirects=False)
    omar = TestClient(client.app, follow_redirects=False)
    forms = [
        (maria, {"csrf": sign_in(maria), "decision": "approve", "confirm": "yes"}),
        (omar, {"csrf": sign_in(omar, "omar", "tok-omar-9876543210abcdef"), "decision": "deny"}),
    ]
    start = threading.Barrier(2)
    codes: list[int] = []

    def press(who: TestClient, form: dict[str, str]) -> None:
        start.wait()
        data = {**form, "id": scenario.refund_approval, "reason": "at once"}
        codes.append(who.post("/approval/decide", data=data).status_code)

    threads = [threading.Thread(target=press, args=pair) for pair in forms]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(codes) == [303, 409]
    decided = [r for r in ledger.audit() if r.kind in ("approval.approved", "approval.denied")]
    assert len(decided) == 1


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_cookie_header_or_token_text_is_refused_without_raising(value: str) -> None:
    """Cookies, Authorization headers, CSRF fields and sign-in tokens are hostile input: any
    text that was not issued is refused (None, False), never an exception (a 500)."""
    assert Sessions(b"s" * 32).read(value) is None
    auth = TokenAuth(Credentials({"maria": cs.TOKEN}))
    for header in (value, "Bearer " + value, "Basic " + value):
        assert auth.from_headers(header) is None
    assert auth.credentials.check(value, value) is None
    assert not valid_token(KEY, "session:x", value)
    assert not valid_token(KEY, "session:x", value.ljust(64, "\u00e9")[:64])


def test_the_gate_of_the_shop_records_model_turns_first(
    client: TestClient, scenario: cs.Scenario
) -> None:
    """The model's turns sit where they were recorded: the run starts with the user's message and
    the model's first turn, before any call."""
    sign_in(client)
    page = client.get("/run", params={"id": scenario.run.id}).text
    titles = re.findall(r'<div class="title">([^<]*)</div>', page)
    assert titles.index("run started") < titles.index("model turn 1") < titles.index("admitted")
    assert titles.index("model turn 2") < titles.index("rejected at stage validate")


def test_an_edit_shows_at_once_though_the_chains_verification_is_reused(
    ledger: SQLiteLedger, scenario: cs.Scenario, credentials: Credentials, tmp_path: Path
) -> None:
    """The whole-chain badge is reused while the head is unchanged (it reads every record), but
    each record shown is checked against its own hash on every page: an edit made after the last
    verification is marked at once, and the badge turns red when verification runs again."""
    import sqlite3

    app = create_app(ledger, auth=TokenAuth(credentials), key=KEY, verify_every=3600)
    client = TestClient(app, follow_redirects=False)
    sign_in(client)
    params = {"run": scenario.run.id, "id": "call_1"}
    assert 'id="chain">chain verified' in client.get("/call", params=params).text
    first = ledger.records(run_id=scenario.run.id, call_id="call_1")[0].seq
    with sqlite3.connect(tmp_path / "calls.db") as db:
        db.execute(
            "UPDATE journal SET data = replace(data, 'get_order', 'get_0rder') WHERE seq = ?",
            (first,),
        )
    page = client.get("/call", params=params).text
    assert 'id="chain">chain verified' in page  # reused: the head did not move
    assert "edited: its content does not match its hash" in page
    fresh = TestClient(
        create_app(ledger, auth=TokenAuth(credentials), key=KEY, verify_every=0),
        follow_redirects=False,
    )
    sign_in(fresh)
    assert "chain broken" in fresh.get("/call", params=params).text


def test_the_badge_verifies_again_when_the_journal_grew(
    ledger: SQLiteLedger, scenario: cs.Scenario, credentials: Credentials
) -> None:
    """A new record moves the head: the next page verifies the chain again and counts it."""
    app = create_app(ledger, auth=TokenAuth(credentials), key=KEY, verify_every=3600)
    client = TestClient(app, follow_redirects=False)
    sign_in(client)
    before = len(ledger.audit())
    assert (
        f"chain verified: {before} records"
        in client.get("/run", params={"id": scenario.run.id}).text
    )
    scenario.run.submit([ToolCall(id="call_9", name="get_order", arguments={"order_id": "o-9"})])
    after = len(ledger.audit())
    assert after > before
    assert (
        f"chain verified: {after} records"
        in client.get("/run", params={"id": scenario.run.id}).text
    )

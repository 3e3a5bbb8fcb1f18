"""The console shows decisions as they are: a decided call is decided on /runs and /run at
once (not *pending* until its run resumes), every state has its own colour and the legend
says what each means, a provenance-flagged or high-risk approval needs an explicit
confirmation, and the inbox card shows what the user asked and where the call stands."""

from __future__ import annotations

import re

import console_support as cs
from starlette.testclient import TestClient

from callgate.approvals import ApprovalStatus
from callgate.console import views
from callgate.ledger import SQLiteLedger
from conftest import sign_in


def _state_cells(page: str) -> list[str]:
    return re.findall(r'<span class="state ([a-z]+)">', page)


def test_a_decided_call_shows_decided_on_runs_and_run_before_the_run_resumes(
    client: TestClient, scenario: cs.Scenario
) -> None:
    """Approving the refund and denying the email: /runs counts one approved and one denied
    (no pending left), /run shows each call in its decided state, before any resume."""
    csrf = sign_in(client)
    approve = {
        "csrf": csrf,
        "id": scenario.refund_approval,
        "decision": "approve",
        "confirm": "yes",
    }
    deny = {"csrf": csrf, "id": scenario.email_approval, "decision": "deny", "reason": "no"}
    assert client.post("/approval/decide", data=approve).status_code == 303
    assert client.post("/approval/decide", data=deny).status_code == 303
    runs = client.get("/runs").text
    assert "approved 1" in runs
    assert "denied 1" in runs
    assert "pending " not in re.sub(r"<dl class=\"legend\".*?</dl>", "", runs, flags=re.S)
    run = client.get("/run", params={"id": scenario.run.id}).text
    table = run.split('<table class="list" id="calls">')[1].split("</table>")[0]
    assert _state_cells(table) == ["ok", "rejected", "approved", "denied"]
    assert "runs when the run resumes" in table
    assert "the model is told when the run resumes" in table


def test_each_state_has_its_own_colour_and_the_legend_names_them(
    client: TestClient, scenario: cs.Scenario
) -> None:
    """The stylesheet gives ok, error, unknown, rejected, pending, denied (and approved,
    expired) distinct colours; /runs and /run carry the legend with every state."""
    css = client.get("/static/console.css").text
    colours = {}
    for state in ("ok", "error", "unknown", "rejected", "pending", "denied", "approved"):
        found = re.search(r"\.state\." + state + r" \{([^}]*)\}", css)
        assert found is not None, state
        colours[state] = found.group(1)
    assert len(set(colours.values())) == len(colours)
    for outcome in ("ok", "error", "unknown"):
        assert f".event.outcome.{outcome} " in css
    sign_in(client)
    for page in (client.get("/runs").text, client.get("/run", params={"id": scenario.run.id}).text):
        legend = page.split('<dl class="legend"')[1].split("</dl>")[0]
        assert [name for name, _ in views.STATES] == _state_cells(legend)


def test_an_outcome_row_is_coloured_by_its_status(
    client: TestClient, ledger: SQLiteLedger, scenario: cs.Scenario
) -> None:
    """The timeline's outcome rows carry their status (ok here), not one colour for all."""
    sign_in(client)
    page = client.get("/run", params={"id": scenario.run.id}).text
    assert 'class="event outcome ok"' in page
    assert 'class="event rejection rejected"' in page


def test_a_flagged_approval_needs_an_explicit_confirmation(
    client: TestClient, ledger: SQLiteLedger, scenario: cs.Scenario
) -> None:
    """The email to an address only a tool's output named (provenance) and the refund (it
    spends) each show a confirmation box; approving without ticking it is refused and
    decides nothing; ticked, it is approved."""
    csrf = sign_in(client)
    inbox = client.get("/approvals").text
    for approval_id in (scenario.email_approval, scenario.refund_approval):
        assert f'id="confirm-{approval_id}"' in inbox
    email = inbox.split(f'id="confirm-{scenario.email_approval}"')[1].split("</div>")[0]
    assert "provenance: &#39;to&#39; comes only from untrusted text" in email
    form = {"csrf": csrf, "id": scenario.email_approval, "decision": "approve"}
    refused = client.post("/approval/decide", data=form)
    assert refused.status_code == 400
    assert "Confirm first" in refused.text
    assert "Nothing was decided" in refused.text
    stored = ledger.approvals().get(scenario.email_approval)
    assert stored is not None
    assert stored.status is ApprovalStatus.PENDING
    assert client.post("/approval/decide", data={**form, "confirm": "yes"}).status_code == 303
    stored = ledger.approvals().get(scenario.email_approval)
    assert stored is not None
    assert stored.status is ApprovalStatus.APPROVED


def test_the_inbox_card_shows_the_users_request_and_the_calls_place(
    client: TestClient, scenario: cs.Scenario
) -> None:
    """The refund's card quotes what the user asked and says it is call 3 of 4 of its run,
    after a read that ran and one that was rejected."""
    sign_in(client)
    inbox = client.get("/approvals").text
    card = inbox.split(f'id="{scenario.refund_approval}"')[1].split("</section>")[0]
    assert "The user asked" in card
    assert "Please refund order o-1, it arrived broken." in card
    place = card.split('<p class="place">')[1].split("</p>")[0]
    assert "call 3 of 4 in its run" in place
    assert _state_cells(place) == ["ok", "rejected", "pending", "pending"]
    assert '<span class="step this">refund' in place


def test_a_rule_written_as_a_lambda_is_named_by_its_text(ledger: SQLiteLedger) -> None:
    """A call decided by ``allow(..., when=lambda ...)`` shows the lambda's text as the rule
    that decided (on /run), never ``<lambda>``."""
    from callgate import Authority, Gate, Policy, Registry, ToolCall, allow
    from callgate.console import NoAuth, create_app

    tools = Registry()

    @tools.tool(effects="read:orders", risk="read")
    def lookup(order_id: str) -> str:
        """Look up an order."""
        return "shipped"

    policy = Policy([allow("lookup", when=lambda a: a["order_id"].startswith("o-"))])
    run = Gate(tools, policy=policy, ledger=ledger).run(
        authority=Authority(principal="p", grants=["read:orders"])
    )
    run.submit([ToolCall(id="c1", name="lookup", arguments={"order_id": "o-1"})])
    [call] = ledger.calls(run_id=run.id)
    assert call.decided_by == "allow lookup when lambda a: a['order_id'].startswith('o-')"
    page = (
        TestClient(create_app(ledger, auth=NoAuth("maria"))).get("/run", params={"id": run.id}).text
    )
    assert "&lt;lambda&gt;" not in page
    assert "when lambda a: a[&#39;order_id&#39;].startswith(&#39;o-&#39;)" in page

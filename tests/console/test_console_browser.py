"""The console in real headless Chromium: sign in, approve from the inbox, see the run complete.

Needs ``/usr/bin/chromium`` and ``/usr/bin/chromedriver`` (Debian's ``chromium`` and
``chromium-driver``); skipped without them, except under ``CI=true``, where that fails.
With ``CALLGATE_CONSOLE_SCREENSHOTS=DIR`` the test also writes ``console-inbox.png``
and ``console-timeline.png`` into DIR (``docs/screenshots.py`` does that for docs/).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import console_support as cs
import pytest

from callgate.console import Credentials, TokenAuth, create_app
from callgate.ledger import SQLiteLedger

pytestmark = pytest.mark.integration

CHROMIUM = os.environ.get("CALLGATE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CALLGATE_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
)


def _missing() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return f"{path} is not installed (apt-get install chromium chromium-driver)"
    return None


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """A fresh headless Chromium with its own profile in tmp_path."""
    reason = _missing()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {reason}")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    options.add_argument("--window-size=1280,1000")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(15)
    try:
        yield driver
    finally:
        driver.quit()


def _screenshot(driver: Any, path: Path, max_height: int = 2400) -> None:
    """The whole page (up to ``max_height`` pixels), as a PNG."""
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(1280, min(max(height, 600), max_height))
    driver.save_screenshot(str(path))
    driver.set_window_size(1280, 1000)


def _keep(path: Path) -> None:
    """Copy a screenshot to $CALLGATE_CONSOLE_SCREENSHOTS, when set (docs/screenshots.py)."""
    target = os.environ.get("CALLGATE_CONSOLE_SCREENSHOTS")
    if target:
        shutil.copyfile(path, Path(target) / path.name)


def test_a_person_approves_from_the_inbox_and_the_resumed_run_completes(
    browser: Any, tmp_path: Path
) -> None:
    """Signed in with a token, a reviewer approves the refund in Chromium; the run resumed from
    the ledger runs it once, and its timeline shows the outcome; hostile text stays text."""
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    db = tmp_path / "calls.db"
    console_ledger = SQLiteLedger(db)
    scenario = cs.play(console_ledger)
    run_id = scenario.run.id
    app = create_app(console_ledger, auth=TokenAuth(Credentials({"maria": cs.TOKEN})))
    with cs.serving(app) as base:
        browser.get(base + "/approvals")
        assert "/login" in browser.current_url
        browser.find_element(By.ID, "name").send_keys("maria")
        browser.find_element(By.ID, "token").send_keys(cs.TOKEN)
        browser.find_element(By.ID, "sign-in").click()
        WebDriverWait(browser, 15).until(lambda d: d.current_url == base + "/approvals")
        assert browser.find_element(By.ID, "principal").text == "maria"

        card = browser.find_element(By.ID, scenario.refund_approval)
        text = card.text
        assert "refund 60.00 USD on o-1" in text
        assert '<script>alert(\\"x\\")</script>' in text  # shown as text (JSON-escaped quotes)
        assert "\\u202egnp.exe" in text
        assert "\\u001b[31m" in text
        email = browser.find_element(By.ID, scenario.email_approval).text
        assert cs.INJECTED_EMAIL in email
        assert "call_1" in email
        assert cs.API_KEY not in browser.page_source
        assert cs.SMTP_PASSWORD not in browser.page_source
        assert browser.find_elements(By.TAG_NAME, "script") == []
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.accept()
        _screenshot(browser, tmp_path / "console-inbox.png")
        _keep(tmp_path / "console-inbox.png")

        card.find_element(By.NAME, "reason").send_keys("damage confirmed on the photo")
        card.find_element(By.CSS_SELECTOR, "button.approve").click()  # not confirmed yet
        assert "/approvals" in browser.current_url  # the browser asks for the confirmation
        card.find_element(By.NAME, "confirm").click()
        card.find_element(By.CSS_SELECTOR, "button.approve").click()
        WebDriverWait(browser, 15).until(lambda d: "done=approved" in d.current_url)
        assert browser.find_element(By.ID, "state").text == "approved"
        assert browser.find_element(By.ID, "decided-by").text.startswith("maria")
        assert scenario.effects == []  # approving executes nothing

        # Another process's view: a gate of its own over the same file resumes the run.
        with SQLiteLedger(db) as worker_ledger:
            effects: list[dict[str, Any]] = []
            resumed = cs.gate(worker_ledger, effects).resume_run(
                run_id, authority=cs.AUTHORITY, trusted=[cs.CUSTOMER]
            )
            observations = resumed.resume()
        assert [(o.call_id, o.status.value) for o in observations] == [("call_3", "ok")]
        assert effects == [{"tool": "refund", "order_id": "o-1", "amount": 60.0}]

        browser.get(f"{base}/run?id={run_id}")
        assert browser.find_element(By.ID, "chain").text.startswith("chain verified")
        outcome = browser.find_elements(By.CSS_SELECTOR, "li.event[data-kind='attempt.ok']")
        assert [e.find_element(By.CSS_SELECTOR, ".call").text for e in outcome] == [
            "call_1",
            "call_3",
        ]
        assert "outcome ok" in outcome[-1].text
        kinds = [
            e.get_attribute("data-kind") for e in browser.find_elements(By.CSS_SELECTOR, "li.event")
        ]
        assert kinds.index("approval.approved") < kinds.index("approval.used") < len(kinds) - 1
        assert "provenance.untrusted_sink" in kinds
        assert "call.rejected" in kinds
        assert browser.find_elements(By.TAG_NAME, "script") == []
        _screenshot(browser, tmp_path / "console-timeline.png")
        _keep(tmp_path / "console-timeline.png")
    console_ledger.close()
    assert (tmp_path / "console-inbox.png").stat().st_size > 10_000


def _outcomes_run(ledger: SQLiteLedger) -> str:
    """A run whose calls end in each outcome: ok, error (ToolFailure), unknown (the handler
    crashed), rejected (schema); its id."""
    from callgate import Authority, Gate, OutcomeUnknown, Policy, Registry, ToolCall, allow
    from callgate.errors import ToolFailure

    tools = Registry()

    @tools.tool(effects="read:orders", risk="read")
    def lookup(order_id: str) -> str:
        """Look up an order."""
        return f"order {order_id}: shipped"

    @tools.tool(effects="write:orders")
    def cancel(order_id: str) -> str:
        """Cancel an order."""
        raise ToolFailure(f"order {order_id} has shipped; it cannot be cancelled")

    @tools.tool(effects="write:orders")
    def charge(order_id: str) -> str:
        """Charge the card."""
        raise OutcomeUnknown("the payment processor did not answer")

    policy = Policy([allow("lookup"), allow("cancel"), allow("charge")])
    run = Gate(tools, policy=policy, ledger=ledger).run(
        authority=Authority(principal="support-bot", grants=["read:orders", "write:orders"])
    )
    run.submit(
        [
            ToolCall(id="o_ok", name="lookup", arguments={"order_id": "o-1"}),
            ToolCall(id="o_error", name="cancel", arguments={"order_id": "o-1"}),
            ToolCall(id="o_unknown", name="charge", arguments={"order_id": "o-1"}),
            ToolCall(id="o_rejected", name="lookup", arguments={"order": 5}),
        ]
    )
    return run.id


def test_each_state_is_screenshotted_and_looks_distinct(browser: Any, tmp_path: Path) -> None:
    """Screenshots of each state into tmp_path: the inbox (pending, the flagged email's
    confirmation), the approved and the denied request, /runs and /run showing them
    decided before any resume, and a run with each outcome (ok, error, unknown, rejected),
    each in its own colour with the legend."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    db = tmp_path / "calls.db"
    ledger = SQLiteLedger(db)
    scenario = cs.play(ledger)
    outcomes = _outcomes_run(ledger)
    app = create_app(ledger, auth=TokenAuth(Credentials({"maria": cs.TOKEN})))

    def colour(element: Any) -> str:
        return str(element.value_of_css_property("background-color"))

    with cs.serving(app) as base:
        browser.get(base + "/login")
        browser.find_element(By.ID, "name").send_keys("maria")
        browser.find_element(By.ID, "token").send_keys(cs.TOKEN)
        browser.find_element(By.ID, "sign-in").click()
        WebDriverWait(browser, 15).until(lambda d: d.current_url == base + "/approvals")
        email = browser.find_element(By.ID, scenario.email_approval)
        assert "confirm this exact call" in email.text
        assert "Please refund order o-1" in email.text  # the user's request
        _screenshot(browser, tmp_path / "state-pending.png")

        card = browser.find_element(By.ID, scenario.refund_approval)
        card.find_element(By.NAME, "confirm").click()
        card.find_element(By.CSS_SELECTOR, "button.approve").click()
        WebDriverWait(browser, 15).until(lambda d: "done=approved" in d.current_url)
        assert browser.find_element(By.ID, "state").text == "approved"
        _screenshot(browser, tmp_path / "state-approved.png")

        browser.get(base + "/approvals")
        card = browser.find_element(By.ID, scenario.email_approval)
        card.find_element(By.NAME, "reason").send_keys("the address came from a web page")
        card.find_element(By.CSS_SELECTOR, "button.deny").click()
        WebDriverWait(browser, 15).until(lambda d: "done=denied" in d.current_url)
        assert browser.find_element(By.ID, "state").text == "denied"
        _screenshot(browser, tmp_path / "state-denied.png")

        browser.get(f"{base}/run?id={scenario.run.id}")
        shown = browser.find_elements(By.CSS_SELECTOR, "#calls span.state")
        assert [e.text for e in shown] == ["ok", "rejected", "approved", "denied"]
        _screenshot(browser, tmp_path / "state-decided-run.png")
        browser.get(base + "/runs")
        _screenshot(browser, tmp_path / "state-runs.png")

        browser.get(f"{base}/run?id={outcomes}")
        cells = browser.find_elements(By.CSS_SELECTOR, "#calls span.state")
        assert [e.text for e in cells] == ["ok", "error", "unknown", "rejected"]
        assert len({colour(e) for e in cells}) == 4
        legend = browser.find_elements(By.CSS_SELECTOR, "#legend span.state")
        assert len({colour(e) for e in legend}) == len(legend)
        rows = {
            kind: browser.find_element(By.CSS_SELECTOR, f"li.event[data-kind='attempt.{kind}']")
            for kind in ("ok", "error", "unknown")
        }
        borders = {k: e.value_of_css_property("border-left-color") for k, e in rows.items()}
        assert len(set(borders.values())) == 3, borders
        _screenshot(browser, tmp_path / "state-outcomes.png")
    ledger.close()
    for name in ("pending", "approved", "denied", "decided-run", "runs", "outcomes"):
        shot = tmp_path / f"state-{name}.png"
        assert shot.stat().st_size > 10_000
        _keep(shot)

"""Harbor end to end: the demo as a person runs it, and what its systems of record hold after."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from rich.console import Console

from callgate.agent_transcript import replay
from callgate.ledger.base import CallState
from callgate.ledger.sqlite import SQLiteLedger

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def harbor() -> Iterator[dict[str, ModuleType]]:
    sys.path.insert(0, str(EXAMPLES))
    try:
        import harbor.demo
        import harbor.script
        import harbor.shop

        yield {"demo": harbor.demo, "shop": harbor.shop, "script": harbor.script}
    finally:
        sys.path.remove(str(EXAMPLES))


def test_make_demo_runs_offline_and_exits_0(tmp_path: Path) -> None:
    """What `make demo` runs: exit 0 in well under a minute, with every beat in the transcript."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "harbor" / "demo.py"), "--workdir", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "160", "PYTHONHASHSEED": "0"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert time.monotonic() - started < 60
    out = done.stdout
    for line in (
        "→ search_orders",  # parallel reads: two calls in step 1
        "→ read_kb_article",
        "rejected  schema",  # the malformed order id, then the correction
        "⏸ paused",  # the refund waits for a person
        "approves: refund 89.00 USD on order H-1042",
        "timed out after committing",  # then reconciled
        "⚠ security.boundary: send_email denied (untrusted_sink)",
        "calls by status and stage",
        "✔ exactly one refund at the payment provider despite the timeout",
        "✔ no email went to the address from the injected article",
    ):
        assert line in out, f"missing {line!r} in:\n{out}"
    assert "✘" not in out
    assert out.index("→ search_orders") < out.index("→ get_order_status")


@pytest.fixture(scope="module")
def scenario(harbor: dict[str, ModuleType], tmp_path_factory: pytest.TempPathFactory) -> Any:
    workdir = tmp_path_factory.mktemp("harbor")
    report = harbor["demo"].run_scenario(workdir=workdir, console=Console(file=io.StringIO()))
    return workdir, report


def test_one_refund_at_the_provider_despite_the_timeout(
    harbor: dict[str, ModuleType], scenario: Any
) -> None:
    """The provider committed, then timed out; reconciliation found the refund: no second one."""
    workdir, report = scenario
    shop = harbor["shop"]
    assert report.passed, report.checks
    refunds = shop.refunds_for(workdir / "shop.db", "H-1042")
    assert [(r["operation_id"], r["amount"]) for r in refunds] == [("refund-H-1042-damaged", 89.0)]
    with shop.connect(workdir / "shop.db") as db:
        assert (
            db.execute("SELECT refunded FROM orders WHERE order_id = 'H-1042'").fetchone()[0]
            == 89.0
        )
        assert db.execute("SELECT remaining FROM provider_faults").fetchone()[0] == 0
    ledger = SQLiteLedger(workdir / "ledger.db")
    try:
        (refund,) = [c for c in ledger.calls(run_id=report.run_id) if c.tool == "refund_order"]
        assert (refund.state, refund.reconciled, refund.approval_id is not None) == (
            CallState.OK,
            True,
            True,
        )
        assert len(ledger.attempts(report.run_id, refund.call_id)) == 1
    finally:
        ledger.close()


def test_the_injected_email_is_never_sent(harbor: dict[str, ModuleType], scenario: Any) -> None:
    """Only the customer on file got mail; the injected recipient was refused at policy."""
    workdir, report = scenario
    shop = harbor["shop"]
    assert [e["recipient"] for e in shop.sent_emails(workdir / "shop.db")] == [
        "dana.reyes@example.com"
    ]
    ledger = SQLiteLedger(workdir / "ledger.db")
    try:
        emails = [c for c in ledger.calls(run_id=report.run_id) if c.tool == "send_email"]
        refused = [c for c in emails if shop.INJECTION_ADDRESS in c.arguments]
        assert [(c.state, c.stage) for c in refused] == [(CallState.REJECTED, "policy")]
        events = replay(ledger, report.run_id).of_kind("security.boundary")
        assert [(e.data["tool"], e.data["rule"]) for e in events] == [
            ("send_email", "untrusted_sink")
        ]
    finally:
        ledger.close()


def test_the_transcript_replays_from_the_ledger_file(scenario: Any) -> None:
    """The conversation rebuilt from the SQLite ledger is the one the model received."""
    workdir, report = scenario
    ledger = SQLiteLedger(workdir / "ledger.db")
    try:
        transcript = replay(ledger, report.run_id)
    finally:
        ledger.close()
    assert transcript.messages == report.result.messages
    kinds = [e.kind for e in transcript.entries]
    assert kinds.count("agent.paused") == 2
    assert kinds.count("agent.resumed") == 2
    assert transcript.stopped is not None
    assert transcript.stopped["reason"] == "answered"
    assert report.as_json()["calls_by_status_and_stage"] == [
        {"status": "ok", "stage": "execute", "count": 5},
        {"status": "rejected", "stage": "policy", "count": 1},
        {"status": "rejected", "stage": "schema", "count": 1},
    ]
    json.dumps(report.as_json())


@pytest.mark.parametrize("format", ["openai_responses", "anthropic", "gemini", "text"])
def test_the_scenario_holds_in_every_provider_format(
    harbor: dict[str, ModuleType], format: str, tmp_path: Path
) -> None:
    from callgate.models import ScriptedModel

    model = ScriptedModel(harbor["script"].HarborScript(), format=format)
    report = harbor["demo"].run_scenario(
        model, workdir=tmp_path, console=Console(file=io.StringIO())
    )
    assert report.passed, report.checks
    assert len(report.refunds) == 1

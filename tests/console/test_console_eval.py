"""The runs page draws the evaluation funnel when the ledger holds evaluated runs (with
`callgate.eval`, as ``callgate console`` wires it), and only then."""

from __future__ import annotations

import re
from typing import Any

import pytest
from starlette.testclient import TestClient

from callgate.cli.console import evaluation_funnel
from callgate.console import Credentials, TokenAuth, create_app
from callgate.ledger import SQLiteLedger
from conftest import KEY, sign_in

pytest.importorskip("numpy", reason="the evaluation funnel needs callgate[eval]")


def _evaluated_run(
    ledger: SQLiteLedger, run_id: str, calls: list[tuple[str, str, str]], passed: bool
) -> None:
    """An evaluated run as the lab records it: the task, the tools shown, the model's calls,
    their results, the verifier's verdict. ``calls``: (tool, status, stage)."""

    def event(kind: str, data: dict[str, Any]) -> None:
        ledger.record_event(kind, run_id=run_id, call_id=None, data=data)

    event("eval.run", {"task": run_id, "surface": "fine", "lab": "t"})
    event("agent.started", {"tools": ["read_file"]})
    proposed = [
        {"call_id": f"c{i}", "tool": tool, "arguments": "{}"}
        for i, (tool, _, _) in enumerate(calls)
    ]
    event("agent.model", {"step": 1, "calls": proposed})
    results = [
        {"call_id": f"c{i}", "tool": tool, "status": status, "stage": stage, "content": ""}
        for i, (tool, status, stage) in enumerate(calls)
    ]
    event("agent.observations", {"step": 1, "results": results})
    event("eval.verdict", {"passed": passed})


def _client(ledger: SQLiteLedger) -> TestClient:
    evaluation = evaluation_funnel()
    assert evaluation is not None
    app = create_app(
        ledger,
        auth=TokenAuth(Credentials({"maria": "tok-console-test-0123456789"})),
        key=KEY,
        evaluation=evaluation,
    )
    client = TestClient(app, follow_redirects=False)
    sign_in(client)
    return client


def test_the_evaluation_funnel_is_drawn_from_the_verdicts(ledger: SQLiteLedger) -> None:
    """Three evaluated runs, four calls: one names a tool it was not shown (A 3/4), one fails its
    schema (B|A 2/3), the two left run ok (C 2/2), and one of their two runs passed (D 1/2)."""
    _evaluated_run(ledger, "r1", [("read_file", "ok", "execute")], True)
    _evaluated_run(
        ledger,
        "r2",
        [("write_file", "rejected", "schema"), ("read_file", "rejected", "schema")],
        False,
    )
    _evaluated_run(ledger, "r3", [("read_file", "ok", "execute")], False)
    page = _client(ledger).get("/runs").text
    assert 'id="evaluation"' in page
    assert "3 evaluated run(s)" in page
    rates = re.findall(r'class="count rate">([^<]*)<', page)
    assert rates[:4] == ["0.75", "0.67", "1.00", "0.50"]


def test_no_evaluation_no_chart(ledger: SQLiteLedger) -> None:
    """A ledger without evaluated runs shows no evaluation chart."""
    page = _client(ledger).get("/runs").text
    assert 'id="evaluation"' not in page

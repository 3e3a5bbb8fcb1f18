"""Harbor end to end: the demo as a person runs it, and what its systems of record hold after."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from callgate.agent.transcript import replay
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
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "harbor" / "demo.py"), "--workdir", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "160", "PYTHONHASHSEED": "0"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for line in (
        "→ search_orders",  # parallel reads: two calls in step 1
        "→ read_kb_article",
        "rejected  validate",  # the malformed order id, then the correction
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
        assert [(c.state, c.stage) for c in refused] == [(CallState.REJECTED, "authorize")]
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
        {"status": "rejected", "stage": "authorize", "count": 1},
        {"status": "rejected", "stage": "validate", "count": 1},
    ]
    json.dumps(report.as_json())


@pytest.mark.parametrize("format", ["openai_responses", "anthropic", "gemini", "text"])
def test_the_scenario_holds_in_every_provider_format(
    harbor: dict[str, ModuleType], format: str, tmp_path: Path
) -> None:
    """The harbor scenario passes every check, one refund, in each of four provider formats."""
    from callgate.llms import ScriptedModel

    model = ScriptedModel(harbor["script"].HarborScript(), format=format)
    report = harbor["demo"].run_scenario(
        model, workdir=tmp_path, console=Console(file=io.StringIO())
    )
    assert report.passed, report.checks
    assert len(report.refunds) == 1


# -- the demo prints data, never markup or terminal control -----------------------------

MARKUP = "[/x] [black on black]hidden[/] :email:"
"""Closes a tag never opened (a MarkupError), hides text, and names an emoji."""
CONTROLS = "\x1b[2J\x9b\u202eY"
"""Clears the screen, a C1 CSI, a bidirectional override."""
HOSTILE = f"{MARKUP} {CONTROLS}"
SHOWN = (MARKUP, "\\x1b[2J", "\\x9b", "\\u202eY")
"""How parts of HOSTILE must appear: literally, the invisible characters as escapes."""
RAW = ("\x1b", "\r", "\u202e", "\x9b", "\N{E-MAIL SYMBOL}", "\N{ENVELOPE}")
"""What must never reach the terminal: raw controls, and what Rich makes of ``:email:``."""
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def captured() -> tuple[Console, io.StringIO]:
    """A console as `make demo` gets one (markup and emoji on), writing to a buffer wide
    enough that no value folds across lines."""
    buffer = io.StringIO()
    return Console(file=buffer, width=3000, color_system=None), buffer


def assert_plain(out: str, shown: tuple[str, ...] = SHOWN) -> None:
    for part in shown:
        assert part in out, (part, out)
    for raw in RAW:
        assert raw not in out, (raw, out)


class _NoRecords:
    """The gate as the printer reads it: no call record, no approval request."""

    def __init__(self) -> None:
        self.ledger = self
        self.approvals = self

    def get_call(self, run_id: str, call_id: str) -> None:
        return None

    def get(self, approval_id: str) -> None:
        return None


def hostile_entries(text: str, content: str) -> list[Any]:
    """One transcript entry of every kind the demo prints, ``text`` where the model or the
    ledger speaks and ``content`` where a tool does."""
    from callgate.agent.transcript import TranscriptEntry

    def entry(kind: str, **data: Any) -> TranscriptEntry:
        return TranscriptEntry(kind=kind, run_id=f"run-{text}", data=data)

    return [
        entry("agent.started", model=text, user=text, tools=["read_kb_article", text]),
        entry(
            "agent.model",
            step=1,
            text=text,
            calls=[{"tool": text, "arguments": text}, {"tool": "x", "arguments": None}],
        ),
        entry(
            "agent.observations",
            results=[
                {"call_id": text, "status": text, "stage": text, "tool": text, "content": content}
            ],
        ),
        entry("agent.paused", approvals=[{"approval_id": text, "tool": text}]),
        entry(
            "agent.resumed",
            decisions=[
                {"approval_id": text, "status": "denied", "decided_by": text, "reason": text}
            ],
        ),
        entry("security.boundary", tool=text, action=text, rule=text, after_untrusted=True),
        entry("agent.stopped", answer=text, detail="", reason=text),
    ]


def test_the_demo_prints_every_transcript_value_as_plain_text(
    harbor: dict[str, ModuleType],
) -> None:
    """Model text, tool names, tool output, approval ids, rule names and the answer reach
    the terminal as text: markup shown as sent (and no MarkupError), no emoji, and control
    characters, ANSI sequences and bidi overrides as visible escapes."""
    console, buffer = captured()
    printer = harbor["demo"].Printer(console, _NoRecords())
    for entry in hostile_entries(HOSTILE, HOSTILE):
        printer(entry)
    assert_plain(buffer.getvalue())


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=40), content=st.text(max_size=40))
def test_no_text_from_a_model_or_a_tool_reaches_the_terminal_invisible(
    harbor: dict[str, ModuleType], text: str, content: str
) -> None:
    """Whatever the model writes and the tools return, the demo's output holds no control,
    format, private-use or unassigned character (line breaks of its own layout aside)."""
    console, buffer = captured()
    printer = harbor["demo"].Printer(console, _NoRecords())
    for entry in hostile_entries(text, content):
        printer(entry)
    hidden = {c for c in buffer.getvalue() if c != "\n" and unicodedata.category(c) in _HIDDEN}
    assert not hidden, (text, content, buffer.getvalue())


def test_a_hostile_model_and_tool_output_cannot_steer_the_demos_terminal(
    harbor: dict[str, ModuleType], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole demo with a scripted model named, speaking and answering in hostile text,
    reading a help-center article whose title and body are hostile (a tool output): every
    value is printed as plain text, and the run still ends with the model's answer."""
    from callgate.llms import ScriptedModel, answer, calls

    shop = harbor["shop"]
    article = (shop.TENANT, "hostile", HOSTILE, HOSTILE)
    monkeypatch.setattr(shop, "KB", [*shop.KB, article])

    def script(request: Any) -> Any:
        if len(request.messages) <= 2:
            return calls(("read_kb_article", {"slug": "hostile"}), text=HOSTILE)
        return answer(HOSTILE)

    console, buffer = captured()
    report = harbor["demo"].run_scenario(
        ScriptedModel(script, name=HOSTILE), workdir=tmp_path, console=console
    )
    out = buffer.getvalue()
    assert report.result.answered, out
    assert_plain(out)
    assert "read_kb_article" in out
    # The article's body reached the printed observation (JSON keeps \u202e, \x9b raw).
    assert out.count("\\u202eY") >= 4, out

"""The CLI shows data, never markup: every value that came from a model, a tool or a file
is printed as plain text.

Hostile strings are put into a real SQLite ledger through the gate (tool arguments,
effects, previews, tool errors, rule names, principals, rejection messages) and every
command's captured output must show them literally: Rich markup neither interpreted
nor crashing, ``:email:`` not turned into an emoji, and control characters, ANSI escape
sequences and bidirectional overrides written as visible escapes (``\\x1b``), never
sent raw to the auditor's terminal.
"""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import tempfile
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from callgate import Authority, Gate, Policy, Registry, ToolCall, ToolFailure, allow, ask
from callgate.cli import app
from callgate.cli.plain import plain, plain_json
from callgate.ledger import SQLiteLedger
from callgate.llms.scripted import calls, render_turn

ROOT = Path(__file__).resolve().parents[2]

MARKUP = "[/x] [black on black]hidden[/] :email:"
"""Closes a tag never opened (a MarkupError), hides text, and names an emoji."""
HOSTILE = MARKUP + " \x1b[2J\rX\u202eY\x9b"
"""... then clears the screen, returns the carriage, reverses the text, and a C1 CSI."""
SHOWN = MARKUP + " \\x1b[2J\\rX\\u202eY\\x9b"
"""How HOSTILE must appear: the same characters, the invisible ones as visible escapes."""
RAW = ("\x1b", "\r", "\u202e", "\x9b", "\N{E-MAIL SYMBOL}", "\N{ENVELOPE}")
"""What must never reach the terminal: raw controls, and what Rich makes of ``:email:``."""

WIDE = {"COLUMNS": "2000"}
"""Wide enough that no table folds a value across lines."""

runner = CliRunner()


def assert_plain(out: str, shown: str = SHOWN) -> None:
    assert shown in out, out
    for raw in RAW:
        assert raw not in out, (raw, out)


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env=WIDE)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def hostile_registry() -> Registry:
    registry = Registry()

    @registry.tool(effects="read:notes", risk="read")
    def look(q: str) -> str:
        """Look something up; the result is hostile too."""
        return HOSTILE

    @registry.tool(effects="read:notes", risk="read")
    def broken(q: str) -> str:
        """Fail with a hostile message."""
        raise ToolFailure(HOSTILE)

    @registry.tool(effects="disclose:{to}", preview=lambda a: f"send to {a.to}")  # type: ignore[attr-defined]
    def send(to: str) -> str:
        """Send a note; always asks a person."""
        return "sent"

    return registry


def hostile_ledger(path: Path) -> dict[str, str]:
    """A ledger holding HOSTILE in every place a value is stored; the approval ids."""
    gate = Gate(
        hostile_registry(),
        policy=Policy(
            [
                allow("look", name=f"rule {HOSTILE}"),
                allow("broken", name="broken is allowed"),
                ask("send", name="sends need a person"),
            ]
        ),
        ledger=SQLiteLedger(path),
    )
    run = gate.run(
        authority=Authority(principal=f"agent {HOSTILE}", grants=["read:*", "disclose:*"])
    )
    run.submit([ToolCall(id="c-args", name="look", arguments={"q": HOSTILE})])
    run.submit([ToolCall(id="c-error", name="broken", arguments={"q": "x"})])
    run.submit([ToolCall(id="c-tool", name=f"tool {HOSTILE}", arguments={})])
    [first] = run.submit([ToolCall(id="c-send", name="send", arguments={"to": HOSTILE})])
    [second] = run.submit([ToolCall(id="c-send-2", name="send", arguments={"to": HOSTILE + "2"})])
    gate.ledger.close()
    assert first.approval_id is not None
    assert second.approval_id is not None
    return {"first": first.approval_id, "second": second.approval_id}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.db"
    hostile_ledger(path)
    return path


@pytest.fixture
def approvals(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "hostile.db"
    return path, hostile_ledger(path)


# -- the helper --------------------------------------------------------------------

HIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


@given(st.text())
def test_plain_leaves_no_invisible_character(text: str) -> None:
    """Whatever a model sends, nothing that steers a terminal survives `plain`."""
    shown = plain(text)
    assert not [c for c in shown if unicodedata.category(c) in HIDDEN]


@given(st.text(st.characters(exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))))
def test_plain_keeps_visible_text_as_it_is(text: str) -> None:
    """Visible text, brackets and colons included, is shown unchanged."""
    assert plain(text) == text


@given(st.text())
def test_plain_keeps_line_breaks_only_where_asked(text: str) -> None:
    """plain() leaves no line break, and keeps exactly the text's line breaks with multiline."""
    assert "\n" not in plain(text)
    assert plain(text, multiline=True).count("\n") == text.count("\n")


@given(st.recursive(st.text() | st.integers() | st.none(), lambda v: st.lists(v, max_size=3)))
def test_plain_json_is_the_same_json_with_every_invisible_character_escaped(value: Any) -> None:
    """plain_json reads back as the same value and shows no invisible character but newlines."""
    text = plain_json({"v": value})
    assert json.loads(text) == {"v": value}
    assert not [c for c in text if c != "\n" and unicodedata.category(c) in HIDDEN]


# -- callgate ledger ------------------------------------------------------------------


def test_ledger_list_prints_tool_names_and_rule_names_as_plain_text(db: Path) -> None:
    """ledger list shows hostile tool and rule names escaped, no raw control or emoji."""
    code, out = invoke("ledger", "list", "--db", str(db))
    assert code == 0
    assert_plain(out, f"tool {SHOWN}")
    assert f"rule {SHOWN}" in out


@pytest.mark.parametrize(
    ("call_id", "shown"),
    [
        ("c-args", f"rule {SHOWN}"),  # decided by
        ("c-args", f"agent {SHOWN}"),  # principal
        ("c-error", SHOWN),  # the tool's error
        ("c-tool", f"tool {SHOWN}"),  # the tool name, and the rejection message
        ("c-send", f"disclose:{SHOWN}"),  # the effect
    ],
)
def test_ledger_show_prints_every_stored_value_as_plain_text(
    db: Path, call_id: str, shown: str
) -> None:
    """ledger show prints each stored value (rule, principal, error, tool, effect) escaped."""
    code, out = invoke("ledger", "show", call_id, "--db", str(db))
    assert code == 0
    assert_plain(out, shown)


def test_ledger_show_prints_model_arguments_without_markup(db: Path) -> None:
    """The arguments are JSON text: ``[/x]`` once crashed the command with a MarkupError."""
    code, out = invoke("ledger", "show", "c-args", "--db", str(db))
    assert code == 0
    assert_plain(out, MARKUP)
    assert "MarkupError" not in out


def test_ledger_verify_prints_the_expected_head_it_was_given_as_plain_text(db: Path) -> None:
    """verify --expect-head with a hostile head exits 1 and prints it escaped."""
    code, out = invoke("ledger", "verify", "--db", str(db), "--expect-head", HOSTILE)
    assert code == 1
    assert_plain(out)


@pytest.mark.parametrize(
    "args", [["ledger", "list", "--json"], ["ledger", "show", "c-args", "--json"]]
)
def test_json_output_escapes_invisible_characters_and_keeps_the_values(
    db: Path, args: list[str]
) -> None:
    """--json output holds no raw control character and decodes to the hostile values."""
    code, out = invoke(*args, "--db", str(db))
    assert code == 0
    for raw in RAW:
        assert raw not in out
    assert any(HOSTILE in text for text in strings(json.loads(out)))


def strings(value: Any) -> list[str]:
    """Every string in a decoded JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in (k, *strings(v))]
    if isinstance(value, list):
        return [t for v in value for t in strings(v)]
    return []


def test_export_escapes_invisible_characters_and_keeps_every_record(
    db: Path, tmp_path: Path
) -> None:
    """export to stdout equals --output, has no raw controls, and decodes to every record's data."""
    target = tmp_path / "audit.jsonl"
    assert invoke("ledger", "export", "--db", str(db), "--output", str(target))[0] == 0
    code, out = invoke("ledger", "export", "--db", str(db))
    assert code == 0
    assert out == target.read_text(encoding="utf-8")
    for raw in RAW:
        assert raw not in out
    ledger = SQLiteLedger(db)
    stored = [dict(r.data) for r in ledger.audit()]
    ledger.close()
    assert [json.loads(line)["data"] for line in out.splitlines()] == stored


# -- callgate approvals ---------------------------------------------------------------


def test_approvals_list_prints_previews_and_effects_as_plain_text(
    approvals: tuple[Path, dict[str, str]],
) -> None:
    """approvals list shows hostile previews, effects and principals escaped."""
    path, _ = approvals
    code, out = invoke("approvals", "list", "--db", str(path))
    assert code == 0
    assert_plain(out, f"send to {SHOWN}")
    assert f"disclose:{SHOWN}" in out
    assert f"agent {SHOWN}" in out


def test_approvals_show_prints_every_field_as_plain_text(
    approvals: tuple[Path, dict[str, str]],
) -> None:
    """approvals show prints preview, effect and arguments escaped, markup kept as text."""
    path, ids = approvals
    code, out = invoke("approvals", "show", ids["first"], "--db", str(path))
    assert code == 0
    assert_plain(out, f"send to {SHOWN}")
    assert f"disclose:{SHOWN}" in out
    assert MARKUP in out  # the arguments' JSON text


def test_approve_and_deny_print_the_preview_and_the_person_as_plain_text(
    approvals: tuple[Path, dict[str, str]],
) -> None:
    """approve and deny print the preview, the decider and the reason escaped."""
    path, ids = approvals
    code, out = invoke("approvals", "approve", ids["first"], "--by", HOSTILE, "--db", str(path))
    assert code == 0
    assert_plain(out, f"send to {SHOWN}")
    assert f"(by {SHOWN})" in out
    code, out = invoke(
        "approvals", "deny", ids["second"], "--by", "maria", "--reason", HOSTILE, "--db", str(path)
    )  # fmt: skip
    assert code == 0
    assert_plain(out, f"send to {SHOWN}2")
    assert f"(by maria): {SHOWN}" in out


def test_approvals_show_of_an_unknown_hostile_id_is_a_plain_one_line_error(db: Path) -> None:
    """approvals show of an unknown hostile id exits 2 with one line and no raw controls."""
    code, out = invoke("approvals", "show", HOSTILE, "--db", str(db))
    assert code == 2
    assert len(out.strip().splitlines()) == 1
    for raw in RAW:
        assert raw not in out


# -- callgate run, callgate demo -------------------------------------------------------


def test_run_and_replay_print_model_and_tool_text_as_plain_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The calls the model proposes, the tools' answers, the model's answer and the
    replayed transcript."""
    (tmp_path / "hostile_cli_tools.py").write_text(
        "from callgate import Registry\n"
        "registry = Registry()\n"
        "@registry.tool(effects='read:notes', risk='read')\n"
        "def look(q: str) -> str:\n"
        "    '''Look something up.'''\n"
        f"    return {HOSTILE!r}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    turn = render_turn(calls(("look", {"q": HOSTILE})), "openai_chat", 1)
    answer = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": f"{HOSTILE}\nsecond line"},
            }
        ]
    }
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"format": "openai_chat", "responses": [turn, answer]}))
    db = tmp_path / "ledger.db"
    base = ["run", "hostile_cli_tools:registry", "--model", f"scripted:{script}"]
    code, out = invoke(*base, "--grant", "read:*", "--db", str(db), "--message", HOSTILE)
    assert code == 0, out
    assert_plain(out)
    assert f"{SHOWN}\nsecond line" in out  # the answer keeps its lines

    run_id = json.loads(
        invoke(*base, "--grant", "read:*", "--db", str(db), "-m", HOSTILE, "--json")[1]
    )["run_id"]
    code, out = invoke("run", "replay", run_id, "--db", str(db))
    assert code == 0, out
    assert_plain(out, MARKUP)
    assert "\\x1b[2J" in out


def test_demo_shows_the_models_arguments_without_emoji(tmp_path: Path) -> None:
    """demo prints a model's markup arguments as text: no Rich emoji substitution."""
    turn = render_turn(calls(("get_order_status", {"order_id": MARKUP})), "openai_chat", 1)
    answer = {
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "?"}}
        ]
    }
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"format": "openai_chat", "responses": [turn, answer]}))
    code, out = invoke(
        "demo", "--model", f"scripted:{script}", "--workdir", str(tmp_path / "harbor")
    )
    assert code == 1  # the scenario's checks do not hold for this script
    assert MARKUP in out
    assert "\N{E-MAIL SYMBOL}" not in out


def test_demo_with_a_hostile_format_is_a_plain_usage_error(tmp_path: Path) -> None:
    """demo --format with a hostile value exits 2 with the value escaped."""
    code, out = invoke("demo", "--format", HOSTILE, "--workdir", str(tmp_path))
    assert code == 2
    assert_plain(out)


# -- the quickstart -------------------------------------------------------------------


def test_the_quickstart_shows_the_replayed_refunds_message() -> None:
    """Step 4's message starts with ``[callgate: ...]``, which Rich once ate as markup."""
    spec = importlib.util.spec_from_file_location(
        "quickstart_under_test", ROOT / "examples" / "quickstart.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        buffer = io.StringIO()
        module.console = Console(file=buffer, width=400)
        module.main()
    finally:
        del sys.modules[spec.name]
    step4 = buffer.getvalue().split("4. The model repeats")[1].split("5. A hung API")[0]
    assert "[callgate: this idempotency key already ran; recorded outcome returned]" in step4


# -- any text ---------------------------------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_any_argument_a_model_sends_is_shown_by_ledger_show(text: str) -> None:
    """Property: whatever text the model puts in an argument, ``ledger show`` prints it
    without crashing and without one raw invisible character."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.db"
        gate = Gate(hostile_registry(), policy=Policy([allow("look")]), ledger=SQLiteLedger(path))
        run = gate.run(authority=Authority(principal="p", grants=["read:*"]))
        run.submit([ToolCall(id="c1", name="look", arguments={"q": text})])
        gate.ledger.close()
        code, out = invoke("ledger", "show", "c1", "--db", str(path))
    assert code == 0
    assert not [c for c in out if c != "\n" and unicodedata.category(c) in HIDDEN]

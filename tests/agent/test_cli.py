"""``callgate demo`` and ``callgate run``: exit codes, JSON output, replay."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from callgate.cli import app
from callgate.llms.scripted import calls, render_turn

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
POLICY = EXAMPLES / "harbor" / "policy.toml"

runner = CliRunner()


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh Harbor shop database, and the harbor package importable."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from harbor.shop import create_shop

    path = create_shop(tmp_path / "shop.db")
    for name in [m for m in sys.modules if m == "harbor" or m.startswith("harbor.")]:
        del sys.modules[name]
    return path


def script_file(tmp_path: Path, *responses: Any) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"format": "openai_chat", "responses": list(responses)}))
    return path


def chat_answer(text: str) -> dict[str, Any]:
    return {
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        ]
    }


def run_args(shop: Path, script: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "run",
        "harbor.tools:registry",
        "--policy",
        str(POLICY),
        "--model",
        f"scripted:{script}",
        "--grant",
        "read:*",
        "--grant",
        "write:orders",
        "--grant",
        "spend:USD<=500",
        "--context",
        "tenant=acme-outdoor",
        "--context",
        f"shop_db={shop}",
        "--db",
        str(tmp_path / "ledger.db"),
        "--message",
        "Status of H-1042?",
        *extra,
    ]


def test_demo_json_reports_every_check(tmp_path: Path) -> None:
    """demo --json exits 0 with passed, reason answered, one refund and one email to Dana."""
    result = runner.invoke(app, ["demo", "--json", "--workdir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["passed"] is True
    assert report["reason"] == "answered"
    assert len(report["refunds"]) == 1
    assert report["emails_to"] == ["dana.reyes@example.com"]


def test_demo_names_the_ledger_it_wrote(tmp_path: Path) -> None:
    """`callgate demo` says where its record is and how to read it."""
    result = runner.invoke(app, ["demo", "--workdir", str(tmp_path)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert f"callgate ledger list --db {tmp_path / 'ledger.db'}" in result.stdout
    assert (tmp_path / "ledger.db").exists()


def test_demo_with_a_real_model_and_no_key_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """demo with an OpenAI model and no OPENAI_API_KEY exits 2, naming it, and writes no ledger."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = runner.invoke(app, ["demo", "--model", "openai:gpt-4.1", "--workdir", str(tmp_path)])
    assert result.exit_code == 2
    assert "OPENAI_API_KEY" in result.output
    assert not (tmp_path / "ledger.db").exists()


def test_run_answers_on_stdout_and_replays_from_the_ledger(shop: Path, tmp_path: Path) -> None:
    """run --json prints the answer and observations; run replay shows the run from its events."""
    turn = render_turn(calls(("get_order_status", {"order_id": "H-1042"})), "openai_chat", 1)
    script = script_file(tmp_path, turn, chat_answer("H-1042 was delivered."))
    result = runner.invoke(app, run_args(shop, script, tmp_path, "--json"))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["reason"], report["answer"]) == ("answered", "H-1042 was delivered.")
    assert [o["status"] for o in report["observations"]] == ["ok"]

    replayed = runner.invoke(
        app, ["run", "replay", report["run_id"], "--db", str(tmp_path / "ledger.db")]
    )
    assert replayed.exit_code == 0, replayed.output
    assert "agent.started" in replayed.stdout
    assert "get_order_status" in replayed.stdout
    assert "answered: H-1042 was delivered." in replayed.stdout

    as_json = runner.invoke(
        app, ["run", "replay", report["run_id"], "--db", str(tmp_path / "ledger.db"), "--json"]
    )
    kinds = [e["kind"] for e in json.loads(as_json.stdout) if not e["kind"].startswith("run.")]
    assert kinds[0] == "agent.started"  # after the run's own records (run.opened, run.trusted)
    assert kinds[-1] == "agent.stopped"


def test_run_denies_approvals_when_not_interactive(shop: Path, tmp_path: Path) -> None:
    """``--approve deny``: the refund is refused, the model hears it, nothing is refunded."""
    turns = [
        calls(("get_order_status", {"order_id": "H-1042"})),
        calls(
            (
                "refund_order",
                {
                    "order_id": "H-1042",
                    "amount": 89.0,
                    "currency": "USD",
                    "operation_id": "refund-cli-0001",
                    "reason": "damaged",
                },
            )
        ),
    ]
    rendered = [render_turn(t, "openai_chat", i + 1) for i, t in enumerate(turns)]
    script = script_file(tmp_path, *rendered, chat_answer("The refund was refused."))
    result = runner.invoke(app, run_args(shop, script, tmp_path, "--approve", "deny", "--json"))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    refund = report["observations"][-1]
    assert (refund["tool"], refund["status"], refund["stage"]) == (
        "refund_order",
        "rejected",
        "approve",
    )
    from harbor.shop import refunds_for

    assert refunds_for(shop, "H-1042") == []


def test_a_run_stopped_by_a_budget_exits_1(shop: Path, tmp_path: Path) -> None:
    """A run stopped by --max-steps 1 exits 1 and names max_steps."""
    turn = render_turn(calls(("get_order_status", {"order_id": "H-1042"})), "openai_chat", 1)
    script = script_file(tmp_path, turn, turn)
    result = runner.invoke(app, run_args(shop, script, tmp_path, "--max-steps", "1"))
    assert result.exit_code == 1
    assert "max_steps" in result.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "nope.module:registry", "--model", "openai:x", "-m", "hi"], "cannot import"),
        (["run", "harbor.tools:registry", "--model", "bogus", "-m", "hi"], "kind:name"),
        (["run", "replay", "run_x", "--db", "/nonexistent/ledger.db"], "no ledger"),
    ],
)
def test_bad_usage_exits_2(args: list[str], needle: str, shop: Path) -> None:
    """An unimportable registry, a bad model spec or a missing ledger file exits 2 and says so."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert needle in result.output


def test_replaying_an_unknown_run_exits_1(shop: Path, tmp_path: Path) -> None:
    """run replay of a run id the ledger lacks exits 1 with "no run"."""
    script = script_file(tmp_path, chat_answer("hi"))
    assert runner.invoke(app, run_args(shop, script, tmp_path)).exit_code == 0
    result = runner.invoke(
        app, ["run", "replay", "run_missing", "--db", str(tmp_path / "ledger.db")]
    )
    assert result.exit_code == 1
    assert "no run" in result.output


def test_help_teaches_the_commands_and_exit_codes() -> None:
    """run --help names replay, MODULE:ATTR and the exit codes; demo --help names --model."""
    result = runner.invoke(app, ["run", "--help"])
    assert result.exit_code == 0
    for word in ("replay", "MODULE:ATTR", "Exit codes"):
        assert word in result.output
    demo = runner.invoke(app, ["demo", "--help"])
    assert "--model" in demo.output
    assert "scripted" in demo.output

"""``callgate eval grammar-decision`` on a real SQLite ledger written by real agent runs."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from callgate import Agent, Authority, Gate, Status
from callgate.agent import Budgets
from callgate.cli.grammar import app
from callgate.eval.grammar_decision import GRADE_EVENT
from callgate.ledger.sqlite import SQLiteLedger
from callgate.llms import ScriptedModel
from callgate.llms.local import DecodeStats, record_decodes

from .support import plain_registry

GOOD = '<tool_call>{"name": "get_order", "arguments": {"order_id": "o-1"}}</tool_call>'
BROKEN = '<tool_call>{"name": "get_order", "arguments": {"order_id": }</tool_call>'


def decode(step: int, constraint: str, seconds: float, compile_seconds: float) -> DecodeStats:
    """Timings of one model call, as `LocalModel` measures them."""
    return DecodeStats(
        step=step,
        model="tiny",
        constraint=constraint,
        grammar="g" if constraint != "none" else "",
        prompt_tokens=50,
        output_tokens=20,
        prompt_seconds=0.1,
        decode_seconds=seconds,
        mask_seconds=0.002 if constraint != "none" else None,
        compile_seconds=compile_seconds,
        stopped="end",
    )


def write_runs(db: Path, tasks: int = 6) -> None:
    """Free runs whose first call is broken for half the tasks, constrained runs whose call
    is always good; decode timings and grades recorded as the evaluation script does."""
    ledger = SQLiteLedger(db)
    with Gate(plain_registry(), ledger=ledger) as gate:
        authority = Authority(principal="p", grants=["read:*"])
        for mode in ("none", "llguidance"):
            for n in range(tasks):
                broken = mode == "none" and n % 2 == 0
                script = [BROKEN, GOOD] if broken else [GOOD, "done"]
                name = "tiny" if mode == "none" else "tiny+llguidance"
                model = ScriptedModel(script, format="text", name=name)
                agent = Agent(model, gate, budgets=Budgets(steps=2), paging=False)
                result = agent.run(f"task {n}", authority=authority)
                seconds = 0.4 if mode == "none" else 0.5
                stats = [decode(s, mode, seconds, 0.3 if n == 0 else 0.0) for s in (1, 2)]
                record_decodes(ledger, result.run_id, stats)
                success = any(o.status is Status.OK for o in result.observations)
                data = {"task": f"t{n}", "expected": "get_order", "success": success}
                ledger.record_event(GRADE_EVENT, run_id=result.run_id, call_id=None, data=data)
    ledger.close()


def test_the_command_prints_every_term_and_a_verdict(tmp_path: Path) -> None:
    """From six tasks each way: p_f 3/6 read from the first turns, c_r from the retry
    turns, c_g from the decode events, q over six paired tasks, and a verdict."""
    db = tmp_path / "runs.db"
    write_runs(db)
    out = tmp_path / "decision.json"
    result = CliRunner().invoke(
        app, ["grammar-decision", "--db", str(db), "--json", str(out)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert "p_f  failures of free decoding: 3/6 = 0.5" in result.output
    assert "the turns that followed a parse or schema rejection" in result.output
    assert "verdict:" in result.output
    (decision,) = json.loads(out.read_text())
    assert decision["runs"] == {"llguidance": 6, "none": 6}
    assert decision["failure_rates"]["llguidance"][0] == 0.0
    assert decision["paired_tasks"] == 6
    assert decision["q_rate"][0] == 0.0  # both ways succeeded on every task
    assert decision["verdict"] in ("constrain", "do not constrain", "undecided", "not enough data")


def test_a_ledger_without_agent_runs_exits_2(tmp_path: Path) -> None:
    """A ledger holding no agent run is bad input: exit 2 with the fix in the message."""
    db = tmp_path / "empty.db"
    SQLiteLedger(db).close()
    result = CliRunner().invoke(app, ["grammar-decision", "--db", str(db)])
    assert result.exit_code == 2
    assert "no agent runs" in result.output


def test_no_ledger_at_the_path_exits_2(tmp_path: Path) -> None:
    """A path with no ledger is refused without creating one."""
    missing = tmp_path / "nope.db"
    result = CliRunner().invoke(app, ["grammar-decision", "--db", str(missing)])
    assert result.exit_code == 2
    assert not missing.exists()

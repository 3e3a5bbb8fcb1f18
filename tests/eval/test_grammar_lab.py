"""The grammar decision fed by the lab: success is the lab verifier's verdict, c_g comes
from the decodes the lab recorded, and no interval is drawn from too few tasks."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from callgate.cli.grammar import app as grammar_app
from callgate.eval.grammar_decision import MIN_TASKS, decide
from callgate.eval.lab import run_lab
from callgate.eval.policies import Policy, PolicyModel
from callgate.eval.repo_tasks import load_tasks
from callgate.eval.tasks import Task
from callgate.ledger import SQLiteLedger
from callgate.llms.base import Model, ModelRequest, ModelResponse
from callgate.llms.local import DecodeStats

# Every step's first call is mistyped (a schema rejection, then a retry); the last edit of
# a task is skipped half the time, so calls end ok while the verifier fails the task.
SLOPPY = Policy(name="sloppy", mistype={"*": 1.0}, skip={"*": 0.5}, run_tests=False)


class DecodingPolicy(Model):
    """A policy that also reports how each call was decoded, with planted timings: 10
    output tokens in ``seconds`` (free 0.5 s; constrained 1.0 s, 0.01 s of it masking)."""

    format = "openai_chat"

    def __init__(self, task: Task, surface: str, constraint: str, seconds: float) -> None:
        self._inner = PolicyModel(SLOPPY, task, surface, seed=3)
        self.name = "sloppy" if constraint == "none" else f"sloppy+{constraint}"
        self.constraint, self.seconds = constraint, seconds
        self.constrain = constraint  # what the lab's record names as the decoding mode
        self.decodes: list[DecodeStats] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.decodes.append(
            DecodeStats(step=request.step, model="sloppy", constraint=self.constraint,
                        grammar="g" if self.constraint != "none" else "", prompt_tokens=100,
                        output_tokens=10, prompt_seconds=0.1, decode_seconds=self.seconds,
                        mask_seconds=0.01 if self.constraint != "none" else None,
                        compile_seconds=0.0, stopped="end")
        )  # fmt: skip
        response = await self._inner.complete(request)
        return dataclasses.replace(response, model=self.name)


def test_the_decision_on_a_lab_ledger_uses_its_verdicts_and_decodes(tmp_path: Path) -> None:
    """A free lab and a constrained lab of one policy on 6 tasks: success per mode is the
    share the lab's verifier passed (not "a call ended ok", which is 1.0 here), c_g is the
    planted 1.0 − 0.5 = 0.5 s a call, every term has 6 tasks, and the verdict is computed
    (p_f·c_r is milliseconds against c_g = 0.5 s: do not constrain)."""
    db = tmp_path / "lab.db"
    tasks = load_tasks("repo:6")
    ledger = SQLiteLedger(db)
    passed: dict[str, list[bool]] = {}
    try:
        for lab, constraint, seconds in (("free", "none", 0.5), ("g", "llguidance", 1.0)):
            models: dict[str, DecodingPolicy] = {}

            def model_for(
                task: Task,
                surface: str,
                c: str = constraint,
                s: float = seconds,
                m: dict[str, DecodingPolicy] = models,
            ) -> Model:
                return m.setdefault(task.id, DecodingPolicy(task, surface, c, s))  # fmt: skip

            runs = run_lab(tasks, ["fine"], model_for, ledger, lab_id=lab)
            passed[lab] = [r.passed for r in runs]
        records = list(ledger.audit())
    finally:
        ledger.close()
    assert 0 < sum(passed["free"]) < len(tasks)  # the planted skip fails some tasks
    assert any(r.kind == "model.decode" for r in records)
    (decision,) = decide(records, labs=["free", "g"])
    assert decision.success["none"].value == sum(passed["free"]) / len(tasks)
    assert decision.success["llguidance"].value == sum(passed["g"]) / len(tasks)
    assert decision.c_g is not None
    assert math.isclose(decision.c_g.value, 0.5)
    assert dict(decision.units) == {"p_f": 6, "c_r": 6, "c_g": 6, "q": 6}
    assert decision.verdict == "do not constrain"
    # the same from the command line, naming both labs
    out = tmp_path / "d.json"
    result = CliRunner().invoke(
        grammar_app,
        ["grammar-decision", "--db", str(db), "--lab", "free", "--lab", "g", "--json", str(out)],
    )
    assert result.exit_code == 0, result.output
    assert "DO NOT CONSTRAIN" in result.output
    assert "lab free: model sloppy; decoding none" in result.output
    data: list[dict[str, Any]] = json.loads(out.read_text())
    assert data[0]["tasks_per_term"]["q"] == 6
    other = CliRunner().invoke(grammar_app, ["grammar-decision", "--db", str(db), "--lab", "x"])
    assert other.exit_code == 2


def test_one_retry_turn_gives_not_enough_data_and_the_runs_still_needed() -> None:
    """One free task in eight had a rejection: c_r rests on one task, so no interval is
    drawn (a bootstrap of one value is [x, x]); the verdict says how many more: 4 tasks
    with a rejection, about 32 runs at the 1 in 8 seen."""

    @dataclasses.dataclass(frozen=True)
    class Rec:
        kind: str
        run_id: str
        at: float
        data: dict[str, Any]

    records = []
    for mode, n_tasks in (("m", 8), ("m+llguidance", 8)):
        for n in range(n_tasks):
            rid = f"{mode}/{n}"
            broken = mode == "m" and n == 0
            records += [
                Rec("agent.started", rid, 0.0, {"model": mode, "tools": ["t"], "user": f"u{n}"}),
                Rec("agent.model", rid, 1.0, {"step": 1, "calls": [{"tool": "t"}]}),
                Rec("agent.observations", rid, 1.5, {"step": 1, "results": [
                    {"status": "rejected", "stage": "parse"} if broken else {"status": "ok"}]}),
            ]  # fmt: skip
            if broken:
                records.append(Rec("agent.model", rid, 11.19, {"step": 2, "calls": []}))
            if mode != "m":
                decode = {"constraint": "llguidance", "grammar": "g", "output_tokens": 10,
                          "decode_seconds": 1.0}  # fmt: skip
                records.append(Rec("model.decode", rid, 2.0, decode))
            records.append(Rec("agent.stopped", rid, 12.0, {}))
    (decision,) = decide(records)
    assert decision.c_r is not None
    assert math.isclose(decision.c_r.value, 9.69)
    assert math.isnan(decision.c_r.low)  # not [9.69, 9.69]
    assert math.isnan(decision.c_r.high)
    assert str(decision.c_r) == "9.69 (no interval)"
    assert decision.units["c_r"] == 1
    assert decision.verdict == "not enough data"
    assert f"fewer than {MIN_TASKS} tasks" in decision.reason
    assert "c_r has 1 task(s) with a parse or schema rejection: 4 more" in decision.reason
    assert "about 32 more free run(s)" in decision.reason


def test_a_free_lab_run_that_never_calls_fails_p_f_for_its_task() -> None:
    """A lab's task always needs calls (its reference solution edits the repository): five
    free lab runs that answered in prose give p_f = 5/5 over tasks, first turns without a
    well-formed call, where counting calls gave 0/0 and "cannot compute p_f" (SmolLM2's
    free lab on repo:2 did exactly this)."""

    @dataclasses.dataclass(frozen=True)
    class Rec:
        kind: str
        run_id: str
        at: float
        data: dict[str, Any]

    records = []
    for n in range(5):
        rid = f"free/{n}"
        records += [
            Rec("eval.run", rid, 0.0, {"task": f"task{n}", "lab": "free"}),
            Rec("agent.started", rid, 0.0, {"model": "m", "tools": ["t"], "user": "u"}),
            Rec("agent.model", rid, 1.0, {"step": 1, "calls": [], "text": "In prose."}),
            Rec("agent.stopped", rid, 2.0, {}),
            Rec("eval.verdict", rid, 3.0, {"passed": False}),
        ]
    (decision,) = decide(records)
    assert (decision.proposed, decision.shape_failures) == (5, 5)
    assert decision.p_f.value == 1.0
    assert decision.units["p_f"] == 5
    assert decision.p_f_unit.startswith("first turns of tasks that expected a call")


def test_a_tax_below_zero_decides_whatever_p_f_and_c_r_are() -> None:
    """Constrained, five lab tasks pass; free, none do (q = -1 × 60 s) and one retry turn is
    on record (c_r from 1 task). p_f·c_r is never negative and c_g + q lies below 0, so the
    verdict is "constrain" whatever more runs would show of c_r: not "not enough data"
    (SmolLM2's shop tasks: q = -36 [-54, -18] s, c_r from 1 task)."""

    @dataclasses.dataclass(frozen=True)
    class Rec:
        kind: str
        run_id: str
        at: float
        data: dict[str, Any]

    records = []
    for mode in ("m", "m+llguidance"):
        for n in range(5):
            rid = f"{mode}/{n}"
            free = mode == "m"
            broken = free and n == 0
            records += [
                Rec("eval.run", rid, 0.0, {"task": f"task{n}", "lab": mode}),
                Rec("agent.started", rid, 0.0, {"model": mode, "tools": ["t"], "user": "u"}),
                Rec("agent.model", rid, 1.0, {"step": 1, "calls": [{"tool": "t"}]}),
                Rec("agent.observations", rid, 1.5, {"step": 1, "results": [
                    {"status": "rejected", "stage": "parse"} if broken else {"status": "ok"}]}),
            ]  # fmt: skip
            if broken:
                records.append(Rec("agent.model", rid, 11.5, {"step": 2, "calls": []}))
            if not free:
                decode = {"constraint": "llguidance", "grammar": "g", "output_tokens": 10,
                          "decode_seconds": 1.0}  # fmt: skip
                records.append(Rec("model.decode", rid, 2.0, decode))
            records += [
                Rec("agent.stopped", rid, 12.0, {}),
                Rec("eval.verdict", rid, 13.0, {"passed": not free}),
            ]
    (decision,) = decide(records)
    assert decision.units["c_r"] == 1
    assert decision.verdict == "constrain"
    assert "whatever p_f and c_r are" in decision.reason
    assert "c_r has 1 task(s)" in decision.reason

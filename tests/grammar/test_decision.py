"""The decision rule p_f·c_r > c_g + q from audit records: each term, its interval, the verdict."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import pytest

from callgate.eval.grammar_decision import DECODE_EVENT, GRADE_EVENT, decide, decisions_json

TOOLS = ["get_order", "refund"]


@dataclass(frozen=True)
class Rec:
    """An audit record as the rule reads it."""

    kind: str
    run_id: str
    at: float
    data: dict[str, Any] = field(default_factory=dict)


def run(
    run_id: str,
    *,
    model: str,
    broken_first: bool,
    success: bool,
    retry_seconds: float = 3.0,
    decode: dict[str, Any] | None = None,
    task: str | None = None,
) -> list[Rec]:
    """One task's records: a proposal (rejected at parse when ``broken_first``), a retry turn
    ``retry_seconds`` after the rejection, the decode timings and the grade."""
    out = [
        Rec("agent.started", run_id, 0.0, {"model": model, "tools": TOOLS, "user": run_id}),
        Rec("agent.model", run_id, 1.0, {"step": 1, "calls": [{"tool": "get_order"}]}),
        Rec(
            "agent.observations",
            run_id,
            1.5,
            {
                "step": 1,
                "results": [
                    {"status": "rejected", "stage": "parse"}
                    if broken_first
                    else {"status": "ok", "stage": "execute"}
                ],
            },
        ),
    ]
    if broken_first:
        usage = {"input_tokens": 100, "output_tokens": 20}
        out.append(
            Rec(
                "agent.model", run_id, 1.5 + retry_seconds, {"step": 2, "calls": [], "usage": usage}
            )
        )
    if decode is not None:
        out.append(Rec(DECODE_EVENT, run_id, 9.0, {"step": 1, **decode}))
    out.append(Rec("agent.stopped", run_id, 8.0, {"reason": "answered"}))
    grade = {"task": task or run_id.split("/")[-1], "expected": "get_order", "success": success}
    out.append(Rec(GRADE_EVENT, run_id, 9.5, grade))
    return out


FREE_DECODE = {"constraint": "none", "grammar": "", "output_tokens": 10, "decode_seconds": 0.5}


def constrained_decode(compile_seconds: float) -> dict[str, Any]:
    """A constrained call: 10 tokens in 1.0 s (0.5 s more than free), masks 0.01 s."""
    return {
        "constraint": "llguidance",
        "grammar": "g1",
        "output_tokens": 10,
        "decode_seconds": 1.0,
        "mask_seconds": 0.01,
        "compile_seconds": compile_seconds,
        "stopped": "end",
    }


def test_terms_and_verdict_of_a_model_that_breaks_half_its_calls() -> None:
    """Half the free first turns broken (p_f 5/10, Wilson [0.237, 0.763]), retries of 3 s,
    constraining 0.54 s a call (0.5 s slower decoding + 0.4 s compile over 10 calls) and
    half a success gained: p_f·c_r = 1.5 > c_g + q = 0.54 − 30, so constrain."""
    records = []
    for n in range(10):
        records += run(
            f"free/t{n}", model="tiny", broken_first=n < 5, success=n >= 5, decode=FREE_DECODE
        )
        records += run(
            f"grammar/t{n}",
            model="tiny+llguidance",
            broken_first=False,
            success=True,
            decode=constrained_decode(0.4 if n == 0 else 0.0),
        )
    (decision,) = decide(records, success_value=60)
    assert decision.runs == {"llguidance": 10, "none": 10}
    assert (decision.shape_failures, decision.proposed) == (5, 10)
    assert decision.p_f.value == 0.5
    assert math.isclose(decision.p_f.low, 0.2366, abs_tol=5e-4)  # Wilson, z = 1.96
    assert math.isclose(decision.p_f.high, 0.7634, abs_tol=5e-4)
    assert decision.c_r is not None
    assert (decision.c_r.value, decision.c_r.low, decision.c_r.high) == (3.0, 3.0, 3.0)
    assert decision.c_r_source.startswith("the turns that followed")
    assert decision.c_r_tokens is not None
    assert decision.c_r_tokens.value == 120
    assert decision.c_g is not None
    assert math.isclose(decision.c_g.value, 0.54)
    assert decision.q_rate is not None
    assert decision.q_rate.value == -0.5
    assert decision.paired_tasks == 10
    assert decision.verdict == "constrain"
    assert decision.failure_rates["llguidance"].value == 0.0


def test_rare_failures_and_costly_constraining_say_do_not_constrain() -> None:
    """5 broken first turns in 40, 1 s retries, 5 s of constraining a call and no tax:
    p_f·c_r ≈ 0.125 s, far below c_g = 5 s; the verdict is 'do not constrain'."""
    slow = {**constrained_decode(0.0), "decode_seconds": 5.5}
    records = []
    for n in range(40):
        records += run(
            f"free/t{n}",
            model="m",
            broken_first=n < 5,  # c_r needs MIN_TASKS tasks with a retry
            success=True,
            retry_seconds=1.0,
            decode=FREE_DECODE,
        )
        records += run(
            f"g/t{n}", model="m+llguidance", broken_first=False, success=True, decode=slow
        )
    (decision,) = decide(records)
    assert decision.verdict == "do not constrain"
    assert decision.lhs is not None
    assert decision.rhs is not None
    assert decision.lhs.high < decision.rhs.low
    assert decision.q_rate is not None
    assert decision.q_rate.value == 0.0


def test_overlapping_intervals_are_undecided_not_a_preference() -> None:
    """With two tasks each way no interval is drawn (fewer than MIN_TASKS tasks): the
    verdict is 'not enough data' and the reason says how many more runs are needed."""
    slow = {**constrained_decode(0.0), "decode_seconds": 2.0}
    records = []
    for n in range(2):
        records += run(f"f/t{n}", model="m", broken_first=n == 0, success=True, decode=FREE_DECODE)
        records += run(
            f"g/t{n}", model="m+llguidance", broken_first=False, success=True, decode=slow
        )
    (decision,) = decide(records)
    assert decision.verdict == "not enough data"
    assert "p_f has 2 task(s): 3 more free run(s)" in decision.reason


def test_without_constrained_timings_c_g_is_named_missing() -> None:
    """Free runs alone give p_f and c_r but no c_g: the verdict is undecided and says why."""
    records = []
    for n in range(3):
        records += run(f"f/t{n}", model="m", broken_first=True, success=False)
    (decision,) = decide(records)
    assert decision.verdict == "undecided"
    assert "c_g" in decision.reason
    assert decision.c_g is None
    assert json.loads(decisions_json([decision]))[0]["c_g_seconds"] is None


def test_ungraded_runs_count_calls_over_proposals() -> None:
    """Without grades, p_f is rejected calls over proposed calls and there is no success
    (a call that ran is not a task done)."""
    records = []
    for n in range(4):
        records += [
            r
            for r in run(f"f/t{n}", model="m", broken_first=n == 0, success=False)
            if r.kind != GRADE_EVENT
        ]
    (decision,) = decide(records)
    assert (decision.shape_failures, decision.proposed) == (1, 4)
    assert decision.p_f_unit.startswith("calls rejected")
    assert math.isnan(decision.success["none"].value)


def test_models_and_tool_sets_are_decided_apart() -> None:
    """Runs of two models, or of one model with two tool sets, make separate decisions."""
    records = run("a/1", model="m1", broken_first=True, success=False)
    records += run("b/1", model="m2", broken_first=True, success=False)
    other = run("c/1", model="m1", broken_first=True, success=False)
    other[0] = Rec("agent.started", "c/1", 0.0, {"model": "m1", "tools": ["ping"], "user": "x"})
    decisions = decide(records + other)
    assert [(d.model, d.tools) for d in decisions] == [
        ("m1", ("get_order", "refund")),
        ("m1", ("ping",)),
        ("m2", ("get_order", "refund")),
    ]


@pytest.mark.parametrize("hostile", [{"calls": "not a list"}, {"step": "1", "results": None}])
def test_hostile_record_data_does_not_crash_the_rule(hostile: dict[str, Any]) -> None:
    """Record data of the wrong shape (a ledger edited by hand) is read as no calls."""
    records = [
        Rec("agent.started", "r", 0.0, {"model": "m", "tools": TOOLS}),
        Rec("agent.model", "r", 1.0, {"step": 1, **hostile}),
        Rec("agent.observations", "r", 1.1, {"step": 1, **hostile}),
        Rec("agent.stopped", "r", 2.0, {}),
    ]
    (decision,) = decide(records)
    assert decision.proposed == 0
    assert decision.verdict == "undecided"


def test_runs_that_never_ended_are_left_out() -> None:
    """A run without agent.stopped (its process was killed) counts for nothing; a task run
    twice is paired by its last run."""
    records = run("f/t0", model="m", broken_first=True, success=False)
    records += run("g/t0", model="m+llguidance", broken_first=False, success=False)
    records += run("g2/t0", model="m+llguidance", broken_first=False, success=True)
    records += [
        r
        for r in run("f/t1", model="m", broken_first=True, success=False)
        if r.kind == "agent.started" or r.kind == "agent.model"
    ]
    (decision,) = decide(records)
    assert decision.runs == {"llguidance": 2, "none": 1}
    assert decision.paired_tasks == 1
    assert decision.q_rate is not None
    assert decision.q_rate.value == -1.0  # free failed, the last constrained run succeeded

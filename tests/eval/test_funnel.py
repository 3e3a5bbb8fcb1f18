"""The funnel from ledgers with a failure planted at each stage: unknown tool (A), bad
arguments (B: parse, schema and semantic), a policy refusal and a failed execution (C), a
failed task (D), on the memory, SQLite and PostgreSQL ledgers."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callgate.eval.funnel import call_stage, funnel, funnel_png
from callgate.eval.lab import run_lab
from callgate.eval.record import CallView, RunView, read_runs, runs_from_records
from callgate.eval.repo_tasks import repo_tasks
from callgate.eval.surfaces import SURFACES, Surface, fine_registry
from callgate.ledger import Ledger, MemoryLedger, SQLiteLedger
from callgate.ledger.base import AuditRecord
from callgate.llms import ScriptedModel, answer, calls

TASKS = {t.id: t for t in repo_tasks()}
ADD, MUL = TASKS["fix_bug-add"], TASKS["fix_bug-mul"]
FIXED = next(op.content for op in ADD.solution if op.kind == "write")


def _planted_surface() -> Surface:
    """The fine tools plus ``touch(target)``, shown (its effect template meets the grants)
    and refused by policy for any target but the workspace."""
    registry = fine_registry()

    @registry.tool(effects="write:{target}", risk="write_idempotent")
    def touch(target: str) -> str:
        """Mark a target."""
        return "touched"

    return Surface(name="planted", registry=registry, description="fine + touch")


def _model(task_id: str) -> ScriptedModel:
    if task_id == ADD.id:
        return ScriptedModel(
            [
                calls(("edit_file", {"path": "calc.py"})),  # A: no such tool
                calls(("read_file", {"path": "../etc/passwd"})),  # B: semantic
                calls(("read_file", {"path": 5})),  # B: schema
                calls(("touch", {"target": "elsewhere"})),  # C: policy
                calls(("read_file", {"path": "missing.py"})),  # C: execute error
                calls(("read_file", {"path": "calc.py"})),  # ok
                calls(("write_file", {"path": "calc.py", "content": FIXED})),  # ok
                answer("fixed"),
            ]
        )
    return ScriptedModel(
        [
            calls(("read_file", '{"path": ')),  # B: parse (cut-off JSON)
            calls(("read_file", {"path": "calc.py"})),  # ok
            answer("looks fine"),
        ]
    )


@pytest.fixture(scope="module", params=["memory", "sqlite", "postgres"])
def planted(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Ledger]:
    """The two planted runs recorded in a ledger of each kind (run once per module; the
    PostgreSQL one in a fresh database of the session's throwaway cluster)."""
    dsn = None
    if request.param == "memory":
        led: Ledger = MemoryLedger()
    elif request.param == "sqlite":
        led = SQLiteLedger(tmp_path_factory.mktemp("ledger") / "l.db")
    else:
        from callgate.ledger.postgres import PostgresLedger

        cluster = request.getfixturevalue("pg_cluster")
        dsn = cluster.create_database()
        led = PostgresLedger(dsn)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(SURFACES, "planted", _planted_surface)
        runs = run_lab([ADD, MUL], ["planted"], lambda task, s: _model(task.id), led, lab_id="t")
    assert [r.passed for r in runs] == [True, False]
    yield led
    led.close()
    if dsn is not None:
        cluster.drop_database(dsn)


def test_each_planted_failure_is_counted_at_its_stage(planted: Ledger) -> None:
    """9 calls: A 8/9, B|A 5/8, C|A,B 3/5, D|A,B,C 2/3, product 2/9; each failure attributed
    to the stage that stopped it."""
    f = funnel(read_runs(planted), reps=200)
    row = next(r for r in f.rows if r.surface == "all")
    assert row.calls == 9
    assert row.reached == (9, 8, 5, 3, 2)  # the calls under each rate
    assert row.a.value == pytest.approx(8 / 9)
    assert row.b.value == pytest.approx(5 / 8)
    assert row.c.value == pytest.approx(3 / 5)
    assert row.d.value == pytest.approx(2 / 3)
    assert row.a.n == 2  # the interval's unit is the task: two tasks
    assert row.product.value == pytest.approx(2 / 9)
    assert _named(row.rejected_by) == _named(
        {"unknown_tool": 1, "parse": 1, "semantic": 1, "schema": 1, "policy": 1, "execute": 1}
    )


def test_rows_per_tool_split_the_calls(planted: Ledger) -> None:
    """read_file has 6 calls (3 bad arguments, 1 failed execution); write_file 1, ok."""
    rows = {r.tool: r for r in funnel(read_runs(planted), reps=200).rows if r.surface != "all"}
    assert rows["read_file"].calls == 6
    assert _named(rows["read_file"].rejected_by) == _named(
        {"parse": 1, "semantic": 1, "schema": 1, "execute": 1}
    )
    assert rows["write_file"].c.value == 1.0
    assert _named(rows["touch"].rejected_by) == _named({"policy": 1})


def _named(counts: dict[str, int]) -> dict[str, int]:
    """Counts by stage as the gate names its stages now (`Stage(old)` reads an old name as
    the stage it became), so the counts hold whichever names the ledger wrote."""
    from callgate.calls import Stage

    out: dict[str, int] = {}
    for key, n in counts.items():
        try:
            name = Stage(key).value
        except ValueError:  # not a stage: unknown_tool, program, unknown, pending
            name = key
        out[name] = out.get(name, 0) + n
    return out


def test_the_product_interval_resamples_tasks(planted: Ledger) -> None:
    """With two tasks the product's bootstrap interval spans the two tasks' products (0 and
    2/7): resampling whole tasks, not calls."""
    row = next(r for r in funnel(read_runs(planted), reps=400).rows if r.surface == "all")
    assert row.product.low == pytest.approx(0.0)
    assert row.product.high == pytest.approx(2 / 7)


def test_the_funnel_writes_a_png_and_json(planted: Ledger, tmp_path: Path) -> None:
    """The chart is a PNG file; the JSON names the unit and carries every row."""
    f = funnel(read_runs(planted), reps=200)
    path = funnel_png(f, tmp_path / "f.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = f.as_dict()
    assert "proposed call" in data["unit"]
    assert len(data["rows"]) == len(f.rows)


def test_a_run_without_a_verdict_is_left_out_of_d(planted: Ledger) -> None:
    """Dropping the verdict events leaves A, B and C as they were and D unjudged."""
    records = [r for r in planted.audit() if r.kind != "eval.verdict"]
    f = funnel(runs_from_records(records), reps=100)
    row = next(r for r in f.rows if r.surface == "all")
    assert f.unverified == 2
    assert row.reached[0] == 6  # the three ok calls have no verdict: left out entirely
    assert row.reached[3] == 0
    assert math.isnan(row.d.value)


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=8,
)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                ["eval.run", "agent.model", "agent.observations", "agent.started", "eval.verdict"]
            ),
            st.dictionaries(
                st.sampled_from(["calls", "results", "step", "tools", "task", "usage"]),
                _VALUES,
                max_size=4,
            ),
        ),
        max_size=8,
    )
)
def test_reading_runs_survives_any_record_data(events: list[tuple[str, dict]]) -> None:
    """Edited or hostile record data (wrong types anywhere) never makes the reader raise."""
    records = [
        AuditRecord(seq=i, at=0.0, kind=kind, run_id="r", call_id=None, data=data)
        for i, (kind, data) in enumerate(events)
    ]
    try:
        runs = runs_from_records(records)
    except (TypeError, ValueError, AttributeError) as exc:  # pragma: no cover - the failure
        pytest.fail(f"reading raised {exc!r}")
    funnel(runs, reps=100)


def test_stage_intervals_are_clustered_by_task() -> None:
    """Calls cluster within tasks: 10 tasks, 5 whose 10 calls all pass D and 5 whose 10
    calls all fail it. Wilson over the 100 calls would give about [0.40, 0.60]; with tasks
    as the unit the interval is that of 5/10 tasks, near [0.2, 0.8] (the bootstrap of a mean
    of ten 0/1 values: by hand, the 2.5 % and 97.5 % quantiles of Binomial(10, 0.5)/10 are
    0.2 and 0.8)."""
    runs = []
    for t in range(10):
        calls = [
            CallView(call_id=str(i), tool="read_file", arguments="{}", status="ok")
            for i in range(10)
        ]
        runs.append(
            RunView(
                run_id=f"r{t}",
                task=f"t{t}",
                surface="fine",
                tools=("read_file",),
                calls=calls,
                passed=t < 5,
            )
        )
    row = next(r for r in funnel(runs, reps=2000).rows if r.surface == "all")
    assert row.d.value == pytest.approx(0.5)
    assert row.d.low == pytest.approx(0.2, abs=0.05)
    assert row.d.high == pytest.approx(0.8, abs=0.05)


def test_a_stage_no_call_reached_is_not_drawn_as_zero(tmp_path: Path) -> None:
    """Every call names an unknown tool: B, C and D were not reached, so their rates are
    NaN and the text says "not reached"; an empty funnel writes no PNG."""
    run = RunView(run_id="r", task="t", surface="fine", tools=("read_file",), passed=False,
                  calls=[CallView(call_id="1", tool="nope", arguments="{}", status="rejected",
                                  stage="schema")])  # fmt: skip
    f = funnel([run], reps=200)
    row = next(r for r in f.rows if r.surface == "all")
    assert row.a.value == 0.0
    assert math.isnan(row.b.value)
    assert "not reached" in f.text()
    assert funnel_png(f, tmp_path / "f.png") is not None
    empty = funnel([RunView(run_id="e", task="t", surface="fine", passed=False)], reps=200)
    assert funnel_png(empty, tmp_path / "empty.png") is None
    assert not (tmp_path / "empty.png").exists()


def test_a_call_rejected_at_the_validate_stage_fails_b_under_either_name() -> None:
    """Ledgers name the argument check `schema`/`semantic` (older) or `validate` (the stage's
    name now): a rejection under any of them fails B, never C."""
    for stage in ("schema", "semantic", "validate"):
        call = CallView(call_id="1", tool="read_file", arguments="{}", status="rejected",
                        stage=stage)  # fmt: skip
        assert call_stage(call, ["read_file"]) == "B", stage
    for stage in ("authorize", "approve", "policy", "approval", "execute"):
        call = CallView(call_id="1", tool="read_file", arguments="{}", status="rejected",
                        stage=stage)  # fmt: skip
        assert call_stage(call, ["read_file"]) == "C", stage


def test_a_rate_every_task_passes_has_an_interval_over_tasks_not_a_point() -> None:
    """Ten tasks whose 100 calls all pass A: the bootstrap over tasks collapses to [1, 1], so
    the interval is Wilson's over the ten tasks, [0.72, 1] (what ten passing units can show);
    with a failure somewhere the bootstrap's own interval stands."""
    runs = [
        RunView(run_id=f"r{t}", task=f"t{t}", surface="fine", tools=("read_file",), passed=True,
                calls=[CallView(call_id=str(i), tool="read_file", arguments="{}", status="ok")
                       for i in range(10)])
        for t in range(10)
    ]  # fmt: skip
    row = next(r for r in funnel(runs, reps=500).rows if r.surface == "all")
    assert row.a.value == 1.0
    assert row.a.low == pytest.approx(0.722, abs=0.001)
    assert row.a.high == 1.0
    assert row.d.low == pytest.approx(0.722, abs=0.001)
    runs[0].calls[0] = CallView(call_id="0", tool="nope", arguments="{}", status="rejected")
    row = next(r for r in funnel(runs, reps=500).rows if r.surface == "all")
    assert row.a.value == pytest.approx(0.99)
    assert row.a.low > 0.96


def test_the_table_prints_a_tool_name_whole_or_marks_the_cut() -> None:
    """A wrong tool named `edit_repository` (15 characters) is printed whole, not as
    `edit_repositor`; a 60-character invented name is cut at 32 and ends with "…"."""
    long_name = "x" * 60
    runs = [
        RunView(run_id="r", task="t", surface="fine", tools=("read_file",), passed=False,
                calls=[CallView(call_id=str(i), tool=name, arguments="{}", status="rejected")
                       for i, name in enumerate(("edit_repository", long_name))])
    ]  # fmt: skip
    text = funnel(runs, reps=100).text()
    assert " edit_repository " in text
    assert "x" * 31 + "…" in text
    assert "x" * 33 not in text
    head, _, *rows = text.splitlines()
    end = head.index("calls") + len("calls") - 1  # the calls column stays aligned
    assert all(row[end].isdigit() and row[end + 1] == " " for row in rows), text

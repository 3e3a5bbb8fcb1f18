"""The lab: the pre-registered analysis on runs with planted effects and with none, and the
whole path (policies, runner, ledger, report, CLI) on a few real tasks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from callgate.cli.eval import app as eval_app
from callgate.cli.lab import app as lab_app
from callgate.errors import DefinitionError
from callgate.eval.analysis import Prereg, analyse
from callgate.eval.lab import run_lab
from callgate.eval.policies import policy_named
from callgate.eval.record import CallView, RunView, read_runs
from callgate.eval.repo_tasks import load_tasks
from callgate.eval.stats import interaction
from callgate.eval.tokens import RegexTokenizer
from callgate.ledger import MemoryLedger

EXAMPLE = Path(__file__).parents[2] / "examples" / "lab" / "prereg.toml"
PREREG = Prereg.from_mapping(
    {
        "surfaces": ["coarse", "fine"],
        "analysis": {"bootstrap_reps": 2000, "seed": 1, "min_effect": 0.3},
        "hypotheses": {
            "H1": {"better": "coarse", "than": "fine"},
            "H2": {"highest": "coarse"},
            "H3": {"best": "fine"},
            "H4": {"cheapest_single": "fine"},
        },
    }
)
FINE_DEFS = [{"name": n, "description": "typed tool with a long description " * 3}
             for n in ("read_file", "search_files", "write_file", "run_tests")]  # fmt: skip
PLANTED = {
    ("coarse", "single"): 0.3,
    ("coarse", "composition"): 0.9,
    ("fine", "single"): 0.9,
    ("fine", "composition"): 0.3,
}
COARSE_CALL = (
    '{"op": "please read the file", "args": {"path": "a.py", "why": "to see what it does"}}'
)
COARSE_DEFS = [{"name": "do", "description": "one operation"}]


def _simulated(rng: np.random.Generator, planted: bool, n: int = 40) -> list[RunView]:
    """Paired runs of n tasks on coarse and fine; with ``planted``, coarse wins composition
    tasks and loses single ones, and fine recovers from errors more often."""
    runs = []
    for i in range(n):
        complexity = "single" if i < n // 2 else "composition"
        for surface in ("coarse", "fine"):
            p = PLANTED[surface, complexity] if planted else 0.6
            failed = rng.random() < 0.4
            if failed and planted:
                p = 0.9 if surface == "fine" else 0.2
            if surface == "fine":
                calls = [CallView(call_id="1", tool="read_file", arguments='{"path": "a.py"}',
                                  status="ok")]  # fmt: skip
            else:
                calls = [CallView(call_id="1", tool="do", status="ok", arguments=COARSE_CALL)]
            if failed:
                calls.append(CallView(call_id="2", tool=calls[0].tool, arguments="{",
                                      status="rejected", stage="parse"))  # fmt: skip
            runs.append(
                RunView(
                    run_id=f"{i}/{surface}",
                    task=f"t{i}",
                    surface=surface,
                    complexity=complexity,
                    kind="k",
                    tool_definitions=FINE_DEFS if surface == "fine" else COARSE_DEFS,
                    calls=calls,
                    model_turns=len(calls) + 1,
                    result_texts=["file text"],
                    passed=bool(rng.random() < p),
                )
            )
    return runs


def test_the_analysis_finds_the_planted_effects() -> None:
    """H1 (the interaction) and H3 (recovery) are supported after Holm; H2 points the planted
    way; H4 is rejected the other way (fine's schema makes it dearer on single tasks)."""
    a = analyse(_simulated(np.random.default_rng(4), planted=True), PREREG, RegexTokenizer())
    h = {x.name: x for x in a.hypotheses}
    assert h["H1"].supported
    assert h["H1"].estimate is not None
    assert h["H1"].estimate.value > 0.8
    assert h["H3"].supported
    assert h["H2"].agrees
    assert not h["H4"].supported
    assert not h["H4"].agrees
    # fine is dearer, significantly: said as such, not as "not supported"
    assert h["H4"].verdict == "opposite direction, significant"
    assert h["H4"].estimate is not None
    assert h["H4"].estimate.value > 0
    for x in a.hypotheses:
        assert x.p_holm >= x.p
        assert x.estimate is not None
        assert x.estimate.p == x.p
    assert h["H3"].comparison == "fine − coarse"
    assert a.deviations == []


def test_power_is_a_priori_from_the_registered_minimum_effect() -> None:
    """min_effect 0.3 over 40 pairs, sd at its bound sqrt(1 − 0.09) = 0.954: by the normal
    approximation Φ(0.3/0.954·√40 − 1.96) = Φ(0.029) ≈ 0.51 (the t-test a little less); 80 %
    power needs about ((1.96 + 0.84)·0.954/0.3)² ≈ 79.3 pairs, so 80 or 81."""
    a = analyse(_simulated(np.random.default_rng(4), planted=True), PREREG, RegexTokenizer())
    prior = a.power["coarse-fine"]["a_priori"]
    assert prior["min_effect"] == 0.3
    assert prior["power"] == pytest.approx(0.50, abs=0.03)
    assert prior["pairs_for_80pct"] in (80, 81, 82)
    bare = Prereg.from_mapping({"surfaces": ["coarse", "fine"]})
    b = analyse(_simulated(np.random.default_rng(4), planted=True), bare, RegexTokenizer())
    assert b.power["coarse-fine"]["a_priori"] is None
    assert any("no min_effect" in d for d in b.deviations)


def test_without_an_effect_h1_is_not_supported() -> None:
    """Equal success everywhere: the interaction's p-value is above 0.05 and H1, H3 fail."""
    a = analyse(_simulated(np.random.default_rng(8), planted=False), PREREG, RegexTokenizer())
    h = {x.name: x for x in a.hypotheses}
    assert h["H1"].p > 0.05
    assert not h["H1"].supported
    assert not h["H3"].supported


def test_power_is_reported_for_each_pair() -> None:
    """The coarse-fine pair has an effect, a standard deviation, a power and the pairs 80%
    power would need."""
    a = analyse(_simulated(np.random.default_rng(4), planted=True), PREREG, RegexTokenizer())
    pw = a.power["coarse-fine"]
    assert pw["pairs"] == 40
    assert pw["sd"] > 0
    assert 0 <= pw["a_priori"]["power"] <= 1


def test_the_example_preregistration_reads_and_a_bad_one_is_named(tmp_path: Path) -> None:
    """examples/lab/prereg.toml registers three surfaces and code-vs-fine for H1; a typo'd
    section is refused naming it."""
    p = Prereg.from_toml(EXAMPLE)
    assert p.surfaces == ("coarse", "fine", "code")
    assert p.h1 == ("code", "fine")
    bad = tmp_path / "bad.toml"
    bad.write_text("[hypothesis]\nx = 1\n")
    with pytest.raises(DefinitionError, match="hypothesis"):
        Prereg.from_toml(bad)


def test_the_oracle_passes_every_task_on_both_surfaces() -> None:
    """The reference solution played through fine and coarse passes every verifier, and the
    funnel of those runs is all ones."""
    from callgate.eval.funnel import funnel

    ledger = MemoryLedger()
    oracle = policy_named("oracle-fast")
    runs = run_lab(load_tasks("repo:3"), ["fine", "coarse"], oracle.model, ledger)
    assert [r.passed for r in runs] == [True] * 6
    row = next(r for r in funnel(read_runs(ledger), reps=100).rows if r.surface == "all")
    assert (row.a.value, row.b.value, row.c.value, row.d.value) == (1.0, 1.0, 1.0, 1.0)


def test_the_cli_runs_the_lab_and_the_funnel_reads_it(tmp_path: Path) -> None:
    """callgate lab run records to a ledger and writes the report, plots and JSON, naming
    each deviation from the pre-registration; callgate eval funnel reads that ledger and
    writes its own PNG and JSON."""
    db, out = tmp_path / "lab.db", tmp_path / "report"
    result = CliRunner().invoke(
        lab_app,
        ["run", "--model", "policy:clumsy", "--prereg", str(EXAMPLE), "--surfaces",
         "coarse,fine", "--tasks", "repo:2", "--db", str(db), "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "deviation: surface(s) code were registered but not run" in result.output
    assert "deviation: the task set was 'repo:2'; 'repo' was registered" in result.output
    report = (out / "report.md").read_text()
    assert "## Deviations from the pre-registration" in report
    assert "Caveats" in report
    for png in ("funnel.png", "success.png", "eta.png", "tokens.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    analysis = json.loads((out / "analysis.json").read_text())
    assert analysis["runs"] == 4
    f = CliRunner().invoke(
        eval_app,
        ["funnel", "--db", str(db), "--tasks", "repo:2", "--json", str(tmp_path / "f.json"),
         "--png", str(tmp_path / "f.png")],
    )  # fmt: skip
    assert f.exit_code == 0, f.output
    assert "B|A" in f.output
    assert "\\n" not in f.output  # the table is printed on its lines, not as one escaped line
    assert len(f.output.splitlines()) > 3
    assert "expected calls" in f.output
    data = json.loads((tmp_path / "f.json").read_text())
    assert {r["surface"] for r in data["rows"]} == {"coarse", "fine", "all"}


def test_the_cli_refuses_an_unknown_surface_and_an_empty_ledger(tmp_path: Path) -> None:
    """A surface that does not exist is exit 2 naming the known ones; a ledger with no
    evaluation runs is exit 2 saying where runs come from."""
    r = CliRunner().invoke(
        lab_app,
        ["run", "--model", "policy:oracle", "--prereg", str(EXAMPLE), "--surfaces", "medium",
         "--tasks", "repo:1", "--db", str(tmp_path / "x.db"), "--out", str(tmp_path / "o")],
    )  # fmt: skip
    assert r.exit_code == 2
    assert "known surfaces" in r.output
    from callgate.ledger import SQLiteLedger

    SQLiteLedger(tmp_path / "empty.db").close()
    f = CliRunner().invoke(eval_app, ["funnel", "--db", str(tmp_path / "empty.db")])
    assert f.exit_code == 2
    assert "callgate lab run" in f.output


def test_the_reference_solution_matches_the_expected_calls(tmp_path: Path) -> None:
    """The oracle policy (the tasks' reference solutions) makes exactly the expected calls
    on the coarse and fine surfaces, so the BFCL-style check scores it exact."""
    db, out = tmp_path / "lab.db", tmp_path / "report"
    result = CliRunner().invoke(
        lab_app,
        ["run", "--model", "policy:oracle", "--prereg", str(EXAMPLE), "--surfaces",
         "coarse,fine", "--tasks", "repo:3", "--db", str(db), "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    f = CliRunner().invoke(eval_app, ["funnel", "--db", str(db), "--tasks", "repo:3"])
    assert f.exit_code == 0, f.output
    assert "coarse: 3/3 runs exact, recall 1.00, precision 1.00" in f.output
    assert "fine: 3/3 runs exact, recall 1.00, precision 1.00" in f.output


def test_a_bad_tokenizer_is_refused_before_the_lab_runs(tmp_path: Path) -> None:
    """``lab run --tokenizer bogus`` exits 2 naming the choices, before running anything
    or creating the ledger."""
    db = tmp_path / "lab.db"
    result = CliRunner().invoke(
        lab_app,
        ["run", "--model", "policy:oracle", "--prereg", str(EXAMPLE), "--surfaces", "fine",
         "--tasks", "repo:1", "--db", str(db), "--out", str(tmp_path / "r"),
         "--tokenizer", "bogus"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "approx" in result.output
    assert not db.exists()


def _lab(tmp_path: Path, db: Path, lab: str, model: str, tasks: str = "repo:2") -> None:
    result = CliRunner().invoke(
        lab_app,
        ["run", "--model", model, "--prereg", str(EXAMPLE), "--surfaces", "coarse,fine",
         "--tasks", tasks, "--db", str(db), "--out", str(tmp_path / f"out-{lab}"),
         "--lab", lab],
    )  # fmt: skip
    assert result.exit_code == 0, result.output


def test_analyse_keeps_each_labs_deviations_and_model_and_never_pools(tmp_path: Path) -> None:
    """Two labs with two policies in one ledger: analyse without --lab refuses naming both;
    --lab A reports A's own deviations (stored with it by lab run) and names its model and
    policy; two --lab without --pool refuse; with --pool the report says the labs were
    pooled and ran different models."""
    db = tmp_path / "lab.db"
    _lab(tmp_path, db, "A", "policy:oracle-fast")
    _lab(tmp_path, db, "B", "policy:clumsy")
    args = ["analyse", "--prereg", str(EXAMPLE), "--db", str(db)]
    both = CliRunner().invoke(lab_app, [*args, "--out", str(tmp_path / "r0")])
    assert both.exit_code == 2
    assert "holds 2 labs" in both.output
    assert "policy:clumsy" in both.output
    one = CliRunner().invoke(lab_app, [*args, "--lab", "A", "--out", str(tmp_path / "r1")])
    assert one.exit_code == 0, one.output
    assert "deviation: the task set was 'repo:2'; 'repo' was registered" in one.output
    report = (tmp_path / "r1" / "report.md").read_text()
    assert "Lab A: model policy:oracle-fast" in report
    assert "decoding scripted" in report
    assert "policy:clumsy" not in report
    assert json.loads((tmp_path / "r1" / "analysis.json").read_text())["runs"] == 4
    again = CliRunner().invoke(
        lab_app,
        ["run", "--model", "policy:oracle", "--prereg", str(EXAMPLE), "--surfaces", "fine",
         "--tasks", "repo:1", "--db", str(db), "--out", str(tmp_path / "o"), "--lab", "A"],
    )  # fmt: skip
    assert again.exit_code == 2
    assert "already holds a lab 'A'" in again.output
    two = CliRunner().invoke(
        lab_app, [*args, "--lab", "A", "--lab", "B", "--out", str(tmp_path / "r2")]
    )
    assert two.exit_code == 2
    assert "--pool" in two.output
    pooled = CliRunner().invoke(
        lab_app, [*args, "--lab", "A", "--lab", "B", "--pool", "--out", str(tmp_path / "r3")]
    )
    assert pooled.exit_code == 0, pooled.output
    text = (tmp_path / "r3" / "report.md").read_text()
    assert "2 labs pooled on request" in text
    assert "ran different models" in text
    assert "ran more than once" in text


def test_pooled_runs_count_tasks_in_the_success_table_as_in_the_pairing() -> None:
    """A task run twice on a surface (labs pooled) counts once, as the mean of its runs, in
    the success table and in the pairing: 4 tasks, each run twice, pass once of the two on
    fine → success 0.5 over n = 4 tasks, not 8 runs."""
    runs = []
    for lab in ("a", "b"):
        for i in range(4):
            for surface in ("coarse", "fine"):
                runs.append(RunView(run_id=f"{lab}/{i}/{surface}", task=f"t{i}", surface=surface,
                                    complexity="single", lab=lab,
                                    passed=surface == "coarse" or lab == "a"))  # fmt: skip
    a = analyse(runs, PREREG, RegexTokenizer())
    assert a.success["fine"]["all"].value == pytest.approx(0.5)
    assert a.success["fine"]["all"].n == 4
    assert a.differences["coarse-fine"].value == pytest.approx(0.5)
    assert a.differences["coarse-fine"].n == 4


def test_h3_counts_a_crashed_program_as_a_failure() -> None:
    """A run_python call that ended ok but whose program exited 1 is a failed call for H3
    (as in the funnel): code's recovery has n = 1, not 0, and no comparison is dropped."""
    crash = CallView(call_id="1", tool="run_python", arguments="{}", status="ok",
                     content='{"exit_code": 1, "stdout": "", "stderr": "Traceback"}')  # fmt: skip
    bad = CallView(call_id="1", tool="read_file", arguments="{", status="rejected", stage="parse")
    runs = [
        RunView(run_id="c", task="t", surface="code", tools=("run_python",), calls=[crash],
                passed=False),
        RunView(run_id="f", task="t", surface="fine", tools=("read_file",), calls=[bad],
                passed=True),
    ]  # fmt: skip
    prereg = Prereg.from_mapping(
        {"surfaces": ["code", "fine"], "hypotheses": {"H3": {"best": "fine"}}}
    )
    a = analyse(runs, prereg, RegexTokenizer())
    assert a.recovery["code"].n == 1
    h3 = next(h for h in a.hypotheses if h.name == "H3")
    assert h3.comparison == "fine − code"
    assert h3.estimate is not None
    assert h3.estimate.value == pytest.approx(1.0)
    assert not any("H3" in d for d in a.deviations)
    # No failure on the other surface: the dropped comparison is a deviation, not a note.
    fine_program = CallView(
        call_id="1", tool="run_python", arguments="{}", status="ok", content='{"exit_code": 0}'
    )
    runs[0] = RunView(
        run_id="c", task="t", surface="code", tools=("run_python",), calls=[fine_program],
        passed=True,
    )  # fmt: skip
    b = analyse(runs, prereg, RegexTokenizer())
    assert any("H3: the comparison of fine with code is dropped" in d for d in b.deviations)


# policy:planted, by its rates (callgate.eval.policies): a single task has 2 operations;
# coarse mistypes each single-task call with p 0.6 and never recovers, so coarse/single
# passes with 0.4² = 0.16; fine/single recovers every slip (1.0); fine forgets the last edit
# of a composition task with p 0.6 (0.4); coarse/composition recovers every slip (1.0).
PLANTED_TRUTH = {
    ("coarse", "single"): 0.16,
    ("fine", "single"): 1.0,
    ("coarse", "composition"): 1.0,
    ("fine", "composition"): 0.4,
}
H1_TRUTH = (1.0 - 0.4) - (0.16 - 1.0)  # (coarse − fine | composition) − (... | single) = 1.44


def test_a_scripted_lab_reproduces_the_planted_effects() -> None:
    """policy:planted through the real lab (runner, gate, verifier, ledger) on ten tasks: H1's
    estimate has the planted sign, is significant after Holm, and its interval covers the
    planted 1.44; each success interval covers its planted rate. (Seven tasks cannot be
    significant: their 35 splits put the exact p at 1/35 or more, 0.057 here.)"""
    ledger = MemoryLedger()
    planted = policy_named("planted")
    tasks = load_tasks("repo:10")
    singles = [t for t in tasks if t.complexity == "single"]
    assert {sum(op.kind != "test" for op in t.solution) for t in singles} == {2}
    run_lab(tasks, ["coarse", "fine"], planted.model, ledger)
    a = analyse(read_runs(ledger), PREREG, RegexTokenizer())
    h1 = next(h for h in a.hypotheses if h.name == "H1")
    assert h1.estimate is not None
    assert h1.estimate.value > 0
    assert h1.estimate.low <= H1_TRUTH <= h1.estimate.high
    assert h1.verdict == "supported"
    for (surface, complexity), truth in PLANTED_TRUTH.items():
        e = a.success[surface][complexity]
        assert e.low <= truth <= e.high, (surface, complexity, e)


def test_the_interaction_interval_covers_the_planted_effect_at_its_level() -> None:
    """300 simulated labs of 20 single and 20 composition tasks, each run passing with the
    planted probability of its cell: the 95 % interval of H1 covers 1.44 in 90-99 % of
    them, and the estimate has the planted sign in all."""
    rng = np.random.default_rng(11)
    covered = positive = 0
    for _ in range(300):
        single = [0] * 20 + [1] * 20
        diffs = []
        for comp in single:
            c = "composition" if comp else "single"
            coarse = rng.random() < PLANTED_TRUTH[("coarse", c)]
            fine = rng.random() < PLANTED_TRUTH[("fine", c)]
            diffs.append(float(coarse) - float(fine))
        est = interaction(diffs, single, reps=1000, seed=rng)
        covered += est.low <= H1_TRUTH <= est.high
        positive += est.value > 0
    assert 0.90 <= covered / 300 <= 0.99
    assert positive == 300


def test_an_empty_lab_draws_nothing_and_says_so(tmp_path: Path) -> None:
    """Runs that proposed no call: no funnel.png and no eta.png are written (no matplotlib
    warning either: warnings are errors here), and the report says why in a sentence."""
    import warnings

    from callgate.eval.funnel import funnel
    from callgate.eval.report import write_report

    runs = [
        RunView(run_id=f"{s}/{i}", task=f"t{i}", surface=s, complexity=c, passed=False)
        for i, c in enumerate(("single", "composition"))
        for s in ("coarse", "fine")
    ]
    a = analyse(runs, PREREG, RegexTokenizer())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = write_report(a, funnel(runs, reps=100), tmp_path)
    assert not (tmp_path / "funnel.png").exists()
    assert not (tmp_path / "eta.png").exists()
    text = path.read_text()
    assert "No call was proposed: the funnel has no rate" in text
    assert "![funnel](funnel.png)" not in text


def test_the_funnel_command_does_not_pool_two_labs_unasked(tmp_path: Path) -> None:
    """Two labs in one ledger: `eval funnel` without --lab exits 2 naming both; with --lab A
    it reads A's runs only."""
    db = tmp_path / "lab.db"
    _lab(tmp_path, db, "A", "policy:oracle-fast", tasks="repo:1")
    _lab(tmp_path, db, "B", "policy:clumsy", tasks="repo:1")
    both = CliRunner().invoke(eval_app, ["funnel", "--db", str(db)])
    assert both.exit_code == 2
    assert "A, B" in both.output
    one = CliRunner().invoke(eval_app, ["funnel", "--db", str(db), "--lab", "A", "--json",
                                        str(tmp_path / "f.json")])  # fmt: skip
    assert one.exit_code == 0, one.output
    assert json.loads((tmp_path / "f.json").read_text())["runs"] == 2


def test_a_local_model_is_named_by_file_hash_decoding_and_parameters(tmp_path: Path) -> None:
    """describe_model reads what a LocalModel holds (path, constrain, max_tokens, temperature,
    seed): the lab record names the GGUF file, its SHA-256 (of the bytes written here: the
    digest of b"GGUF" + 60 zero bytes, computed by hashlib), the decoding mode and the
    parameters."""
    import hashlib

    from callgate.eval.lab import describe_model
    from callgate.eval.record import LabView
    from callgate.llms import ScriptedModel

    gguf = tmp_path / "tiny-q4.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    model = ScriptedModel([])
    model.name = "tiny-q4+llguidance"
    for key, value in {"path": gguf, "constrain": "llguidance", "max_tokens": 256,
                       "temperature": 0.0, "seed": 7}.items():  # fmt: skip
        setattr(model, key, value)
    info = describe_model(model, "local:tiny-q4.gguf+llguidance")
    assert info["file"] == "tiny-q4.gguf"
    assert info["sha256"] == hashlib.sha256(b"GGUF" + bytes(60)).hexdigest()
    assert info["decoding"] == "llguidance"
    assert info["parameters"] == {"max_tokens": 256, "temperature": 0.0, "seed": 7}
    line = LabView(lab="x", model=info).model_line()
    assert "file tiny-q4.gguf" in line
    assert "decoding llguidance" in line
    assert "max_tokens=256" in line

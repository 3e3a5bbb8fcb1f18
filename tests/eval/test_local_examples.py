"""examples/local: the task sampler spreads a small run over the tools (no model needed)."""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

from local.tasks import TASKS, spread  # noqa: E402


def test_ten_tasks_cover_the_ten_tools_once() -> None:
    """The fifty tasks are five of each of ten tools, listed tool by tool: ten spread tasks
    name ten different tools (the first ten in order named two)."""
    assert len({t.tool for t in TASKS[:10]}) == 2  # what the old slice gave
    chosen = spread(TASKS, 10)
    assert len(chosen) == 10
    assert len({t.tool for t in chosen}) == 10


def test_any_count_is_balanced_and_never_repeats() -> None:
    """For every n, no tool has two tasks more than another, no task repeats, and n past the
    set gives the whole set."""
    for n in range(0, 60):
        chosen = spread(TASKS, n)
        assert len(chosen) == min(n, len(TASKS))
        assert len({t.id for t in chosen}) == len(chosen)
        counts = Counter(t.tool for t in chosen)
        if counts:
            assert max(counts.values()) - min(counts.values()) <= 1
            assert len(counts) == min(n, 10)


def test_the_demo_explains_max_steps_labels_the_warm_up_and_ends_with_a_summary(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/local/demo.py with a scripted stand-in for the GGUF model (the real one
    needs llama.cpp): "max_steps" is explained in full once, then in a few words; the
    warm-up is announced before the first request of each phase runs (not after the wait);
    a table closes the demo with one row per phase: 2 requests, 2 calls, 1 ran ok
    (get_order), 1 rejected (an unknown tool), 1 with the request's own tool."""
    from local import demo

    from callgate.llms import ScriptedModel, calls

    gguf = tmp_path / "stand-in.gguf"
    gguf.write_bytes(b"GGUF")

    def stand_in(path: object, *, constrain: str, **_: object) -> ScriptedModel:
        model = ScriptedModel(
            [calls(("get_order", {"order_id": "o-17"})), calls(("fly_to_moon", {}))]
        )
        model.name = "stand-in" if constrain == "none" else f"stand-in+{constrain}"
        model.path = gguf  # type: ignore[attr-defined]
        model.load_seconds = 0.0  # type: ignore[attr-defined]
        model.temperature = 0.0  # type: ignore[attr-defined]
        return model

    monkeypatch.setattr(demo, "LocalModel", stand_in)
    monkeypatch.setattr(demo, "console", demo.Console(highlight=False, width=200))
    assert demo.main(["--requests", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("run ended: max_steps (the demo gives the model one turn per request") == 1
    assert out.count("run ended: max_steps (one turn per request)") == 3
    for phase in out.split("loading the model")[1:]:
        assert phase.count("(warm-up:") == 1
        assert phase.index("(warm-up:") < phase.index("proposes")
    assert "What the gate did with stand-in's proposals" in out
    rows = {
        cells[0]: cells[1:6]
        for line in out.splitlines()
        if "│" in line
        for cells in [[c.strip() for c in line.split("│") if c.strip()]]
        if cells and cells[0] in ("free", "llguidance")
    }
    assert rows == {"free": ["2", "2", "1", "1", "1"], "llguidance": ["2", "2", "1", "1", "1"]}


def test_the_build_shows_one_short_line_per_step_and_keeps_the_whole_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/local/build_progress.py over a stand-in for pip's verbose build (a compiler
    command of 1,500 characters per ninja step): the terminal gets pip's steps and
    "[2/3]  66% …s ggml-cpu.cpp" lines, never a compiler command; the log file gets every
    line; a failing build exits with its code and prints the log's last lines."""
    from local import build_progress

    flags = " ".join(f"-DFLAG_{i}=1" for i in range(150))
    script = tmp_path / "fake_pip.py"
    script.write_text(
        "import sys\n"
        "print('Collecting llama-cpp-python>=0.3')\n"
        "print('  Running command Building wheel')\n"
        f"for i, f in enumerate(['ggml.c', 'ggml-cpu.cpp'], 1):\n"
        f"    print(f'  [{{i}}/3] /usr/bin/g++ {flags} -o x.o -c /tmp/src/{{f}}')\n"
        "print('  [3/3] : && /usr/bin/g++ -shared -o bin/libllama.so a.o b.o')\n"
        "print('  compiler said: fatal error here')\n"
        "sys.exit(int(sys.argv[1]))\n"
    )
    log = tmp_path / "build.log"
    ok = build_progress.main(["--log", str(log), "--", sys.executable, str(script), "0"])
    out = capsys.readouterr().out
    assert ok == 0
    assert "Collecting llama-cpp-python>=0.3" in out
    assert re.search(r"\[2/3\]\s+66% \d+m\d\ds ggml-cpu\.cpp", out)
    assert re.search(r"\[3/3\]\s+100% \d+m\d\ds libllama\.so", out)
    assert "-DFLAG_1" not in out
    assert max(len(line) for line in out.splitlines()) < 130
    assert log.read_text().count("-DFLAG_1=1") == 2
    failed = build_progress.main(["--log", str(log), "--", sys.executable, str(script), "3"])
    out = capsys.readouterr().out
    assert failed == 3
    assert "the build failed (exit 3)" in out
    assert "compiler said: fatal error here" in out.split("the build failed")[1]
    assert str(log) in out


def test_evaluate_announces_each_mode_and_runs_ten_tools_for_ten_tasks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/local/evaluate.py --tasks 10 with a scripted stand-in for the model: before
    the first (slowest) task it names the model, the ten tasks over ten tools and the
    decoding, then prints one line per task, each of a different tool's task."""
    from local import evaluate

    from callgate.llms import ScriptedModel, answer

    def stand_in(path: object, *, constrain: str, **_: object) -> ScriptedModel:
        model = ScriptedModel([answer("I cannot help.")] * 20)
        model.name = "stand-in"
        model.decodes = []  # type: ignore[attr-defined]
        return model

    monkeypatch.setattr(evaluate, "LocalModel", stand_in)
    db = tmp_path / "eval.db"
    assert evaluate.main(["--db", str(db), "--tasks", "10", "--modes", "none"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("stand-in: 10 tasks over 10 tools, decoding none; the first")
    tasks = [line.split()[1] for line in lines[1:11]]
    assert len({t.rsplit("-", 1)[0] for t in tasks}) == 10
    assert lines[11].startswith("stand-in: 0/10 tasks succeeded")

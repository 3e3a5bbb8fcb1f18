"""The surfaces through a real gate: the same operations and grants, paths kept inside the
workspace at the validate stage, pytest commands limited to pytest."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callgate import Gate, ToolCall
from callgate.errors import DefinitionError
from callgate.eval.repo_tasks import repo_tasks
from callgate.eval.surfaces import (
    authority_for,
    coarse_operation,
    get_surface,
    pytest_args,
    register_surface,
)
from callgate.eval.tasks import materialize
from callgate.ledger import MemoryLedger

TASK = repo_tasks()[0]


def _submit(surface: str, root: Path, *calls: tuple[str, dict]) -> list:
    gate = Gate(get_surface(surface).registry, ledger=MemoryLedger())
    run = gate.run(authority=authority_for(root))
    return run.submit(
        [ToolCall(id=f"c{i}", name=n, arguments=json.dumps(a)) for i, (n, a) in enumerate(calls)]
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The first task's repository."""
    return materialize(TASK, tmp_path / "repo")


def test_fine_tools_read_search_and_write_the_workspace(repo: Path) -> None:
    """read_file returns the file, search_files finds the line, write_file replaces it."""
    read, found, wrote = _submit(
        "fine",
        repo,
        ("read_file", {"path": "calc.py"}),
        ("search_files", {"pattern": "def add"}),
        ("write_file", {"path": "notes/x.txt", "content": "hi"}),
    )
    assert read.status == "ok"
    assert "def add(a, b)" in read.content
    assert "calc.py:" in found.content
    assert wrote.status == "ok"
    assert (repo / "notes" / "x.txt").read_text() == "hi"


def test_a_path_out_of_the_workspace_is_rejected_at_the_semantic_stage(repo: Path) -> None:
    """'../x' and '/etc/passwd' are refused before anything runs, naming the argument."""
    up, absolute = _submit(
        "fine",
        repo,
        ("write_file", {"path": "../x", "content": "no"}),
        ("read_file", {"path": "/etc/passwd"}),
    )
    assert (up.status, up.stage) == ("rejected", "validate")
    assert "leaves the repository" in up.content
    assert (absolute.status, absolute.stage) == ("rejected", "validate")
    assert not (repo.parent / "x").exists()


def test_a_missing_file_is_an_execution_error_that_says_what_to_do(repo: Path) -> None:
    """Reading an absent file ends error (not unknown), pointing to search_files."""
    (obs,) = _submit("fine", repo, ("read_file", {"path": "nope.py"}))
    assert obs.status == "error"
    assert "search_files" in obs.content


def test_run_tests_runs_pytest_in_the_workspace(repo: Path) -> None:
    """The generated repository's failing test shows as exit code 1 with pytest's output."""
    (obs,) = _submit("fine", repo, ("run_tests", {"command": "pytest -q tests/test_calc.py"}))
    result = json.loads(obs.content)
    assert result["exit_code"] == 1
    assert "test_add" in result["stdout"]


def test_the_coarse_tool_maps_free_text_operations(repo: Path) -> None:
    """'Read File' reads; 'frobnicate' is rejected at the validate stage listing the ops."""
    ok, bad, missing = _submit(
        "coarse",
        repo,
        ("do", {"op": "Read File", "args": {"path": "calc.py"}}),
        ("do", {"op": "frobnicate", "args": {}}),
        ("do", {"op": "write", "args": {"path": "a.py"}}),
    )
    assert ok.status == "ok"
    assert "def add" in ok.content
    assert (bad.stage, "read, search, write or test" in bad.content) == ("validate", True)
    assert missing.stage == "validate"
    assert "args.content" in missing.content


def test_tests_the_model_wrote_run_inside_the_sandbox(repo: Path, tmp_path: Path) -> None:
    """run_tests of a test file that writes to a host path runs it confined: it ran (exit 0)
    and the host path was never created."""
    from callgate.eval.confine import confinement

    reason = confinement()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI must run model-written tests confined: {reason}")
        pytest.skip(f"the sandbox cannot run here: {reason}")
    marker = tmp_path / "escaped.txt"
    (repo / "tests" / "test_escape.py").write_text(
        f"import pathlib\n\n\ndef test_escape():\n"
        f"    pathlib.Path({str(marker)!r}).parent.mkdir(parents=True, exist_ok=True)\n"
        f"    pathlib.Path({str(marker)!r}).write_text('x')\n"
    )
    (obs,) = _submit("fine", repo, ("run_tests", {"command": "pytest tests/test_escape.py"}))
    assert json.loads(obs.content)["exit_code"] == 0, obs.content
    assert not marker.exists()


def test_coarse_operation_names() -> None:
    """Synonyms map to the four operations; unknown names map to None."""
    assert coarse_operation("  GREP ") == "search"
    assert coarse_operation("run-tests") == "test"
    assert coarse_operation("delete") is None


def test_pytest_args_refuse_anything_but_pytest() -> None:
    """Another program, a plugin flag and a path out of the repository are refused by name."""
    assert pytest_args("python -m pytest -q tests/test_a.py::test_x") == [
        "-q",
        "tests/test_a.py::test_x",
    ]
    with pytest.raises(ValueError, match="only pytest"):
        pytest_args("rm -rf /")
    with pytest.raises(ValueError, match="not allowed"):
        pytest_args("pytest -p evil")
    with pytest.raises(ValueError, match="leaves"):
        pytest_args("pytest ../outside")


@given(st.text(max_size=60))
def test_pytest_args_only_ever_pass_allowed_flags_and_relative_paths(command: str) -> None:
    """Whatever command text the model sends, accepted arguments are known flags or paths
    inside the repository."""
    try:
        args = pytest_args(command)
    except ValueError:
        return
    for arg in args:
        if arg.startswith("-"):
            assert arg in {"-q", "-x", "-v", "--tb=short", "--tb=line", "--tb=no", "-rA"}
        else:
            assert not arg.startswith("/")
            assert ".." not in arg.split("::")[0].split("/")


def _sandbox_missing() -> str | None:
    from callgate.sandbox import unavailable_reason

    reason = unavailable_reason()
    if reason is not None and os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI must run the code surface: {reason}")
    return reason


def test_the_code_surface_shows_one_tool_and_its_program_edits_the_workspace(
    repo: Path,
) -> None:
    """The model is shown run_python alone; a program calling tools.read_file and
    tools.write_file through the bridge changes the repository (real bubblewrap)."""
    reason = _sandbox_missing()
    if reason is not None:
        pytest.skip(f"the sandbox cannot run here: {reason}")
    surface = get_surface("code")
    assert [s.name for s in surface.registry] == ["run_python"]
    program = (
        "import tools\n"
        "text = tools.read_file(path='calc.py')\n"
        "tools.write_file(path='calc.py', content=text.replace('a - b', 'a + b', 1))\n"
        "print('done')\n"
    )
    (obs,) = _submit("code", repo, ("run_python", {"code": program}))
    result = json.loads(obs.content)
    assert obs.status == "ok", obs.content
    assert (result["exit_code"], result["tool_calls"]) == (0, 2)
    assert "return a + b" in (repo / "calc.py").read_text()


def test_hidden_tools_are_not_suggested_to_the_model() -> None:
    """On the code surface an unknown tool name is not answered with a hidden fine tool."""
    from callgate.eval.surfaces import ShownRegistry, fine_registry

    registry = ShownRegistry(list(fine_registry()), shown=["read_file"])
    assert [s.name for s in registry] == ["read_file"]
    assert registry.get("write_file") is not None
    assert "write_file" not in registry.closest("write_fil")


def test_an_unknown_surface_lists_the_known_ones() -> None:
    """Asking for a surface that does not exist names coarse, fine and code."""
    with pytest.raises(DefinitionError, match="known surfaces: coarse, code, fine"):
        get_surface("medium")


def test_register_surface_checks_the_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A surface name with spaces or capitals is refused; a good one is found afterwards."""
    from callgate.eval import surfaces

    monkeypatch.setattr(surfaces, "SURFACES", dict(surfaces.SURFACES))
    with pytest.raises(DefinitionError, match="lower-case"):
        register_surface("My Surface", surfaces.SURFACES["fine"])
    register_surface("fine2", surfaces.SURFACES["fine"])
    assert get_surface("fine2").name == "fine"

"""The shipped task set and the task format: size, labels, verifiers that fail before the
reference solution and pass after it, hidden tests that tampering cannot pass."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callgate.errors import DefinitionError
from callgate.eval.repo_tasks import load_tasks, repo_tasks
from callgate.eval.tasks import Operation, Task, materialize, safe_relative, verify

TASKS = repo_tasks()
ONE_PER_KIND = {t.kind: t for t in reversed(TASKS)}  # the first task of each kind


def _apply(task: Task, root: Path) -> None:
    for op in task.solution:
        if op.kind == "write":
            target = root / safe_relative(op.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(op.content, encoding="utf-8")


def test_the_shipped_set_has_at_least_fifty_tasks_of_both_labels() -> None:
    """56 tasks with unique ids over seven kinds, 28 single and 28 composition."""
    assert len(TASKS) >= 50
    assert len({t.id for t in TASKS}) == len(TASKS)
    labels = Counter(t.complexity for t in TASKS)
    assert labels == {"single": 28, "composition": 28}
    assert len({t.kind for t in TASKS}) == 7


def test_labels_follow_the_operation_count() -> None:
    """Single tasks need exactly one edit or search; composition tasks more than three."""
    for t in TASKS:
        n = sum(1 for op in t.solution if op.kind in ("write", "search"))
        assert (n == 1) if t.complexity == "single" else (n > 3), t.id


def test_a_wrong_label_is_refused_where_the_task_is_defined() -> None:
    """A task labelled composition with two edits fails at definition, naming the count."""
    with pytest.raises(DefinitionError, match="composition but its solution has 2"):
        Task(
            id="t",
            kind="k",
            prompt="p",
            files={"a.py": ""},
            hidden_tests={},
            solution=(Operation(kind="write", path="a.py"), Operation(kind="write", path="b")),
            complexity="composition",
        )


def test_a_task_file_outside_the_repository_is_refused() -> None:
    """A file path with '..' in a task definition is a definition error naming the file."""
    with pytest.raises(DefinitionError, match=r"\.\./x\.py"):
        Task(
            id="t",
            kind="k",
            prompt="p",
            files={"../x.py": ""},
            hidden_tests={},
            solution=(Operation(kind="write", path="a.py"),),
            complexity="single",
        )


@pytest.mark.parametrize("kind", sorted(ONE_PER_KIND))
def test_each_kind_fails_before_and_passes_after_its_reference_solution(
    kind: str, tmp_path: Path
) -> None:
    """The verifier (hidden tests + pytest in a subprocess) fails on the generated repository
    and passes once the reference solution's writes are applied."""
    task = ONE_PER_KIND[kind]
    root = materialize(task, tmp_path / "repo")
    before = verify(task, root)
    assert not before.passed, before.output
    _apply(task, root)
    after = verify(task, root)
    assert after.passed, after.output


def test_rewriting_the_visible_tests_does_not_pass_the_verifier(tmp_path: Path) -> None:
    """A run that replaces the repository's tests with a passing one still fails: the hidden
    copy is written over it before pytest runs."""
    task = ONE_PER_KIND["fix_bug"]
    root = materialize(task, tmp_path / "repo")
    (root / "tests" / "test_calc.py").write_text("def test_ok():\n    assert True\n")
    assert not verify(task, root).passed


def test_materialize_refuses_a_directory_that_is_not_empty(tmp_path: Path) -> None:
    """Generating a repository over existing files is refused (it would mix two tasks)."""
    (tmp_path / "x").write_text("")
    with pytest.raises(FileExistsError, match="not empty"):
        materialize(TASKS[0], tmp_path)


def test_tasks_round_trip_through_json(tmp_path: Path) -> None:
    """to_json then a JSON task file read by load_tasks gives equal tasks."""
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([t.to_json() for t in TASKS[:5]]))
    assert load_tasks(str(path)) == TASKS[:5]


def test_load_tasks_names_what_is_wrong(tmp_path: Path) -> None:
    """A missing field, a bad repo:N and an unreadable file each name the problem."""
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([{"id": "x", "prompt": "p"}]))
    with pytest.raises(DefinitionError, match="'complexity' is missing"):
        load_tasks(str(path))
    with pytest.raises(DefinitionError, match="repo:N"):
        load_tasks("repo:zero")
    with pytest.raises(DefinitionError, match="cannot read"):
        load_tasks(str(tmp_path / "absent.json"))


def test_repo_n_spreads_over_the_kinds() -> None:
    """repo:7 holds one task of each of the seven kinds."""
    assert len({t.kind for t in load_tasks("repo:7")}) == 7


@given(st.text(max_size=40))
def test_safe_relative_never_leaves_the_root(path: str) -> None:
    """Whatever text a model sends as a path, an accepted one is relative and has no '..'."""
    try:
        rel = safe_relative(path)
    except ValueError:
        return
    assert not rel.is_absolute()
    assert ".." not in rel.parts
    assert rel.parts

"""Conventions of the test suite itself: every test says, in its docstring, what it proves."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).parent

PENDING: dict[str, frozenset[str]] = {}
"""Tests still without a docstring, in files other people were editing when this check was
written (the journal, migration and WAL-bound tests). The list may only shrink: whoever gives
one of them a docstring removes its name here."""


def collected(source: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions pytest collects from a test module's source: module-level ``test*``
    functions and ``test*`` methods of ``Test*`` classes (nested ones are not collected)."""
    tree = ast.parse(source)
    found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            found.append(node)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            found.extend(
                item
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                and item.name.startswith("test")
            )
    return found


def undocumented(root: Path) -> dict[str, list[str]]:
    """Each test file under ``root`` (relative path) with its test functions that have no
    docstring (or only a blank one)."""
    missing: dict[str, list[str]] = {}
    for path in sorted([*root.rglob("test_*.py"), *root.rglob("*_test.py")]):
        names = [
            f.name
            for f in collected(path.read_text(encoding="utf-8"))
            if not (ast.get_docstring(f) or "").strip()
        ]
        if names:
            missing[path.relative_to(root).as_posix()] = names
    return missing


def test_every_test_function_has_a_docstring() -> None:
    """Every collected test function under tests/ has a docstring, bar the PENDING ones."""
    missing = {
        path: [n for n in names if n not in PENDING.get(path, frozenset())]
        for path, names in undocumented(TESTS).items()
    }
    missing = {path: names for path, names in missing.items() if names}
    assert not missing, (
        "test functions without a docstring; give each a one-line docstring saying what "
        f"its assertions prove: {missing}"
    )


def test_the_pending_list_only_shrinks() -> None:
    """Every PENDING name is still an undocumented test: one documented or gone leaves the list."""
    found = undocumented(TESTS)
    stale = {
        path: sorted(names - set(found.get(path, ())))
        for path, names in PENDING.items()
        if names - set(found.get(path, ()))
    }
    assert not stale, (
        f"these tests now have a docstring or no longer exist: remove them from PENDING in "
        f"tests/test_conventions.py: {stale}"
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def test_a():\n    pass\n", ["test_a"]),
        ('def test_a():\n    """Proves a."""\n', []),
        ('def test_a():\n    """   """\n', ["test_a"]),
        ("async def test_a():\n    pass\n", ["test_a"]),
        ("class TestA:\n    def test_b(self):\n        pass\n", ["test_b"]),
        ("class Helper:\n    def test_b(self):\n        pass\n", []),
        ("def helper():\n    def test_inner():\n        pass\n", []),
    ],
)
def test_the_check_finds_exactly_the_undocumented_tests(
    tmp_path: Path, source: str, expected: list[str]
) -> None:
    """The check names module-level and Test* class tests without a docstring, nothing else."""
    (tmp_path / "test_sample.py").write_text(source, encoding="utf-8")
    assert undocumented(tmp_path).get("test_sample.py", []) == expected

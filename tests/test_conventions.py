"""Conventions of the test suite itself: every test says, in its docstring, what it proves."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).parent

PENDING: dict[str, frozenset[str]] = {
    "integration/test_wal_bound.py": frozenset(
        {"test_wal_stays_bounded_when_processes_exit_without_close_or_are_killed"}
    ),
    "ledger/test_journal_properties.py": frozenset(
        {
            "test_sqlite_rows_follow_from_its_journal_and_it_answers_like_memory",
            "test_two_ledgers_on_one_file_see_each_other_and_never_claim_a_key_twice",
        }
    ),
    "ledger/test_journal_truth.py": frozenset(
        {
            "test_an_edited_journal_record_is_reported",
            "test_an_edited_record_time_is_reported",
            "test_a_deleted_record_in_the_middle_is_reported",
            "test_a_deleted_tail_with_the_head_row_is_reported",
            "test_a_deleted_tail_without_the_head_row_is_reported",
            "test_an_inserted_call_row_is_reported",
            "test_a_deleted_call_row_is_reported",
            "test_an_inserted_key_row_is_reported",
            "test_a_deleted_key_row_is_reported",
            "test_an_approval_flipped_to_approved_is_reported",
            "test_a_deleted_approval_row_is_reported",
            "test_an_approval_flipped_with_a_decider_and_time_is_never_spent",
        }
    ),
    "ledger/test_migrate.py": frozenset(
        {
            "test_reading_an_unmigrated_ledger_says_to_migrate_it",
            "test_verify_on_an_unmigrated_ledger_says_to_migrate_it",
            "test_migrate_exits_0_and_says_what_moved",
            "test_migrate_json_reports_the_counts_and_that_it_verified",
            "test_migrating_again_has_nothing_to_do",
            "test_every_call_keeps_its_state_attempts_key_and_reconciled",
            "test_every_idempotency_key_is_there_with_its_holders_outcome",
            "test_every_approval_is_there_with_its_status",
            "test_the_migrated_ledger_verifies",
            "test_the_json_report_names_an_approved_row_without_its_decision",
        }
    ),
}
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

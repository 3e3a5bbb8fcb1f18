"""``python -m tests.corpus``: the table, the exit codes, and sources found by folder."""

from __future__ import annotations

import pytest

from . import __main__ as corpus
from ._report import SourceReport


def test_every_source_folder_is_found() -> None:
    """A folder with a source.py is a source; the helpers' own modules are not."""
    assert {"glaive_toolcall", "mcp_servers", "skills", "tau_bench"} <= set(corpus.sources())


def test_a_clean_sample_exits_zero_and_prints_the_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One source's sample: a row with its counts and the refusal reason, exit 0."""
    assert corpus.main(["--sample", "--only", "skills"]) == 0
    out = capsys.readouterr().out
    assert "anthropics-skills" in out
    assert "over SkillLimits.description_chars" in out


def test_a_crash_or_a_failed_check_exits_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report with a failed check makes the run fail, and the finding is printed."""
    failing = SourceReport(source="broken", definitions=1, checks_failed=["tool x: export [bad]"])
    monkeypatch.setattr(corpus, "run_source", lambda name, full: failing)
    assert corpus.main(["--sample", "--only", "skills"]) == 1
    assert "tool x: export [bad]" in capsys.readouterr().out


def test_an_unknown_source_is_refused_with_the_list() -> None:
    """--only with a name that is no source exits 2 before running anything."""
    assert corpus.main(["--only", "nope"]) == 2

"""The fast sample of the public anthropics/skills folders (``make corpus`` runs all)."""

from __future__ import annotations

from .skills import source


def test_the_public_skills_load_one_folder_at_a_time() -> None:
    """claude-api's 1,068-character description is refused on its own (naming the limit);
    the other sampled folders load, every file reads through the gate, and with the limit
    raised every folder loads."""
    report = source.run(full=False)
    assert report.crashes == []
    assert report.checks_failed == []
    assert (report.definitions, report.imported) == (4, 3)
    assert report.refused == {"over SkillLimits.description_chars": 1}
    assert report.checked["reads ok"] > 3

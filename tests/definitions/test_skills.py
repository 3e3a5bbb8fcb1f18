"""Skill folders (`callgate.skills`): progressive disclosure through gated tools, scripts
refused, pinned by hash. Each test builds real folders on disk."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from callgate import Authority, DefinitionError, Gate, MemoryLedger, Registry, Status, ToolCall
from callgate.providers import openai_chat
from callgate.skills import SkillPins, load_skill, load_skills

BODY = "# Expenses\n\nUse the EU rates in reference/rates.md. Never approve over 500 EUR."


def _skill(root: Path, name: str, description: str, body: str = BODY) -> Path:
    folder = root / name
    (folder / "reference").mkdir(parents=True)
    (folder / "scripts").mkdir()
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\nlicense: MIT\n---\n{body}\n"
    )
    (folder / "reference" / "rates.md").write_text("Berlin: 32 EUR per day\n")
    (folder / "scripts" / "total.py").write_text("print(sum([1, 2]))\n")
    return folder


@pytest.fixture
def folders(tmp_path: Path) -> list[Path]:
    """Two skills: expense reports and travel booking."""
    return [
        _skill(tmp_path, "expenses", "File expense reports by the company's rules."),
        _skill(tmp_path, "travel", "Book trains and hotels within policy.", "# Travel\nBook it."),
    ]


def _run(skills: Any, grants: list[str]) -> Any:
    gate = Gate(Registry(skills.tools), ledger=MemoryLedger())
    return gate.run(authority=Authority(principal="ana", grants=grants))


def _call(run: Any, tool: str, arguments: dict[str, str], call_id: str = "1") -> Any:
    (obs,) = run.submit([ToolCall(id=call_id, name=tool, arguments=arguments)])
    return obs


def test_the_model_sees_names_and_one_line_descriptions_only(folders: list[Path]) -> None:
    """The catalogue is in read_skill's description; the instructions are in no definition."""
    skills = load_skills(folders)
    exported = str(openai_chat.tool_definitions(skills.tools))
    assert "- expenses: File expense reports by the company's rules." in exported
    assert "Never approve over 500 EUR" not in exported
    assert skills.catalogue().splitlines()[1] == "- travel: Book trains and hotels within policy."


def test_instructions_are_read_through_a_gated_call(folders: list[Path]) -> None:
    """read_skill returns the body, the skill's files and why its scripts are not run."""
    run = _run(load_skills(folders), ["read:skill:*"])
    obs = _call(run, "read_skill", {"name": "expenses"})
    assert obs.status is Status.OK
    text = obs.result
    assert text.startswith(BODY)
    assert "reference/rates.md" in text
    assert "scripts/total.py" in text
    assert "callgate.sandbox" in text


def test_reading_one_skill_needs_its_own_grant(folders: list[Path]) -> None:
    """``read:skill:travel`` does not cover the expenses skill."""
    run = _run(load_skills(folders), ["read:skill:travel"])
    assert _call(run, "read_skill", {"name": "travel"}).status is Status.OK
    denied = _call(run, "read_skill", {"name": "expenses"}, "2")
    assert denied.status is Status.REJECTED
    assert denied.stage.value == "authorize"


@pytest.mark.parametrize(
    "path", ["../travel/SKILL.md", "/etc/passwd", "reference/../SKILL.md", "nope.md"]
)
def test_only_the_skills_own_files_can_be_read(folders: list[Path], path: str) -> None:
    """A path outside the folder, or not one of its files, is an error naming the files."""
    run = _run(load_skills(folders), ["read:skill:*"])
    obs = _call(run, "read_skill_file", {"name": "expenses", "path": path})
    assert obs.status is Status.ERROR
    assert "reference/rates.md" in obs.content


def test_a_file_is_read_as_it_was_approved(folders: list[Path]) -> None:
    """read_skill_file serves the bytes hashed at load, not what is on disk later."""
    run = _run(load_skills(folders), ["read:skill:*"])
    (folders[0] / "reference" / "rates.md").write_text("Berlin: 900 EUR per day\n")
    obs = _call(run, "read_skill_file", {"name": "expenses", "path": "reference/rates.md"})
    assert obs.result == "Berlin: 32 EUR per day\n"


def test_a_changed_skill_is_blocked_until_approved(folders: list[Path], tmp_path: Path) -> None:
    """Pinned by the hash of every file: an edited script blocks the skill's reads."""
    pins = SkillPins(tmp_path / "pins.json")
    assert load_skills(folders, pins=pins).approved == {"expenses": True, "travel": True}
    (folders[0] / "scripts" / "total.py").write_text("import os; os.system('curl evil')\n")
    changed = load_skills(folders, pins=pins)
    assert changed.approved == {"expenses": False, "travel": True}
    run = _run(changed, ["read:skill:*"])
    blocked = _call(run, "read_skill", {"name": "expenses"})
    assert blocked.status is Status.REJECTED
    assert "changed since a person last approved" in blocked.content
    assert _call(run, "read_skill", {"name": "travel"}, "2").status is Status.OK
    pins.approve("expenses", changed.skills["expenses"].digest)
    assert _call(run, "read_skill", {"name": "expenses"}, "3").status is Status.OK


def test_an_executable_file_counts_as_a_script(tmp_path: Path) -> None:
    """A file with the executable bit is listed with the scripts, wherever it is."""
    folder = _skill(tmp_path, "tools", "Helps with tools.")
    helper = folder / "reference" / "helper"
    helper.write_text("#!/bin/sh\necho hi\n")
    helper.chmod(0o755)
    skill = load_skills([folder]).skills["tools"]
    assert set(skill.scripts) == {"reference/helper", "scripts/total.py"}


@pytest.mark.parametrize(
    ("break_it", "words"),
    [
        (lambda f: (f / "SKILL.md").write_text("no front matter\n"), "front matter"),
        (
            lambda f: (f / "SKILL.md").write_text("---\nname: other\ndescription: d\n---\nx"),
            "folder",
        ),
        (lambda f: (f / "SKILL.md").write_text("---\nname: expenses\n---\nx"), "description"),
        (
            lambda f: (f / "SKILL.md").write_text("---\nname: Bad_Name\ndescription: d\n---\n"),
            "lower-case",
        ),
        (lambda f: os.symlink("/etc/hostname", f / "reference" / "host"), "symbolic link"),
        (
            lambda f: (f / "reference" / "big.md").write_text("x" * 200_001),
            "200,001 bytes, over the limit of 200,000",
        ),
        (lambda f: (f / "SKILL.md").unlink(), "no SKILL.md"),
    ],
)
def test_a_malformed_skill_folder_is_refused_with_the_reason(
    folders: list[Path], break_it: Any, words: str
) -> None:
    """Front matter, name, description, links, sizes: each refusal says what to fix; the
    broken folder is refused on its own and the other skill still loads."""
    break_it(folders[0])
    with pytest.raises(DefinitionError, match=words):
        load_skill(folders[0])
    skills = load_skills(folders)
    assert list(skills.skills) == ["travel"]
    [refusal] = skills.refused
    assert refusal.folder == folders[0]
    assert re.search(words, refusal.reason)

"""Skill folders one at a time: a folder callgate cannot take is refused on its own (the
others load, and `SkillSet.refused` says which folder and why), and every size limit is a
`SkillLimits` field a caller can raise, named in the refusal with how to raise it.

Found on the public anthropics/skills set: one folder whose description has 1,068
characters made ``load_skills`` raise for all 17, and a file over 200,000 bytes could not
be taken at any setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from callgate import DefinitionError
from callgate.providers import openai_chat
from callgate.skills import SkillLimits, load_skill, load_skills


def _skill(root: Path, name: str, description: str = "Does one thing well.") -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\nDo it.\n"
    )
    return folder


def test_one_bad_folder_is_refused_and_the_rest_load(tmp_path: Path) -> None:
    """A folder with a 1,068-character description no longer aborts the others."""
    good = _skill(tmp_path, "expenses")
    long = _skill(tmp_path, "long-winded", "x" * 1068)
    other = _skill(tmp_path, "travel")
    skills = load_skills([good, long, other])
    assert list(skills.skills) == ["expenses", "travel"]
    [refusal] = skills.refused
    assert refusal.folder == long
    assert refusal.limit == "description_chars"
    assert "1,068 characters" in refusal.reason
    assert "SkillLimits(description_chars=" in refusal.reason


def test_a_refused_skill_reaches_no_tool_definition(tmp_path: Path) -> None:
    """Neither the catalogue nor the name enum of the tools mentions a refused folder."""
    skills = load_skills(
        [_skill(tmp_path, "expenses"), _skill(tmp_path, "secret-plan", "y" * 2000)]
    )
    exported = str(openai_chat.tool_definitions(skills.tools))
    assert "secret-plan" not in exported
    assert "secret-plan" not in skills.catalogue()


def test_the_description_limit_can_be_raised(tmp_path: Path) -> None:
    """SkillLimits(description_chars=2000) takes the 1,068-character description."""
    folder = _skill(tmp_path, "long-winded", "x" * 1068)
    skills = load_skills([folder], limits=SkillLimits(description_chars=2000))
    assert skills.refused == ()
    assert skills.skills["long-winded"].description == "x" * 1068


def test_the_file_size_limit_is_named_and_can_be_raised(tmp_path: Path) -> None:
    """A 300,000-byte file is refused naming file_bytes; with the limit raised it is served."""
    folder = _skill(tmp_path, "big")
    (folder / "data.md").write_text("z" * 300_000)
    with pytest.raises(DefinitionError, match=r"SkillLimits\(file_bytes=") as caught:
        load_skill(folder)
    assert "data.md is 300,000 bytes" in str(caught.value)
    assert "over the limit of 200,000" in str(caught.value)
    skills = load_skills([folder], limits=SkillLimits(file_bytes=400_000))
    read_file = skills.tools[1]
    assert read_file.fn(name="big", path="data.md") == "z" * 300_000


@pytest.mark.parametrize(
    ("limits", "limit"),
    [
        (SkillLimits(files=2), "files"),
        (SkillLimits(entries=3), "entries"),
        (SkillLimits(file_bytes=80), "file_bytes"),
        (SkillLimits(front_matter_depth=1), "front_matter_depth"),
        (SkillLimits(front_matter_values=3), "front_matter_values"),
    ],
)
def test_every_limit_is_configurable_and_named(
    tmp_path: Path, limits: SkillLimits, limit: str
) -> None:
    """Each limit, set low, refuses the folder with a reason naming that field."""
    folder = _skill(tmp_path, "many")
    (folder / "sub").mkdir()
    for i in range(3):
        (folder / "sub" / f"f{i}.md").write_text(f"file {i}\n" * 20)
    (folder / "SKILL.md").write_text(
        "---\nname: many\ndescription: d\nmetadata:\n  tags: [a, b]\n---\nBody.\n"
    )
    assert load_skills([folder]).refused == ()
    with pytest.raises(DefinitionError, match=rf"SkillLimits\({limit}=") as caught:
        load_skill(folder, limits=limits)
    [refusal] = load_skills([folder, _skill(tmp_path, "ok")], limits=limits).refused
    assert refusal.limit == limit
    assert refusal.reason == str(caught.value)


def test_a_second_skill_of_the_same_name_is_refused(tmp_path: Path) -> None:
    """The first folder named ``expenses`` loads; another one of that name is refused."""
    first = _skill(tmp_path, "expenses")
    (tmp_path / "copy").mkdir()
    second = _skill(tmp_path / "copy", "expenses", "Another one.")
    skills = load_skills([first, second])
    assert skills.skills["expenses"].description == "Does one thing well."
    [refusal] = skills.refused
    assert refusal.folder == second
    assert refusal.limit is None
    assert str(first) in refusal.reason


def test_when_no_folder_loads_the_error_lists_each_refusal(tmp_path: Path) -> None:
    """Nothing to serve is a developer mistake: one error naming every folder and reason."""
    a = _skill(tmp_path, "a", "x" * 1100)
    b = tmp_path / "b"
    b.mkdir()
    with pytest.raises(DefinitionError) as caught:
        load_skills([a, b])
    message = str(caught.value)
    assert "none of the 2 skill folders" in message
    assert f"{a}/SKILL.md: 'description' is 1,100 characters" in message
    assert "no SKILL.md" in message


@pytest.mark.parametrize(
    "bad", [{"file_bytes": 0}, {"description_chars": -1}, {"files": True}, {"entries": 2.5}]
)
def test_a_limit_that_is_not_a_positive_integer_is_a_definition_error(
    bad: dict[str, object],
) -> None:
    """SkillLimits refuses a limit of zero, below zero, a bool or a float, naming the field."""
    [field] = bad
    with pytest.raises(DefinitionError, match=field):
        SkillLimits(**bad)  # type: ignore[arg-type]


def test_a_refusal_shows_a_file_name_with_control_characters_escaped(tmp_path: Path) -> None:
    """A hostile file name cannot forge a line in the refusal (or in the log of it)."""
    folder = _skill(tmp_path, "sneaky")
    (folder / "x\n- travel: approved by the operator.md").write_text("z" * 300)
    [refusal] = load_skills(
        [folder, _skill(tmp_path, "ok")], limits=SkillLimits(file_bytes=200)
    ).refused
    assert "\n" not in refusal.reason
    assert "x\\n- travel" in refusal.reason


def test_a_file_name_that_is_not_utf8_refuses_its_folder_only(tmp_path: Path) -> None:
    """A file whose name is not UTF-8 (bytes 0xff 0xfe) refuses its folder with a reason;
    the other folders load (``load_skills`` raised UnicodeEncodeError for all of them,
    from the digest)."""
    good = _skill(tmp_path, "expenses")
    odd = _skill(tmp_path, "odd-names")
    with open(bytes(odd) + b"/\xff\xfe.txt", "wb") as file:
        file.write(b"x")
    skills = load_skills([good, odd])
    assert list(skills.skills) == ["expenses"]
    [refusal] = skills.refused
    assert refusal.folder == odd
    assert "UTF-8" in refusal.reason


@pytest.mark.parametrize(
    "breaker", ["\n", "\r", "\x85", "\u2028", "\u2029", "\x1e", "\u202e", "\u2066"]
)
def test_a_refusal_escapes_line_breaks_and_bidi_controls_in_folder_and_file_names(
    tmp_path: Path, breaker: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A folder or file name holding a line break of any kind Python splits lines on
    (NEL, the Unicode line and paragraph separators, record separators) or a bidi
    control cannot forge a line in a refusal or its log, nor reorder it on a terminal:
    the folder's name was shown as it was, and only C0 controls were escaped."""
    good = _skill(tmp_path, "expenses")
    folder = tmp_path / f"evil{breaker}WARNING forged"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: evil\ndescription: d\n---\nx\n")
    linked = _skill(tmp_path, "linked")
    (linked / f"a{breaker}b").symlink_to("/etc/passwd")
    with caplog.at_level("WARNING"):
        skills = load_skills([good, folder, linked])
    assert len(skills.refused) == 2
    for text in [r.reason for r in skills.refused] + [r.getMessage() for r in caplog.records]:
        assert len(text.splitlines()) == 1, text
        assert breaker not in text

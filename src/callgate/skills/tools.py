"""The gated tools over a set of skills: ``read_skill`` and ``read_skill_file``."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel

from callgate.errors import DefinitionError, ToolFailure
from callgate.skills.folder import Skill, SkillLimits, SkillPins, load_skill, shown
from callgate.tools import ToolSpec, schema_spec

__all__ = ["SkillRefusal", "SkillSet", "load_skills"]

_log = logging.getLogger("callgate.skills")

_NOT_RUN = (
    "This skill ships scripts ({scripts}). callgate does not run them from this registry: "
    "running code needs the sandboxed code surface (callgate.sandbox), which is not offered "
    "here. Follow the instructions without running them, or tell the user they are needed."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillRefusal:
    """A skill folder `load_skills` did not load, and why."""

    folder: Path
    """The folder as it was given."""
    reason: str
    """What is wrong and how to fix it (the `DefinitionError`'s message)."""
    limit: str | None = None
    """The `SkillLimits` field the folder is over, when a limit refused it."""


@dataclass(frozen=True, kw_only=True)
class SkillSet:
    """Loaded skills and the two tools that disclose them a step at a time."""

    skills: dict[str, Skill]
    approved: dict[str, bool]
    """Per skill: False when it changed since it was approved (its reads are blocked)."""
    tools: tuple[ToolSpec, ...]
    refused: tuple[SkillRefusal, ...] = ()
    """The folders that were not loaded, in the order given, each with its reason: the
    other folders load without them, and nothing of theirs reaches a tool definition."""

    def catalogue(self) -> str:
        """One line per skill: its name and description (what the model sees up front).
        A skill changed since it was approved is shown by name only: its new description
        is the author's unreviewed words."""
        return _catalogue(self.skills, self.approved)


_BLOCKED = "[changed since it was approved; blocked until an operator approves it]"


def _catalogue(skills: dict[str, Skill], approved: dict[str, bool]) -> str:
    return "\n".join(
        f"- {s.name}: {s.description if approved.get(n, False) else _BLOCKED}"
        for n, s in skills.items()
    )


def load_skills(
    folders: Iterable[str | Path],
    *,
    pins: SkillPins | None = None,
    limits: SkillLimits | None = None,
) -> SkillSet:
    """Load skill folders and build ``read_skill`` and ``read_skill_file`` over them.

    Each folder is taken or refused on its own: a folder callgate cannot take (bad
    front matter, a link, over one of ``limits``, a second skill of a name already
    loaded) is listed in `SkillSet.refused` with its reason, logged as a warning on
    ``callgate.skills``, and the others load. ``limits`` (default `SkillLimits()`)
    bounds every folder. No folders at all, or none that loads, is a `DefinitionError`
    (naming each folder and its reason): there would be nothing to serve.
    """
    skills: dict[str, Skill] = {}
    origin: dict[str, Path] = {}
    refused: list[SkillRefusal] = []
    given = 0
    for folder in folders:
        given += 1
        path = Path(folder)
        try:
            skill = load_skill(path, limits=limits)
            if skill.name in skills:
                raise DefinitionError(
                    f"{path}: a skill named {skill.name!r} was already loaded from "
                    f"{origin[skill.name]}; skill names must be unique (rename or leave out "
                    "one of them)"
                )
        except DefinitionError as exc:
            # Escaped whole: the folder's own name is in the reason, and it is hostile too.
            reason = shown(str(exc))
            refusal = SkillRefusal(folder=path, reason=reason, limit=getattr(exc, "limit", None))
            _log.warning("skill folder refused: %s", refusal.reason)
            refused.append(refusal)
            continue
        skills[skill.name] = skill
        origin[skill.name] = path
    if not given:
        raise DefinitionError("no skill folders were given")
    if not skills:
        raise DefinitionError(
            f"none of the {given} skill folders could be loaded:\n"
            + "\n".join(f"- {r.reason}" for r in refused)
        )
    approved = {
        n: (pins.check(n, s.digest) if pins is not None else True) for n, s in skills.items()
    }
    names = list(skills)
    catalogue = _catalogue(skills, approved)
    guard = _guard(skills, pins) if pins is not None else None

    def read_skill(name: str) -> str:
        skill = skills[name]
        text = skill.instructions
        if skill.files:
            text += "\n\nFiles of this skill (read one with read_skill_file): " + ", ".join(
                skill.files
            )
        if skill.scripts:
            text += "\n\n" + _NOT_RUN.format(scripts=", ".join(skill.scripts))
        return text

    def read_skill_file(name: str, path: str) -> str:
        skill = skills[name]
        wanted = PurePosixPath(path)
        if wanted.is_absolute() or ".." in wanted.parts or wanted.as_posix() not in skill.files:
            raise ToolFailure(
                f"the skill '{name}' has no file {path!r}; its files are: "
                + (", ".join(skill.files) or "none"),
                retryable=False,
            )
        data = skill.contents[wanted.as_posix()]  # the bytes that were hashed and approved
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return f"[{path}: {len(data)} bytes of binary data, not shown]"

    name_schema = {"type": "string", "enum": names, "description": "The skill's name."}
    read = schema_spec(
        "read_skill",
        "Read a skill's instructions before doing a task it covers. Skills:\n"
        + catalogue
        + "\nFails if the skill changed since it was approved.",
        {"type": "object", "properties": {"name": name_schema}, "required": ["name"]},
        read_skill,
        effects=["read:skill:{name}"],
        risk="read",
        precondition=guard,
    )
    read_file = schema_spec(
        "read_skill_file",
        "Read one file a skill's instructions refer to (a path listed by read_skill). "
        "Fails for a path that is not one of the skill's files.",
        {
            "type": "object",
            "properties": {
                "name": name_schema,
                "path": {
                    "type": "string",
                    "maxLength": 300,
                    "description": "The file's path inside the skill, e.g. reference/forms.md.",
                },
            },
            "required": ["name", "path"],
        },
        read_skill_file,
        effects=["read:skill:{name}"],
        risk="read",
        precondition=guard,
    )
    return SkillSet(
        skills=skills, approved=approved, tools=(read, read_file), refused=tuple(refused)
    )


def _guard(skills: dict[str, Skill], pins: SkillPins) -> Any:
    def guard(arguments: BaseModel, evidence: Any) -> str | None:
        name = str(arguments.model_dump(by_alias=True).get("name", ""))
        skill = skills.get(name)
        if skill is not None and pins.pinned(name) == skill.digest:
            return None
        return (
            f"the skill '{name}' changed since a person last approved it, so it is blocked. "
            "Nothing was read. Do not retry: tell the user that an operator must review "
            "and approve the new version."
        )

    return guard

"""Skill folders (a ``SKILL.md`` with front matter, plus files) behind gated tools.

```python
from callgate import Registry
from callgate.skills import load_skills

skills = load_skills(["skills/pdf-forms", "skills/expenses"], pins=SkillPins("pins.json"))
registry = Registry(skills.tools)
for refusal in skills.refused:  # folders not loaded, each with why; the others load
    print(refusal.folder, refusal.reason)
```

Each folder is taken or refused on its own (`SkillSet.refused`); every bound on a
folder (description length, file size, file count, ...) is a `SkillLimits` field.

Progressive disclosure: the model sees each skill's name and one-line
description (the catalogue, in the description of the ``read_skill`` tool);
it reads a skill's instructions (``read_skill``) or one of its files
(``read_skill_file``) only when it needs them, each a gated call needing
``read:skill:<name>``. A file is served from what was read and hashed
when the skill was loaded (no symbolic links, bounded size), so what the
model reads is what was approved.

Scripts a skill ships are never run here: running code needs the sandboxed
code surface (``callgate.sandbox``), which this package does not depend on.
A skill's scripts are listed, and reading its instructions says that they
cannot be run from this registry. A skill is pinned by the hash of every
file in its folder (`SkillPins`); a skill that changed since it was approved
is blocked, like any other code, until ``SkillPins.approve``.
"""

from __future__ import annotations

from callgate.skills.folder import MAX_FILE_BYTES, Skill, SkillLimits, SkillPins, load_skill
from callgate.skills.tools import SkillRefusal, SkillSet, load_skills

__all__ = [
    "MAX_FILE_BYTES",
    "Skill",
    "SkillLimits",
    "SkillPins",
    "SkillRefusal",
    "SkillSet",
    "load_skill",
    "load_skills",
]

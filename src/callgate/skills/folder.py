"""One skill folder read and checked: its front matter, instructions, files and digest."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from callgate.definitions.pins import DigestPins
from callgate.errors import DefinitionError

__all__ = ["MAX_FILE_BYTES", "Skill", "SkillPins", "load_skill"]

MAX_FILE_BYTES = 200_000
"""The largest file a skill may hold (instructions included): text meant for a context."""
MAX_FILES = 200
MAX_ENTRIES = 2000
"""Files and folders together: listing stops here, before a huge tree is walked."""
MAX_FRONT_MATTER_DEPTH = 32
MAX_FRONT_MATTER_VALUES = 10_000
"""Values in the front matter once YAML aliases are expanded (it holds a few fields)."""
_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_SCRIPT_SUFFIXES = frozenset({".py", ".sh", ".bash", ".js", ".ts", ".rb", ".pl", ".ps1", ".bat"})


class SkillPins(DigestPins):
    """Approved skill digests, one per skill name (see `DigestPins`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    """A skill folder as read: what the model may see of it, and its digest."""

    name: str
    description: str
    """One line: what the skill is for and when to use it (the catalogue's entry)."""
    instructions: str
    """The body of ``SKILL.md`` after the front matter."""
    root: Path
    files: tuple[str, ...]
    """Every other file, as a path relative to the folder (``reference/forms.md``)."""
    scripts: tuple[str, ...]
    """The files that are code (by folder ``scripts/``, suffix, or executable bit)."""
    digest: str
    metadata: dict[str, Any]
    contents: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    """Each file's bytes as read and hashed: what is served is what was approved."""


def _front_matter(text: str, where: Path) -> tuple[dict[str, Any], str]:
    import yaml

    if not text.startswith("---"):
        raise DefinitionError(f"{where}: SKILL.md must start with '---' and YAML front matter")
    parts = text.split("\n---", 1)
    if len(parts) != 2:
        raise DefinitionError(f"{where}: the front matter is not closed by a '---' line")
    head, body = parts[0][3:], parts[1].partition("\n")[2]
    deep = DefinitionError(
        f"{where}: the front matter nests deeper than {MAX_FRONT_MATTER_DEPTH} levels; "
        "it holds a few plain fields (name, description, license)"
    )
    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError as exc:
        raise DefinitionError(
            f"{where}: the front matter is not YAML ({type(exc).__name__})"
        ) from exc
    except RecursionError:
        raise deep from None
    if not isinstance(data, dict):
        raise DefinitionError(f"{where}: the front matter must be a YAML mapping")
    stack: list[tuple[Any, int]] = [(data, 0)]
    count = 0
    while stack:  # bounded walk: an alias inside its own anchor nests without end
        node, depth = stack.pop()
        count += 1
        if depth > MAX_FRONT_MATTER_DEPTH:
            raise deep
        if count > MAX_FRONT_MATTER_VALUES:
            raise DefinitionError(
                f"{where}: the front matter expands to more than {MAX_FRONT_MATTER_VALUES:,} "
                "values (YAML aliases repeat what they name); write plain fields"
            )
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return data, body.strip()


def _read(path: Path) -> bytes | None:
    """The bytes of a regular file, opened without following a link (a file swapped for a
    link or a pipe after it was listed is refused); None when over `MAX_FILE_BYTES`."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        data = file.read(MAX_FILE_BYTES + 1)
    return None if len(data) > MAX_FILE_BYTES else data


def load_skill(folder: str | Path) -> Skill:
    """Read and check one skill folder; `DefinitionError` says what is wrong and how to fix it."""
    root = Path(folder)
    main = root / "SKILL.md"
    if root.is_symlink() or not root.is_dir():
        raise DefinitionError(f"{root}: a skill is a folder (not a link) holding SKILL.md")
    entries: list[tuple[str, bytes, bool]] = []
    listed: list[Path] = []
    for path in root.rglob("*"):
        listed.append(path)
        if len(listed) > MAX_ENTRIES:
            raise DefinitionError(
                f"{root}: more than {MAX_ENTRIES} entries (files and folders); a skill holds "
                "its instructions and the few files they refer to"
            )
    for path in sorted(listed):
        relative = path.relative_to(root).as_posix()
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            raise DefinitionError(
                f"{root}: {relative} is a symbolic link; a skill's files must be in its folder "
                "(copy the file instead)"
            )
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            raise DefinitionError(f"{root}: {relative} is not a regular file")
        try:
            content = _read(path)
        except OSError as exc:
            raise DefinitionError(
                f"{root}: {relative} could not be read as a regular file ({exc}); "
                "a skill's files must be plain files in its folder"
            ) from None
        if content is None:
            raise DefinitionError(f"{root}: {relative} is over {MAX_FILE_BYTES:,} bytes")
        entries.append((relative, content, bool(mode & 0o111)))
        if len(entries) > MAX_FILES:
            raise DefinitionError(f"{root}: more than {MAX_FILES} files")
    hashed = {relative: content for relative, content, _ in entries}
    if "SKILL.md" not in hashed:
        raise DefinitionError(f"{root}: no SKILL.md")
    try:
        # The instructions are the bytes hashed into the digest, not a second read that a
        # swap of the file in between could change after approval.
        text = hashed["SKILL.md"].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DefinitionError(f"{main}: not UTF-8 text") from exc
    data, body = _front_matter(text, main)
    name = data.get("name")
    description = data.get("description")
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > 64:
        raise DefinitionError(
            f"{main}: 'name' must be 1 to 64 lower-case letters, digits and single hyphens, "
            f"got {name!r}"
        )
    if name != root.name:
        raise DefinitionError(f"{main}: 'name' is {name!r} but the folder is {root.name!r}")
    if not isinstance(description, str) or not description.strip() or len(description) > 1024:
        raise DefinitionError(
            f"{main}: 'description' must say in at most 1024 characters what the skill does "
            "and when to use it"
        )
    digest = hashlib.sha256()
    for relative, content, executable in entries:
        digest.update(f"{relative}\0{int(executable)}\0{len(content)}\0".encode())
        digest.update(content)
    files = tuple(r for r, _, _ in entries if r != "SKILL.md")
    scripts = tuple(
        r
        for r, _, executable in entries
        if r != "SKILL.md"
        and (
            PurePosixPath(r).parts[0] == "scripts"
            or PurePosixPath(r).suffix in _SCRIPT_SUFFIXES
            or executable
        )
    )
    return Skill(
        name=name,
        description=" ".join(description.split()),
        instructions=body,
        root=root.resolve(),
        files=files,
        scripts=scripts,
        digest="sha256:" + digest.hexdigest(),
        metadata={k: v for k, v in data.items() if k not in ("name", "description")},
        contents={r: content for r, content, _ in entries if r != "SKILL.md"},
    )

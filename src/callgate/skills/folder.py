"""One skill folder read and checked: its front matter, instructions, files and digest.

Every bound on what a folder may hold is a field of `SkillLimits`; a folder over one is
refused with a `DefinitionError` naming the field, the value found and how to raise it.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePosixPath
from typing import Any

from callgate.definitions.pins import DigestPins
from callgate.errors import DefinitionError

__all__ = ["MAX_FILE_BYTES", "Skill", "SkillLimits", "SkillPins", "load_skill", "shown"]

MAX_FILE_BYTES = 200_000
"""The default largest file a skill may hold (`SkillLimits.file_bytes`)."""
_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_SCRIPT_SUFFIXES = frozenset({".py", ".sh", ".bash", ".js", ".ts", ".rb", ".pl", ".ps1", ".bat"})


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillLimits:
    """How much one skill folder may hold; a folder over any of them is refused.

    The defaults fit the Agent Skills format (a description of at most 1,024
    characters, a few files of text meant for a context) and bound the work of
    reading a folder nobody reviewed yet. Raise one for material that needs it,
    e.g. ``load_skills(folders, limits=SkillLimits(description_chars=2000))``.
    """

    description_chars: int = 1024
    """The longest ``description`` in the front matter (the catalogue's entry), in characters."""
    file_bytes: int = MAX_FILE_BYTES
    """The largest file (``SKILL.md`` included), in bytes: each is held in memory and served."""
    files: int = 200
    """The most files in the folder, ``SKILL.md`` included."""
    entries: int = 2000
    """Files and folders together: listing stops past it, before a huge tree is walked."""
    front_matter_depth: int = 32
    """How deep the front matter may nest (it holds a few plain fields)."""
    front_matter_values: int = 10_000
    """Values in the front matter once YAML aliases are expanded."""

    def __post_init__(self) -> None:
        for limit in fields(self):
            value = getattr(self, limit.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise DefinitionError(
                    f"SkillLimits.{limit.name} must be a positive whole number, got {value!r}"
                )


class _OverLimit(DefinitionError):
    """A folder over one of its `SkillLimits`; ``limit`` names the field."""

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


def _over(
    where: Path, what: str, limit: str, bound: int, fix: str, found: int | None
) -> _OverLimit:
    """The refusal for a folder over ``SkillLimits.<limit>``: what, how much, how to raise it."""
    if found is not None:
        amount = f"is {found:,} {_UNITS[limit]}, over the limit of {bound:,}"
    else:
        amount = f"more than {bound:,} {_UNITS[limit]}"
    suggest = found if found is not None else 2 * bound
    return _OverLimit(
        f"{where}: {what} {amount} (SkillLimits.{limit}); {fix}, or raise the limit: "
        f"load_skills(..., limits=SkillLimits({limit}={suggest}))",
        limit,
    )


_UNITS = {
    "description_chars": "characters",
    "file_bytes": "bytes",
    "files": "files",
    "entries": "entries (files and folders)",
    "front_matter_depth": "levels deep",
    "front_matter_values": "values (YAML aliases repeat what they name)",
}


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


def _front_matter(text: str, where: Path, limits: SkillLimits) -> tuple[dict[str, Any], str]:
    import yaml

    if not text.startswith("---"):
        raise DefinitionError(f"{where}: SKILL.md must start with '---' and YAML front matter")
    parts = text.split("\n---", 1)
    if len(parts) != 2:
        raise DefinitionError(f"{where}: the front matter is not closed by a '---' line")
    head, body = parts[0][3:], parts[1].partition("\n")[2]
    deep = _over(
        where,
        "the front matter nests",
        "front_matter_depth",
        limits.front_matter_depth,
        "it holds a few plain fields (name, description, license)",
        None,
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
        if depth > limits.front_matter_depth:
            raise deep
        if count > limits.front_matter_values:
            raise _over(
                where,
                "the front matter expands to",
                "front_matter_values",
                limits.front_matter_values,
                "write plain fields",
                None,
            )
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return data, body.strip()


def _read(path: Path, most: int) -> bytes | int:
    """The bytes of a regular file, opened without following a link (a file swapped for a
    link or a pipe after it was listed is refused); its size when over ``most`` bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        data = file.read(most + 1)
        if len(data) > most:
            return max(os.fstat(fd).st_size, len(data))
    return data


_UNSHOWN = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
"""What a name may not show as it is: C0 and C1 controls (NEL and the record separators
end a line for Python's ``splitlines``), the Unicode line and paragraph separators, the
bidi controls (they reorder a line on a terminal) and lone surrogates (a file name that
is not UTF-8; they cannot be written to a UTF-8 log)."""
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT:
        return _SHORT[char]
    return f"\\x{ord(char):02x}" if ord(char) < 256 else f"\\u{ord(char):04x}"


def shown(text: str) -> str:
    """A path or a refusal for a message: line breaks of every kind, controls, bidi
    controls and lone surrogates escaped, so a hostile folder or file name cannot start a
    line of its own in a refusal or in the log of one, nor reorder it on a terminal."""
    return _UNSHOWN.sub(_escaped, text)


_shown = shown


def _listing(root: Path, limits: SkillLimits) -> list[tuple[Path, int]]:
    """Every entry under ``root`` with its mode (links not followed), sorted; refused past
    ``limits.entries`` while listing, and when the folder cannot be listed."""
    listed: list[Path] = []
    try:
        for path in root.rglob("*"):
            listed.append(path)
            if len(listed) > limits.entries:
                fix = "a skill holds its instructions and the few files they refer to"
                raise _over(root, "the folder holds", "entries", limits.entries, fix, None)
        return [(path, path.lstat().st_mode) for path in sorted(listed)]
    except OSError as exc:
        raise DefinitionError(
            f"{root}: the folder could not be listed ({type(exc).__name__}: "
            f"{exc.strerror or exc}); a skill's folder must be readable as it is"
        ) from None


def load_skill(folder: str | Path, *, limits: SkillLimits | None = None) -> Skill:
    """Read and check one skill folder; `DefinitionError` says what is wrong and how to fix it.

    ``limits`` bounds what the folder may hold (default `SkillLimits()`); a refusal for
    a limit names the `SkillLimits` field and the value that would take the folder.
    """
    limits = limits if limits is not None else SkillLimits()
    root = Path(folder)
    main = root / "SKILL.md"
    if root.is_symlink() or not root.is_dir():
        raise DefinitionError(f"{root}: a skill is a folder (not a link) holding SKILL.md")
    entries: list[tuple[str, bytes, bool]] = []
    for path, mode in _listing(root, limits):
        relative = path.relative_to(root).as_posix()
        shown = _shown(relative)
        try:
            relative.encode("utf-8")
        except UnicodeEncodeError:
            raise DefinitionError(
                f"{root}: the file name {shown} is not UTF-8; a skill's file names are "
                "text (rename the file)"
            ) from None
        if stat.S_ISLNK(mode):
            raise DefinitionError(
                f"{root}: {shown} is a symbolic link; a skill's files must be in its folder "
                "(copy the file instead)"
            )
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            raise DefinitionError(f"{root}: {shown} is not a regular file")
        try:
            content = _read(path, limits.file_bytes)
        except OSError as exc:
            raise DefinitionError(
                f"{root}: {shown} could not be read as a regular file ({exc}); "
                "a skill's files must be plain files in its folder"
            ) from None
        if isinstance(content, int):
            fix = "split the file or leave it out of the skill"
            raise _over(root, shown, "file_bytes", limits.file_bytes, fix, content)
        entries.append((relative, content, bool(mode & 0o111)))
        if len(entries) > limits.files:
            fix = "a skill holds its instructions and the few files they refer to"
            raise _over(root, "the folder holds", "files", limits.files, fix, None)
    hashed = {relative: content for relative, content, _ in entries}
    if "SKILL.md" not in hashed:
        raise DefinitionError(f"{root}: no SKILL.md")
    try:
        # The instructions are the bytes hashed into the digest, not a second read that a
        # swap of the file in between could change after approval.
        text = hashed["SKILL.md"].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DefinitionError(f"{main}: not UTF-8 text") from exc
    data, body = _front_matter(text, main, limits)
    name = data.get("name")
    description = data.get("description")
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > 64:
        raise DefinitionError(
            f"{main}: 'name' must be 1 to 64 lower-case letters, digits and single hyphens, "
            f"got {name!r}"
        )
    if name != root.name:
        raise DefinitionError(f"{main}: 'name' is {name!r} but the folder is {root.name!r}")
    if not isinstance(description, str) or not description.strip():
        raise DefinitionError(
            f"{main}: 'description' must say in a line what the skill does and when to use it"
        )
    if len(description) > limits.description_chars:
        fix = "shorten it to what the skill does and when to use it"
        raise _over(
            main,
            "'description'",
            "description_chars",
            limits.description_chars,
            fix,
            len(description),
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

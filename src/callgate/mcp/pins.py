"""Tool pins: the "rug pull" defence for tools imported from MCP servers.

A remote server can change what a tool says it does (its description, its
schema, its annotations such as ``readOnlyHint``) after a person decided to use it.
Each tool's definition is hashed and pinned, per server; when a later listing
differs, the change is reported and the tool is not callable until a person approves
the new definition
(``callgate mcp pins approve SERVER TOOL``).

Rules, applied by `PinStore.check`:

* first contact with a server (no pins for it): every tool is pinned as seen
  ("trust on first use"), unless ``trust_first_use=False``;
* a pinned tool whose definition is unchanged: callable;
* a pinned tool whose definition changed: **changed**, blocked until approved;
* a tool the server did not list before: **added**, blocked until approved
  (unless ``trust_new=True``);
* a pinned tool the server no longer lists: **removed**, reported.

Annotations (``readOnlyHint``, ``destructiveHint``...) are part of the definition: a tool
that turns itself read-only is changed. A pin written before annotations were pinned (its
approved record has no ``annotations`` key) and whose other fields are unchanged adopts the
annotations listed next, once, as on first use; from then on they are pinned too.

The store is one JSON file, written atomically, so a proxy and the CLI can
share it; `approved` re-reads the file when it changed on disk.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callgate.errors import CallgateError

__all__ = [
    "PinEntry",
    "PinError",
    "PinReport",
    "PinStore",
    "ToolDefinition",
    "definition_hash",
]

_FORMAT = 1


class PinError(CallgateError):
    """A pin file that cannot be read or written, or a pin that does not exist."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """What a server says about one tool: everything a model reads or a call depends on."""

    name: str
    description: str = ""
    title: str | None = None
    input_schema: Mapping[str, Any] = field(default_factory=dict)
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] | None = None

    @property
    def hash(self) -> str:
        """The pinned hash of this definition."""
        return definition_hash(self)

    def as_dict(self) -> dict[str, Any]:
        """The definition as stored in the pin file."""
        out: dict[str, Any] = {"description": self.description, "input_schema": self.input_schema}
        if self.title is not None:
            out["title"] = self.title
        if self.output_schema is not None:
            out["output_schema"] = self.output_schema
        out["annotations"] = self.annotations
        return out


def definition_hash(definition: ToolDefinition, *, annotations: bool = True) -> str:
    """SHA-256 of the canonical JSON of a tool's name, title, description, schemas and
    annotations (a tool without annotations hashes as before annotations were pinned;
    ``annotations=False`` leaves them out, as pins written before did)."""
    fields: dict[str, Any] = {
        "name": definition.name,
        "title": definition.title,
        "description": definition.description,
        "input_schema": definition.input_schema,
        "output_schema": definition.output_schema,
    }
    if annotations and definition.annotations is not None:
        fields["annotations"] = definition.annotations
    blob = json.dumps(
        fields,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class PinEntry:
    """One pinned tool: the approved definition and, if it differs, the one last seen."""

    server: str
    tool: str
    approved_hash: str | None
    approved_by: str | None
    approved_at: float | None
    seen_hash: str | None
    seen_at: float | None
    approved: Mapping[str, Any] | None
    seen: Mapping[str, Any] | None

    @property
    def state(self) -> str:
        """``pinned``, ``changed`` (seen differs from approved) or ``new`` (never approved)."""
        if self.approved_hash is None:
            return "new"
        if self.seen_hash is not None and self.seen_hash != self.approved_hash:
            return "changed"
        return "pinned"


@dataclass(frozen=True, slots=True, kw_only=True)
class PinReport:
    """What changed in one server's tool list since it was pinned."""

    server: str
    first_use: bool = False
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()
    """Tools that are not callable until a person approves them."""

    @property
    def differs(self) -> bool:
        """Whether anything was added, changed or removed."""
        return bool(self.added or self.changed or self.removed)

    def summary(self) -> str:
        """One paragraph for a log or a terminal."""
        if self.first_use:
            return (
                f"MCP server '{self.server}': first use, pinned {len(self.unchanged)} tool(s) "
                f"as seen: {', '.join(self.unchanged) or '(none)'}"
            )
        parts = []
        for label, names in (
            ("changed", self.changed),
            ("added", self.added),
            ("removed", self.removed),
        ):
            if names:
                parts.append(f"{label}: {', '.join(names)}")
        if not parts:
            return f"MCP server '{self.server}': {len(self.unchanged)} tool(s), none changed"
        text = f"MCP server '{self.server}': tool list differs from the pins ({'; '.join(parts)})"
        if self.blocked:
            text += (
                f". Blocked until approved: {', '.join(self.blocked)}; review with "
                f"`callgate mcp pins show {self.server}` and approve with "
                f"`callgate mcp pins approve {self.server} TOOL`"
            )
        return text


class PinStore:
    """Pinned tool definitions per server, in a JSON file (or in memory with ``path=None``).

    Args:
        path: the pin file; created on first write.
        trust_first_use: pin every tool of a server seen for the first time.
        trust_new: pin tools a known server adds, instead of blocking them.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        trust_first_use: bool = True,
        trust_new: bool = False,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.trust_first_use = trust_first_use
        self.trust_new = trust_new
        self._lock = threading.Lock()
        self._data: dict[str, Any] = {"version": _FORMAT, "servers": {}}
        self._stamp: tuple[int, int] | None = None
        self._load()

    # -- queries ---------------------------------------------------------------

    def approved(self, server: str, tool: str, definition_hash: str) -> bool:
        """Whether exactly this definition of the tool is approved (re-reads a changed file)."""
        with self._lock:
            self._load()
            entry = self._tools(server).get(tool)
            return entry is not None and entry.get("approved", {}).get("hash") == definition_hash

    def entries(self, server: str | None = None) -> list[PinEntry]:
        """Every pin, or one server's, sorted by server and tool."""
        with self._lock:
            self._load()
            servers = self._data["servers"]
            names = [server] if server is not None else sorted(servers)
            out = []
            for name in names:
                for tool, raw in sorted(servers.get(name, {}).get("tools", {}).items()):
                    out.append(_entry(name, tool, raw))
            return out

    def servers(self) -> list[str]:
        """Names of the servers with pins."""
        with self._lock:
            self._load()
            return sorted(self._data["servers"])

    # -- changes ---------------------------------------------------------------

    def check(self, server: str, definitions: Sequence[ToolDefinition]) -> PinReport:
        """Compare a server's current tool list with its pins; record what was seen."""
        now = time.time()
        with self._lock, self._writing():
            tools = self._data["servers"].setdefault(server, {"tools": {}})["tools"]
            first_use = not tools
            report: dict[str, list[str]] = {
                "added": [],
                "changed": [],
                "unchanged": [],
                "blocked": [],
            }
            listed = set()
            for definition in definitions:
                listed.add(definition.name)
                entry = tools.setdefault(definition.name, {})
                record = {"hash": definition.hash, **definition.as_dict()}
                approved = entry.get("approved")
                if (
                    approved is not None
                    and "annotations" not in approved
                    and approved.get("hash") == definition_hash(definition, annotations=False)
                ):
                    # Pinned before annotations were: the annotations seen now are adopted.
                    entry["approved"] = {**approved, **record}
                    approved = entry["approved"]
                if approved is not None and approved.get("hash") == definition.hash:
                    entry.pop("seen", None)
                    report["unchanged"].append(definition.name)
                    continue
                trusted = self.trust_first_use if first_use else self.trust_new
                if approved is None and trusted:
                    by = "first use" if first_use else "trust_new"
                    entry["approved"] = {**record, "at": now, "by": by}
                    report["unchanged" if first_use else "added"].append(definition.name)
                    continue
                if entry.get("seen", {}).get("hash") != definition.hash:
                    entry["seen"] = {**record, "at": now}
                report["changed" if approved is not None else "added"].append(definition.name)
                report["blocked"].append(definition.name)
            return PinReport(
                server=server,
                first_use=first_use and self.trust_first_use,
                added=tuple(report["added"]),
                changed=tuple(report["changed"]),
                removed=tuple(sorted(name for name in tools if name not in listed)),
                unchanged=tuple(report["unchanged"]),
                blocked=tuple(report["blocked"]),
            )

    def approve(self, server: str, tool: str | None = None, *, by: str) -> list[str]:
        """Approve the last seen definition of one tool (or of every blocked tool of a server).

        Returns the names approved; a tool with nothing new to approve is skipped.
        Raises `PinError` for an unknown server or tool.
        """
        now = time.time()
        with self._lock, self._writing():
            tools = self._server_or_error(server)
            if tool is not None and tool not in tools:
                raise PinError(
                    f"server '{server}' has no pinned tool '{tool}'; known: {sorted(tools) or []}"
                )
            names = [tool] if tool is not None else sorted(tools)
            done = []
            for name in names:
                entry = tools[name]
                seen = entry.pop("seen", None)
                if seen is None:
                    continue
                entry["approved"] = {**seen, "at": now, "by": by}
                done.append(name)
            return done

    def forget(self, server: str, tool: str | None = None) -> list[str]:
        """Remove the pins of one tool, or of a whole server; returns the names removed."""
        with self._lock, self._writing():
            tools = self._server_or_error(server)
            if tool is None:
                names = sorted(tools)
                del self._data["servers"][server]
                return names
            if tool not in tools:
                raise PinError(f"server '{server}' has no pinned tool '{tool}'")
            del tools[tool]
            return [tool]

    # -- storage ---------------------------------------------------------------

    def _tools(self, server: str) -> dict[str, Any]:
        tools: dict[str, Any] = self._data["servers"].get(server, {}).get("tools", {})
        return tools

    def _server_or_error(self, server: str) -> dict[str, Any]:
        if server not in self._data["servers"]:
            known = sorted(self._data["servers"])
            raise PinError(f"no pins for server '{server}'; servers with pins: {known or []}")
        tools: dict[str, Any] = self._data["servers"][server]["tools"]
        return tools

    def _file_stamp(self) -> tuple[int, int] | None:
        if self.path is None:
            return None
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _load(self) -> None:
        """Read the file if it changed since it was last read (caller holds the lock)."""
        if self.path is None:
            return
        stamp = self._file_stamp()
        if stamp is None or stamp == self._stamp:
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PinError(f"{self.path}: cannot read the pin file: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("servers"), dict):
            raise PinError(f"{self.path}: not a callgate pin file (no 'servers' table)")
        if data.get("version") != _FORMAT:
            raise PinError(
                f"{self.path}: pin file format {data.get('version')!r} is not supported "
                f"(this callgate writes format {_FORMAT})"
            )
        self._data = data
        self._stamp = stamp

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Read-modify-write under an exclusive file lock; written atomically if it changed."""
        with _file_lock(self.path):
            self._stamp = None
            self._load()
            before = json.dumps(self._data, sort_keys=True)
            yield
            if json.dumps(self._data, sort_keys=True) != before or self._file_stamp() is None:
                self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self._data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        fd, tmp = tempfile.mkstemp(prefix=".pins-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._stamp = self._file_stamp()

    def __repr__(self) -> str:
        return f"PinStore({str(self.path) if self.path else None!r})"


@contextlib.contextmanager
def _file_lock(path: Path | None) -> Iterator[None]:
    """An exclusive advisory lock on ``<path>.lock`` (no-op in memory or without fcntl)."""
    if path is None:
        yield
        return
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: atomic replace only
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _entry(server: str, tool: str, raw: Mapping[str, Any]) -> PinEntry:
    approved = raw.get("approved")
    seen = raw.get("seen")
    return PinEntry(
        server=server,
        tool=tool,
        approved_hash=approved.get("hash") if approved else None,
        approved_by=approved.get("by") if approved else None,
        approved_at=approved.get("at") if approved else None,
        seen_hash=seen.get("hash") if seen else None,
        seen_at=seen.get("at") if seen else None,
        approved=approved,
        seen=seen,
    )

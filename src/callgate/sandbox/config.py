"""What a sandbox is given: its limits and its configuration, checked where they are declared."""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from callgate.errors import DefinitionError

__all__ = ["Limits", "Mode", "SandboxConfig"]


class Mode(enum.StrEnum):
    """How the code is confined."""

    BWRAP = "bwrap"
    """bubblewrap: namespaces, a read-only system, seccomp, limits (the only safe mode)."""
    UNSAFE_SUBPROCESS = "unsafe_subprocess"
    """A plain child process with limits and an empty environment, for development only:
    the code sees the host's files, network and processes. Logged as a warning on every run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Resource bounds of one sandboxed run (each a positive integer)."""

    cpu_seconds: int = 10
    """CPU time (RLIMIT_CPU); the wall-clock bound is the tool's ``timeout``."""
    memory_bytes: int = 1 << 30
    """Address space (RLIMIT_AS)."""
    processes: int = 32
    """Processes and threads of the sandbox's user (RLIMIT_NPROC)."""
    open_files: int = 64
    """Open file descriptors (RLIMIT_NOFILE)."""
    file_bytes: int = 16 << 20
    """Size of any one file written (RLIMIT_FSIZE)."""
    workspace_bytes: int = 64 << 20
    """Size of the private ``/workspace`` (a tmpfs)."""
    tmp_bytes: int = 16 << 20
    """Size of the private ``/tmp`` (a tmpfs)."""
    shm_bytes: int = 8 << 20
    """Size of the private ``/dev/shm`` (a tmpfs: POSIX shared memory, semaphores). With
    ``workspace_bytes`` and ``tmp_bytes``, the sandbox's whole file memory: ``/dev`` itself
    is read-only, and SysV IPC, POSIX message queues and memfds are refused."""
    output_bytes: int = 64 << 10
    """Bytes of stdout and of stderr kept each; the rest is counted and dropped."""
    message_bytes: int = 1 << 20
    """One bridge message, either way."""
    max_calls: int = 256
    """Tool calls one run of code may make through the bridge."""
    bridge_bytes: int = 8 << 20
    """Bytes one run of code may send through the bridge in all (every frame counted); a
    call past it is refused (``tools.CallRejected``) and never reaches the gate."""
    ledger_bytes: int = 16 << 20
    """What the ledger may keep for one run of code's calls: 2 kB of records per call,
    each call's frame as many
    times as the ledger stores its arguments (twice; three times while it waits for an
    approval) and the content of its answer; once spent, further calls are refused (the
    call that crosses it has run, so the ledger may pass it by one call's worth)."""

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DefinitionError(
                    f"sandbox Limits.{name} must be a positive integer, got {value!r}"
                )


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxConfig:
    """Where and how code runs: the interpreter, the workspace seed, the environment."""

    timeout: float = 10.0
    """Wall-clock seconds; at the deadline the sandbox and all its processes are killed."""
    limits: Limits = field(default_factory=Limits)
    workspace: Path | None = None
    """A directory copied into ``/workspace`` at each start (never written back)."""
    python: str = "/usr/bin/python3"
    """The interpreter inside, bound read-only with ``/usr``."""
    env: Mapping[str, str] = field(default_factory=dict)
    """The only environment variables inside (besides PATH, HOME, LANG)."""
    mode: Mode = Mode.BWRAP
    sandbox_uids: range = range(1_640_000_000, 1_640_000_000 + 65536)
    """When the host runs as root: the unprivileged host uids bubblewrap is started as, one
    per running sandbox (leased with a lock file, across processes), so that what the
    kernel counts per user is counted per sandbox. Give a range no account uses."""
    read_only: tuple[str, ...] = ()
    """More host paths bound read-only at the same place (e.g. a virtualenv's packages)."""

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "mode", Mode(self.mode))
        except ValueError:
            raise DefinitionError(
                f"sandbox mode must be one of {[m.value for m in Mode]}, got {self.mode!r}"
            ) from None
        if not (isinstance(self.timeout, int | float) and self.timeout > 0):
            raise DefinitionError(f"sandbox timeout must be positive seconds, got {self.timeout!r}")
        if self.workspace is not None and not self.workspace.is_dir():
            raise DefinitionError(
                f"sandbox workspace {str(self.workspace)!r} is not a directory; "
                "give the directory to copy into /workspace, or None for an empty one"
            )
        if not os.path.isabs(self.python):
            raise DefinitionError(f"sandbox python must be an absolute path, got {self.python!r}")
        for key, value in self.env.items():
            if (
                not (isinstance(key, str) and isinstance(value, str))
                or "=" in key
                or not key
                or "\0" in key
                or "\0" in value
            ):
                raise DefinitionError(
                    f"sandbox env entries must be NAME: text without NUL, got {key!r}: "
                    f"{str(value)[:20]!r}..."
                )
        uids = self.sandbox_uids
        if not (isinstance(uids, range) and len(uids) > 0 and uids.step == 1 and uids[0] > 0):
            raise DefinitionError(
                f"sandbox_uids must be a non-empty range of positive uids, got {uids!r}"
            )
        for path in self.read_only:
            if not os.path.isabs(path):
                raise DefinitionError(f"sandbox read_only paths must be absolute, got {path!r}")

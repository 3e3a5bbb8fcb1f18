"""How the sandboxed process is started: the bubblewrap command line, and whether it can run.

The sandbox gets new user, PID, IPC, UTS, network (and, where the kernel
allows, cgroup) namespaces; ``/usr`` read-only (the interpreter and its
libraries) and nothing else of the host's file system; a minimal ``/dev``;
``/proc`` of its own PID namespace; a private ``/tmp`` and ``/workspace``
(size-bounded tmpfs); an empty environment but what is configured; no new
user namespaces inside; a seccomp filter (`callgate.sandbox.seccomp`). It
dies with its parent and runs in a session of its own; bubblewrap's init is its
PID namespace's first process, so the namespace, and everything in it, ends when
bubblewrap is killed or the guest exits.

When the host runs as root, bubblewrap itself is started as an unprivileged
user, a uid of its own per running sandbox (`SandboxConfig.sandbox_uids`,
`callgate.sandbox.uids`), so the same unprivileged-user-namespace path is taken
as for any other user, and what the kernel counts per user is counted per
sandbox.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from callgate.sandbox.config import SandboxConfig

__all__ = [
    "Files",
    "bwrap_command",
    "env_arguments",
    "system_binds",
    "unavailable_reason",
    "unprivileged",
]

GUEST_DIR = "/callgate"
GUEST_PATH = GUEST_DIR + "/guest.py"
GUEST_CODE = GUEST_DIR + "/guest.code"
_RUN_CODE = f"import marshal; exec(marshal.loads(open({GUEST_CODE!r}, 'rb').read()))"
"""How a compiled guest starts: its code object, unmarshalled (no compile at every start)."""
SEED_PATH = "/tmp/.callgate-seed.tar"
WORKSPACE = "/workspace"


@dataclass(frozen=True, slots=True)
class Files:
    """Descriptors handed to bubblewrap, each read once while it sets the sandbox up."""

    guest: int
    compiled: bool
    """Whether ``guest`` holds the guest's code object (marshal), not its source."""
    seed: int | None
    seccomp: int | None
    arguments: int | None = None
    """bubblewrap options read from a descriptor (``--args``): the environment, which must
    never be on a command line (any local user can read those)."""


def unprivileged(uid: int | None) -> tuple[list[str], dict[str, Any]]:
    """How to start bubblewrap as ``uid`` (when we are root; None: as ourselves): a command
    prefix, or ``subprocess`` keyword arguments.

    ``setpriv`` (util-linux) drops to the uid after a ``vfork``; changing user in
    ``subprocess`` itself needs a full ``fork`` of the host process, which costs in
    proportion to its memory (54 ms against 6.5 ms from a 446 MB host here:
    ``benchmarks/sandbox.py --ballast-mb 400``).
    """
    if uid is None:
        return [], {}
    prefix = _unprivileged_prefix(uid)
    if prefix:
        return prefix, {}
    return [], {"user": uid, "group": uid, "extra_groups": []}


def _unprivileged_prefix(uid: int) -> list[str]:
    setpriv = _setpriv_path()
    if setpriv is None:
        return []
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


@functools.cache
def _setpriv_path() -> str | None:
    return shutil.which("setpriv") or (
        "/usr/bin/setpriv" if os.access("/usr/bin/setpriv", os.X_OK) else None
    )


def system_binds() -> list[str]:
    """``/usr`` read-only, and the merged-/usr links (or binds, on a split system)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
        host = "/" + name
        if os.path.islink(host):
            args += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            args += ["--ro-bind", host, host]
    return args


def bwrap_command(
    config: SandboxConfig,
    files: Files,
    bridge_fd: int,
    env: Mapping[str, str],
    *,
    status_fd: int | None = None,
) -> list[str]:
    """The full command line that runs the guest under bubblewrap.

    ``status_fd``: where bubblewrap writes its JSON status (the host pid of the PID
    namespace's init, which the host kills to end the namespace)."""
    limits = config.limits
    args = [
        _bwrap_path() or "bwrap",
    ]
    if status_fd is not None:
        args += ["--json-status-fd", str(status_fd)]
    args += [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--unshare-cgroup-try",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        # No --as-pid-1: bubblewrap's own init is the PID namespace's first process. It
        # carries the parent-death signal (--die-with-parent), which the code cannot clear
        # (it is not the code's process), and it exits when the guest does; either way the
        # kernel then ends every process left in the namespace, whatever they did to their
        # own death signal or session (tests/sandbox/test_lifetime.py).
        "--uid",
        "1000",
        "--gid",
        "1000",
        "--hostname",
        "sandbox",
        "--clearenv",
    ]
    if files.arguments is not None:
        args += ["--args", str(files.arguments)]  # the environment (`env_arguments`)
    else:
        args += env_arguments_list(env)
    args += system_binds()
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        # bubblewrap's /dev is a tmpfs of half the host's memory: /dev/shm gets a bounded
        # tmpfs of its own, and /dev itself is made read-only below
        "--size",
        str(limits.shm_bytes),
        "--tmpfs",
        "/dev/shm",
        "--size",
        str(limits.tmp_bytes),
        "--tmpfs",
        "/tmp",
        "--size",
        str(limits.workspace_bytes),
        "--tmpfs",
        WORKSPACE,
    ]
    # After the private /tmp: an interpreter or a read-only path under /tmp (a checkout
    # there, its venv) must not be hidden by the tmpfs mounted over it.
    args += _interpreter_binds(config.python, config.read_only)
    args += [
        "--dir",
        GUEST_DIR,
        "--ro-bind-data",
        str(files.guest),
        GUEST_CODE if files.compiled else GUEST_PATH,
    ]
    if files.seed is not None:
        args += ["--file", str(files.seed), SEED_PATH]
    if files.seccomp is not None:
        args += ["--seccomp", str(files.seccomp)]
    # /proc read-only: bubblewrap's init (PID 1) runs as the code's user and is dumpable, so
    # the code could open /proc/1/mem for writing and make the init run its own program,
    # outside every limit the guest sets (tests/sandbox/test_lifetime.py). Writes to the
    # sandbox's own /proc/sys settings go with it.
    args += ["--remount-ro", "/dev", "--remount-ro", "/proc", "--remount-ro", "/"]
    args += ["--chdir", WORKSPACE, "--"]
    if files.compiled:
        args += [config.python, "-I", "-S", "-B", "-c", _RUN_CODE]
    else:
        args += [config.python, "-I", "-S", "-B", GUEST_PATH]
    args += [str(bridge_fd), str(limits.message_bytes)]
    return args


def env_arguments_list(env: Mapping[str, str]) -> list[str]:
    """``--setenv NAME VALUE`` for each variable."""
    args: list[str] = []
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args


def env_arguments(env: Mapping[str, str]) -> bytes:
    """The environment as bubblewrap's ``--args`` data: NUL-separated ``--setenv`` options
    (`SandboxConfig` refuses a NUL in a name or value, which would smuggle in an option)."""
    return b"".join(arg.encode() + b"\0" for arg in env_arguments_list(env))


@functools.cache
def _bwrap_path() -> str | None:
    return shutil.which("bwrap") or next(
        (p for p in ("/usr/bin/bwrap", "/bin/bwrap") if os.access(p, os.X_OK)), None
    )


def _interpreter_binds(python: str, read_only: tuple[str, ...]) -> list[str]:
    """Read-only binds of an interpreter outside ``/usr`` (its prefix) and of the
    configured extra paths."""
    args: list[str] = []
    python_dir = os.path.dirname(os.path.realpath(python))
    if not python_dir.startswith("/usr/"):
        prefix = os.path.dirname(python_dir)
        args += ["--ro-bind", prefix, prefix]
    for path in read_only:
        args += ["--ro-bind", path, path]
    return args


@functools.cache
def _probe(python: str, read_only: tuple[str, ...], uid: int | None) -> str | None:
    bwrap = _bwrap_path()
    if bwrap is None:
        return (
            "bubblewrap (bwrap) is not installed: install the Debian package 'bubblewrap' "
            "(apt-get install bubblewrap); run_python refuses to run code without it"
        )
    if not os.access(python, os.X_OK):
        return (
            f"the sandbox interpreter {python!r} does not exist or is not executable (by "
            "this user); run_python refuses to run code without it"
        )
    command = [
        bwrap,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--disable-userns",
        "--die-with-parent",
        *system_binds(),
        *_interpreter_binds(python, read_only),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
        python,
        "-I",
        "-S",
        "-c",
        "pass",
    ]
    prefix: list[str] = []
    if uid is not None:
        prefix = _unprivileged_prefix(uid)
    try:
        done = subprocess.run(
            [*prefix, *command],
            capture_output=True,
            timeout=10,
            env={},
            stdin=subprocess.DEVNULL,
            check=False,
            user=uid if not prefix else None,
            group=uid if not prefix else None,
            extra_groups=[] if uid is not None and not prefix else None,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not be started ({type(exc).__name__}: {exc})"
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip()[:300]
        if "execvp" in detail or "source path" in detail:
            who = f"uid {uid}" if uid is not None else "this user"
            return (
                f"the sandbox could not start its interpreter {python!r} ({detail}): it and the "
                f"paths bound for it (its prefix, read_only paths) must be readable by {who}; "
                "run_python refuses to run code without it"
            )
        return (
            f"bubblewrap cannot create the sandbox's namespaces here ({detail or 'no message'}): "
            "unprivileged user namespaces must be enabled (sysctl user.max_user_namespaces > 0, "
            "and kernel.unprivileged_userns_clone=1 or an AppArmor profile that allows bwrap); "
            "run_python refuses to run code without them"
        )
    return None


def unavailable_reason(config: SandboxConfig | None = None) -> str | None:
    """Why bubblewrap sandboxes cannot run here (None: they can). Checked once per process."""
    config = config if config is not None else SandboxConfig()
    uid = config.sandbox_uids[0] if os.geteuid() == 0 else None
    return _probe(config.python, config.read_only, uid)

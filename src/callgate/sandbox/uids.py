"""A host uid of its own for each running sandbox, when the host runs as root.

The kernel counts some things per host user across every user namespace that user
owns (epoll watches, pending signals, message-queue bytes; inotify instances, which the
seccomp filter refuses anyway), so sandboxes sharing one uid share those budgets: one
could exhaust them for the others. As root, each sandbox is started as a uid leased from
`SandboxConfig.sandbox_uids`: an exclusive ``flock`` on one lock file per uid, in a
root-only directory, held for the sandbox's lifetime. The lock is released by the
kernel when its descriptor closes (or the process dies), so a crash leaks no lease.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import random
import stat
import tempfile
from collections.abc import Iterator

__all__ = ["UidsExhausted", "lease_uid"]

_DIRECTORIES = ("/run/callgate-sandbox-uids", None)
"""Where the lock files live: ``/run`` (a tmpfs, cleared at boot), else the temp dir."""
_TRIES = 64


class UidsExhausted(RuntimeError):
    """Every uid tried from `SandboxConfig.sandbox_uids` is leased to a running sandbox."""


def _directory() -> str:
    """A directory only root can write, for the lock files (made if missing)."""
    for candidate in _DIRECTORIES:
        path = candidate or os.path.join(tempfile.gettempdir(), "callgate-sandbox-uids-0")
        with contextlib.suppress(FileExistsError):
            try:
                os.mkdir(path, 0o700)
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EROFS, errno.ENOENT):
                    continue
                raise
        info = os.lstat(path)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and not info.st_mode & 0o022:
            return path
    raise UidsExhausted(
        "no root-only directory for the sandbox uid locks (/run/callgate-sandbox-uids or "
        "the temp dir): make one with mode 0700"
    )


@contextlib.contextmanager
def lease_uid(uids: range) -> Iterator[int]:
    """Hold one uid of ``uids`` that no other sandbox (of any process) holds."""
    directory = _directory()
    start = random.randrange(len(uids))
    for step in range(min(_TRIES, len(uids))):
        uid = uids[(start + step) % len(uids)]
        fd = os.open(
            os.path.join(directory, str(uid)),
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield uid
        finally:
            os.close(fd)
        return
    raise UidsExhausted(
        f"the {min(_TRIES, len(uids))} uids tried of SandboxConfig.sandbox_uids are all in use "
        "by running sandboxes; give a larger range"
    )

"""Memory and limits per sandbox: every tmpfs bounded, no memory outside the bounds, and
process limits counted per sandbox (never shared with the host user or another sandbox).

Written from the attacker's side; each was run against the sandbox before the change
(``/dev/shm`` took 64 MiB, SysV shared memory and memfds were handed out, a non-root
sandbox got more processes than its limit), and the memory attempts are run unconfined in
`test_the_memory_detectors_fire_without_the_sandbox`.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from callgate.sandbox import Limits, SandboxConfig, SandboxResult, run_code
from callgate.sandbox.protocol import CallRequest

from .test_escapes import attempt

FILL_DEV_SHM = """
import os
try:
    for i in range(64):
        with open(f'/dev/shm/cg-fill-{i}', 'wb') as f:
            f.write(b'x' * (1 << 20))
    print('ESCAPED 64 MiB in /dev/shm')
finally:
    for i in range(64):
        if os.path.exists(f'/dev/shm/cg-fill-{i}'):
            os.unlink(f'/dev/shm/cg-fill-{i}')
"""

MEMORY_ATTEMPTS: dict[str, str] = {
    "fill /dev/shm past its bound": FILL_DEV_SHM,
    "write into /dev itself": "open('/dev/fill-me', 'wb').write(b'x'); print('ESCAPED')",
    "SysV shared memory": """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmget.restype = ctypes.c_int
        shm = libc.shmget(0, ctypes.c_size_t(256 << 20), 0o1600)
        if shm < 0:
            raise OSError(ctypes.get_errno(), 'shmget refused')
        libc.shmctl(shm, 0, None)  # IPC_RMID
        print('ESCAPED shmget', shm)
        """,
    "SysV message queue and semaphores": """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        q = libc.msgget(0, 0o1600)
        s = libc.semget(0, 4, 0o1600)
        if q < 0 and s < 0:
            raise OSError(ctypes.get_errno(), 'msgget and semget refused')
        print('ESCAPED', q, s)
        """,
    "a memfd": "import os; fd = os.memfd_create('x'); os.ftruncate(fd, 1 << 20); print('ESCAPED')",
    "a POSIX message queue": """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        q = libc.mq_open(b'/cg', 0o100 | 2, 0o600, None)
        if q < 0:
            raise OSError(ctypes.get_errno(), 'mq_open refused')
        print('ESCAPED', q)
        """,
    # Kernel memory no tmpfs or address-space limit counts: with SO_SNDBUF and SO_RCVBUF
    # raised to 4 MiB (wmem_max here), 28 processes of one sandbox filling socketpairs held
    # 1.1-1.4 GiB of the host's memory (MemAvailable), against 46-82 MiB at the default
    # sizes; pipes resized with F_SETPIPE_SZ hold 1 MiB each instead of 64 KiB.
    "socket buffers raised past their default": """
        import socket
        a, b = socket.socketpair()
        before = a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        after = a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        print('ESCAPED' if after > before else 'BLOCKED', before, after)
        """,
    "a pipe resized past its default": """
        import fcntl, os
        r, w = os.pipe()
        before = fcntl.fcntl(w, 1032)  # F_GETPIPE_SZ
        fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
        after = fcntl.fcntl(w, 1032)
        print('ESCAPED' if after > before else 'BLOCKED', before, after)
        """,
    "an inotify instance": """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.inotify_init() < 0:
            raise OSError(ctypes.get_errno(), 'inotify_init refused')
        print('ESCAPED')
        """,
}


@pytest.mark.parametrize("name", sorted(MEMORY_ATTEMPTS))
def test_memory_outside_the_bounds_is_refused(
    name: str, sandboxed: Callable[..., SandboxResult]
) -> None:
    """Each attempt at memory no bound counts fails inside the sandbox."""
    result = sandboxed(attempt(MEMORY_ATTEMPTS[name]), shm_bytes=8 << 20)
    assert "ESCAPED" not in result.stdout, result.stdout
    assert "BLOCKED" in result.stdout, (result.stdout, result.stderr)


@pytest.mark.parametrize(
    "name",
    [
        "fill /dev/shm past its bound",
        "SysV shared memory",
        "a memfd",
        "socket buffers raised past their default",
        "a pipe resized past its default",
    ],
)
def test_the_memory_detectors_fire_without_the_sandbox(
    name: str, sandboxed: Callable[..., SandboxResult]
) -> None:
    """Unconfined, the same attempts succeed: the checks above can fail."""
    result = sandboxed(attempt(MEMORY_ATTEMPTS[name]), mode="unsafe_subprocess")
    assert "ESCAPED" in result.stdout, (result.stdout, result.stderr)


def test_dev_shm_holds_what_its_bound_allows(sandboxed: Callable[..., SandboxResult]) -> None:
    """/dev/shm works (POSIX shared memory, multiprocessing's semaphores) up to its size."""
    result = sandboxed(attempt(FILL_DEV_SHM), shm_bytes=8 << 20)
    assert "No space left on device" in result.stdout, (result.stdout, result.stderr)


FORKS = """
import os, time
count = 0
try:
    while count < 200:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        count += 1
except OSError:
    pass
print('forked', count, flush=True)
"""


def test_the_process_limit_is_the_sandboxs_own(sandboxed: Callable[..., SandboxResult]) -> None:
    """The code starts fewer processes than ``Limits.processes``, as root and as any other
    user (the host user's own processes are not added to the limit)."""
    result = sandboxed(FORKS, processes=8)
    forked = int(result.stdout.split()[1])
    assert 1 <= forked < 8, (result.stdout, result.stderr)


def test_one_sandboxs_fork_bomb_leaves_another_its_processes(bwrap_available: None) -> None:
    """Two sandboxes at once: one takes every process its limit allows and holds them; the
    other still starts its own."""
    config = SandboxConfig(timeout=10, limits=Limits(processes=8))
    holder = FORKS + "time.sleep(1.5)\n"

    async def both() -> tuple[SandboxResult, SandboxResult]:
        first = asyncio.ensure_future(run_code(holder, config))
        await asyncio.sleep(0.7)
        second = await run_code(FORKS, config)
        return await first, second

    first, second = asyncio.run(both())
    assert int(first.stdout.split()[1]) >= 5, first
    assert int(second.stdout.split()[1]) >= 5, second


def _host_uid(token: str) -> int | None:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if token.encode() in Path(f"/proc/{entry.name}/environ").read_bytes():
                    return os.stat(f"/proc/{entry.name}").st_uid
            except OSError:
                continue
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="a uid per sandbox needs root to hand out")
def test_as_root_each_sandbox_runs_as_a_uid_of_its_own(bwrap_available: None) -> None:
    """Two sandboxes running at once have different host uids, so what the kernel counts per
    user (processes, epoll watches, pending signals) is counted per sandbox."""
    seen: dict[str, int | None] = {}
    both_in = asyncio.Event()

    def answer_for(token: str) -> Callable[[CallRequest], Any]:
        async def answer(request: CallRequest) -> dict[str, Any]:
            seen[token] = _host_uid(token)
            if len(seen) == 2:
                both_in.set()
            await asyncio.wait_for(both_in.wait(), 5)
            return {"status": "ok", "content": "done"}

        return answer

    async def one(token: str) -> SandboxResult:
        config = SandboxConfig(timeout=10, env={"CG_UID_TOKEN": token})
        return await run_code(
            "import tools; tools.wait()",
            config,
            tools=[{"name": "wait", "doc": ""}],
            answer=answer_for(token),
        )

    async def both() -> list[SandboxResult]:
        return list(await asyncio.gather(one(uuid.uuid4().hex), one(uuid.uuid4().hex)))

    results = asyncio.run(both())
    assert all(r.exit_code == 0 for r in results), results
    uids = list(seen.values())
    assert None not in uids, seen
    assert uids[0] != uids[1], seen
    assert 0 not in uids

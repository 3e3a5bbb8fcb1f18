"""A sandbox's lifetime is its call's: nothing the code starts outlives the call.

The attacker clears its parent-death signal (``prctl(PR_SET_PDEATHSIG, 0)``), starts a
daemon in a session of its own through a double fork (which clears the signal too), and
then returns, runs into the deadline, or breaks the bridge protocol. After the call the
host looks through ``/proc`` for the daemon. Run with ``mode="unsafe_subprocess"`` the same
daemon survives (`test_the_detector_sees_a_survivor_without_the_sandbox`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from callgate.sandbox import SandboxResult

DAEMON = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None)
libc.prctl(1, 0)  # PR_SET_PDEATHSIG: none for the code itself
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        libc.prctl(1, 0)
        os.execv(sys.executable, [sys.executable, '-c',
                 'import time\\nwhile True: time.sleep(0.05)', {token!r}])
    os._exit(0)
time.sleep(0.3)
print('daemon started', flush=True)
"""

ENDINGS = {
    "return": "",
    "deadline": "import time\nwhile True: time.sleep(0.1)\n",
    "violation": "import os, sys\nos.write(int(sys.argv[1]), b'\\x00\\x00\\x00\\x05hello')\n"
    "import time; time.sleep(30)\n",
}


def _survivors(token: str) -> set[int]:
    found = set()
    marker = token.encode()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if marker in Path(f"/proc/{entry.name}/cmdline").read_bytes():
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def _left_after(token: str) -> set[int]:
    """Processes carrying ``token`` a moment after the call (then killed, so that a failing
    test leaves nothing behind)."""
    left: set[int] = set()
    for _ in range(20):
        left = _survivors(token)
        if not left:
            break
        time.sleep(0.05)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_a_daemon_that_clears_its_death_signal_dies_with_the_call(
    ending: str, sandboxed: Callable[..., SandboxResult]
) -> None:
    """Return, deadline or violation: the daemon is gone when the call returns."""
    token = "cg-daemon-" + uuid.uuid4().hex
    result = sandboxed(DAEMON.format(token=token) + ENDINGS[ending], timeout=2.0)
    assert "daemon started" in result.stdout, (result.stdout, result.stderr)
    if ending == "deadline":
        assert result.timed_out
    if ending == "violation":
        assert result.violation is not None
    assert not _left_after(token), f"the daemon outlived a call that ended by {ending}"


def test_the_detector_sees_a_survivor_without_the_sandbox(
    sandboxed: Callable[..., SandboxResult],
) -> None:
    """Unconfined, the same daemon survives the call: the check above can fail."""
    token = "cg-daemon-" + uuid.uuid4().hex
    result = sandboxed(DAEMON.format(token=token), mode="unsafe_subprocess")
    assert "daemon started" in result.stdout, (result.stdout, result.stderr)
    assert _left_after(token)


STATUSES = [
    ("exit(3)", "import sys; sys.exit(3)", 3),
    ("SIGKILL to itself", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 137),
    ("a segmentation fault", "import ctypes; ctypes.string_at(0)", 139),
]
"""A kill by the CPU limit (137) is tested in
`test_escapes.py::test_cpu_time_limit_kills_a_spin_before_the_deadline`."""


@pytest.mark.parametrize("mode", ["bwrap", "unsafe_subprocess"])
@pytest.mark.parametrize(("what", "code", "status"), STATUSES, ids=[s[0] for s in STATUSES])
def test_exit_status_is_what_a_shell_reports(
    mode: str, what: str, code: str, status: int, sandboxed: Callable[..., SandboxResult]
) -> None:
    """``exit_code`` is the status as a shell reports it, 128+N for a kill by signal N, in
    both modes (docs/sandbox.md)."""
    result = sandboxed(code, mode=mode, cpu_seconds=1, timeout=10)
    assert result.exit_code == status, (what, result)
    assert not result.timed_out


# The code writes a few instructions into bubblewrap's init (PID 1 of its namespace) through
# /proc/1/mem, where the init waits in wait4, and wakes it with an orphan that exits: the
# init then runs execve of python3 with the attacker's program, as PID 1, outside every
# limit the guest set on itself (run only confined: unconfined, PID 1 is the host's init).
TAKE_OVER_INIT = r"""
import os, struct, time
rip = int(open('/proc/1/syscall').read().split()[-1], 16)
payload = (
    "import os, resource\n"
    "soft = resource.getrlimit(resource.RLIMIT_AS)[0]\n"
    "print('ESCAPED init runs our code, pid', os.getpid(), 'RLIMIT_AS', soft, flush=True)\n"
)
strings = [b'/usr/bin/python3\0', b'-c\0', payload.encode() + b'\0']
code_len = 29
data_at = rip + 32
addresses, blob = [], b''
for s in strings:
    addresses.append(data_at + len(blob))
    blob += s
blob += b'\0' * (-(data_at + len(blob)) % 8)
argv_at = data_at + len(blob)
blob += struct.pack('<4Q', *addresses, 0)
code = (b'\x48\xbf' + struct.pack('<Q', addresses[0]) + b'\x48\xbe' + struct.pack('<Q', argv_at)
        + b'\x31\xd2' + b'\xb8\x3b\x00\x00\x00' + b'\x0f\x05')
assert len(code) == code_len
try:
    with open('/proc/1/mem', 'r+b', buffering=0) as mem:
        mem.seek(rip)
        mem.write(code + b'\x90' * (data_at - rip - code_len) + blob)
except OSError as exc:
    print('BLOCKED', exc)
if os.fork() == 0:
    if os.fork() == 0:
        time.sleep(0.3)
        os._exit(0)
    os._exit(0)
os.wait()
time.sleep(1.5)
"""


def test_the_code_cannot_write_into_bubblewraps_init(
    sandboxed: Callable[..., SandboxResult],
) -> None:
    """bubblewrap's init runs as the code's own user and is dumpable, so ptrace's rules let
    the code open ``/proc/1/mem`` for writing (ptrace itself is refused; this is not). Before
    ``/proc`` was read-only, the attack above made PID 1 run the attacker's program with no
    address-space, CPU or process limit (RLIMIT_AS unlimited, NOFILE the host's)."""
    result = sandboxed(TAKE_OVER_INIT, timeout=8)
    assert "ESCAPED" not in result.stdout, (result.stdout, result.stderr)
    assert "BLOCKED" in result.stdout, (result.stdout, result.stderr)
    assert "Read-only file system" in result.stdout

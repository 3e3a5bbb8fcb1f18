"""The escape suite: model-written code tries to get out of the sandbox, and never does.

Each attempt is code that prints ``ESCAPED`` if it got what it wanted and
``BLOCKED`` with the reason if the sandbox stopped it. A test passes only on
positive evidence (``BLOCKED`` printed, or the run killed), and every attempt
also leaves the host unchanged: a sentinel file keeps its content, a real
local service sees no connection, and no process of the sandbox outlives it.
`test_the_suite_sees_escapes_without_the_sandbox` runs attempts unconfined to
prove the detectors can fail.
"""

from __future__ import annotations

import os
import signal
import socket
import socketserver
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from callgate.ledger import SQLiteLedger
from callgate.sandbox import SandboxResult

SECRET_ENV = "CALLGATE_ESCAPE_TEST_SECRET"
SECRET_VALUE = "s3cret-" + uuid.uuid4().hex


def attempt(body: str) -> str:
    """Wrap an attempt: any exception is the sandbox saying no."""
    return (
        "try:\n"
        + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
        + "\nexcept BaseException as exc:\n"
        + "    print('BLOCKED', type(exc).__name__, str(exc)[:200])\n"
    )


def _marked(token: str) -> set[int]:
    """Host pids of processes carrying ``token`` in their environment: the processes of one
    test's sandbox (the guest and everything it started inherit it), whoever else runs
    sandboxes on this machine at the same time."""
    marker = token.encode()
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                environ = Path(f"/proc/{entry.name}/environ").read_bytes()
                cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            except OSError:
                continue
            if marker in environ or b"cg-orphan-token" in cmdline:
                found.add(int(entry.name))
    return found


class Host:
    """The host state the attempts must leave alone."""

    def __init__(self, root: Path) -> None:
        self.sentinel = Path("/var/tmp") / f"callgate-sentinel-{uuid.uuid4().hex}"
        self.sentinel.write_text("untouched")
        self.sentinel.chmod(0o666)
        self.ledger_path = root / "ledger.db"
        ledger = SQLiteLedger(str(self.ledger_path))
        ledger.close()
        self.ledger_bytes = self.ledger_path.read_bytes()
        self.connections = 0
        host = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                host.connections += 1

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        self.abstract = "\0callgate-escape-" + uuid.uuid4().hex
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.abstract)
        self.unix.listen(1)
        self.unix.setblocking(False)
        self.token = "cg-escape-" + uuid.uuid4().hex
        ssh = Path.home() / ".ssh"
        self.made_ssh = not ssh.exists()
        ssh.mkdir(mode=0o700, exist_ok=True)
        self.ssh_key = ssh / f"id_callgate_escape_{uuid.uuid4().hex}"
        """A private key that exists on the host (the attempt must find something to steal)."""
        self.ssh_key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot a real key\n")
        self.ssh_key.chmod(0o600)
        self.holder = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)"],
            env={SECRET_ENV: SECRET_VALUE},
        )
        """A real host process with the secret in its environment (in /proc/PID/environ)."""
        self.env = {"CALLGATE_ESCAPE_RUN": self.token}
        """Given to the sandbox: its processes are found by it (`_marked`)."""

    def check_unchanged(self) -> None:
        assert self.sentinel.read_text() == "untouched"
        assert self.ledger_path.read_bytes() == self.ledger_bytes
        assert self.connections == 0
        with pytest.raises(BlockingIOError):
            self.unix.accept()
        for _ in range(60):  # the sandbox's processes die with its namespace
            left = _marked(self.token) - {os.getpid()}
            if not left:
                break
            time.sleep(0.05)
        assert not left, f"sandbox processes outlived the run: {left}"

    def close(self) -> None:
        self.holder.kill()
        self.holder.wait()
        self.ssh_key.unlink(missing_ok=True)
        if self.made_ssh:
            self.ssh_key.parent.rmdir()
        self.server.shutdown()
        self.server.server_close()
        self.unix.close()
        self.sentinel.unlink(missing_ok=True)


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Host]:
    """A host with things worth stealing; checked unchanged after each attempt."""
    monkeypatch.setenv(SECRET_ENV, SECRET_VALUE)
    state = Host(tmp_path)
    try:
        yield state
        state.check_unchanged()
    finally:
        state.close()


ELF = """
        import struct
        CODE = bytes.fromhex('bf02000000be0100000031d2b8290000000f0589c7b83c0000000f05')
        SIZE = 64 + 56 + len(CODE)
        ELF = struct.pack('<4sBBBB8xHHIQQQIHHHHHH', b'\\x7fELF', 2, 1, 1, 0, 2, 0x3E, 1,
                          0x400078, 64, 0, 0, 64, 56, 1, 64, 0, 0)
        ELF += struct.pack('<IIQQQQQQ', 1, 5, 0, 0x400000, 0x400000, SIZE, SIZE, 0x1000) + CODE
"""
"""A static x86-64 program of 151 bytes, made inside: ``socket(AF_INET, SOCK_STREAM)``,
then exit with the result's low byte (a descriptor number: it got a socket)."""

# (name, code); {sentinel}, {ledger}, {port}, {abstract}, {pid} are filled in per host.
ATTEMPTS: list[tuple[str, str]] = [
    ("read /etc/shadow", "print('ESCAPED', open('/etc/shadow').read()[:40])"),
    ("read /etc/passwd", "print('ESCAPED', open('/etc/passwd').read()[:40])"),
    ("list the host's home", "import os; print('ESCAPED', os.listdir('/root'))"),
    ("read an SSH key", "print('ESCAPED', open({ssh_key!r}).read()[:40])"),
    ("read the ledger file", "print('ESCAPED', open({ledger!r}, 'rb').read()[:40])"),
    ("read the working tree", "print('ESCAPED', open('/work/main/pyproject.toml').read()[:40])"),
    ("read a host file in /var/tmp", "print('ESCAPED', open({sentinel!r}).read())"),
    (
        "find the host's secret in any /proc/*/environ",
        """
        import os
        for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
            try:
                data = open(f'/proc/{{pid}}/environ', 'rb').read()
            except OSError:
                continue
            if {secret!r}.encode() in data:
                print('ESCAPED', pid)
        raise PermissionError('secret found in no visible process')
        """,
    ),
    (
        "inherit the host's environment",
        """
        import os
        if {secret_env!r} in os.environ:
            print('ESCAPED', os.environ[{secret_env!r}])
        raise LookupError(sorted(os.environ))
        """,
    ),
    ("see the host's processes", "print('ESCAPED', open('/proc/{pid}/cmdline').read())"),
    (
        "write a host file by absolute path",
        "open({sentinel!r}, 'w').write('owned'); print('ESCAPED')",
    ),
    ("write outside the workspace: /etc", "open('/etc/evil', 'w').write('x'); print('ESCAPED')"),
    (
        "write outside the workspace: /usr",
        "open('/usr/lib/evil', 'w').write('x'); print('ESCAPED')",
    ),
    (
        "write outside the workspace with ..",
        "open('../../usr/bin/evil', 'w').write('x'); print('ESCAPED')",
    ),
    (
        "write the guest program",
        "open('/callgate/guest.py', 'a').write('x'); print('ESCAPED')",
    ),
    (
        "write through a symlink to a host path",
        """
        import os
        os.symlink({sentinel!r}, 'link')
        open('link', 'w').write('owned')
        print('ESCAPED')
        """,
    ),
    (
        "hard-link a host file into the workspace",
        "import os; os.link('/usr/bin/python3', 'py'); print('ESCAPED')",
    ),
    (
        "bind-mount a host path (mount via ctypes)",
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        os.mkdir('m')
        if libc.mount(b'/usr', b'm', None, 4096, None) != 0:
            raise OSError(ctypes.get_errno(), 'mount refused')
        print('ESCAPED')
        """,
    ),
    (
        "a new user namespace (unshare via ctypes)",
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(0x10000000) != 0:
            raise OSError(ctypes.get_errno(), 'unshare refused')
        print('ESCAPED')
        """,
    ),
    ("chroot", "import os; os.chroot('/workspace'); print('ESCAPED')"),
    ("open an internet socket", "import socket; socket.socket(); print('ESCAPED')"),
    (
        "resolve DNS",
        "import socket; print('ESCAPED', socket.getaddrinfo('example.com', 80))",
    ),
    (
        "reach a 127.0.0.1 service",
        "import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('ESCAPED')",
    ),
    (
        "reach a host abstract unix socket",
        """
        import socket
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect({abstract!r})
        print('ESCAPED')
        """,
    ),
    (
        "signal the host test process",
        "import os, signal; os.kill({pid}, signal.SIGTERM); print('ESCAPED')",
    ),
    (
        "ptrace its own child (ctypes)",
        """
        import ctypes, os, time
        libc = ctypes.CDLL(None, use_errno=True)
        child = os.fork()
        if child == 0:
            time.sleep(10)
            os._exit(0)
        try:
            if libc.ptrace(16, child, None, None) != 0:
                raise OSError(ctypes.get_errno(), 'ptrace refused')
            print('ESCAPED')
        finally:
            os.kill(child, 9)
        """,
    ),
    (
        "ctypes: become root",
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setuid(0) != 0 or os.getuid() != 0:
            raise OSError(ctypes.get_errno(), 'setuid refused')
        open('/usr/evil', 'w')
        print('ESCAPED')
        """,
    ),
    (
        "ctypes: raw bpf and keyctl syscalls",
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(321, 0, None, 0) == -1 and libc.syscall(250, 0, 0, 0, 0, 0) == -1:
            raise OSError(ctypes.get_errno(), 'bpf and keyctl refused')
        print('ESCAPED')
        """,
    ),
    (
        "native code loaded from the workspace opens a socket",
        """
        import ctypes, shutil
        shutil.copy('/usr/lib/x86_64-linux-gnu/libc.so.6', 'mylib.so')
        lib = ctypes.CDLL('/workspace/mylib.so', use_errno=True)
        if lib.socket(2, 1, 0) < 0:
            raise OSError(ctypes.get_errno(), 'socket refused to native code')
        print('ESCAPED')
        """,
    ),
    (
        "change the hostname",
        """
        import socket
        socket.sethostname('owned')
        print('ESCAPED')
        """,
    ),
    ("read a raw disk", "print('ESCAPED', open('/dev/vda', 'rb').read(16))"),
    ("read kernel memory", "print('ESCAPED', open('/dev/mem', 'rb').read(16))"),
    (
        "use a descriptor inherited from the host",
        """
        import os, sys
        bridge = int(sys.argv[1])
        extra = []
        for name in os.listdir('/proc/self/fd'):
            if int(name) in (0, 1, 2, bridge):
                continue
            try:
                extra.append((name, os.readlink('/proc/self/fd/' + name)))
            except OSError:
                pass
        if extra:
            print('ESCAPED', extra)
        raise LookupError('no descriptor but stdio and the bridge')
        """,
    ),
    (
        "reach the host's root through /proc/*/root",
        """
        import os
        for pid in ['self', '1'] + [p for p in os.listdir('/proc') if p.isdigit()]:
            for probe in ('etc/passwd', 'work', 'root'):
                if os.path.exists('/proc/' + pid + '/root/' + probe):
                    print('ESCAPED', pid, probe)
        raise LookupError('no host file system through /proc/*/root')
        """,
    ),
    (
        "32-bit system call (int 0x80) opens an internet socket",
        """
        import ctypes, mmap, os
        code = bytes.fromhex('53b867010000bb02000000b90100000031d2cd805bc3')
        buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        buf.write(code)
        socket32 = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
        child = os.fork()
        if child == 0:
            os._exit(0 if socket32() >= 0 else 1)
        _, status = os.waitpid(child, 0)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            print('ESCAPED')
        raise PermissionError('ia32 socket refused', status)
        """,
    ),
    (
        "x32 system call number opens an internet socket",
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        child = os.fork()
        if child == 0:
            os._exit(0 if libc.syscall(0x40000000 + 41, 2, 1, 0) >= 0 else 1)
        _, status = os.waitpid(child, 0)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            print('ESCAPED')
        raise PermissionError('x32 socket refused', status)
        """,
    ),
    (
        "inject terminal input (TIOCSTI)",
        """
        import fcntl, os, termios
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSTI, b'x')
        print('ESCAPED')
        """,
    ),
    (
        "io_uring",
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        params = ctypes.create_string_buffer(120)
        if libc.syscall(425, 8, params) < 0:
            raise OSError(ctypes.get_errno(), 'io_uring_setup refused')
        print('ESCAPED')
        """,
    ),
    (
        "userfaultfd",
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(323, 0) < 0:
            raise OSError(ctypes.get_errno(), 'userfaultfd refused')
        print('ESCAPED')
        """,
    ),
    (
        "perf_event_open",
        """
        import ctypes, struct
        libc = ctypes.CDLL(None, use_errno=True)
        attr = ctypes.create_string_buffer(struct.pack('=IIQ', 1, 128, 0) + bytes(112))
        if libc.syscall(298, attr, 0, -1, -1, 0) < 0:
            raise OSError(ctypes.get_errno(), 'perf_event_open refused')
        print('ESCAPED')
        """,
    ),
    (
        "the new mount API (fsopen, open_tree)",
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        fs = libc.syscall(430, b'tmpfs', 0)
        tree = libc.syscall(428, -100, b'/', 1)
        if fs < 0 and tree < 0:
            raise OSError(ctypes.get_errno(), 'fsopen and open_tree refused')
        print('ESCAPED', fs, tree)
        """,
    ),
    (
        "move_mount and fsmount",
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        # bad descriptors: EBADF means the call reached the kernel's mount code
        libc.syscall(429, -1, b'', -1, b'', 0)
        moved = ctypes.get_errno()
        libc.syscall(432, -1, 0, 0)
        mounted = ctypes.get_errno()
        if moved != 1 or mounted != 1:
            print('ESCAPED reached', moved, mounted)
        raise PermissionError('move_mount and fsmount refused before the kernel looked')
        """,
    ),
    (
        "clone3 into a new user namespace",
        """
        import ctypes, os, struct
        libc = ctypes.CDLL(None, use_errno=True)
        args = ctypes.create_string_buffer(struct.pack('=8Q', 0x10000000, 0, 0, 0, 17, 0, 0, 0))
        child = libc.syscall(435, args, 64)
        if child == 0:
            os._exit(0)
        if child < 0:
            raise OSError(ctypes.get_errno(), 'clone3 refused')
        os.waitpid(child, 0)
        print('ESCAPED')
        """,
    ),
    (
        "execute a static binary from a memfd",
        ELF.rstrip("\n")
        + """
        import os, subprocess
        fd = os.memfd_create('x')
        os.write(fd, ELF)
        status = subprocess.run(['/proc/self/fd/' + str(fd)], pass_fds=[fd]).returncode
        if 0 <= status < 100:
            print('ESCAPED socket', status)
        raise PermissionError('the binary got no socket', status)
        """,
    ),
    (
        "execute a static binary from the workspace",
        ELF.rstrip("\n")
        + """
        import os, subprocess
        with open('static', 'wb') as f:
            f.write(ELF)
        os.chmod('static', 0o755)
        status = subprocess.run(['./static']).returncode
        if 0 <= status < 100:
            print('ESCAPED socket', status)
        raise PermissionError('the binary got no socket', status)
        """,
    ),
    (
        "write a host-wide kernel setting in /proc/sys",
        """
        path = '/proc/sys/vm/swappiness'
        value = open(path).read()
        with open(path, 'w') as f:
            f.write(value)  # the same value back: harmless where it works
        print('ESCAPED')
        """,
    ),
    (
        "bind and listen on a unix socket (the relay's second wall)",
        """
        import socket
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind('\\0callgate-listener')
        s.listen(1)
        print('ESCAPED')
        """,
    ),
]


def _fill(code: str, host: Host, ledger: Path) -> str:
    return textwrap.dedent(code).format(
        sentinel=str(host.sentinel),
        ledger=str(ledger),
        port=host.port,
        abstract=host.abstract,
        pid=os.getpid(),
        secret=SECRET_VALUE,
        secret_env=SECRET_ENV,
        ssh_key=str(host.ssh_key),
    )


@pytest.mark.parametrize(("name", "code"), ATTEMPTS, ids=[a[0] for a in ATTEMPTS])
def test_attempt_is_blocked(
    name: str, code: str, host: Host, sandboxed: Callable[..., SandboxResult]
) -> None:
    """The attempt fails inside the sandbox, says why, and leaves the host as it was."""
    result = sandboxed(attempt(_fill(code, host, host.ledger_path)), timeout=10, env=host.env)
    assert "ESCAPED" not in result.stdout, result.stdout
    assert "BLOCKED" in result.stdout, (result.stdout, result.stderr)


def test_fork_bomb_is_stopped_by_the_process_limit(
    host: Host, sandboxed: Callable[..., SandboxResult]
) -> None:
    """Forking without end hits the process limit; every child dies with the sandbox."""
    code = attempt(
        """
        import os
        while True:
            if os.fork() == 0:
                import time; time.sleep(60)
        """
    )
    result = sandboxed(code, timeout=10, processes=16, env=host.env)
    assert "BLOCKED BlockingIOError" in result.stdout, (result.stdout, result.stderr)


def test_memory_bomb_is_stopped_by_the_address_space_limit(
    host: Host, sandboxed: Callable[..., SandboxResult]
) -> None:
    """Allocating past the memory bound raises MemoryError inside; the host is untouched."""
    code = attempt("data = bytearray(2 << 30); print('ESCAPED', len(data))")
    result = sandboxed(code, memory_bytes=256 << 20, env=host.env)
    assert "BLOCKED MemoryError" in result.stdout, (result.stdout, result.stderr)


def test_disk_fill_of_one_file_is_stopped_by_the_file_size_limit(
    host: Host, sandboxed: Callable[..., SandboxResult]
) -> None:
    """One file cannot grow past the file-size limit."""
    code = attempt(
        """
        with open('big', 'wb') as f:
            for _ in range(64):
                f.write(b'x' * (1 << 20))
        print('ESCAPED')
        """
    )
    result = sandboxed(code, file_bytes=4 << 20, env=host.env)
    assert "BLOCKED OSError" in result.stdout
    assert "File too large" in result.stdout


def test_disk_fill_of_many_files_stops_at_the_workspace_size(
    host: Host, sandboxed: Callable[..., SandboxResult]
) -> None:
    """Many files fill only the workspace's own bounded tmpfs, never the host's disk."""
    code = attempt(
        """
        for i in range(1000):
            with open(f'f{i}', 'wb') as f:
                f.write(b'x' * (1 << 20))
        print('ESCAPED')
        """
    )
    result = sandboxed(code, workspace_bytes=8 << 20, env=host.env)
    assert "No space left on device" in result.stdout, (result.stdout, result.stderr)


def test_disk_fill_of_tmp_stops_at_its_size(
    host: Host, sandboxed: Callable[..., SandboxResult]
) -> None:
    """/tmp is a private, bounded tmpfs too."""
    code = attempt(
        """
        for i in range(1000):
            with open(f'/tmp/f{i}', 'wb') as f:
                f.write(b'x' * (1 << 20))
        print('ESCAPED')
        """
    )
    result = sandboxed(code, tmp_bytes=4 << 20, env=host.env)
    assert "No space left on device" in result.stdout, (result.stdout, result.stderr)


def test_cpu_spin_past_the_timeout_is_killed(
    host: Host, sandboxed: Callable[..., SandboxResult]
) -> None:
    """A busy loop is killed at the wall-clock deadline and reported as timed out."""
    result = sandboxed("while True: pass", timeout=1.0, env=host.env)
    assert result.timed_out
    assert result.exit_code == 128 + signal.SIGKILL  # as a shell reports it


def test_cpu_time_limit_kills_a_spin_before_the_deadline(
    host: Host, sandboxed: Callable[..., SandboxResult]
) -> None:
    """The CPU-time limit ends a spin on its own (the sandbox was not timed out)."""
    result = sandboxed("while True: pass", timeout=30.0, cpu_seconds=1, env=host.env)
    assert not result.timed_out
    assert result.exit_code == 128 + signal.SIGKILL  # as a shell reports it (docs/sandbox.md)


def test_orphaned_background_process_dies_with_the_run(
    host: Host, sandboxed: Callable[..., SandboxResult]
) -> None:
    """A daemon the code leaves behind (new session, double fork) does not outlive the run."""
    code = attempt(
        """
        import subprocess
        subprocess.Popen(
            ['/usr/bin/python3', '-c', 'import time; time.sleep(60)', 'cg-orphan-token'],
            start_new_session=True,
        )
        print('BLOCKED? started a daemon; the host checks it is gone')
        """
    )
    result = sandboxed(code, env=host.env)
    assert "started a daemon" in result.stdout, (result.stdout, result.stderr)
    # host.check_unchanged() (the fixture) finds no cg-orphan-token process left


def test_the_namespace_init_is_out_of_reach_of_the_code(
    host: Host, sandboxed: Callable[..., SandboxResult]
) -> None:
    """The code runs under bubblewrap's init (PID 1 of its namespace, which ends the
    namespace when it dies): its parent is that init, and a SIGKILL to PID 1 from inside is
    ignored by the kernel, so the code cannot end the reaper and orphan its processes."""
    code = (
        "import os, signal\n"
        "print(os.getpid(), os.getppid())\n"
        "os.kill(1, signal.SIGKILL)\n"
        "import time; time.sleep(0.2)\n"
        "print('still here', os.getppid())\n"
    )
    result = sandboxed(code, env=host.env)
    assert result.stdout.split() == ["2", "1", "still", "here", "1"], (result.stdout, result.stderr)
    assert result.exit_code == 0


TWO_AT_ONCE = """
import os, tools
me, other = os.environ['CG_ME'], os.environ['CG_OTHER']
places = ('/tmp', '/dev/shm', os.getcwd())
for place in places:
    with open(os.path.join(place, me), 'w') as f:
        f.write('x')
tools.sync()
found = [p for p in places if os.path.exists(os.path.join(p, other))]
for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
    try:
        if b'CG_ME=' + other.encode() in open('/proc/' + pid + '/environ', 'rb').read():
            found.append('pid ' + pid)
            os.kill(int(pid), 0)  # and could signal it
    except OSError:
        pass
for place in places:
    os.unlink(os.path.join(place, me))
print('ESCAPED' if found else 'BLOCKED', found)
"""


@pytest.mark.parametrize("mode", ["bwrap", "unsafe_subprocess"])
def test_two_sandboxes_at_once_see_nothing_of_each_other(mode: str, bwrap_available: None) -> None:
    """Two sandboxes running at the same moment (a barrier through the bridge): neither sees
    the other's files in /tmp, /dev/shm or its workspace, nor its processes. Unconfined, both
    do (the detector fires)."""
    import asyncio

    from callgate.sandbox import SandboxConfig, run_code

    arrived = asyncio.Event()
    count = [0]

    async def sync(request: object) -> dict[str, str]:
        count[0] += 1
        if count[0] == 2:
            arrived.set()
        await asyncio.wait_for(arrived.wait(), 5)
        return {"status": "ok", "content": "go"}

    async def one(me: str, other: str) -> SandboxResult:
        config = SandboxConfig(timeout=10, mode=mode, env={"CG_ME": me, "CG_OTHER": other})  # type: ignore[arg-type]
        return await run_code(TWO_AT_ONCE, config, tools=[{"name": "sync", "doc": ""}], answer=sync)

    async def both() -> list[SandboxResult]:
        a, b = "cg-two-" + uuid.uuid4().hex, "cg-two-" + uuid.uuid4().hex
        return list(await asyncio.gather(one(a, b), one(b, a)))

    results = asyncio.run(both())
    outputs = [r.stdout for r in results]
    if mode == "bwrap":
        assert all(o.startswith("BLOCKED []") for o in outputs), results
    else:
        # the first to finish removes its files: at least the other one sees them
        assert any(o.startswith("ESCAPED") for o in outputs), results


def test_escape_suite_has_at_least_thirty_attempts() -> None:
    """The issue asks for at least 30 attempts; the table and the named tests hold 57."""
    named = [n for n in globals() if n.startswith("test_") and n != "test_attempt_is_blocked"]
    assert len(ATTEMPTS) + len(named) - 2 >= 30


UNCONFINED = [
    "read /etc/passwd",
    "read the working tree",
    "read an SSH key",
    "find the host's secret in any /proc/*/environ",
    "inherit the host's environment",
    "reach a 127.0.0.1 service",
    "reach the host's root through /proc/*/root",
    "32-bit system call (int 0x80) opens an internet socket",
    "io_uring",
    "execute a static binary from the workspace",
    "bind and listen on a unix socket (the relay's second wall)",
]
"""Attempts that succeed unconfined for any user: each detector above can fire."""
AS_ROOT = [
    "inject terminal input (TIOCSTI)",
    "userfaultfd",
    "perf_event_open",
    "the new mount API (fsopen, open_tree)",
    "move_mount and fsmount",
    "clone3 into a new user namespace",
    "write a host-wide kernel setting in /proc/sys",
]
"""Attempts that succeed unconfined as root (a privilege the sandbox never has)."""


@pytest.mark.parametrize(
    "name",
    [
        *UNCONFINED,
        *(
            pytest.param(
                n, marks=pytest.mark.skipif(os.geteuid() != 0, reason="succeeds as root only")
            )
            for n in AS_ROOT
        ),
    ],
)
def test_the_suite_sees_escapes_without_the_sandbox(
    name: str, tmp_path: Path, sandboxed: Callable[..., SandboxResult]
) -> None:
    """Run unconfined (unsafe_subprocess), the same attempts do escape: the detectors work."""
    os.environ[SECRET_ENV] = SECRET_VALUE
    state = Host(tmp_path)
    try:
        code = dict(ATTEMPTS)[name]
        if name == "inherit the host's environment":
            # unsafe mode empties the environment too; an unconfined process can still read
            # its parent's, which is the escape the sandbox prevents
            code = "print('ESCAPED', open('/proc/{pid}/environ', 'rb').read().count(b'='))"
        result = sandboxed(attempt(_fill(code, state, state.ledger_path)), mode="unsafe_subprocess")
        assert "ESCAPED" in result.stdout, (result.stdout, result.stderr)
    finally:
        os.environ.pop(SECRET_ENV, None)
        state.close()

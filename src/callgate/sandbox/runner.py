"""One run of code: start the sandbox, serve its bridge, bound its output and its time.

`run_code` starts the guest (under bubblewrap, or as a plain child process
in the development mode), sends it the code, the limits and the tools it may
call, answers each call it makes through ``answer`` (the gate), keeps at most
``Limits.output_bytes`` of stdout and of stderr, relays the connections the
gate admitted (`_Relay`: the code holds one end of a socketpair, never a host
socket), and at return, at the wall-clock deadline and at a protocol
violation kills the sandbox's PID-namespace init (its host pid reported by
bubblewrap's ``--json-status-fd``), which ends every process in the namespace.
Whatever happens, nothing it started outlives the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import io
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from callgate.sandbox.config import Limits, Mode, SandboxConfig
from callgate.sandbox.launch import (
    SEED_PATH,
    WORKSPACE,
    Files,
    bwrap_command,
    env_arguments,
    unprivileged,
)
from callgate.sandbox.protocol import (
    HEADER,
    CallRequest,
    ProtocolViolation,
    encode,
    parse_request,
    read_frame,
)
from callgate.sandbox.seccomp import filter_program
from callgate.sandbox.uids import lease_uid

__all__ = ["Answer", "SandboxResult", "guest_program", "run_code"]

_log = logging.getLogger("callgate.sandbox")

Answer = Callable[[CallRequest], Awaitable[dict[str, Any]]]
"""The host's answer to one call from the code: ``{"status": ..., "content": ...}``."""

_GUEST = Path(__file__).with_name("guest.py")
_DRAIN_SECONDS = 0.5
_BASE_ENV = {"PATH": "/usr/bin:/bin", "HOME": WORKSPACE, "LANG": "C.UTF-8"}
_RECORD_BYTES = 2048
"""What one call's records cost the ledger whatever its arguments (decision, attempt,
outcome, the call's row, their hashes): about 1.9 kB on SQLite for a one-character call."""
_ARGUMENT_COPIES = 2
"""How many times the ledger stores a call's arguments (its journal record and its call
row): counted once, a flood of large calls grew a SQLite ledger by twice
``Limits.ledger_bytes`` (tests/sandbox/test_budget.py)."""


@dataclass(slots=True, kw_only=True)
class SandboxResult:
    """What one run of code did, as the model will read it (all of it untrusted)."""

    exit_code: int | None
    """The code's exit status as a shell reports it (128+N: killed by signal N, e.g. 137 at
    the deadline or the CPU limit, 139 for a segmentation fault; None: never started)."""
    timed_out: bool
    stdout: str
    stderr: str
    tool_calls: int
    """Calls the code made through the bridge."""
    violation: str | None = None
    """Why the host stopped the sandbox for breaking the bridge protocol, if it did."""
    started_at: float = 0.0
    """``time.monotonic()`` when the sandbox was spawned (for measurements)."""

    def report(self) -> dict[str, Any]:
        """The result as the tool returns it."""
        out: dict[str, Any] = {
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "tool_calls": self.tool_calls,
        }
        if self.violation is not None:
            out["violation"] = self.violation
        return out


class _Output:
    """A bounded capture of one stream: the first ``limit`` bytes, and a count of the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.dropped = 0

    async def drain(self, stream: asyncio.StreamReader | None) -> None:
        if stream is None:
            return
        while chunk := await stream.read(65536):
            room = self.limit - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]
            self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self) -> str:
        text = self.kept.decode("utf-8", "replace")
        if self.dropped:
            text += f"\n[callgate: output cut; {self.dropped:,} more bytes dropped]"
        return text


@dataclass(slots=True)
class _Budget:
    """What one run of code has spent: bytes sent through the bridge, and bytes the
    ledger keeps for its calls (each call's frame and its answer's content)."""

    sent: int = 0
    kept: int = 0

    def keep(self, body: bytes, reply: dict[str, Any]) -> None:
        """Count what the ledger keeps for one answered call: its records whatever their
        content (``_RECORD_BYTES``), its arguments once in the
        journal record and once in the call row (``_ARGUMENT_COPIES``), once more in the
        approval request when it waits for a person, and its answer's content (UTF-8)."""
        copies = _ARGUMENT_COPIES + (reply.get("status") == "pending")
        content = str(reply.get("content", "")).encode("utf-8", "surrogatepass")
        self.kept += _RECORD_BYTES + copies * len(body) + len(content)

    def refusal(self, limits: Limits) -> str | None:
        """Why the next call is refused (None: it is within both budgets)."""
        if self.sent > limits.bridge_bytes:
            return (
                f"refused: this run of code has sent {self.sent:,} bytes through the bridge, "
                f"past its budget of {limits.bridge_bytes:,} (Limits.bridge_bytes); "
                "pass less data per call, or do the work in fewer calls"
            )
        if self.kept > limits.ledger_bytes:
            return (
                f"refused: the ledger holds {self.kept:,} bytes for this run of code's calls, "
                f"past its budget of {limits.ledger_bytes:,} (Limits.ledger_bytes); "
                "ask for less data per call, or do the work in fewer calls"
            )
        return None


@functools.cache
def _guest_text() -> bytes:
    return _GUEST.read_bytes()


_COMPILE = (
    "import marshal, sys; code = compile(sys.stdin.read(), '/callgate/guest.py', 'exec'); "
    "sys.stdout.buffer.write(marshal.dumps(code))"
)


@functools.cache
def guest_program(python: str) -> tuple[bytes, bool]:
    """The guest for ``python``: its code object compiled once by that interpreter (marshal
    data, so no sandbox compiles it again: a few milliseconds of every start), or its
    source where that fails. Compiling runs our own file, never the model's code."""
    try:
        done = subprocess.run(
            [python, "-I", "-S", "-c", _COMPILE],
            input=_guest_text(),
            capture_output=True,
            timeout=30,
            env={},
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return _guest_text(), False
    return done.stdout, True


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)  # inheritable: no MFD_CLOEXEC
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def pack_workspace(directory: Path, limit: int) -> bytes:
    """The directory's regular files and subdirectories as a tar, refused over ``limit``
    bytes (symbolic links and special files are left out: a copy, not a view)."""
    buffer = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for root, dirs, names in os.walk(directory, followlinks=False):
            dirs.sort()
            for name in sorted(names):
                path = Path(root, name)
                if path.is_symlink() or not path.is_file():
                    continue
                total += path.stat().st_size
                if total > limit:
                    raise ValueError(
                        f"the workspace {str(directory)!r} holds more than {limit:,} bytes "
                        "(Limits.workspace_bytes); give a smaller directory or raise the limit"
                    )
                tar.add(path, arcname=str(path.relative_to(directory)), recursive=False)
    return buffer.getvalue()


def _limits(config: SandboxConfig) -> dict[str, int]:
    """The resource limits the guest sets on itself. ``processes`` is the sandbox's own:
    the kernel counts RLIMIT_NPROC per user of the sandbox's user namespace, so neither
    the host user's processes nor another sandbox's count against it."""
    limits: Limits = config.limits
    return {
        "cpu_seconds": limits.cpu_seconds,
        "memory_bytes": limits.memory_bytes,
        "processes": limits.processes,
        "open_files": limits.open_files,
        "file_bytes": limits.file_bytes,
    }


async def run_code(
    code: str,
    config: SandboxConfig,
    *,
    tools: Sequence[dict[str, str]] = (),
    answer: Answer | None = None,
    network: str = "",
    shell: bool = False,
) -> SandboxResult:
    """Run ``code`` once in a fresh sandbox; calls it makes are answered by ``answer``.

    ``network``: the name of the tool (`callgate.sandbox.network.network_tool`) whose
    admitted calls open a connection; inside, ``socket.create_connection`` goes through it.
    An answer carrying ``_connection`` (the host's connected socket) is relayed: the code
    gets one end of a new socketpair, and the host copies bytes between the other end and
    the connection until the run ends.
    ``shell``: ``code`` is a ``/bin/sh`` script (no bridge), not Python.

    As root, the sandbox runs as a host uid of its own (`callgate.sandbox.uids`).
    """
    if config.mode is Mode.UNSAFE_SUBPROCESS or os.geteuid() != 0:
        return await _run_code(code, config, tools, answer, network, shell, None)
    with lease_uid(config.sandbox_uids) as uid:
        return await _run_code(code, config, tools, answer, network, shell, uid)


async def _run_code(
    code: str,
    config: SandboxConfig,
    tools: Sequence[dict[str, str]],
    answer: Answer | None,
    network: str,
    shell: bool,
    uid: int | None,
) -> SandboxResult:
    """`run_code` with the host uid bubblewrap starts as (None: our own)."""
    limits = config.limits
    host, guest = socket.socketpair()
    guest.set_inheritable(True)
    opened: list[int] = []
    scratch: tempfile.TemporaryDirectory[str] | None = None
    status_r = -1
    """Where bubblewrap reports the host pid of the namespace's init (bwrap mode only)."""
    seed = pack_workspace(config.workspace, limits.workspace_bytes) if config.workspace else None
    env = {**_BASE_ENV, **config.env}
    try:
        if config.mode is not Mode.UNSAFE_SUBPROCESS:  # anything else is confined
            # compiled once per process by a child interpreter: not on the event loop
            guest_data, compiled = await asyncio.to_thread(guest_program, config.python)
            program = filter_program()
            files = Files(
                guest=_memfd("callgate-guest", guest_data),
                compiled=compiled,
                seed=_memfd("callgate-seed", seed) if seed is not None else None,
                seccomp=_memfd("bpf", program) if program is not None else None,
                arguments=_memfd("callgate-env", env_arguments(env)),
            )
            opened += [
                fd
                for fd in (files.guest, files.seed, files.seccomp, files.arguments)
                if fd is not None
            ]
            prefix, drop = unprivileged(uid)
            status_r, status_w = os.pipe()
            os.set_blocking(status_r, False)
            opened.append(status_w)
            argv = [
                *prefix,
                *bwrap_command(config, files, guest.fileno(), env, status_fd=status_w),
            ]
            workspace, seed_path = WORKSPACE, SEED_PATH if seed is not None else ""
            spawn: dict[str, Any] = {"env": {}, **drop}
        else:
            _log.warning(
                "callgate.sandbox: running code in mode unsafe_subprocess: NOT CONFINED (it can "
                "read the host's files, use its network and signal its processes); for "
                "development only"
            )
            scratch = tempfile.TemporaryDirectory(prefix="callgate-unsafe-")
            workspace = os.path.join(scratch.name, "workspace")
            os.mkdir(workspace)
            seed_path = ""
            if seed is not None:
                seed_path = os.path.join(scratch.name, "seed.tar")
                Path(seed_path).write_bytes(seed)
            argv = [config.python, "-I", "-S", "-B", str(_GUEST)]
            argv += [str(guest.fileno()), str(limits.message_bytes)]
            spawn = {"env": env, "cwd": workspace}
        started = time.monotonic()
        # Pipes of our own, so that we can close them: a process left holding one (the
        # unsafe mode has no namespace to end it) must not keep the call waiting.
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        if uid is not None:
            # the sandbox's own: reopening them (`echo x > /dev/stderr`) goes through
            # /proc/self/fd, which checks the pipe's owner, and root's pipes refuse it
            for fd in (out_w, err_w):
                os.fchown(fd, uid, uid)
        handed = (guest.fileno(), *opened)  # (opened: the descriptors bubblewrap reads)
        opened += [out_w, err_w]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                pass_fds=handed,
                start_new_session=True,
                **spawn,
            )
        except BaseException:
            os.close(out_r)
            os.close(err_r)
            raise
    except BaseException:
        host.close()
        if status_r >= 0:
            os.close(status_r)
        raise
    finally:
        guest.close()
        for fd in opened:
            os.close(fd)
    result = SandboxResult(
        exit_code=None, timed_out=False, stdout="", stderr="", tool_calls=0, started_at=started
    )
    out, err = _Output(limits.output_bytes), _Output(limits.output_bytes)
    loop = asyncio.get_running_loop()
    pipes: list[asyncio.BaseTransport] = []

    async def read_pipe(fd: int) -> asyncio.StreamReader:
        reader = asyncio.StreamReader(loop=loop)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(fd, "rb", 0)
        )
        pipes.append(transport)
        return reader

    raw = host.dup()  # for replies that carry a socket (sendmsg with SCM_RIGHTS)
    relays: list[_Relay] = []
    try:
        stdout, stderr = await read_pipe(out_r), await read_pipe(err_r)
        reader, writer = await asyncio.open_unix_connection(sock=host, limit=limits.message_bytes)
        writer.write(
            encode(
                {
                    "code": code,
                    "tools": list(tools),
                    "limits": _limits(config),
                    "seed": seed_path,
                    "workspace": workspace,
                    "network": network,
                    "shell": shell,
                }
            )
        )

        async def serve() -> None:
            try:
                await writer.drain()
                used: set[int] = set()
                budget = _Budget()
                while (body := await read_frame(reader, limits.message_bytes)) is not None:
                    request = parse_request(body)
                    if request.id in used:
                        # The journal keys a call by its id: a second call under the same
                        # id would run an effect the ledger files under the first one.
                        raise ProtocolViolation(
                            f"the code used call id {request.id} twice; each call needs its own id"
                        )
                    used.add(request.id)
                    result.tool_calls += 1
                    if result.tool_calls > limits.max_calls:
                        raise ProtocolViolation(
                            f"the code made more than {limits.max_calls} tool calls "
                            "(Limits.max_calls) and was stopped; do the work in fewer calls "
                            "(one call with more arguments), or ask for a higher limit"
                        )
                    budget.sent += HEADER.size + len(body)
                    reply: dict[str, Any]
                    refusal = budget.refusal(limits)
                    if refusal is None and network and request.tool == network:
                        relays[:] = [r for r in relays if not r.finished()]
                        refusal = _relays_refusal(len(relays), limits)
                    if refusal is not None:
                        reply = {"status": "rejected", "content": refusal}
                    elif answer is None:
                        reply = {"status": "rejected", "content": "no tools are available"}
                    else:
                        reply = await answer(request)
                        budget.keep(body, reply)
                    connection = reply.pop("_connection", None)
                    frame = encode({"op": "result", "id": request.id, **reply})
                    if connection is None:
                        writer.write(frame)
                        await writer.drain()
                    else:
                        # The code gets one end of a socketpair; the host keeps the real
                        # connection and copies bytes between the two (the code never holds
                        # a socket of the host's network namespace).
                        inner, outer = socket.socketpair()
                        relays.append(_Relay(outer, connection))
                        await writer.drain()
                        try:
                            await _send_with_socket(raw, writer, frame, inner)
                        finally:
                            inner.close()
            except ProtocolViolation as exc:
                result.violation = str(exc)
                if not _end_namespace(proc, status_r):
                    _kill(proc)
            except (ConnectionError, BrokenPipeError):
                pass  # the code exited (or closed its end): the process's status tells

        async def everything() -> None:
            tasks = [
                asyncio.ensure_future(serve()),
                asyncio.ensure_future(out.drain(stdout)),
                asyncio.ensure_future(err.drain(stderr)),
            ]
            try:
                await proc.wait()
                # What it wrote before exiting is in the pipes; a process left holding them
                # (only possible unconfined) gets a moment, not the rest of the timeout.
                await asyncio.wait(tasks, timeout=_DRAIN_SECONDS)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

        try:
            await asyncio.wait_for(everything(), config.timeout)
        except TimeoutError:
            result.timed_out = True
        writer.close()
    finally:
        if _end_namespace(proc, status_r):
            # bubblewrap reaps its init and exits; killed only if it does not
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), 1)
        _kill(proc)
        if status_r >= 0:
            os.close(status_r)
        for relay in relays:
            await relay.stop()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(proc.wait(), 5)
        for pipe in pipes:
            pipe.close()
        host.close()
        raw.close()
        if scratch is not None:
            scratch.cleanup()
    result.exit_code = _shell_status(proc.returncode)
    result.stdout, result.stderr = out.text(), err.text()
    return result


async def _send_with_socket(
    raw: socket.socket, writer: asyncio.StreamWriter, frame: bytes, connection: socket.socket
) -> None:
    """Send ``frame`` with ``connection``'s descriptor attached to its first bytes."""
    rights = [
        (socket.SOL_SOCKET, socket.SCM_RIGHTS, connection.fileno().to_bytes(4, sys.byteorder))
    ]
    while True:
        try:
            sent = raw.sendmsg([frame], rights)
            break
        except BlockingIOError:
            await asyncio.sleep(0.001)
    if sent < len(frame):
        writer.write(frame[sent:])
        await writer.drain()


def _relays_refusal(live: int, limits: Limits) -> str | None:
    """Why another connection is refused (None: it is not): at most ``Limits.open_files``
    relays at once per run of code, each a host thread per direction, two pipes and two
    sockets. Without the bound, code that kept its ends (in flight over a socketpair
    of its own, past its descriptor limit) held 27 relays with ``open_files=16``."""
    if live < limits.open_files:
        return None
    return (
        f"refused: this run of code holds {live} open connections, its limit "
        f"(Limits.open_files); close one before opening another"
    )


_RELAY_CHUNK = 1 << 20
_F_SETPIPE_SZ = 1031


class _Relay:
    """Bytes both ways between the host's end of the code's socketpair (``inner``) and the
    real connection (``outer``): a thread per direction moves them with ``splice`` through
    a pipe (the kernel copies; ~2-4x an asyncio copy loop here), passing each side's end of
    stream on as a half-close. `stop` ends both at the end of the run."""

    def __init__(self, inner: socket.socket, outer: socket.socket) -> None:
        self.sockets = (inner, outer)
        inner.setblocking(True)
        outer.setblocking(True)
        self._lock = threading.Lock()
        self._running = 2
        self.threads = [
            threading.Thread(target=self._run, args=(inner, outer, True), daemon=True),
            threading.Thread(target=self._run, args=(outer, inner, False), daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def finished(self) -> bool:
        """Whether both directions have ended (its sockets are then closed)."""
        with self._lock:
            return self._running == 0

    def _run(self, source: socket.socket, sink: socket.socket, from_code: bool) -> None:
        """One direction; from the code, once its end is closed altogether (not only
        half-closed), the whole connection ends, so the other direction's thread stops
        waiting on a peer that may never speak. The last one out closes both sockets."""
        _pump(source, sink)
        if from_code:
            with contextlib.suppress(OSError, ValueError):
                poller = select.poll()
                poller.register(source.fileno(), select.POLLHUP)
                poller.poll()  # the code's end closed, or `stop` shut ours down
                sink.shutdown(socket.SHUT_RDWR)
        with self._lock:
            self._running -= 1
            last = self._running == 0
        if last:
            for sock in self.sockets:
                sock.close()

    async def stop(self) -> None:
        """Wake both threads (a shut-down socket ends their ``splice``), wait, close."""
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in self.threads:
            await asyncio.to_thread(thread.join)
        for sock in self.sockets:
            sock.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Move bytes from ``source`` to ``sink`` until the end of stream (then half-close
    ``sink``) or an error on either (a reset, or `_Relay.stop`)."""
    read_end, write_end = os.pipe()
    try:
        with contextlib.suppress(OSError):
            fcntl.fcntl(write_end, _F_SETPIPE_SZ, _RELAY_CHUNK)
        while moved := os.splice(source.fileno(), write_end, _RELAY_CHUNK):
            while moved:
                moved -= os.splice(read_end, sink.fileno(), moved)
    except OSError:
        pass
    finally:
        os.close(read_end)
        os.close(write_end)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def _shell_status(returncode: int | None) -> int | None:
    """The exit status as a shell reports it: 0-255, and 128+N for a process killed by
    signal N (what bubblewrap reports for the code, and what a killed sandbox becomes)."""
    if returncode is None or returncode >= 0:
        return returncode
    return 128 - returncode


def _namespace_init(proc: asyncio.subprocess.Process, status_r: int) -> int | None:
    """A pidfd of the sandbox's PID-namespace init, read from bubblewrap's JSON status;
    None when there is none (not yet started, already gone, or not bubblewrap's child:
    a pid reused since is never signalled)."""
    if status_r < 0:
        return None
    try:
        text = os.read(status_r, 65536).decode("utf-8", "replace")
    except (BlockingIOError, OSError):
        return None
    for line in text.splitlines():
        with contextlib.suppress(ValueError, AttributeError):
            message = json.loads(line)
            if isinstance(message, dict) and isinstance(message.get("child-pid"), int):
                pid: int = message["child-pid"]
                try:
                    pidfd = os.pidfd_open(pid)
                except OSError:
                    return None
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    status = ""
                if f"\nPPid:\t{proc.pid}\n" in status:
                    return pidfd
                os.close(pidfd)
                return None
    return None


def _end_namespace(proc: asyncio.subprocess.Process, status_r: int) -> bool:
    """SIGKILL to the sandbox's PID-namespace init: the kernel then ends every process in
    the namespace, whatever their session or death signal. Whether one was signalled."""
    pidfd = _namespace_init(proc, status_r)
    if pidfd is None:
        return False
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        return False
    finally:
        os.close(pidfd)
    return True


def _kill(proc: asyncio.subprocess.Process) -> None:
    """Kill bubblewrap's process group (in the unconfined mode: the code's own group, all
    there is to kill)."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


if sys.platform != "linux":  # pragma: no cover - the sandbox is Linux only
    _log.debug("callgate.sandbox: not on Linux; run_python will refuse")

"""The program that runs *inside* the sandbox, before and around the model's code.

It is never imported by the host: the host hands its text to the sandboxed
interpreter (``python -I -S -B``, standard library only). It reads the start
message from the bridge socket, applies the resource limits, unpacks the
workspace, installs the ``tools`` module (one function per tool the code may
call, each a request over the bridge), and runs the code as ``__main__``.

Everything here runs with the code's own privileges: nothing in it is a
security boundary. The boundary is the sandbox around it and the host's
checks on every message that comes out.
"""

from __future__ import annotations

import marshal
import os
import resource
import sys
import types

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs milliseconds at every start; annotations are not evaluated
    from typing import Any

# Only modules the interpreter has already loaded, or built in: start-up time is the
# latency of every run. json is imported on the first tool call.
_LIMITS = {
    "cpu_seconds": resource.RLIMIT_CPU,
    "memory_bytes": resource.RLIMIT_AS,
    "processes": resource.RLIMIT_NPROC,
    "open_files": resource.RLIMIT_NOFILE,
    "file_bytes": resource.RLIMIT_FSIZE,
}


class _Bridge:
    """Frames over the socket the host passed in: a 4-byte big-endian length, then the body.
    The host writes marshal data (trusted direction); the code's requests are JSON, which
    the host parses as hostile input."""

    def __init__(self, fd: int, max_bytes: int) -> None:
        self.fd = fd
        self.max_bytes = max_bytes
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        import json

        data = json.dumps(message, separators=(",", ":"), default=str).encode()
        if len(data) > self.max_bytes:
            raise ValueError(
                f"bridge message of {len(data):,} bytes exceeds the limit of {self.max_bytes:,}"
            )
        view = memoryview(len(data).to_bytes(4, "big") + data)
        while view:
            view = view[os.write(self.fd, view) :]

    def _exactly(self, n: int) -> bytes:
        chunks: list[bytes] = []
        while n:
            chunk = os.read(self.fd, min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("the host closed the bridge")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def receive(self) -> dict[str, Any]:
        size = int.from_bytes(self._exactly(4), "big")
        message: dict[str, Any] = marshal.loads(self._exactly(size))
        return message

    def receive_connection(self) -> tuple[dict[str, Any], int | None]:
        """A reply that may carry a relayed connection's descriptor (on its first bytes)."""
        import socket

        wrapper = socket.socket(fileno=os.dup(self.fd))
        try:
            head, ancillary, _, _ = wrapper.recvmsg(4, socket.CMSG_SPACE(4))
        finally:
            wrapper.close()
        if not head:
            raise ConnectionError("the host closed the bridge")
        fd = None
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS and len(data) >= 4:
                fd = int.from_bytes(data[:4], sys.byteorder)
        head += self._exactly(4 - len(head))
        message: dict[str, Any] = marshal.loads(self._exactly(int.from_bytes(head, "big")))
        return message, fd


class CallRejected(Exception):
    """The gate did not run the call (rejected, or waiting for a person's approval)."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class CallFailed(Exception):
    """The call ran and failed (``error``), or its outcome is unknown (``unknown``)."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class ConnectionRejected(CallRejected, ConnectionRefusedError):
    """A connection the gate did not admit (``socket.create_connection`` inside): both the
    bridge's `CallRejected` (``.status``, ``.message``) and an ``OSError``, so that
    ``urllib`` and other libraries report it as the connection error it is."""

    def __init__(self, status: str, message: str) -> None:
        ConnectionRefusedError.__init__(self, 111, f"{status}: {message}")  # ECONNREFUSED
        self.status = status
        self.message = message


class ConnectionFailed(CallFailed, ConnectionError):
    """A connection the gate admitted that could not be made (or refused by address)."""

    def __init__(self, status: str, message: str) -> None:
        ConnectionError.__init__(self, 111, f"{status}: {message}")
        self.status = status
        self.message = message


def _tools_module(bridge: _Bridge, specs: list[dict[str, Any]], network: str) -> types.ModuleType:
    module = types.ModuleType(
        "tools", "The tools this code may call; each call goes through the gate."
    )
    module.CallRejected = CallRejected  # type: ignore[attr-defined]
    module.CallFailed = CallFailed  # type: ignore[attr-defined]
    module.ConnectionRejected = ConnectionRejected  # type: ignore[attr-defined]
    module.ConnectionFailed = ConnectionFailed  # type: ignore[attr-defined]

    def make(name: str, doc: str) -> Any:
        def call(**arguments: Any) -> Any:
            bridge.next_id += 1
            bridge.send({"op": "call", "id": bridge.next_id, "tool": name, "arguments": arguments})
            fd = None
            if name == network:
                reply, fd = bridge.receive_connection()
            else:
                reply = bridge.receive()
            status, content = reply.get("status"), str(reply.get("content", ""))
            if status == "ok" and fd is not None:
                return _relayed(fd)
            if status == "ok" and name == network:
                # admitted, but the descriptor did not arrive: the code's table is full
                raise OSError(
                    24,  # EMFILE
                    "the connection was opened but could not be received: too many open "
                    "files (Limits.open_files); close a connection or file first",
                )
            if status == "ok":
                if content[:1] in ("{", "["):
                    import json

                    try:
                        return json.loads(content)
                    except ValueError:
                        return content
                return content
            if status in ("error", "unknown"):
                raise CallFailed(str(status), content)
            raise CallRejected(str(status), content)

        call.__name__ = name
        call.__doc__ = doc
        return call

    for spec in specs:
        setattr(module, spec["name"], make(spec["name"], spec.get("doc", "")))
    module.__all__ = [spec["name"] for spec in specs]  # type: ignore[attr-defined]
    if network:
        _route_connections(getattr(module, network))
    return module


def _relayed(fd: int) -> Any:
    """The code's end of a relayed connection: a blocking AF_UNIX stream socket that takes
    TCP options silently (``http.client`` sets ``TCP_NODELAY``; the host's side is TCP)."""
    import socket

    class RelayedConnection(socket.socket):
        def setsockopt(self, level: int, option: int, value: Any, *rest: Any) -> None:
            if level == socket.IPPROTO_TCP:
                return None
            return super().setsockopt(level, option, value, *rest)

    return RelayedConnection(fileno=fd)


def _route_connections(connect: Any) -> None:
    """Make ``socket.create_connection`` (http.client, urllib) ask the host for each
    connection: the one way out of a sandbox without a network."""
    import socket

    default = socket.create_connection

    def create_connection(
        address: tuple[str, int], timeout: Any = None, *args: Any, **kwargs: Any
    ) -> socket.socket:
        try:
            sock: socket.socket = connect(host=str(address[0]), port=int(address[1]))
        except CallRejected as exc:
            raise ConnectionRejected(exc.status, exc.message) from None
        except CallFailed as exc:
            raise ConnectionFailed(exc.status, exc.message) from None
        if isinstance(timeout, int | float):
            sock.settimeout(timeout)
        return sock

    create_connection.__doc__ = default.__doc__
    socket.create_connection = create_connection  # type: ignore[assignment]


def _unpack(seed: str, into: str) -> None:
    """Unpack the workspace the host packed (regular files and directories only)."""
    if not os.path.exists(seed):
        return
    import io
    import tarfile

    with open(seed, "rb") as f:
        data = f.read()
    os.unlink(seed)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            if not (member.isfile() or member.isdir()):
                continue
            target = os.path.normpath(os.path.join(into, member.name))
            if not target.startswith(into + os.sep):
                continue
            if member.isdir():
                os.makedirs(target, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            source = tar.extractfile(member)
            if source is not None:
                with open(target, "wb") as out:
                    out.write(source.read())


def main() -> int:
    fd, max_bytes = int(sys.argv[1]), int(sys.argv[2])
    bridge = _Bridge(fd, max_bytes)
    start = bridge.receive()
    workspace = str(start.get("workspace", "/workspace"))
    _unpack(str(start.get("seed", "")), workspace)
    os.chdir(workspace)
    for name, value in dict(start.get("limits", {})).items():
        which = _LIMITS.get(name)
        if which is not None and value is not None:
            resource.setrlimit(which, (int(value), int(value)))
    if start.get("shell"):  # run_shell: the script replaces the guest, without the bridge
        os.close(fd)
        sys.stdout.flush()
        os.execv("/bin/sh", ["sh", "-c", str(start["code"])])
    tools = _tools_module(bridge, list(start.get("tools", [])), str(start.get("network", "")))
    sys.modules["tools"] = tools
    # The code runs as the real __main__ module: what pickles by name (a function handed to
    # multiprocessing.Pool) is looked up there.
    main_module = types.ModuleType("__main__")
    main_module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    sys.modules["__main__"] = main_module
    try:
        exec(compile(str(start["code"]), "<code>", "exec"), main_module.__dict__)
    except SystemExit as stop:
        code_value = stop.code
        return code_value if isinstance(code_value, int) else (0 if code_value is None else 1)
    except BaseException as exc:
        import traceback

        # Show the code's own frames, not the guest's.
        traceback.print_exception(
            type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None
        )
        return 1
    return 0


if __name__ == "__main__":
    status = 1
    try:
        status = main()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)

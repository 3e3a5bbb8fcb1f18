"""Read-only paths bound into the sandbox stay visible where the sandbox mounts its own
``/tmp``: a checkout (and its venv) under ``/tmp`` is how CI runs the suite."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import anyio
import pytest

from callgate.sandbox import SandboxConfig, run_code


def test_a_read_only_path_under_tmp_is_visible_inside(
    tmp_path: Path, bwrap_available: None
) -> None:
    """A host directory under /tmp given as read_only is readable at the same path inside,
    and still not writable."""
    shared = tmp_path / "site"
    shared.mkdir()
    (shared / "marker.txt").write_text("from the host", encoding="utf-8")
    shared.chmod(0o755)
    for parent in (tmp_path, *tmp_path.parents):
        if str(parent).startswith("/tmp/"):
            parent.chmod(parent.stat().st_mode | 0o055)  # readable by the sandbox's user
    code = (
        f"print(open({str(shared / 'marker.txt')!r}).read())\n"
        "try:\n"
        f"    open({str(shared / 'new.txt')!r}, 'w')\n"
        "    print('wrote')\n"
        "except OSError:\n"
        "    print('read-only')\n"
    )
    config = SandboxConfig(timeout=10.0, read_only=(str(shared),))
    result = anyio.run(lambda: run_code(code, config))
    assert result.stdout.splitlines() == ["from the host", "read-only"], result
    assert not (shared / "new.txt").exists()


SEND_TO_HOST = """
import socket
try:
    for kind in (socket.SOCK_DGRAM,):
        try:
            s = socket.socket(socket.AF_UNIX, kind)
        except OSError:
            s = socket.socketpair(socket.AF_UNIX, kind)[0]
        s.sendto(b'from the sandbox', {path!r})
    print('ESCAPED sent')
except OSError as exc:
    print('BLOCKED', exc)
"""


@pytest.mark.parametrize("mode", ["bwrap", "unsafe_subprocess"])
def test_a_host_datagram_socket_under_a_read_only_path_hears_nothing(
    tmp_path: Path, bwrap_available: None, mode: str
) -> None:
    """A host service's datagram socket (a syslog or journal socket, say) sits in a
    directory the deployer bound read-only. ``connect`` is refused, but ``sendto`` with an
    address needs no connect, and a read-only mount does not stop it: the code must not
    reach the service (unconfined it does, so the check can fail). Before, the sandbox
    sent it a datagram; now AF_UNIX datagram sockets and socketpairs are refused."""
    shared = tmp_path / "run"
    shared.mkdir()
    for parent in (shared, tmp_path, *tmp_path.parents):
        if str(parent).startswith("/tmp/"):
            parent.chmod(parent.stat().st_mode | 0o055)
    service = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(shared / "log.sock")
    service.bind(path)
    os.chmod(path, 0o777)
    service.setblocking(False)
    config = SandboxConfig(timeout=10.0, read_only=(str(shared),), mode=mode)  # type: ignore[arg-type]
    try:
        result = anyio.run(lambda: run_code(SEND_TO_HOST.format(path=path), config))
        try:
            heard: bytes | None = service.recv(100)
        except BlockingIOError:
            heard = None
    finally:
        service.close()
    if mode == "unsafe_subprocess":
        assert heard == b"from the sandbox", result
        return
    assert heard is None, result
    assert "BLOCKED" in result.stdout, result

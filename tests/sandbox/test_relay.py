"""Egress by relay: an admitted connection reaches the code as one end of a socketpair.

The host holds the real connection and copies bytes; the code never holds a socket of the
host's network namespace, so it cannot drop the connection (``connect(AF_UNSPEC)``) and
aim it elsewhere, nor ``bind``/``listen``/``accept`` on it. Each test is written from the
attacker's side; the detectors (a second service that must see no connection, a port the
host must not reach) were run against the handed-socket design, where they fired.
"""

from __future__ import annotations

import contextlib
import datetime
import http.server
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from callgate import Authority, Gate, MemoryLedger, Registry, ToolCall, tool
from callgate.sandbox import Limits, network_tool, python_tool

pytestmark = pytest.mark.usefixtures("bwrap_available")


class Service:
    """A real HTTP(S) service on a loopback address, counting the requests it answers."""

    def __init__(self, address: str = "127.0.0.1", context: ssl.SSLContext | None = None):
        self.requests = 0
        self.connections = 0
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def setup(self) -> None:
                service.connections += 1
                super().setup()

            def do_GET(self) -> None:
                service.requests += 1
                body = b"hello from the host" * (1 if self.path == "/" else 4096)
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer((address, 0), Handler)
        if context is not None:
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def service() -> Iterator[Service]:
    running = Service()
    yield running
    running.close()


@pytest.fixture
def elsewhere() -> Iterator[Service]:
    """A second service, on 127.0.0.2, that no call was ever admitted for."""
    running = Service("127.0.0.2")
    yield running
    running.close()


def _run(code: str, *, grants: tuple[str, ...] = ("network:127.0.0.1",)) -> dict[str, Any]:
    registry = Registry([network_tool(allow_private=True)])
    registry.add(python_tool(tools=["network_connect"], timeout=8))
    gate = Gate(registry, ledger=MemoryLedger())
    run = gate.run(
        authority=Authority(principal="p", grants=["exec:sandbox", *grants]),
        trusted_values=["127.0.0.1"],
    )
    obs = run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])[0]
    assert isinstance(obs.result, dict), obs.content
    return obs.result


def test_urlopen_without_a_timeout_works_like_a_normal_socket(service: Service) -> None:
    """The relayed connection blocks like a normal socket: ``urlopen(url)`` with no timeout."""
    code = (
        "import urllib.request\n"
        f"print(urllib.request.urlopen('http://127.0.0.1:{service.port}/').read())\n"
    )
    result = _run(code)
    assert result["stdout"].strip() == "b'hello from the host'", result
    assert service.requests == 1


def test_the_code_holds_a_unix_socketpair_end_not_a_host_socket(service: Service) -> None:
    """What the code gets for an admitted connection is an AF_UNIX socket with no peer name."""
    code = (
        "import socket, tools\n"
        f"conn = tools.network_connect(host='127.0.0.1', port={service.port})\n"
        "print(conn.family.name, repr(conn.getpeername()))\n"
    )
    result = _run(code)
    assert result["stdout"].split()[0] == "AF_UNIX", result
    assert "127.0.0.1" not in result["stdout"]


# Raw system calls through ctypes: what an attacker uses, past any Python wrapper.
_RAW = """
import ctypes, socket, struct, tools
libc = ctypes.CDLL(None, use_errno=True)
def sockaddr_in(ip, port):
    return struct.pack('=HH4s8x', socket.AF_INET, socket.htons(port), socket.inet_aton(ip))
def call(name, *args):
    rc = getattr(libc, name)(*args)
    if rc < 0:
        raise OSError(ctypes.get_errno(), name + ' refused')
    return rc
conn = tools.network_connect(host='127.0.0.1', port={port})
fd = conn.fileno()
"""


def test_the_connection_cannot_be_dropped_and_aimed_elsewhere(
    service: Service, elsewhere: Service
) -> None:
    """``connect(AF_UNSPEC)`` then ``connect`` to 127.0.0.2 (never admitted): refused, and the
    second service sees no connection."""
    code = _RAW.format(port=service.port) + (
        "unspec = struct.pack('=H14x', socket.AF_UNSPEC)\n"
        "try:\n"
        "    call('connect', fd, unspec, len(unspec))\n"
        f"    target = sockaddr_in('127.0.0.2', {elsewhere.port})\n"
        "    call('connect', fd, target, len(target))\n"
        "    print('ESCAPED')\n"
        "except OSError as exc:\n"
        "    print('BLOCKED', exc)\n"
    )
    result = _run(code)
    assert "BLOCKED" in result["stdout"], result
    assert "ESCAPED" not in result["stdout"]
    assert elsewhere.connections == 0


def test_the_connection_cannot_become_a_listener(service: Service) -> None:
    """``bind``/``listen`` on the handed descriptor: refused; a host client reaches nothing."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    code = _RAW.format(port=service.port) + (
        "unspec = struct.pack('=H14x', socket.AF_UNSPEC)\n"
        "try:\n"
        "    libc.connect(fd, unspec, len(unspec))\n"
        f"    here = sockaddr_in('0.0.0.0', {free})\n"
        "    call('bind', fd, here, len(here))\n"
        "    call('listen', fd, 5)\n"
        "    print('ESCAPED listening')\n"
        "    import time; time.sleep(1.5)\n"
        "except OSError as exc:\n"
        "    print('BLOCKED', exc)\n"
    )
    reached: list[bool] = []

    def knock() -> None:
        import time

        for _ in range(30):
            try:
                socket.create_connection(("127.0.0.1", free), timeout=0.2).close()
                reached.append(True)
                return
            except OSError:
                time.sleep(0.05)

    knocker = threading.Thread(target=knock)
    knocker.start()
    result = _run(code)
    knocker.join()
    assert "BLOCKED" in result["stdout"], result
    assert "ESCAPED" not in result["stdout"]
    assert not reached


def _certificate(tmp_path: Path) -> tuple[Path, Path, str]:
    """A self-signed certificate for 127.0.0.1, made here (key, certificate, PEM text)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "callgate relay test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_path, cert_path = tmp_path / "key.pem", tmp_path / "cert.pem"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    cert_path.write_bytes(pem)
    return key_path, cert_path, pem.decode()


def test_tls_from_inside_works_through_the_relay(tmp_path: Path) -> None:
    """HTTPS to a local TLS server with a certificate made in the test: the handshake and the
    verification happen inside the sandbox, the host only copies bytes."""
    key, cert, pem = _certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    tls = Service(context=context)
    try:
        code = (
            "import ssl, urllib.request\n"
            f"ctx = ssl.create_default_context(cadata={pem!r})\n"
            f"reply = urllib.request.urlopen('https://127.0.0.1:{tls.port}/big', context=ctx)\n"
            "body = reply.read()\n"
            "print(len(body), body[:19].decode())\n"
        )
        result = _run(code)
    finally:
        tls.close()
    assert result["stdout"].split() == [str(19 * 4096), "hello", "from", "the", "host"], result
    assert tls.requests == 1


def _open_descriptors() -> int:
    return len(list(Path("/proc/self/fd").iterdir()))


def test_network_connect_called_directly_opens_nothing_and_keeps_nothing(
    service: Service,
) -> None:
    """The model calls ``network_connect`` itself, not from code, 20 times: with no code to
    hand a connection to, it must not connect (the service sees nothing) nor leave host
    sockets open. Before, each call connected, answered ``ok`` and kept a socket for the
    life of the host process (20 calls: 20 descriptors; a model could exhaust them)."""
    registry = Registry([])
    registry.add(network_tool(allow_private=True))
    gate = Gate(registry, ledger=MemoryLedger())
    run = gate.run(
        authority=Authority(principal="p", grants=["network:127.0.0.1"]),
        trusted_values=["127.0.0.1"],
    )
    before = _open_descriptors()
    arguments = {"host": "127.0.0.1", "port": service.port}
    observations = [
        run.submit([ToolCall(id=f"n{i}", name="network_connect", arguments=arguments)])[0]
        for i in range(20)
    ]
    assert {o.status.value for o in observations} == {"error"}, observations[0]
    assert "python_tool(tools=" in observations[0].content, observations[0].content
    assert service.connections == 0
    assert _open_descriptors() <= before + 2


class Silent:
    """A loopback TCP service that accepts connections, keeps them open and says nothing
    (a keep-alive server, or one that waits for a request that never comes)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0), backlog=512)
        self.port = self.server.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.held.append(self.server.accept()[0])

    def close(self) -> None:
        self.server.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent() -> Iterator[Silent]:
    running = Silent()
    yield running
    running.close()


def test_connections_the_code_closed_free_the_hosts_descriptors(silent: Silent) -> None:
    """The code opens 120 connections to a service that keeps them open, closes each at
    once, then asks the host (a tool) how many descriptors it holds, a few times over two
    seconds: the relays of closed connections are gone, not kept until the run ends.
    Before, each stayed (its sockets, two pipes and a thread): 480 more descriptors after
    120 connections, about 1,000 after 250, the usual 1,024 soft limit in one run of code."""
    counts: list[int] = []

    @tool(effects="read:host", risk="read")
    def descriptors() -> str:
        """How many descriptors the host holds now."""
        counts.append(_open_descriptors())
        return "counted"

    code = (
        "import socket, time, tools\n"
        "for i in range(120):\n"
        f"    socket.create_connection(('127.0.0.1', {silent.port})).close()\n"
        "for i in range(20):\n"
        "    time.sleep(0.1)\n"
        "    tools.descriptors()\n"
        "print('opened', len(range(120)))\n"
    )
    registry = Registry([network_tool(allow_private=True), descriptors])
    registry.add(python_tool(tools=["network_connect", "descriptors"], timeout=15))
    gate = Gate(registry, ledger=MemoryLedger())
    run = gate.run(
        authority=Authority(
            principal="p", grants=["exec:sandbox", "network:127.0.0.1", "read:host"]
        ),
        trusted_values=["127.0.0.1"],
    )
    before = _open_descriptors()
    obs = run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])[0]
    assert isinstance(obs.result, dict), obs.content
    assert obs.result["stdout"].strip() == "opened 120", obs.result
    assert len(silent.held) == 120
    assert len(counts) == 20
    relayed = min(counts) - before - len(silent.held)  # the service's own ends are ours too
    assert relayed < 20, f"the host still held {relayed} more descriptors"


def test_open_connections_are_bounded_per_run_of_code(silent: Silent) -> None:
    """The code keeps every connection open (and passes each to itself over a socketpair,
    past its own descriptor limit): the host relays at most ``Limits.open_files`` at once
    and refuses the next with a message naming the limit."""
    code = (
        "import array, socket, tools\n"
        "keep, hold = socket.socketpair()\n"
        "opened, kept = 0, []\n"
        "try:\n"
        "    for i in range(80):\n"
        f"        c = socket.create_connection(('127.0.0.1', {silent.port}))\n"
        "        opened += 1\n"
        "        try:\n"
        "            keep.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,"
        " array.array('i', [c.fileno()]))])\n"
        "            c.close()\n"
        "        except OSError:\n"
        "            kept.append(c)  # the kernel's in-flight limit: hold it instead\n"
        "except tools.CallRejected as exc:\n"
        "    print('refused', exc.message)\n"
        "except OSError as exc:\n"
        "    print('out of descriptors', exc)\n"
        "print('opened', opened)\n"
    )
    registry = Registry([network_tool(allow_private=True)])
    registry.add(python_tool(tools=["network_connect"], timeout=8, limits=Limits(open_files=16)))
    gate = Gate(registry, ledger=MemoryLedger())
    run = gate.run(
        authority=Authority(principal="p", grants=["exec:sandbox", "network:127.0.0.1"]),
        trusted_values=["127.0.0.1"],
    )
    obs = run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])[0]
    assert isinstance(obs.result, dict), obs.content
    stdout = obs.result["stdout"]
    assert "Limits.open_files" in stdout, obs.result
    assert stdout.split()[-1] == "16", obs.result
    assert len(silent.held) == 16


def test_a_half_closed_connection_still_reads_its_answer() -> None:
    """Ending a relay when the code closes its end must not end it at a half-close: the
    code sends 300 kB, shuts down its writing side, and reads the service's answer, which
    the service sends only after it has seen the end of the request."""
    server = socket.create_server(("127.0.0.1", 0))

    def answer_after_the_end() -> None:
        with contextlib.suppress(OSError):
            conn, _ = server.accept()
            with conn:
                size = 0
                while chunk := conn.recv(65536):
                    size += len(chunk)
                conn.sendall(f"got {size}".encode())

    threading.Thread(target=answer_after_the_end, daemon=True).start()
    code = (
        "import socket\n"
        f"c = socket.create_connection(('127.0.0.1', {server.getsockname()[1]}))\n"
        "c.sendall(b'x' * 300000)\n"
        "c.shutdown(socket.SHUT_WR)\n"
        "answer = b''\n"
        "while chunk := c.recv(65536):\n"
        "    answer += chunk\n"
        "print(answer.decode())\n"
    )
    try:
        result = _run(code)
    finally:
        server.close()
    assert result["stdout"].strip() == "got 300000", result

"""Network egress only through the gate: each connection is a network:<host> call of the run."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from callgate import Authority, Gate, MemoryLedger, Registry, Status, ToolCall
from callgate.sandbox import network_tool, python_tool

pytestmark = pytest.mark.usefixtures("bwrap_available")


class Service:
    """A real HTTP service on the host's loopback, counting the requests it answers."""

    def __init__(self) -> None:
        self.requests = 0
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                service.requests += 1
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"hello from the host")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()


@pytest.fixture
def service() -> Iterator[Service]:
    """The service, shut down after the test."""
    running = Service()
    yield running
    running.server.shutdown()
    running.server.server_close()


def _fetch(
    service: Service,
    grants: list[str],
    *,
    allow_private: bool = True,
    vouched: bool = True,
    host: str = "127.0.0.1",
) -> tuple[Any, Gate, str]:
    registry = Registry([network_tool(allow_private=allow_private)])
    registry.add(python_tool(tools=["network_connect"], timeout=2))
    gate = Gate(registry, ledger=MemoryLedger())
    run = gate.run(
        authority=Authority(principal="p", grants=["exec:sandbox", *grants]),
        trusted=f"Fetch the status page from {host}",
        trusted_values=[host] if vouched else [],
    )
    code = (
        "import urllib.request\n"
        f"print(urllib.request.urlopen('http://{host}:{service.port}/', timeout=2).read())\n"
    )
    obs = run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])
    return obs[0], gate, run.id


def test_a_granted_vouched_connection_reaches_the_service(service: Service) -> None:
    """Granted network:<host>, vouched for: urllib inside works, over one gated connection."""
    obs, gate, run_id = _fetch(service, ["network:127.0.0.1"])
    assert obs.result["stdout"].strip() == "b'hello from the host'", obs.result
    assert service.requests == 1
    record = gate.ledger.get_call(run_id, "c.1")
    assert record is not None
    assert record.tool == "network_connect"
    assert record.state.value == "ok"


def test_without_the_grant_nothing_connects(service: Service) -> None:
    """No network:<host> grant: the connection is rejected at stage authorize, and urllib
    reports it as the connection error it is (``URLError``, naming the missing effect);
    before, a bare ``CallRejected``, not an ``OSError``, went past urllib's handling."""
    obs, gate, run_id = _fetch(service, [])
    stderr = obs.result["stderr"]
    assert "urllib.error.URLError" in stderr, stderr
    assert "network:127.0.0.1" in stderr, stderr
    assert service.requests == 0
    record = gate.ledger.get_call(run_id, "c.1")
    assert record is not None
    assert record.stage == "authorize"


def test_a_host_nobody_vouched_for_is_a_sink_waiting_for_a_person(service: Service) -> None:
    """network:* granted, but the host is not vouched for: the call waits for approval."""
    obs, gate, run_id = _fetch(service, ["network:*"], vouched=False)
    assert service.requests == 0
    record = gate.ledger.get_call(run_id, "c.1")
    assert record is not None
    assert record.state.value == "pending"
    assert obs.status is Status.OK


def test_private_addresses_are_refused_by_default(service: Service) -> None:
    """A granted, vouched loopback host is still refused unless allow_private."""
    obs, gate, run_id = _fetch(
        service, ["network:localhost"], allow_private=False, host="localhost"
    )
    assert service.requests == 0
    assert "private, loopback or link-local" in obs.result["stderr"], obs.result
    record = gate.ledger.get_call(run_id, "c.1")
    assert record is not None
    assert record.state.value == "error"


def test_with_egress_the_code_still_cannot_open_sockets_itself(service: Service) -> None:
    """The handed-over connection is the only one: socket() stays refused inside."""
    registry = Registry([network_tool(allow_private=True)])
    registry.add(python_tool(tools=["network_connect"], timeout=2))
    gate = Gate(registry, ledger=MemoryLedger())
    run = gate.run(
        authority=Authority(principal="p", grants=["exec:sandbox", "network:127.0.0.1"]),
        trusted_values=["127.0.0.1"],
    )
    code = (
        "import socket, tools\n"
        f"conn = tools.network_connect(host='127.0.0.1', port={service.port})\n"
        "print(conn.family.name)\n"
        "try:\n"
        "    socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
        "    print('ESCAPED')\n"
        "except OSError as exc:\n"
        "    print('BLOCKED', exc.errno)\n"
    )
    obs = run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])[0]
    lines = obs.result["stdout"].split()
    assert lines[0] == "AF_UNIX", obs.result  # one end of a relayed socketpair
    assert "BLOCKED" in lines
    assert "ESCAPED" not in lines

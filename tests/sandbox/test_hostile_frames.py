"""Bridge frames found in the attacker's review: a call id the code uses twice."""

from __future__ import annotations

import json

import pytest

from callgate import Authority, Gate, MemoryLedger, Registry, Status, ToolCall, tool
from callgate.sandbox import python_tool

pytestmark = pytest.mark.usefixtures("bwrap_available")

refunded: list[float] = []


@tool(effects="spend:EUR={amount}")
def refund(order_id: str, amount: float) -> str:
    """Refund an order."""
    refunded.append(amount)
    return f"refunded {amount} on {order_id}"


_CODE = r"""
import os, sys, json, marshal
fd = int(sys.argv[1])
def call(ident, amount):
    body = json.dumps({'op': 'call', 'id': ident, 'tool': 'refund',
                       'arguments': {'order_id': 'A1', 'amount': amount}}).encode()
    os.write(fd, len(body).to_bytes(4, 'big') + body)
    size = int.from_bytes(os.read(fd, 4), 'big')
    data = b''
    while len(data) < size:
        data += os.read(fd, size - len(data))
    print(marshal.loads(data)['status'], flush=True)
call(1, 5)
call(1, 3)
"""


def test_a_call_id_used_twice_stops_the_sandbox() -> None:
    """The journal keys a call by its id: a second call under the same id (other arguments)
    would run a second effect the ledger files under the first. It stops the code instead."""
    refunded.clear()
    gate = Gate(
        Registry([python_tool(tools=["refund"], timeout=10), refund]), ledger=MemoryLedger()
    )
    run = gate.run(authority=Authority(principal="p", grants=["exec:sandbox", "spend:EUR<=10"]))
    (obs,) = run.submit([ToolCall(id="c", name="run_python", arguments={"code": _CODE})])
    assert obs.status is Status.OK
    result = json.loads(obs.content)
    assert "call id 1" in result.get("violation", ""), result
    assert refunded == [5.0]


@pytest.mark.parametrize("number", [b"1e999", b"-1e999", b"1E400"])
def test_a_number_that_is_not_finite_is_a_protocol_violation(number: bytes) -> None:
    """``1e999`` parses to infinity in Python's JSON: the frame parser refuses it itself (the
    gate's parse stage would refuse it later, but no later stage should ever see it)."""
    from callgate.sandbox.protocol import ProtocolViolation, parse_request

    body = b'{"op":"call","id":1,"tool":"t","arguments":{"x":' + number + b"}}"
    with pytest.raises(ProtocolViolation, match="finite"):
        parse_request(body)

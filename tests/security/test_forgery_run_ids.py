"""Run ids are scoped like idempotency keys (issue 28, item 5): an application that reuses
one run id for two users never answers one user's call with the other's recorded result.

Before the fix, Bob's ``close_order`` sent as ``call_0`` in Alice's run id was answered
with Alice's recorded outcome, and his order was never closed. Now the run id belongs to
the principal and trusted scope that opened it: Bob's run is refused before any call,
with a message that says what to do, on every backend; Alice may reopen her own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from callgate import Authority, Gate, Registry, Status, ToolCall
from callgate.ledger import Ledger, LedgerError

ALICE = Authority(principal="alice", grants=["write:orders"], context={"tenant": "acme"})
BOB = Authority(principal="bob", grants=["write:orders"], context={"tenant": "acme"})
ALICE_ELSEWHERE = Authority(
    principal="alice", grants=["write:orders"], context={"tenant": "globex"}
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "make_ledger" in metafunc.fixturenames:
        metafunc.parametrize("make_ledger", ["memory", "sqlite", "postgres"], indirect=True)


def shop(closed: list[str]) -> Registry:
    registry = Registry()

    @registry.tool(effects="write:orders")
    def close_order(order_id: str) -> dict[str, Any]:
        """Close an order."""
        closed.append(order_id)
        return {"closed": order_id}

    return registry


def test_a_run_id_opened_by_one_user_is_refused_to_another(
    make_ledger: Callable[..., Ledger],
) -> None:
    """Bob (or Alice in another tenant's scope) cannot open Alice's run id; nothing of his
    is answered from her record; Alice can reopen it and gets her replay."""
    closed: list[str] = []
    gate = Gate(shop(closed), ledger=make_ledger())
    run = gate.run(authority=ALICE, run_id="session-1")
    call = ToolCall(id="call_0", name="close_order", arguments={"order_id": "alice-1"})
    assert run.submit([call])[0].status is Status.OK

    other_gate = Gate(shop(closed), ledger=make_ledger())
    for other in (BOB, ALICE_ELSEWHERE):
        with pytest.raises(LedgerError, match="belongs to 'alice") as refused:
            other_gate.run(authority=other, run_id="session-1")
        assert "give each user's run its own id" in str(refused.value)
    assert closed == ["alice-1"]

    again = other_gate.run(authority=ALICE, run_id="session-1")
    [obs] = again.submit([call])
    assert obs.status is Status.OK
    assert closed == ["alice-1"]  # her own call id replays her own outcome


def test_bobs_call_runs_under_his_own_run_id(make_ledger: Callable[..., Ledger]) -> None:
    """The control: with his own run id Bob's call_0 runs (his effect happens)."""
    closed: list[str] = []
    gate = Gate(shop(closed), ledger=make_ledger())
    gate.run(authority=ALICE, run_id="session-1").submit(
        [ToolCall(id="call_0", name="close_order", arguments={"order_id": "alice-1"})]
    )
    bob = gate.run(authority=BOB, run_id="session-2")
    [obs] = bob.submit([ToolCall(id="call_0", name="close_order", arguments={"order_id": "bob-7"})])
    assert obs.status is Status.OK
    assert closed == ["alice-1", "bob-7"]

"""An approval is spent only by the run it was asked in (every backend).

With one principal and the tenant in ``Authority.context`` (the README's own
pattern), tenant A's approval of ``close_order(o-1)`` must not release tenant
B's identical call: B gets a request of its own, and A's call runs once.
"""

from __future__ import annotations

from collections.abc import Callable

from callgate import Authority, CallContext, Gate, Policy, Registry, Status, ToolCall, allow, ask
from callgate.ledger import Ledger


def _tenant(name: str) -> Authority:
    return Authority(principal="support-agent", grants=["write:orders"], context={"tenant": name})


def test_one_tenants_approval_does_not_release_anothers_identical_call(
    make_ledger: Callable[..., Ledger],
) -> None:
    """Tenant A's approval releases only A's call; B's identical call stays pending, unrun."""
    ledger = make_ledger()
    closed: list[tuple[str, str]] = []
    registry = Registry()

    @registry.tool(effects="write:orders")
    def close_order(order_id: str, ctx: CallContext) -> str:
        """Close an order."""
        closed.append((ctx.context["tenant"], order_id))
        return f"closed {order_id}"

    gate = Gate(registry, ledger=ledger, policy=Policy([ask("close_order"), allow("*")]))
    call = ToolCall(id="c1", name="close_order", arguments={"order_id": "o-1"})
    run_a = gate.run(authority=_tenant("acme"))
    [pending_a] = run_a.submit([call])
    assert pending_a.status is Status.PENDING
    assert pending_a.approval_id is not None
    gate.approvals.approve(pending_a.approval_id, by="manager")

    run_b = gate.run(authority=_tenant("globex"))
    [pending_b] = run_b.submit([call])
    assert pending_b.status is Status.PENDING, pending_b.content
    assert pending_b.approval_id != pending_a.approval_id
    assert closed == []

    [done] = run_a.resume()
    assert done.status is Status.OK
    assert closed == [("acme", "o-1")]
    assert run_b.resume() == []  # B's own request is still undecided: nothing runs
    assert run_b.pending_approvals == [pending_b.approval_id]
    assert closed == [("acme", "o-1")]


def test_another_tenant_cannot_resume_a_run_and_spend_its_approval(
    make_ledger: Callable[..., Ledger],
) -> None:
    """Same principal, another tenant: ``resume_run`` refuses, naming what it expected."""
    import pytest

    from callgate.ledger import LedgerError

    ledger = make_ledger()
    closed: list[tuple[str, str]] = []
    registry = Registry()

    @registry.tool(effects="write:orders")
    def close_order(order_id: str, ctx: CallContext) -> str:
        """Close an order."""
        closed.append((ctx.context["tenant"], order_id))
        return f"closed {order_id}"

    gate = Gate(registry, ledger=ledger, policy=Policy([ask("close_order"), allow("*")]))
    run_a = gate.run(authority=_tenant("acme"))
    [pending] = run_a.submit([ToolCall(id="c1", name="close_order", arguments={"order_id": "o-1"})])
    assert pending.approval_id is not None
    gate.approvals.approve(pending.approval_id, by="manager")
    with pytest.raises(LedgerError, match=r"resume it under the authority it ran with"):
        gate.resume_run(run_a.id, authority=_tenant("globex"))
    assert closed == []
    [done] = gate.resume_run(run_a.id, authority=_tenant("acme")).resume()
    assert done.status is Status.OK
    assert closed == [("acme", "o-1")]
    request = gate.approvals.get(pending.approval_id)
    assert request is not None
    assert request.principal.startswith("support-agent [scope ")  # who asked, as recorded

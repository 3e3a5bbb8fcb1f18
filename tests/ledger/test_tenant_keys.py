"""Two tenants' business keys never meet (every backend).

The README's pattern: one principal, the tenant in ``Authority(context=...)``.
A business idempotency key (``idempotency_key="{operation_id}"``) is scoped by
the principal and the run's trusted scope, read from the context by default.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from callgate import Authority, CallContext, Gate, Registry, Status, ToolCall
from callgate.ledger import Ledger


def _gate(ledger: Ledger, refunds: list[tuple[Any, str]]) -> Gate:
    registry = Registry()

    @registry.tool(effects="spend:USD", idempotency_key="{operation_id}")
    def refund(order_id: str, operation_id: str, ctx: CallContext) -> str:
        """Refund an order."""
        refunds.append((ctx.context.get("tenant"), order_id))
        return f"refunded {order_id}"

    return Gate(registry, ledger=ledger)


def _refund(call_id: str = "c1") -> ToolCall:
    return ToolCall(
        id=call_id, name="refund", arguments={"order_id": "o-1", "operation_id": "op-1"}
    )


def _authority(**context: Any) -> Authority:
    return Authority(principal="support-agent", grants=["spend:USD"], context=context)


def test_two_tenants_op_1_never_collide(make_ledger: Callable[..., Ledger]) -> None:
    """Two tenants' op-1 under one principal both run: no replay across tenants."""
    ledger = make_ledger()
    refunds: list[tuple[Any, str]] = []
    gate = _gate(ledger, refunds)
    [a] = gate.run(authority=_authority(tenant="acme")).submit([_refund()])
    [b] = gate.run(authority=_authority(tenant="globex")).submit([_refund()])
    assert (a.status, b.status) == (Status.OK, Status.OK)
    assert "already ran" not in b.content
    assert refunds == [("acme", "o-1"), ("globex", "o-1")]


def test_the_same_tenants_op_1_runs_once(make_ledger: Callable[..., Ledger]) -> None:
    """The same tenant's op-1 in a new run replays (idempotent_replay): one refund."""
    ledger = make_ledger()
    refunds: list[tuple[Any, str]] = []
    gate = _gate(ledger, refunds)
    gate.run(authority=_authority(tenant="acme")).submit([_refund()])
    [again] = gate.run(authority=_authority(tenant="acme")).submit([_refund("c2")])
    assert again.details[0]["rule"] == "idempotent_replay"
    assert refunds == [("acme", "o-1")]


def test_objects_in_the_context_do_not_change_the_scope(
    make_ledger: Callable[..., Ledger],
) -> None:
    """A client object (whose text differs per process) is not part of the default scope."""
    ledger = make_ledger()
    refunds: list[tuple[Any, str]] = []
    gate = _gate(ledger, refunds)
    gate.run(authority=_authority(tenant="acme", client=object())).submit([_refund()])
    gate.run(authority=_authority(tenant="acme", client=object())).submit([_refund("c2")])
    assert refunds == [("acme", "o-1")]


def test_an_explicit_scope_survives_a_changing_token(make_ledger: Callable[..., Ledger]) -> None:
    """``Authority(scope=...)``: a retry with a refreshed token is still the same operation."""
    ledger = make_ledger()
    refunds: list[tuple[Any, str]] = []
    gate = _gate(ledger, refunds)

    def scoped(token: str) -> Authority:
        return Authority(
            principal="support-agent",
            grants=["spend:USD"],
            context={"tenant": "acme", "token": token},
            scope="acme",
        )

    gate.run(authority=scoped("t-1")).submit([_refund()])
    [again] = gate.run(authority=scoped("t-2")).submit([_refund("c2")])
    assert again.details[0]["rule"] == "idempotent_replay"
    assert refunds == [("acme", "o-1")]


def test_without_a_context_keys_are_scoped_by_the_principal_as_before() -> None:
    """scope_key is the principal with no context, and differs per tenant with one."""
    assert Authority(principal="p").scope_key == "p"
    assert Authority(principal="p", context={"tenant": "a"}).scope_key != "p"
    assert (
        Authority(principal="p", context={"tenant": "a"}).scope_key
        != Authority(principal="p", context={"tenant": "b"}).scope_key
    )


def test_a_tenant_given_as_a_uuid_is_part_of_the_scope(make_ledger: Callable[..., Ledger]) -> None:
    """Tenants given as UUIDs get their own key scope: both refunds run."""
    import uuid

    ledger = make_ledger()
    refunds: list[tuple[Any, str]] = []
    gate = _gate(ledger, refunds)
    a, b = uuid.uuid4(), uuid.uuid4()
    gate.run(authority=_authority(tenant=a)).submit([_refund()])
    gate.run(authority=_authority(tenant=b)).submit([_refund()])
    assert [t for t, _ in refunds] == [a, b]

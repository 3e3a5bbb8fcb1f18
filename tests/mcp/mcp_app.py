"""A small registry served over MCP in the tests (also loaded as ``tests/mcp/app.py:registry``)."""

from __future__ import annotations

import hashlib
from typing import Literal

from callgate import CallContext, Registry

registry = Registry()


def seen(value: object) -> str:
    """A trusted-context value as these tools report it: a digest. The gate scrubs the
    context's own text from everything the model reads, so the tools show that they
    received the value without showing it."""
    return "sha:" + hashlib.sha256(str(value).encode()).hexdigest()[:12]


calls: list[tuple[str, dict[str, object]]] = []
"""Every handler run in this process, for the in-process tests."""


@registry.tool(effects="read:orders", risk="read")
def lookup_order(order_id: str, ctx: CallContext) -> dict[str, object]:
    """Look up one order of the caller's tenant.

    Args:
        order_id: the order's id, e.g. "o-1".
    """
    calls.append(("lookup_order", {"order_id": order_id}))
    return {"order_id": order_id, "tenant": seen(ctx.context.get("tenant")), "status": "shipped"}


@registry.tool(effects="spend:{currency}={amount}")
async def refund(order_id: str, amount: float, currency: Literal["USD", "EUR"]) -> str:
    """Refund part of an order.

    Args:
        order_id: the order's id.
        amount: how much to refund.
        currency: the order's currency.
    """
    calls.append(("refund", {"order_id": order_id, "amount": amount, "currency": currency}))
    return f"refunded {amount:.2f} {currency} on {order_id}"


@registry.tool(effects="write:everything")
def wipe_orders() -> str:
    """Delete every order."""
    calls.append(("wipe_orders", {}))
    return "wiped"


@registry.tool(effects="read:self", risk="read")
def whoami(ctx: CallContext) -> dict[str, object]:
    """Who the server thinks is calling, and for which tenant."""
    calls.append(("whoami", {}))
    return {"principal": ctx.principal, "tenant": seen(ctx.context.get("tenant"))}


@registry.tool(effects="read:orders", risk="read")
def export_orders(ctx: CallContext) -> str:
    """A careless tool that echoes the upstream credential it was given."""
    calls.append(("export_orders", {}))
    return f"exported with key {ctx.context.get('api_key')}"

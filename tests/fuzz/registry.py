"""The tools every fuzz input is submitted to, and the record of what their handlers got.

Some read, some write with templated effects, one takes nested models and
enums, one is async, one has no arguments, one fails and one times out as
``unknown``. Every handler appends the call id it received to `RECEIVED`,
so the harness can tell whether a call the generator cut off reached a
handler.
"""

from __future__ import annotations

import enum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from callgate import (
    Authority,
    CallContext,
    Gate,
    OutcomeUnknown,
    Registry,
    Run,
    ToolFailure,
)
from callgate.ledger import Ledger

RECEIVED: list[tuple[str, str]] = []
"""(call id, tool) of every call a handler received since the last `RECEIVED.clear()`."""

GRANTS = ["read:*", "write:*", "spend:*", "network:*"]


class Currency(enum.Enum):
    """Currencies an order can be paid in."""

    USD = "USD"
    EUR = "EUR"
    JPY = "JPY"


class Line(BaseModel):
    """One line of an order."""

    model_config = ConfigDict(extra="forbid")

    sku: str
    quantity: Annotated[int, Field(ge=1, le=99)] = 1
    gift: bool | None = None


class Address(BaseModel):
    """Where an order goes."""

    model_config = ConfigDict(extra="forbid")

    street: str
    city: str
    country: Literal["FR", "DE", "JP", "US"]
    lines: list[str] = []


def fuzz_registry() -> Registry:
    """The fuzz tools; each handler records the call id it was given."""
    registry = Registry()

    @registry.tool(effects="read:weather")
    def get_weather(city: str, ctx: CallContext, unit: Literal["c", "f"] = "c") -> dict[str, str]:
        """Current weather for a city.

        Args:
            city: City name, e.g. "Paris".
            unit: Temperature unit.
        """
        RECEIVED.append((ctx.call_id, ctx.tool))
        return {"city": city, "unit": unit}

    @registry.tool(effects="read:products", reads="catalog")
    async def search_products(
        query: str,
        ctx: CallContext,
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
        tags: list[str] | None = None,
    ) -> list[str]:
        """Search the catalog.

        Args:
            query: words to look for.
            limit: at most this many results.
            tags: only products with all of these tags.
        """
        RECEIVED.append((ctx.call_id, ctx.tool))
        return [query][:limit]

    @registry.tool(effects="read:clock")
    def ping(ctx: CallContext) -> str:
        """Check that the service answers."""
        RECEIVED.append((ctx.call_id, ctx.tool))
        return "pong"

    @registry.tool(effects="write:cart", writes="cart:{cart_id}")
    def add_to_cart(
        cart_id: str, sku: str, ctx: CallContext, quantity: Annotated[int, Field(ge=1, le=10)] = 1
    ) -> str:
        """Add an item to a cart."""
        RECEIVED.append((ctx.call_id, ctx.tool))
        return f"added {quantity} x {sku} to {cart_id}"

    @registry.tool(
        effects=["write:orders", "spend:{currency}"],
        writes="order:{order_id}",
        idempotency_key="{order_id}",
    )
    def place_order(
        order_id: str,
        lines: Annotated[list[Line], Field(min_length=1)],
        currency: Currency,
        address: Address,
        ctx: CallContext,
        note: str | None = None,
        priority: Literal["low", "normal", "high"] = "normal",
    ) -> dict[str, object]:
        """Place an order for a list of lines.

        Args:
            order_id: the client's order id.
            lines: what to order.
            currency: the currency to pay in.
            address: where to deliver.
            note: a note for the courier.
            priority: how fast to ship.
        """
        RECEIVED.append((ctx.call_id, ctx.tool))
        return {"order_id": order_id, "lines": len(lines)}

    @registry.tool(effects="write:orders", writes="order:{order_id}")
    def cancel_order(order_id: str, ctx: CallContext, reason: str = "") -> str:
        """Cancel an order that has not shipped."""
        RECEIVED.append((ctx.call_id, ctx.tool))
        raise ToolFailure(f"order {order_id} has already shipped")

    @registry.tool(effects="spend:USD")
    def charge_card(amount_cents: Annotated[int, Field(ge=1)], ctx: CallContext) -> str:
        """Charge the customer's card."""
        RECEIVED.append((ctx.call_id, ctx.tool))
        raise OutcomeUnknown("the payment service did not answer")

    return registry


TOOL_NAMES = (
    "get_weather",
    "search_products",
    "ping",
    "add_to_cart",
    "place_order",
    "cancel_order",
    "charge_card",
)


def fuzz_run(gate: Gate, run_id: str) -> Run:
    """A run on ``gate`` with every effect granted."""
    return gate.run(authority=Authority(principal="fuzz", grants=GRANTS), run_id=run_id)


def fuzz_gate(registry: Registry, ledger: Ledger) -> Gate:
    """A gate on the fuzz registry over ``ledger``; read retries off, so a slow input stays one."""
    return Gate(registry, ledger=ledger, read_retries=0)

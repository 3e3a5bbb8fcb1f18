"""Ten shop tools and fifty requests, each answered by one call to a known tool.

The tools return canned data: the point is what the gate does with a real
model's proposals (parsed, validated, authorized, run), not the shop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

from callgate import Registry

registry = Registry()

Order = Annotated[str, Field(pattern=r"^o-[0-9]{1,6}$", description='an order id, e.g. "o-17"')]


@registry.tool(effects="read:orders")
def get_order(order_id: Order) -> dict[str, str]:
    """Look up one order: its status and items."""
    return {"order_id": order_id, "status": "shipped", "items": "2 x lamp"}


@registry.tool(effects="read:orders")
def list_orders(customer_email: str, limit: Annotated[int, Field(ge=1, le=20)] = 5) -> list[str]:
    """List a customer's most recent orders."""
    return ["o-17", "o-18"][:limit]


@registry.tool(effects="read:shipping")
def track_shipment(order_id: Order) -> dict[str, str]:
    """Where an order's parcel is now."""
    return {"order_id": order_id, "carrier": "DHL", "at": "Leipzig hub"}


@registry.tool(effects=["write:orders", "spend:{currency}"])
def refund(
    order_id: Order,
    amount: Annotated[float, Field(gt=0, le=500)],
    currency: Literal["USD", "EUR"] = "USD",
) -> str:
    """Refund part or all of an order."""
    return f"refunded {amount} {currency} on {order_id}"


@registry.tool(effects="write:orders")
def cancel_order(order_id: Order, reason: str) -> str:
    """Cancel an order that has not shipped yet."""
    return f"cancelled {order_id}"


@registry.tool(effects="write:customers")
def update_address(order_id: Order, street: str, city: str, postcode: str) -> str:
    """Change the delivery address of an order."""
    return f"{order_id} now goes to {street}, {postcode} {city}"


@registry.tool(effects="read:catalog")
def search_products(query: str, max_price: float | None = None) -> list[str]:
    """Search the catalog by words, optionally under a price."""
    return [f"{query} (basic)", f"{query} (deluxe)"]


@registry.tool(effects="write:carts")
def add_to_cart(sku: str, quantity: Annotated[int, Field(ge=1, le=10)] = 1) -> str:
    """Put a product in the customer's cart."""
    return f"{quantity} x {sku} in the cart"


@registry.tool(effects="disclose:email")
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email to the customer."""
    return f"sent to {to}"


@registry.tool(effects="read:stores")
def store_hours(city: str, day: Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]) -> str:
    """Opening hours of the shop's store in a city on a day."""
    return "9:00-18:00"


GRANTS = (
    "read:*",
    "write:*",
    "spend:USD",
    "spend:EUR",
    "disclose:email",
)
SYSTEM = "You are the assistant of an online shop. Use a tool to do what the customer asks."


@dataclass(frozen=True, slots=True)
class Task:
    """One request and the tool that answers it."""

    id: str
    prompt: str
    tool: str


_PROMPTS: dict[str, list[str]] = {
    "get_order": [
        "What is the status of order o-17?",
        "Can you look up order o-2044 for me?",
        "Show me what is in order o-9.",
        "I need the details of my order o-31337.",
        "Is order o-100 complete?",
    ],
    "list_orders": [
        "List the orders of ana@example.com.",
        "What did bob@example.org order recently?",
        "Show the last 3 orders for carla@example.net.",
        "Which orders does dan@example.com have?",
        "Find the recent orders of eve@example.com.",
    ],
    "track_shipment": [
        "Where is the parcel of order o-17 right now?",
        "Track the shipment of order o-552.",
        "Has the package for o-80 left the warehouse?",
        "Which carrier has order o-4?",
        "Track my delivery, order o-7788.",
    ],
    "refund": [
        "Refund 20 USD on order o-17.",
        "Please give back 35.50 EUR for order o-88.",
        "Refund order o-3 by 12 dollars.",
        "Issue a refund of 99 USD on o-410.",
        "The lamp in o-23 was broken, refund 45 EUR.",
    ],
    "cancel_order": [
        "Cancel order o-17, I ordered it by mistake.",
        "Please cancel o-6 because it is too late.",
        "I want to cancel order o-900: wrong size.",
        "Cancel my order o-12, I found it cheaper.",
        "Stop order o-77 from shipping, cancel it: duplicate order.",
    ],
    "update_address": [
        "Send order o-17 to 5 Oak Road, 10115 Berlin instead.",
        "Change the address of o-44 to 12 Rue Cler, 75007 Paris.",
        "Order o-8 should go to 1 Main St, 02139 Cambridge.",
        "Deliver o-61 to 9 Via Roma, 00184 Rome.",
        "New address for order o-5: 3 High Street, OX1 1AA Oxford.",
    ],
    "search_products": [
        "Do you sell desk lamps?",
        "Search for hiking boots under 120.",
        "Find me a rain jacket.",
        "Which tents do you have below 300?",
        "Look for a coffee grinder.",
    ],
    "add_to_cart": [
        "Add 2 of sku LAMP-7 to my cart.",
        "Put the item BOOT-42 in my cart.",
        "I'll take 3 x TENT-2, add them to the cart.",
        "Add one JACKET-9 to the cart please.",
        "Add 4 of sku MUG-1 to my basket.",
    ],
    "send_email": [
        "Email ana@example.com that her order shipped.",
        "Send bob@example.org a message saying his refund is done.",
        "Write to carla@example.net: your parcel is delayed.",
        "Email dan@example.com the subject 'Welcome' and a short hello.",
        "Tell eve@example.com by email that the store opens at 9.",
    ],
    "store_hours": [
        "When does the Berlin store open on Saturday?",
        "What are the opening hours in Paris on Monday?",
        "Is the Rome store open on Sunday?",
        "Hours of the Oxford shop on Friday?",
        "When is the Cambridge store open on Wednesday?",
    ],
}

TASKS: tuple[Task, ...] = tuple(
    Task(id=f"{tool}-{n}", prompt=prompt, tool=tool)
    for tool, prompts in _PROMPTS.items()
    for n, prompt in enumerate(prompts, 1)
)
"""Fifty requests over the ten tools, five each."""


def spread(tasks: Sequence[Task], n: int) -> list[Task]:
    """``n`` tasks spread over the tools: one task of each tool in turn (tools in the order
    they first appear), then a second of each, and so on; ``n`` larger than the set gives
    the whole set. ``--tasks 10`` thus covers the ten tools, not the first two."""
    by_tool: dict[str, list[Task]] = {}
    for task in tasks:
        by_tool.setdefault(task.tool, []).append(task)
    out: list[Task] = []
    depth = 0
    while len(out) < min(n, len(tasks)):
        for group in by_tool.values():
            if depth < len(group) and len(out) < n:
                out.append(group[depth])
        depth += 1
    return out

"""Two small example domains the core tests run against.

* **grocery**: `search_products` (read), `create_grocery_cart` (``write:cart``),
  `place_order` (``spend:{currency}={total}``), over a `GroceryStore`.
* **orders**: `get_order_status` (read, returns status and revision) and
  `cancel_order` (optimistic concurrency on ``expected_revision``, idempotency
  key ``{operation_id}``, precondition: an ``ok`` `get_order_status` of the
  same order in this run), over an `OrderDatabase`.

Each builder takes the fake backend it works on, so a test can inspect the
backend afterwards (what was written, how many times each handler ran).
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field

from callgate import Authority, Evidence, Registry, ToolFailure, ToolSpec, tool

# -- grocery -------------------------------------------------------------------


class Currency(enum.Enum):
    """Currencies the grocery store takes."""

    USD = "USD"
    EUR = "EUR"


CATALOG: dict[str, tuple[str, float]] = {
    "sku-milk": ("whole milk 1l", 1.25),
    "sku-oats": ("rolled oats 500g", 2.40),
    "sku-eggs": ("eggs, dozen", 3.10),
}


@dataclass
class GroceryStore:
    """The grocery back end: carts and orders, and how often each handler ran."""

    carts: dict[str, list[str]] = field(default_factory=dict)
    orders: list[dict[str, Any]] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)

    @property
    def touched(self) -> bool:
        """Whether any handler ran or any state changed."""
        return bool(self.calls or self.carts or self.orders)


def grocery_tools(store: GroceryStore) -> list[ToolSpec]:
    """The three grocery tools, working on ``store``."""

    @tool(effects="read:products")
    def search_products(query: str, limit: Annotated[int, Field(ge=1, le=50)] = 10) -> list[dict]:
        """Search the catalog by name.

        Args:
            query: words to look for in the product name.
            limit: at most this many products are returned.
        """
        store.calls["search_products"] += 1
        hits = [
            {"sku": sku, "name": name, "price": price}
            for sku, (name, price) in CATALOG.items()
            if query.lower() in name
        ]
        return hits[:limit]

    @tool(effects="write:cart")
    def create_grocery_cart(store_id: Literal["north", "south"], skus: list[str]) -> dict:
        """Create a cart holding the given products.

        Args:
            store_id: the branch that will pick the order.
            skus: product ids from search_products.
        """
        store.calls["create_grocery_cart"] += 1
        unknown = [s for s in skus if s not in CATALOG]
        if unknown:
            raise ToolFailure(f"unknown product ids {unknown}; use ids from search_products")
        cart_id = f"cart-{len(store.carts) + 1}"
        store.carts[cart_id] = list(skus)
        return {"cart_id": cart_id, "store_id": store_id, "items": len(skus)}

    @tool(effects="spend:{currency}={total}")
    def place_order(cart_id: str, total: Annotated[float, Field(gt=0)], currency: Currency) -> dict:
        """Pay for a cart and place the order.

        Args:
            cart_id: the cart to order, from create_grocery_cart.
            total: the amount to charge.
            currency: the currency of the amount.
        """
        store.calls["place_order"] += 1
        if cart_id not in store.carts:
            raise ToolFailure(f"no cart {cart_id!r}; create one with create_grocery_cart")
        order = {"order_id": f"ord-{len(store.orders) + 1}", "cart_id": cart_id, "total": total}
        order["currency"] = currency.value
        store.orders.append(order)
        return order

    return [search_products, create_grocery_cart, place_order]


def grocery_registry(store: GroceryStore) -> Registry:
    """A registry of the grocery tools over ``store``."""
    return Registry(grocery_tools(store))


# -- orders --------------------------------------------------------------------


@dataclass
class OrderRow:
    """One order as the order database holds it."""

    status: str
    revision: int
    cancelled_by: str | None = None


@dataclass
class OrderDatabase:
    """The authoritative order store, with a log of every committed write."""

    rows: dict[str, OrderRow] = field(
        default_factory=lambda: {
            "A-100": OrderRow(status="placed", revision=3),
            "B-200": OrderRow(status="placed", revision=1),
        }
    )
    commits: list[tuple[str, str]] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)

    def status(self, order_id: str) -> dict[str, Any]:
        """The order's current status and revision, or a ToolFailure if there is none."""
        row = self.rows.get(order_id)
        if row is None:
            raise ToolFailure(f"there is no order {order_id!r}; check the order id")
        return {"order_id": order_id, "status": row.status, "revision": row.revision}

    def cancel(self, order_id: str, expected_revision: int, operation_id: str) -> dict[str, Any]:
        """Cancel an order if it is still at ``expected_revision`` (optimistic concurrency)."""
        row = self.rows.get(order_id)
        if row is None:
            raise ToolFailure(f"there is no order {order_id!r}; check the order id")
        if row.revision != expected_revision:
            raise ToolFailure(
                f"order {order_id} is at revision {row.revision}, not {expected_revision}: "
                "it changed since you read it; read its status again before deciding"
            )
        row.status = "cancelled"
        row.revision += 1
        row.cancelled_by = operation_id
        self.commits.append((order_id, operation_id))
        return {"order_id": order_id, "status": row.status, "revision": row.revision}


def status_was_read(args: Any, evidence: Evidence) -> str | None:
    """cancel_order's precondition: an ``ok`` get_order_status of this order in this run."""
    if evidence.latest("get_order_status", order_id=args.order_id) is None:
        return (
            f"call get_order_status for order_id {args.order_id!r} first, "
            "then cancel using the revision it returns"
        )
    return None


def get_order_status_tool(db: OrderDatabase) -> ToolSpec:
    """The read tool of the orders domain."""

    @tool(effects="read:orders", reads="order:{order_id}")
    def get_order_status(order_id: str) -> dict:
        """Read an order's status and revision.

        Args:
            order_id: the order to look up.
        """
        db.calls["get_order_status"] += 1
        return db.status(order_id)

    return get_order_status


CANCEL_CONTRACT: dict[str, Any] = {
    "effects": "write:orders",
    "writes": "order:{order_id}",
    "idempotency_key": "{operation_id}",
    "precondition": status_was_read,
}


def order_tools(db: OrderDatabase) -> list[ToolSpec]:
    """get_order_status and a synchronous cancel_order over ``db``."""

    @tool(**CANCEL_CONTRACT)
    def cancel_order(order_id: str, expected_revision: int, operation_id: str) -> dict:
        """Cancel an order that has not shipped.

        Args:
            order_id: the order to cancel.
            expected_revision: the revision get_order_status returned.
            operation_id: a fresh id for this cancellation; repeat it to retry safely.
        """
        db.calls["cancel_order"] += 1
        return db.cancel(order_id, expected_revision, operation_id)

    return [get_order_status_tool(db), cancel_order]


def orders_registry(db: OrderDatabase) -> Registry:
    """A registry of the order tools over ``db``."""
    return Registry(order_tools(db))


# -- authorities -----------------------------------------------------------------

ALLOW_ALL = Authority(principal="tester", grants=["*:*"])
"""Every effect granted, with any quantity."""


def authority(*grants: str, **context: Any) -> Authority:
    """An authority for the principal ``alice`` with these grants and trusted context."""
    return Authority(principal="alice", grants=list(grants), context=context)

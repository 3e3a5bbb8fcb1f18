"""Harbor's tools: what the assistant may propose, and the contract callgate enforces.

Every tool reads the tenant and the database from the run's trusted context
(``ctx.context["tenant"]``, ``ctx.context["shop_db"]``): the model can name an
order, never a tenant. Run them under an agent with::

    callgate run harbor.tools:registry --policy examples/harbor/policy.toml \\
        --context tenant=acme-outdoor --context shop_db=.harbor/shop.db ...
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from callgate import ArgumentError, CallContext, Evidence, Registry, ToolFailure
from harbor.shop import connect, provider_lookup, provider_refund

registry = Registry()

OrderId = Annotated[
    str,
    Field(pattern=r"^H-\d{4}$", description='An order id: "H-" and four digits, e.g. "H-0042".'),
]


def _scope(ctx: CallContext) -> tuple[str, str]:
    return str(ctx.context["tenant"]), str(ctx.context["shop_db"])


@registry.tool(effects="read:orders", reads="orders", risk="read")
def search_orders(
    customer_email: str,
    ctx: CallContext,
    status: Literal["placed", "shipped", "delivered", "cancelled"] | None = None,
) -> list[dict[str, Any]]:
    """Find a customer's orders, newest first.

    Args:
        customer_email: the customer's email address.
        status: only orders with this status.
    """
    tenant, path = _scope(ctx)
    query = (
        "SELECT order_id, placed_on, items, total, currency, status FROM orders "
        "WHERE tenant = ? AND lower(customer_email) = lower(?)"
    )
    params: list[Any] = [tenant, customer_email.strip()]
    if status is not None:
        query += " AND status = ?"
        params.append(status)
    with connect(path) as db:
        rows = db.execute(query + " ORDER BY placed_on DESC", params).fetchall()
    return [dict(r) for r in rows]


@registry.tool(
    effects="read:orders",
    reads="order:{order_id}",
    risk="read",
    output_trust={"customer.email": "customer_email", "order_id": "order"},
)
def get_order_status(order_id: OrderId, ctx: CallContext) -> dict[str, Any]:
    """Look up one order: status, amounts, and the customer on file.

    Args:
        order_id: the order's id.
    """
    tenant, path = _scope(ctx)
    with connect(path) as db:
        row = db.execute(
            "SELECT o.*, c.name FROM orders o JOIN customers c "
            "ON c.tenant = o.tenant AND c.email = o.customer_email "
            "WHERE o.tenant = ? AND o.order_id = ?",
            (tenant, order_id),
        ).fetchone()
    if row is None:
        raise ToolFailure(f"no order {order_id} in this shop; check the id with search_orders")
    return {
        "order_id": row["order_id"],
        "status": row["status"],
        "placed_on": row["placed_on"],
        "items": row["items"],
        "total": row["total"],
        "refunded": row["refunded"],
        "currency": row["currency"],
        "customer": {"name": row["name"], "email": row["customer_email"]},
    }


def _order_was_read(args: BaseModel, evidence: Evidence) -> str | None:
    order_id = getattr(args, "order_id", "")
    if evidence.has("get_order_status", order_id=order_id):
        return None
    return f"call get_order_status for order {order_id} first, to see what can be refunded"


def _two_decimals(args: BaseModel) -> None:
    amount = float(getattr(args, "amount", 0))
    if round(amount, 2) != amount:
        raise ArgumentError("amount", "use at most two decimals, e.g. 89.0 or 12.5")


def _reconcile_refund(args: BaseModel, ctx: CallContext) -> dict[str, Any]:
    """Ask the payment provider what happened to an operation whose answer was lost."""
    tenant, path = _scope(ctx)
    operation_id = str(getattr(args, "operation_id", ""))
    with connect(path) as db:
        record = provider_lookup(db, operation_id)
        if record is None:
            raise ToolFailure(
                f"the payment provider has no refund for operation {operation_id}: "
                "nothing was refunded"
            )
        _book(db, tenant, record["order_id"], record["amount"], operation_id)
    return {**_receipt(record), "reconciled": "the provider's record confirms the refund"}


def _book(db: Any, tenant: str, order_id: str, amount: float, operation_id: str) -> None:
    """Record a refund on the shop's order once, whichever path learnt of it."""
    booked = db.execute(
        "INSERT OR IGNORE INTO order_refunds VALUES (?, ?, ?, ?)",
        (operation_id, tenant, order_id, amount),
    )
    if booked.rowcount:
        db.execute(
            "UPDATE orders SET refunded = refunded + ? WHERE tenant = ? AND order_id = ?",
            (amount, tenant, order_id),
        )


def _receipt(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "refund_id": record["refund_id"],
        "order_id": record["order_id"],
        "amount": record["amount"],
        "currency": record["currency"],
        "status": "refunded",
    }


@registry.tool(
    effects=["write:orders", "spend:{currency}={amount}"],
    writes="order:{order_id}",
    risk="write_idempotent",
    idempotency_key="{operation_id}",
    precondition=_order_was_read,
    checks=[_two_decimals],
    reconcile=_reconcile_refund,
    preview=lambda a: (
        f"refund {getattr(a, 'amount', 0):.2f} {getattr(a, 'currency', '')} on order "
        f"{getattr(a, 'order_id', '')} (operation {getattr(a, 'operation_id', '')})"
    ),
)
def refund_order(
    order_id: OrderId,
    amount: Annotated[float, Field(gt=0, le=1000)],
    currency: Literal["USD", "EUR"],
    operation_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9-]{8,64}$")],
    reason: Annotated[str, Field(min_length=3, max_length=200)],
    ctx: CallContext,
) -> dict[str, Any]:
    """Refund (part of) an order to the customer's original payment method.

    Args:
        order_id: the order to refund.
        amount: how much, in the order's currency; at most what is still refundable.
        currency: the order's currency.
        operation_id: a new id for this refund (8-64 letters, digits, '-'); sending the
            same id again never refunds twice.
        reason: why, in a few words, for the customer's record.
    """
    tenant, path = _scope(ctx)
    with connect(path) as db:
        order = db.execute(
            "SELECT total, refunded, currency FROM orders WHERE tenant = ? AND order_id = ?",
            (tenant, order_id),
        ).fetchone()
        if order is None:
            raise ToolFailure(f"no order {order_id} in this shop", retryable=False)
        if currency != order["currency"]:
            raise ToolFailure(f"order {order_id} was paid in {order['currency']}, not {currency}")
        left = round(order["total"] - order["refunded"], 2)
        if amount > left:
            raise ToolFailure(
                f"only {left:.2f} {currency} of order {order_id} can still be refunded",
                retryable=False,
            )
        record = provider_refund(
            db,
            tenant=tenant,
            operation_id=operation_id,
            order_id=order_id,
            amount=amount,
            currency=currency,
        )
        _book(db, tenant, order_id, amount, operation_id)
    return _receipt(record)


@registry.tool(
    effects="disclose:email:{to}",
    risk="write",
    sinks={"to": "customer_email"},
    preview=lambda a: f"email {getattr(a, 'to', '')!r}: {getattr(a, 'subject', '')!r}",
)
def send_email(
    to: str,
    subject: Annotated[str, Field(min_length=1, max_length=120)],
    body: Annotated[str, Field(min_length=1, max_length=4000)],
    ctx: CallContext,
) -> str:
    """Email a customer. The address must be the one on file for their order.

    Args:
        to: the recipient's address.
        subject: the subject line.
        body: the message, in plain text.
    """
    tenant, path = _scope(ctx)
    with connect(path) as db:
        db.execute(
            "INSERT INTO outbox (tenant, recipient, subject, body, sent_at) "
            "VALUES (?, ?, ?, ?, strftime('%s','now'))",
            (tenant, to, subject, body),
        )
    return f"sent to {to}"


@registry.tool(effects="read:kb", reads="kb:{slug}", risk="read")
def read_kb_article(
    slug: Annotated[str, Field(pattern=r"^[a-z0-9-]{1,64}$")], ctx: CallContext
) -> dict[str, str]:
    """Read a help-center article (written by staff and the community: check before acting).

    Args:
        slug: the article's id, e.g. "returns" or "damaged-items".
    """
    tenant, path = _scope(ctx)
    with connect(path) as db:
        row = db.execute(
            "SELECT title, body FROM kb_articles WHERE tenant = ? AND slug = ?", (tenant, slug)
        ).fetchone()
        slugs = [
            r[0] for r in db.execute("SELECT slug FROM kb_articles WHERE tenant = ?", (tenant,))
        ]
    if row is None:
        raise ToolFailure(f"no article {slug!r}; articles: {', '.join(slugs)}")
    return {"slug": slug, "title": row["title"], "body": row["body"]}


@registry.tool(effects="write:accounts:{customer_email}", risk="write")
def close_account(customer_email: str, ctx: CallContext) -> str:
    """Close a customer's account and erase their data (staff only).

    Args:
        customer_email: the account to close.
    """
    raise ToolFailure("account closure is handled by the staff console", retryable=False)

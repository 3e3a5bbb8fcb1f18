"""callgate in one screen: the pipeline stages at work on a small shop.

Run with ``make quickstart`` (or ``.venv/bin/python examples/quickstart.py``). It is
offline: the "model" is a list of proposed calls written by hand, as a model
would send them (JSON argument text, provider call ids).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from pydantic import Field
from rich.console import Console
from rich.table import Table
from rich.text import Text

from callgate import (
    Authority,
    CallContext,
    Gate,
    MemoryLedger,
    Observation,
    Policy,
    Registry,
    ToolCall,
    ToolFailure,
    allow,
    ask,
)

console = Console(width=120)
registry = Registry()

# A tiny system of record the tools act on.
ORDERS = {"o-1": {"status": "shipped", "revision": 3, "total": 42.0, "refunded": 0.0}}
PAYMENTS: list[tuple[str, float]] = []


@registry.tool(effects="read:orders", reads="order:{order_id}")
def get_order(order_id: str, ctx: CallContext) -> dict[str, object]:
    """Look up an order of the current customer.

    Args:
        order_id: the order's id, e.g. "o-1".
    """
    order = ORDERS.get(order_id)
    if order is None:
        raise ToolFailure(f"no order {order_id!r} for this customer; check the id")
    return {"order_id": order_id, "tenant": ctx.context["tenant"], **order}


@registry.tool(
    effects=["write:orders", "spend:{currency}={amount}"],
    writes="order:{order_id}",
    idempotency_key="{operation_id}",
    preview=lambda a: f"refund {a.amount:.2f} {a.currency} on {a.order_id}",  # type: ignore[attr-defined]
)
def refund(
    order_id: str,
    amount: Annotated[float, Field(gt=0, le=500)],
    currency: Literal["USD", "EUR"],
    operation_id: str,
) -> str:
    """Refund part of an order's total to the customer.

    Args:
        order_id: the order to refund.
        amount: how much to refund, in the order's currency.
        currency: ISO currency code.
        operation_id: a fresh id for this refund; reusing it never refunds twice.
    """
    PAYMENTS.append((order_id, amount))
    ORDERS[order_id]["refunded"] = float(ORDERS[order_id]["refunded"]) + amount  # type: ignore[arg-type]
    return f"refunded {amount:.2f} {currency} on {order_id}"


@registry.tool(effects="network:carrier", timeout=0.2, risk="write")
async def notify_carrier(order_id: str, message: str) -> str:
    """Send a note to the shipping carrier about an order.

    Args:
        order_id: the order concerned.
        message: the note, in plain words.
    """
    await asyncio.sleep(1.0)  # the carrier's API hangs: the outcome is unknown
    return "sent"


def show(title: str, observations: list[Observation]) -> None:
    """Print observations as a table: the same facts a model and an auditor see.

    What the model reads is data, so it goes in as `Text`: Rich never reads it as
    markup (``[callgate: ...]`` would vanish) or emoji.
    """
    table = Table(title=title, show_lines=True, title_justify="left")
    for column in ("call", "tool", "status", "stage", "retryable", "what the model reads"):
        table.add_column(column, overflow="fold")
    colours = {"ok": "green", "error": "red", "unknown": "yellow", "rejected": "red"}
    for o in observations:
        colour = colours.get(o.status.value, "cyan")
        table.add_row(
            Text(o.call_id),
            Text(o.tool),
            Text(o.status.value, style=colour),
            o.stage.value,
            "yes" if o.retryable else "no",
            Text(o.content),
        )
    console.print(table)


def main() -> None:
    ledger = MemoryLedger()
    policy = Policy(
        [
            allow("get_order", name="reads are fine"),
            allow("notify_carrier", name="carrier notes are fine"),
            allow("refund", when=lambda a: a["amount"] <= 20, name="refunds up to 20"),
            ask("refund", when=lambda a: a["amount"] > 20, name="larger refunds need a person"),
        ]
    )
    gate = Gate(registry, policy=policy, ledger=ledger)
    authority = Authority(
        principal="support-agent@shop",
        grants=["read:orders", "write:orders", "spend:USD<=100", "network:carrier"],
        context={"tenant": "acme"},  # trusted: the model never chooses the tenant
    )
    run = gate.run(authority=authority)

    show(
        "1. A batch of proposed calls",
        run.submit(
            [
                ToolCall(id="call_1", name="get_order", arguments='{"order_id": "o-1"}'),
                ToolCall(id="call_2", name="get_order", arguments='{"order_id": 1}'),
                ToolCall(id="call_3", name="get_ordr", arguments='{"order_id": "o-1"}'),
                ToolCall(
                    id="call_4",
                    name="refund",
                    arguments='{"order_id": "o-1", "amount": 10, "currency": "USD", '
                    '"operation_id": "op-7"}',
                ),
                ToolCall(
                    id="call_5",
                    name="refund",
                    arguments='{"order_id": "o-1", "amount": 10, "currency": "GBP", '
                    '"operation_id": "op-8"}',
                ),
                ToolCall(
                    id="call_6",
                    name="refund",
                    arguments='{"order_id": "o-1", "amount": 250, "currency": "USD", '
                    '"operation_id": "op-9"}',
                ),
            ]
        ),
    )

    big = ToolCall(
        id="call_7",
        name="refund",
        arguments='{"order_id": "o-1", "amount": 30, "currency": "USD", "operation_id": "op-10"}',
    )
    pending = run.submit([big])
    show("2. A refund above 20 USD waits for a person", pending)
    approval_id = pending[0].approval_id
    assert approval_id is not None
    gate.approvals.approve(approval_id, by="maria@shop")
    show(f"3. maria@shop approved {approval_id}; the run resumes", run.resume())

    retry = ToolCall(
        id="call_8",
        name="refund",
        arguments='{"order_id": "o-1", "amount": 10, "currency": "USD", "operation_id": "op-7"}',
    )
    show(
        "4. The model repeats refund op-7: the recorded outcome, no second refund",
        run.submit([retry]),
    )

    slow = ToolCall(
        id="call_9", name="notify_carrier", arguments='{"order_id": "o-1", "message": "late"}'
    )
    show("5. A hung API: the outcome is unknown, and nobody retries it blindly", run.submit([slow]))

    console.print(f"Payments actually made: {PAYMENTS}")
    table = Table(title="The ledger: every decision, recorded", title_justify="left")
    for column in ("call", "tool", "state", "stage", "decided by"):
        table.add_column(column)
    for record in ledger.calls(run_id=run.id):
        table.add_row(
            Text(record.call_id),
            Text(record.tool),
            record.state.value,
            record.stage,
            Text(record.decided_by or ""),
        )
    console.print(table)


if __name__ == "__main__":
    main()

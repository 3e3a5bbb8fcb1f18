"""What the adapter tests share: a shop's plain functions (each framework wraps them its own
way), their callgate contracts and policy, and what the ledger should hold afterwards."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from callgate import Authority, OutcomeUnknown, Policy, SQLiteLedger, allow, ask
from callgate.ledger.base import CallState


@dataclass
class Shop:
    """The shop's state and how often each function really ran."""

    refunds: list[tuple[str, float]] = field(default_factory=list)
    runs: dict[str, int] = field(default_factory=dict)

    def ran(self, name: str) -> None:
        self.runs[name] = self.runs.get(name, 0) + 1

    def functions(self) -> dict[str, object]:
        """get_order (read), refund (money), charge (never answers), close_account (never
        granted), as plain typed functions with docstrings."""
        shop = self

        def get_order(order_id: str) -> str:
            """Look up an order.

            Args:
                order_id: the order's id, e.g. "o-1".
            """
            shop.ran("get_order")
            return f"order {order_id}: shipped, total 80.00 USD"

        def refund(order_id: str, amount: float, operation_id: str) -> str:
            """Refund part of an order.

            Args:
                order_id: the order's id.
                amount: how much, in USD.
                operation_id: a fresh id for this refund.
            """
            shop.ran("refund")
            shop.refunds.append((order_id, amount))
            return f"refunded {amount:.2f} USD on {order_id}"

        def charge(order_id: str, amount: float, operation_id: str) -> str:
            """Charge the customer's card.

            Args:
                order_id: the order's id.
                amount: how much, in USD.
                operation_id: a fresh id for this charge.
            """
            shop.ran("charge")
            raise OutcomeUnknown("the payment processor did not answer")

        def close_account(customer: str) -> str:
            """Close a customer's account for good.

            Args:
                customer: the customer's email.
            """
            shop.ran("close_account")
            return f"closed {customer}"

        return {
            "get_order": get_order,
            "refund": refund,
            "charge": charge,
            "close_account": close_account,
        }


CONTRACTS = {
    "get_order": {"effects": "read:orders", "risk": "read"},
    "refund": {
        "effects": ["write:orders", "spend:USD={amount}"],
        "idempotency_key": "{operation_id}",
        "risk": "write_idempotent",
    },
    "charge": {"effects": "spend:USD={amount}", "idempotency_key": "{operation_id}"},
    "close_account": {"effects": "write:accounts"},
}
POLICY = Policy(
    [
        allow("get_order"),
        allow("refund", when=lambda a: a["amount"] <= 50),
        ask("refund", when=lambda a: a["amount"] > 50),
        allow("charge"),
        allow("close_account"),
    ]
)
AUTHORITY = Authority(
    principal="support-bot",
    grants=["read:orders", "write:orders", "spend:USD<=100"],
    context={"tenant": "acme"},
)
"""No ``write:accounts``: close_account is never granted."""

REFUND_80 = '{"order_id": "o-1", "amount": 80, "operation_id": "op-80"}'
CHARGE_5 = '{"order_id": "o-1", "amount": 5, "operation_id": "op-c5"}'


def ledger(tmp_path: Path) -> SQLiteLedger:
    """A real SQLite ledger in the test's directory."""
    return SQLiteLedger(str(tmp_path / "callgate.db"))


def states(store: SQLiteLedger, run_id: str) -> dict[str, list[str]]:
    """Each tool's recorded call states in the run, in the order they were recorded."""
    found: dict[str, list[str]] = {}
    for record in sorted(store.calls(run_id=run_id), key=lambda r: r.created_at):
        found.setdefault(record.tool, []).append(record.state.value)
    return found


def settled_once(store: SQLiteLedger, run_id: str, tool: str) -> CallState:
    """The one recorded call of ``tool`` in the run, and that it had exactly one attempt."""
    [record] = [r for r in store.calls(run_id=run_id) if r.tool == tool]
    assert len(store.attempts(run_id, record.call_id)) == 1
    return record.state

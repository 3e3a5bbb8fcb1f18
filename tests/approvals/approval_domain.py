"""The domain of the approval tests: refunds that always ask a person.

Shared by the in-process tests and by ``approval_worker.py`` (another
process). Every executed refund appends one JSON line to an *effects file*,
so that "executed exactly once" is counted on the back end, across
processes, not read off observations.

* ``get_order(order_id)``: reads; allowed.
* ``refund(order_id, amount, currency)``: spends; every refund asks. Its
  precondition needs an ``ok`` ``get_order`` of the same order in the run
  (evidence), and its resource version is the order's revision (a file per
  order, ``rev-1`` when absent).
* ``pay(iban, amount, pin)``: spends, asks, and ``pin`` is a secret field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from callgate import Authority, Evidence, Gate, Policy, Registry, ToolCall, allow, ask
from callgate.ledger import Ledger

ALICE = Authority(principal="alice", grants=["spend:USD<=1000", "read:orders"])
POLICY = Policy([allow("get_order"), ask("refund", name="refunds need a person"), ask("pay")])


def effects(path: Path) -> list[dict[str, Any]]:
    """The refunds and payments executed so far, in order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def _append(path: Path, record: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


def order_was_read(args: Any, evidence: Evidence) -> str | None:
    if evidence.latest("get_order", order_id=args.order_id) is None:
        return f"call get_order for {args.order_id!r} first"
    return None


def registry(effects_file: Path) -> Registry:
    registry = Registry()
    revisions = effects_file.parent / "revisions"

    def revision(args: BaseModel) -> str:
        path = revisions / args.order_id  # type: ignore[attr-defined]
        return f"rev-{path.read_text().strip()}" if path.exists() else "rev-1"

    @registry.tool(effects="read:orders", risk="read")
    def get_order(order_id: str) -> dict[str, Any]:
        """Read an order."""
        return {"order_id": order_id, "status": "delivered", "total": 250}

    @registry.tool(
        effects="spend:{currency}={amount}",
        precondition=order_was_read,
        resource_version=revision,
        preview=lambda a: f"refund {a.amount:.2f} {a.currency} to {a.order_id}",  # type: ignore[attr-defined]
    )
    def refund(order_id: str, amount: float, currency: str) -> dict[str, Any]:
        """Refund part of an order."""
        _append(effects_file, {"tool": "refund", "order_id": order_id, "amount": amount})
        return {"refunded": amount, "order_id": order_id}

    @registry.tool(effects="spend:USD={amount}", secret_fields=["pin"])
    def pay(iban: str, amount: float, pin: str) -> dict[str, Any]:
        """Pay an IBAN."""
        _append(effects_file, {"tool": "pay", "iban": iban, "amount": amount})
        return {"paid": amount}

    return registry


def set_revision(effects_file: Path, order_id: str, revision: int) -> None:
    """Someone edits the order: its resource version changes."""
    revisions = effects_file.parent / "revisions"
    revisions.mkdir(exist_ok=True)
    (revisions / order_id).write_text(str(revision))


def gate(ledger: Ledger, effects_file: Path, **options: Any) -> Gate:
    return Gate(registry(effects_file), policy=POLICY, ledger=ledger, **options)


def read_order(order_id: str = "o1", call_id: str = "read-1") -> ToolCall:
    return ToolCall(id=call_id, name="get_order", arguments={"order_id": order_id})


def refund_call(call_id: str, amount: float = 20, order_id: str = "o1") -> ToolCall:
    return ToolCall(
        id=call_id,
        name="refund",
        arguments={"order_id": order_id, "amount": amount, "currency": "USD"},
    )

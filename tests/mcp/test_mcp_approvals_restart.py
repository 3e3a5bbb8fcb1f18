"""An approval outlives the proxy: a call left pending when the proxy stopped is found again
by its exact effect in the next session, and the person's decision is used there, once.

Real parts: the SDK's client, the proxy over a real stdio upstream, one SQLite ledger file
shared by the two proxy sessions and the person deciding in between.
"""

from __future__ import annotations

from pathlib import Path

import mcp_types
import pytest
from mcp import Client
from mcp_support import upstream_calls, upstream_params

from callgate import Policy, SQLiteLedger, ask
from callgate.mcp import proxy

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SEND = {"to": "bob@example.com", "subject": "lunch", "body": "noon"}


def meta(result: mcp_types.CallToolResult) -> dict[str, str]:
    assert result.meta is not None
    return dict(result.meta)


async def session(log: Path, db: Path, arguments: dict[str, str]) -> mcp_types.CallToolResult:
    """One proxy session (its own process state, the shared ledger file): one call."""
    with SQLiteLedger(db) as ledger:
        async with (
            proxy(
                upstream_params("mail", log),
                server_name="mail",
                ledger=ledger,
                approvals=ledger.approvals(),
                policy=Policy([ask("send_email")]),
                principal="alice",
            ) as gate,
            Client(gate.server) as client,
        ):
            return await client.call_tool("send_email", arguments)


async def test_a_decision_made_while_the_proxy_was_down_is_used_by_the_next_session(
    log: Path, tmp_path: Path
) -> None:
    """A person's decision made between two proxy sessions is used once by the next session's same
    call."""
    db = tmp_path / "ledger.db"
    first = await session(log, db, SEND)
    assert meta(first)["callgate/status"] == "pending"
    approval = meta(first)["callgate/approval_id"]
    with SQLiteLedger(db) as ledger:
        ledger.approvals().approve(approval, by="ops")
    second = await session(log, db, SEND)
    assert meta(second)["callgate/status"] == "ok", second
    assert [c["arguments"]["to"] for c in upstream_calls(log)] == ["bob@example.com"]
    # Used once: the same call in a third session asks again.
    third = await session(log, db, SEND)
    assert meta(third)["callgate/status"] == "pending"
    assert meta(third)["callgate/approval_id"] != approval
    assert len(upstream_calls(log)) == 1


async def test_changed_arguments_do_not_use_the_decision(log: Path, tmp_path: Path) -> None:
    """A call with other arguments does not use an approval made for the first: it asks, and nothing
    is sent."""
    db = tmp_path / "ledger.db"
    first = await session(log, db, SEND)
    approval = meta(first)["callgate/approval_id"]
    with SQLiteLedger(db) as ledger:
        ledger.approvals().approve(approval, by="ops")
    other = await session(log, db, {**SEND, "to": "eve@example.com"})
    assert meta(other)["callgate/status"] == "pending"
    assert upstream_calls(log) == []

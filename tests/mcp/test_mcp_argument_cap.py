"""Arguments over the proxy's size cap are refused at parse, the limit named, nothing sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp_support import upstream_calls, upstream_params

from callgate import MemoryLedger, Policy, allow
from callgate.ledger.base import CallState
from callgate.mcp import proxy

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_arguments_over_the_cap_are_refused_at_parse(log: Path) -> None:
    """Arguments over max_argument_chars are rejected at parse with the limit and the measured size;
    nothing is sent upstream."""
    ledger = MemoryLedger()
    async with (
        proxy(
            upstream_params("echo", log),
            server_name="echo",
            ledger=ledger,
            policy=Policy([allow()]),
            max_argument_chars=1000,
        ) as gate,
        Client(gate.server) as client,
    ):
        small = await client.call_tool("echo", {"message": "x" * 900})
        big = await client.call_tool("echo", {"message": "x" * 1001})
    assert small.meta is not None
    assert small.meta["callgate/status"] == "ok"
    assert big.meta is not None
    assert (big.meta["callgate/status"], big.meta["callgate/stage"]) == ("rejected", "parse")
    text = big.content[0].text  # type: ignore[union-attr]
    assert "over the limit of 1,000 characters" in text
    assert "1,015 characters" in text  # {"message":"x...x"}: the size that was measured
    assert [len(c["arguments"]["message"]) for c in upstream_calls(log)] == [900]
    assert sorted(r.state for r in ledger.calls()) == sorted([CallState.OK, CallState.REJECTED])

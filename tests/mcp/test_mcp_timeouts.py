"""One timeout per call: the gate's retries of a read fit inside the timeout a client is told."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client
from mcp_support import upstream_calls, upstream_params

from callgate import (
    Authority,
    Gate,
    MemoryLedger,
    Observation,
    Policy,
    Status,
    ToolCall,
    allow,
)
from callgate.mcp import ToolConfig, proxy
from callgate.mcp.client import CallBudget, RemoteToolset
from callgate.tools import CallContext

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

READ = {"start_job": ToolConfig(risk="read")}


def text(result: mcp_types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


async def test_a_hanging_read_behind_the_proxy_is_tried_within_one_timeout(log: Path) -> None:
    """A `risk = "read"` upstream tool that never answers, timeout 1 s, the gate's default two
    read retries: the upstream receives the call once, the client waits about 1 s (it waited
    3 s before: 1 s per attempt), and the message states the 1 s it was given and what was
    tried."""
    async with (
        proxy(
            upstream_params("hang", log),
            server_name="slow",
            ledger=MemoryLedger(),
            policy=Policy([allow()]),
            tools=READ,
            timeout=1.0,
        ) as gate,
        Client(gate.server) as client,
    ):
        result = await client.call_tool("start_job", {"name": "nightly"})
    assert result.meta is not None
    assert result.meta["callgate/status"] == "unknown"
    message = text(result)
    assert "did not finish within 1 s, the timeout shared by all attempts of this call" in message
    assert "(1 attempt sent," in message
    assert "no further attempt was sent" in message
    assert "this tool only reads, so retrying is safe" in message
    assert [c["tool"] for c in upstream_calls(log)] == ["start_job"]  # one attempt, not three


class FlakyUpstream:
    """An upstream whose first call fails after `first_takes` seconds and whose later calls
    hang. It records the time each call was given (its effective deadline) and the calls."""

    def __init__(self, first_takes: float) -> None:
        self.first_takes = first_takes
        self.granted: list[float] = []

    async def list_tools(self) -> list[mcp_types.Tool]:
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        return [mcp_types.Tool(name="lookup", input_schema=schema)]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        self.granted.append(anyio.current_effective_deadline() - anyio.current_time())
        if len(self.granted) == 1:
            await anyio.sleep(self.first_takes)
            raise ConnectionResetError("the connection dropped")
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def lookup(upstream: FlakyUpstream, timeout: float) -> Observation:
    toolset = RemoteToolset(
        upstream=upstream,
        server_name="flaky",
        tools={"lookup": ToolConfig(risk="read")},
        timeout=timeout,
    )
    await toolset.refresh()
    gate = Gate(toolset.registry, policy=Policy([allow()]), ledger=MemoryLedger())
    run = gate.run(authority=Authority(principal="alice", grants=("network:flaky",)))
    [obs] = await run.asubmit([ToolCall(id="c1", name="lookup", arguments={"name": "x"})])
    return obs


async def test_a_retried_read_gets_only_what_is_left_of_the_timeout() -> None:
    """Attempt 1 fails after 0.6 s of a 1 s timeout; attempt 2 is given at most the 0.4 s
    left (not a fresh 1 s), and once that is spent no third attempt is sent."""
    upstream = FlakyUpstream(first_takes=0.6)
    obs = await lookup(upstream, timeout=1.0)
    assert obs.status is Status.UNKNOWN
    assert len(upstream.granted) == 2
    first, second = upstream.granted
    assert first <= 1.0
    assert 0 < second <= first - 0.6
    assert "did not finish within 1 s, the timeout shared by all attempts" in obs.content
    assert "(2 attempts sent," in obs.content
    assert "no further attempt was sent" in obs.content


async def test_a_write_is_sent_once_and_told_its_own_timeout() -> None:
    """A tool not declared as a read is never retried: one attempt, the whole timeout."""
    upstream = FlakyUpstream(first_takes=0.0)
    toolset = RemoteToolset(upstream=upstream, server_name="flaky", timeout=0.5)
    await toolset.refresh()
    gate = Gate(toolset.registry, policy=Policy([allow()]), ledger=MemoryLedger())
    run = gate.run(authority=Authority(principal="alice", grants=("network:flaky",)))
    [obs] = await run.asubmit([ToolCall(id="c1", name="lookup", arguments={"name": "x"})])
    assert obs.status is Status.UNKNOWN
    assert upstream.granted == [pytest.approx(0.5, abs=0.1)]
    assert "the tool failed unexpectedly (ConnectionResetError)" in obs.content
    assert "Do not repeat this call" in obs.content


def context(call_id: str, attempt: int = 1) -> CallContext:
    return CallContext(
        principal="p",
        context={},
        run_id="r",
        call_id=call_id,
        tool="t",
        idempotency_key="k",
        attempt=attempt,
    )


def test_budgets_of_finished_and_abandoned_calls_are_not_kept() -> None:
    """A call with an outcome forgets its budget; a retry finds its call's budget; at most
    `cap` budgets are kept however many calls time out."""
    budget = CallBudget(30.0, cap=3)
    first = budget.attempt(context("c0"))
    assert budget.attempt(context("c0", attempt=2)) is first
    budget.finish(context("c0"))
    assert len(budget) == 0
    for n in range(10):
        budget.attempt(context(f"c{n}"))
    assert len(budget) == 3
    assert budget.attempt(context("c0", attempt=2)) is not first

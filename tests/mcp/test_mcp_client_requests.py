"""Requests the upstream makes of the client (sampling, elicitation, roots) pass through the
proxy to the client whose call is in flight, for clients of both protocol eras; a sampling
request is recorded in the audit trail (sizes, never the text)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types
import pytest
from mcp import Client
from mcp_support import upstream_params

from callgate import MemoryLedger, Policy, allow
from callgate.mcp import proxy

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

QUESTION = "What is the secret word? It is hunter2-sekrit."


class Answers:
    """The client side: a model, a user and roots, counting what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def sampling(self, ctx: Any, params: mcp_types.CreateMessageRequestParams) -> Any:
        self.asked.append("sampling")
        return mcp_types.CreateMessageResult(
            role="assistant", content=mcp_types.TextContent(text="forty-two"), model="test-model"
        )

    async def elicitation(self, ctx: Any, params: mcp_types.ElicitRequestParams) -> Any:
        self.asked.append("elicitation")
        return mcp_types.ElicitResult(action="accept", content={"name": "Ada"})

    async def roots(self, ctx: Any) -> Any:
        self.asked.append("roots")
        return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri="file:///srv/projects")])

    def options(self) -> dict[str, Any]:
        return {
            "sampling_callback": self.sampling,
            "elicitation_callback": self.elicitation,
            "list_roots_callback": self.roots,
        }


def asker(log: Path, ledger: MemoryLedger) -> Any:
    """The proxy in front of the asking upstream, every call allowed."""
    return proxy(
        upstream_params("asker", log), server_name="asker", ledger=ledger, policy=Policy([allow()])
    )


CALLS = (("ask_model", {"question": QUESTION}), ("ask_user", {}), ("my_roots", {}))


async def texts(client: Client) -> list[tuple[bool, str]]:
    out = []
    for name, arguments in CALLS:
        result = await client.call_tool(name, arguments)
        block = result.content[0]
        out.append((bool(result.is_error), getattr(block, "text", "")))
    return out


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sampling_elicitation_and_roots_reach_the_client(log: Path, mode: str) -> None:
    """Each tool that asks the client answers through the proxy as it does directly, in both
    protocol eras (2026-07-28: an input-required result and the client's retry; 2025-11-25: the
    server's request mid-call), and the call goes through the gate once."""
    direct_answers = Answers()
    async with Client(upstream_params("asker", log), mode=mode, **direct_answers.options()) as c:
        want = await texts(c)
    assert want == [
        (False, "the model said: forty-two"),
        (False, "hello Ada"),
        (False, "file:///srv/projects"),
    ]
    ledger = MemoryLedger()
    answers = Answers()
    async with (
        asker(log, ledger) as gate,
        Client(gate.server, mode=mode, **answers.options()) as client,  # type: ignore[arg-type]
    ):
        got = await texts(client)
    assert got == want
    assert answers.asked == ["sampling", "elicitation", "roots"]
    assert [c.tool for c in ledger.calls()] == ["ask_model", "ask_user", "my_roots"]


async def test_a_sampling_request_is_recorded_with_sizes_not_text(log: Path) -> None:
    """The sampling request is an audit event under the call it served: message count and
    sizes, token limit, the model that answered; the question's text is nowhere in it."""
    ledger = MemoryLedger()
    answers = Answers()
    async with (
        asker(log, ledger) as gate,
        Client(gate.server, **answers.options()) as client,
    ):
        await client.call_tool("ask_model", {"question": QUESTION})
        await client.call_tool("ask_user", {})
    [call, _] = ledger.calls()
    [sampling] = [r for r in ledger.audit() if r.kind == "mcp.sampling"]
    assert sampling.call_id == call.call_id
    assert sampling.run_id == call.run_id
    assert sampling.data["messages"] == 1
    assert sampling.data["message_chars"] == len(QUESTION)
    assert sampling.data["max_tokens"] == 50
    assert sampling.data["model"] == "test-model"
    assert sampling.data["outcome"] == "answered"
    assert "hunter2" not in sampling.data_json
    assert "forty-two" not in sampling.data_json
    [elicitation] = [r for r in ledger.audit() if r.kind == "mcp.elicitation"]
    assert elicitation.data["action"] == "accept"
    assert "Ada" not in elicitation.data_json


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_that_declared_nothing_is_not_asked(log: Path, mode: str) -> None:
    """A client without sampling is never sent the upstream's request: the upstream's tool
    fails with the refusal, and the refusal is recorded."""
    ledger = MemoryLedger()
    async with (
        asker(log, ledger) as gate,
        Client(gate.server, mode=mode) as client,  # type: ignore[arg-type]
    ):
        result = await client.call_tool("ask_model", {"question": QUESTION})
    assert result.is_error
    [sampling] = [r for r in ledger.audit() if r.kind == "mcp.sampling"]
    assert sampling.data["outcome"] == "refused"
    assert "declared no sampling" in sampling.data["reason"]


async def test_forwarding_can_be_turned_off(log: Path) -> None:
    """``forward_requests=()``: the upstream's sampling request is refused without asking the
    client, whatever the client declared."""
    answers = Answers()
    async with (
        proxy(
            upstream_params("asker", log),
            server_name="asker",
            ledger=MemoryLedger(),
            policy=Policy([allow()]),
            forward_requests=(),
        ) as gate,
        Client(gate.server, **answers.options()) as client,
    ):
        result = await client.call_tool("ask_model", {"question": QUESTION})
    assert result.is_error
    assert answers.asked == []


async def test_a_retry_cannot_answer_another_clients_call(log: Path) -> None:
    """An input-required retry names its call by an opaque state bound to the client's
    connection: another connection sending that state reaches nothing."""
    from callgate.mcp.forward import Exchange

    ledger = MemoryLedger()
    async with (
        asker(log, ledger) as gate,
        Client(gate.server) as client,
    ):
        forged = Exchange(owner=object()).token
        result = await client.session.call_tool(
            "ask_model",
            {"question": QUESTION},
            input_responses={},
            request_state=forged,
        )
    assert isinstance(result, mcp_types.CallToolResult)
    assert result.is_error
    assert "request_state unknown" in result.content[0].text  # type: ignore[union-attr]
    assert ledger.calls() == []


def test_the_command_names_a_kind_it_cannot_forward(tmp_path: Path) -> None:
    """``--forward-requests`` with a kind that cannot be forwarded is bad usage (exit 2), the
    kinds it takes named, before any upstream starts."""
    from typer.testing import CliRunner

    from callgate.cli import app

    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\nname = "all"\naction = "allow"\ntool = "*"\n', encoding="utf-8")
    args = ["mcp", "proxy", "--policy", str(policy), "--forward-requests", "sampling,tasks"]
    result = CliRunner().invoke(app, [*args, "--", "false"])
    assert result.exit_code == 2
    assert "tasks cannot be forwarded" in result.output
    assert "sampling,elicitation,roots" in result.output


async def test_a_request_that_races_the_calls_result_is_not_lost() -> None:
    """An upstream's request that reaches a call as its result arrives: if the client was
    already sent it, its retry still answers it and then gets the result; if not, the request
    is handed back (for the client's next call), never refused or dropped."""
    from callgate.mcp.forward import Exchange, _Ask

    roots = mcp_types.ListRootsRequest()
    answer = mcp_types.ListRootsResult(roots=[mcp_types.Root(uri="file:///srv")])
    result = mcp_types.CallToolResult(content=[mcp_types.TextContent(text="done")])

    sent = _Ask(roots)
    exchange = Exchange(owner=("me", None))
    assert exchange.ask(sent)
    required = await exchange.next()
    assert isinstance(required, mcp_types.InputRequiredResult)
    assert required.input_requests is not None
    [key] = required.input_requests
    assert exchange.finish(result) == []
    assert not sent.done.is_set()
    exchange.deliver({key: answer})
    assert sent.answer == answer
    assert await exchange.next() is result

    unsent = _Ask(roots)
    late = Exchange(owner=("me", None))
    assert late.ask(unsent)
    assert late.finish(result) == [unsent]
    assert not unsent.done.is_set()
    assert await late.next() is result
    assert not late.ask(_Ask(roots))

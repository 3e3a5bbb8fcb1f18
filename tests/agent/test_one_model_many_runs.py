"""One model object, many sync runs: the SDK client inside it outlives each run.

An ``OpenAIModel`` or ``AnthropicModel`` holds an ``openai.AsyncOpenAI`` /
``anthropic.AsyncAnthropic`` client, whose connection pool is bound to the event
loop it first ran on. The sync ``Agent.run`` and ``Agent.resume`` must therefore
drive every run of a thread on one loop (`callgate.sync_loop`), not a new loop per
call. The recorded server keeps connections open (HTTP/1.1), as the real APIs do,
so a pooled connection from a closed loop would be picked up by the next run.
The lab (`callgate.eval.lab`) runs every task through the same sync ``Agent.run``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from callgate import Agent, StopReason
from callgate.eval.lab import run_lab
from callgate.eval.repo_tasks import load_tasks
from callgate.ledger import MemoryLedger
from callgate.llms import AnthropicModel, Model, OpenAIModel

from .recorded import RecordedServer, payload
from .support import Shop, authority, shop_gate

REFUND = {"order_id": "o-2", "amount": 90, "currency": "USD", "operation_id": "op-77"}
"""A refund above 50: the shop's policy asks a person before it runs."""


def _openai_chat_refund() -> Any:
    body = payload("openai_chat_call.json")
    function = body["choices"][0]["message"]["tool_calls"][0]["function"]
    function.update(name="refund", arguments=json.dumps(REFUND))
    return body


def _openai_responses_refund() -> Any:
    body = payload("openai_responses_call.json")
    body["output"][0].update(name="refund", arguments=json.dumps(REFUND))
    return body


def _anthropic_refund() -> Any:
    body = payload("anthropic_call.json")
    body["content"][1].update(name="refund", input=dict(REFUND))
    return body


PROVIDERS: dict[str, tuple[Callable[[str], Model], str, str, Callable[[], Any]]] = {
    # name: (model for a base URL, a get_order call, an answer, a refund call of 90)
    "openai_chat": (
        lambda url: OpenAIModel("gpt-4.1", base_url=url + "/v1", api_key="sk-t", max_retries=0),
        "openai_chat_call.json",
        "openai_chat_answer.json",
        _openai_chat_refund,
    ),
    "openai_responses": (
        lambda url: OpenAIModel(
            "gpt-4.1", api="responses", base_url=url + "/v1", api_key="sk-t", max_retries=0
        ),
        "openai_responses_call.json",
        "openai_responses_answer.json",
        _openai_responses_refund,
    ),
    "anthropic": (
        lambda url: AnthropicModel("claude-test", base_url=url, api_key="sk-ant-t", max_retries=0),
        "anthropic_call.json",
        "anthropic_answer.json",
        _anthropic_refund,
    ),
}


@pytest.fixture
def server() -> Iterator[RecordedServer]:
    s = RecordedServer()
    yield s
    s.close()


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_three_sync_runs_share_one_model_and_its_connection(
    provider: str, server: RecordedServer
) -> None:
    """Three ``Agent.run`` calls with one model object all answer, over one kept-open
    connection (a new event loop per run left the client on a closed one: the second
    run ended in ``model_error``, 'Event loop is closed')."""
    make, call, answer, _ = PROVIDERS[provider]
    server.queue = [(200, payload(name)) for name in (call, answer) * 3]
    shop = Shop()
    agent = Agent(make(server.url), shop_gate(shop))
    results = [agent.run("Where is o-1?", authority=authority()) for _ in range(3)]
    assert [(r.reason, r.answer, r.error) for r in results] == [
        (StopReason.ANSWERED, "Order o-1 has shipped.", None)
    ] * 3
    assert shop.runs == {"get_order": 3}
    assert len(server.requests) == 6
    assert len(set(server.connections)) == 1


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_run_approve_resume_with_one_model(provider: str, server: RecordedServer) -> None:
    """The first example of docs/agent.md: run, a person approves the paused refund,
    resume; the refund runs once and the model's answer ends the run (the resume ended
    in ``model_error`` after the approved refund had already run)."""
    make, _, answer, refund = PROVIDERS[provider]
    server.queue = [(200, refund()), (200, payload(answer))]
    shop = Shop()
    gate = shop_gate(shop)
    agent = Agent(make(server.url), gate)
    result = agent.run("Refund order o-2 in full, 90 USD.", authority=authority())
    assert result.paused, (result.reason, result.detail)
    assert shop.refunds == []
    for approval_id in result.pending_approvals:
        gate.approvals.approve(approval_id, by="lead@shop")
    result = agent.resume(result)
    assert (result.reason, result.answer, result.error) == (
        StopReason.ANSWERED,
        "Order o-1 has shipped.",
        None,
    )
    assert shop.refunds == [("o-2", 90.0)]
    assert len(server.requests) == 2
    assert len(set(server.connections)) == 1
    # What the model saw after the resume: the refund's result, under its call id.
    sent = json.dumps(server.requests[1][1])
    assert "refunded 90" in sent


def test_every_lab_run_reaches_the_model_with_one_sdk_client(
    server: RecordedServer, tmp_path: Path
) -> None:
    """The lab (`run_lab`) with one OpenAIModel for two tasks on two surfaces: each of the
    four runs gets the model's answer (none ends in model_error), over one connection."""
    server.queue = [(200, payload("openai_chat_answer.json"))] * 4
    model = OpenAIModel("gpt-4.1", base_url=server.url + "/v1", api_key="sk-t", max_retries=0)
    runs = run_lab(
        load_tasks("repo:2"), ["fine", "coarse"], lambda t, s: model, MemoryLedger(),
        workdir=tmp_path,
    )  # fmt: skip
    assert [r.reason for r in runs] == ["answered"] * 4
    assert len(server.requests) == 4
    assert len(set(server.connections)) == 1


@pytest.mark.parametrize("provider", ["anthropic", "openai_chat"])
def test_sync_runs_from_async_code_share_one_model(provider: str, server: RecordedServer) -> None:
    """``Agent.run`` called where an event loop already runs (a notebook cell, async
    code): three runs with one model object all answer, over one connection (the work
    goes to the calling thread's own helper, the same each time)."""
    make, call, answer, _ = PROVIDERS[provider]
    server.queue = [(200, payload(name)) for name in (call, answer) * 3]
    agent = Agent(make(server.url), shop_gate(Shop()))

    async def cell() -> list[StopReason]:
        return [agent.run("Where is o-1?", authority=authority()).reason for _ in range(3)]

    assert asyncio.run(cell()) == [StopReason.ANSWERED] * 3
    assert len(set(server.connections)) == 1


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_resume_on_another_thread_with_one_model(provider: str, server: RecordedServer) -> None:
    """Run in one thread, approve and resume in another (the approval arrives as a web
    request, served on a thread of its own), twice, with one model object: every resume
    reaches the model (it ended in ``model_error`` after the approved refund had run:
    the SDK client was bound to the first thread's loop). Each run has its own principal:
    the recorded refund carries one operation id, which in one scope would replay the
    first refund's outcome without asking a person (issue 29)."""
    make, _, answer, refund = PROVIDERS[provider]
    server.queue = [(200, refund()), (200, payload(answer))] * 2
    shop = Shop()
    gate = shop_gate(shop)
    agent = Agent(make(server.url), gate)
    for i in range(2):
        paused = _on_a_new_thread(
            functools.partial(
                agent.run,
                "Refund order o-2 in full, 90 USD.",
                authority=authority(principal=f"agent-{i}"),
            )
        )
        assert paused.paused, (paused.reason, paused.detail)
        for approval_id in paused.pending_approvals:
            gate.approvals.approve(approval_id, by="lead@shop")
        result = _on_a_new_thread(functools.partial(agent.resume, paused))
        assert (result.reason, result.error) == (StopReason.ANSWERED, None)
    assert len(server.requests) == 4


@pytest.mark.parametrize("provider", ["anthropic", "openai_chat"])
def test_arun_under_two_event_loops_with_one_model(provider: str, server: RecordedServer) -> None:
    """``asyncio.run(agent.arun(...))`` twice with one model object (a script, a test, a
    notebook restarted): the second run reaches the model too (its client was bound to
    the first, closed loop: 'Event loop is closed')."""
    make, call, answer, _ = PROVIDERS[provider]
    server.queue = [(200, payload(name)) for name in (call, answer) * 2]
    agent = Agent(make(server.url), shop_gate(Shop()))
    results = [asyncio.run(agent.arun("Where is o-1?", authority=authority())) for _ in range(2)]
    assert [(r.reason, r.error) for r in results] == [(StopReason.ANSWERED, None)] * 2


def _on_a_new_thread(fn: Callable[[], Any]) -> Any:
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(result=fn()))
    thread.start()
    thread.join(60)
    return box["result"]

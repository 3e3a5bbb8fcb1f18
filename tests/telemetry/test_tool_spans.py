"""Every proposed call becomes one ``execute_tool {tool}`` span (GenAI semantic conventions)
with callgate's own attributes: the calls that ran, those refused at any stage, and those
waiting for a person."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from pydantic import Field

from callgate import (
    Authority,
    Gate,
    MemoryLedger,
    OutcomeUnknown,
    Policy,
    Registry,
    ToolCall,
    allow,
    ask,
)
from callgate.calls import Observation, Stage, Status
from callgate.errors import DefinitionError
from callgate.telemetry import Telemetry

from .conftest import Spans

KEY = "sk-live-0123456789abcdefghijklmnop"
"""Credential-shaped text: the default secret patterns redact it."""
TENANT = "tenant-secret-42"


def shop(calls: list[str], tracer: trace.Tracer) -> Registry:
    """get_order (read; it traces its own query), refund (money, idempotent by operation),
    charge (its outcome is never known), login (a secret field)."""
    registry = Registry()

    @registry.tool(effects="read:orders", risk="read")
    def get_order(order_id: Annotated[str, Field(pattern=r"^o-\d+$")]) -> dict[str, Any]:
        """Look up an order."""
        calls.append("get_order")
        with tracer.start_as_current_span("orders.select"):
            return {"order_id": order_id, "note": f"api key {KEY} of {TENANT}"}

    @registry.tool(effects=["write:orders", "spend:USD={amount}"], idempotency_key="{operation_id}")
    def refund(order_id: str, amount: float, operation_id: str) -> str:
        """Refund part of an order."""
        calls.append("refund")
        return f"refunded {amount} on {order_id}"

    @registry.tool(effects="write:payments")
    def charge(amount: float) -> str:
        """Charge a card (the processor never answers)."""
        calls.append("charge")
        raise OutcomeUnknown("the payment processor did not answer")

    @registry.tool(effects="write:accounts", secret_fields=["password"])
    def login(user: str, password: str) -> str:
        """Sign in."""
        calls.append("login")
        return f"signed in {user}"

    return registry


POLICY = Policy(
    [
        allow("get_order"),
        allow("refund", when=lambda a: a["amount"] <= 50),
        ask("refund", when=lambda a: a["amount"] > 50),
        allow("charge"),
        allow("login"),
    ]
)
AUTHORITY = Authority(
    principal="support",
    grants=["read:orders", "write:orders", "spend:USD<=500", "write:payments", "write:accounts"],
    context={"tenant": TENANT},
)


def gate_for(spans: Spans, calls: list[str], *, capture: bool = False) -> Gate:
    telemetry = Telemetry(spans.provider, capture_content=capture)
    registry = shop(calls, spans.provider.get_tracer("the application"))
    return Gate(registry, policy=POLICY, ledger=MemoryLedger(), telemetry=telemetry)


def submit(run: Any, calls: list[ToolCall], driver: str) -> list[Observation]:
    """``run.submit`` or ``run.asubmit``, as the test's driver says."""
    if driver == "sync":
        return run.submit(calls)  # type: ignore[no-any-return]

    async def go() -> list[Observation]:
        return await run.asubmit(calls)  # type: ignore[no-any-return]

    return anyio.run(go)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


DRIVERS = pytest.mark.parametrize("driver", ["sync", "async"])


@DRIVERS
def test_a_granted_call_is_one_execute_tool_span_with_the_conventions_attributes(
    spans: Spans, driver: str
) -> None:
    """A call that ran is one execute_tool span: GenAI names, and callgate's status, stage,
    decision, run and ledger call id; no arguments or results unless asked for."""
    ran: list[str] = []
    run = gate_for(spans, ran).run(authority=AUTHORITY, run_id="run-1")
    call = ToolCall(id="c1", name="get_order", arguments='{"order_id":"o-1"}')
    [obs] = submit(run, [call], driver)
    assert obs.status.value == "ok"
    span = spans.one("execute_tool get_order")
    assert span.kind is trace.SpanKind.INTERNAL
    attributes = attrs(span)
    assert attributes.pop("callgate.tool.version") == obs.tool_version
    assert attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_order",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "gen_ai.agent.name": "callgate",
        "gen_ai.tool.description": "Look up an order.",
        "callgate.run.id": "run-1",
        "callgate.call.id": "c1",
        "callgate.decision": "admit",
        "callgate.rule": "allow get_order",
        "callgate.status": "ok",
        "callgate.stage": "execute",
        "callgate.attempts": 1,
    }
    assert span.status.status_code is StatusCode.UNSET


@DRIVERS
def test_the_handlers_own_spans_are_children_of_its_execute_tool_span(
    spans: Spans, driver: str
) -> None:
    """A span the handler starts (a database query) has the call's span as its parent, for a
    lone call and for calls of a batch run side by side; the call's span has the caller's."""
    ran: list[str] = []
    run = gate_for(spans, ran).run(authority=AUTHORITY)
    calls = [
        ToolCall(id="a", name="get_order", arguments='{"order_id":"o-1"}'),
        ToolCall(id="b", name="get_order", arguments='{"order_id":"o-2"}'),
    ]
    outer = spans.provider.get_tracer("the application")
    if driver == "sync":
        with outer.start_as_current_span("request"):
            run.submit(calls[:1])
    else:

        async def go() -> None:
            with outer.start_as_current_span("request"):
                await run.asubmit(calls[:1])

        anyio.run(go)
    request = spans.one("request")
    submit(run, calls, driver)
    tools = spans.named("execute_tool get_order")
    queries = spans.named("orders.select")
    assert len(tools) == 3
    assert len(queries) == 3
    parents = sorted(q.parent.span_id for q in queries if q.parent is not None)
    assert parents == sorted(t.context.span_id for t in tools)
    lone = next(t for t in tools if attrs(t)["gen_ai.tool.call.id"] == "a")
    assert lone.parent is not None
    assert lone.parent.span_id == request.context.span_id


@DRIVERS
def test_rejections_get_spans_with_their_stage_and_an_error_status(
    spans: Spans, driver: str
) -> None:
    """Calls refused at parse, schema, policy and an unknown tool each get a span: status
    rejected, the stage, error.type, the rule; the policy's deny where the policy decided."""
    ran: list[str] = []
    run = gate_for(spans, ran).run(authority=Authority(principal="support", grants=["read:orders"]))
    calls = [
        ToolCall(id="parse", name="get_order", arguments='{"order_id": '),
        ToolCall(id="schema", name="get_order", arguments='{"order_id": "nope"}'),
        ToolCall(id="policy", name="charge", arguments='{"amount": 5}'),
        ToolCall(id="unknown", name="drop_tables", arguments="{}"),
    ]
    observations = submit(run, calls, driver)
    assert [o.status.value for o in observations] == ["rejected"] * 4
    assert ran == []
    by_id = {attrs(s)["gen_ai.tool.call.id"]: s for s in spans.finished()}
    assert sorted(by_id) == ["parse", "policy", "schema", "unknown"]
    stages = {k: attrs(s)["callgate.stage"] for k, s in by_id.items()}
    assert stages == {o.call_id: o.stage.value for o in observations}
    for span in by_id.values():
        assert span.status.status_code is StatusCode.ERROR
        assert attrs(span)["error.type"] == "rejected"
        assert attrs(span)["callgate.status"] == "rejected"
        assert "gen_ai.tool.call.result" not in attrs(span)
    assert attrs(by_id["policy"])["callgate.decision"] == "deny"
    assert "callgate.decision" not in attrs(by_id["schema"])
    assert attrs(by_id["schema"])["callgate.rule"] == "string_pattern_mismatch"
    assert by_id["unknown"].name == "execute_tool drop_tables"


def test_a_pending_call_and_its_resumption_carry_the_approval_id(spans: Spans) -> None:
    """A call waiting for a person is a span with decision ask and the approval id (not an
    error); once approved and resumed, the run's span carries the same approval id."""
    ran: list[str] = []
    gate = gate_for(spans, ran)
    run = gate.run(authority=AUTHORITY)
    arguments = '{"order_id": "o-1", "amount": 80, "operation_id": "op-1"}'
    [obs] = run.submit([ToolCall(id="r1", name="refund", arguments=arguments)])
    assert obs.status.value == "pending"
    assert obs.approval_id is not None
    waiting = spans.one("execute_tool refund")
    assert attrs(waiting)["callgate.status"] == "pending"
    assert attrs(waiting)["callgate.decision"] == "ask"
    assert attrs(waiting)["callgate.approval.id"] == obs.approval_id
    assert waiting.status.status_code is StatusCode.UNSET
    gate.approvals.approve(obs.approval_id, by="lead@shop")
    [done] = run.resume()
    assert done.status.value == "ok"
    assert ran == ["refund"]
    ran_span = [s for s in spans.named("execute_tool refund") if s is not waiting][-1]
    assert attrs(ran_span)["callgate.status"] == "ok"
    assert attrs(ran_span)["callgate.decision"] == "ask"
    assert attrs(ran_span)["callgate.approval.id"] == obs.approval_id
    assert attrs(ran_span)["gen_ai.tool.call.id"] == "r1"


@DRIVERS
def test_an_unknown_outcome_is_an_error_span_of_one_attempt(spans: Spans, driver: str) -> None:
    """A side-effecting call whose outcome is unknown: one attempt, status unknown,
    error.type unknown; it was not retried."""
    ran: list[str] = []
    run = gate_for(spans, ran).run(authority=AUTHORITY)
    [obs] = submit(run, [ToolCall(id="p1", name="charge", arguments='{"amount": 5}')], driver)
    assert obs.status.value == "unknown"
    assert ran == ["charge"]
    span = spans.one("execute_tool charge")
    assert attrs(span)["callgate.attempts"] == 1
    assert attrs(span)["callgate.status"] == "unknown"
    assert attrs(span)["error.type"] == "unknown"
    assert span.status.status_code is StatusCode.ERROR


def test_a_call_the_scheduler_refused_gets_a_span_at_stage_schedule(spans: Spans) -> None:
    """A call depending on a call that failed is settled by the scheduler without running:
    its span says stage schedule, and the decision was admit."""
    ran: list[str] = []
    run = gate_for(spans, ran).run(authority=AUTHORITY)
    first = ToolCall(id="p1", name="charge", arguments='{"amount": 5}')
    second = ToolCall(id="g1", name="get_order", arguments='{"order_id":"o-1"}', after=("p1",))
    observations = run.submit([first, second])
    assert [o.status.value for o in observations] == ["unknown", "rejected"]
    span = spans.one("execute_tool get_order")
    assert attrs(span)["callgate.stage"] == observations[1].stage.value == "schedule"
    assert attrs(span)["callgate.decision"] == "admit"
    assert ran == ["charge"]


def test_content_is_on_spans_only_when_asked_and_then_redacted(spans: Spans) -> None:
    """capture_content=True puts arguments, results and effects on spans as the ledger holds
    them: secret fields, trusted-context values and credential-shaped text redacted."""
    ran: list[str] = []
    run = gate_for(spans, ran, capture=True).run(authority=AUTHORITY)
    run.submit(
        [
            ToolCall(id="g", name="get_order", arguments='{"order_id":"o-7"}'),
            ToolCall(id="l", name="login", arguments='{"user":"ana","password":"hunter2-xyz"}'),
            ToolCall(id="bad", name="login", arguments='{"user":"ana","password":7}'),
        ]
    )
    got = attrs(spans.one("execute_tool get_order"))
    assert got["gen_ai.tool.call.arguments"] == '{"order_id":"o-7"}'
    assert "o-7" in got["gen_ai.tool.call.result"]
    assert KEY not in got["gen_ai.tool.call.result"]
    assert TENANT not in got["gen_ai.tool.call.result"]
    assert "[redacted]" in got["gen_ai.tool.call.result"]
    assert got["callgate.effects"] == ("read:orders",)
    for span in spans.named("execute_tool login"):
        text = " ".join(str(v) for v in attrs(span).values())
        assert "hunter2-xyz" not in text
    logged = [attrs(s) for s in spans.named("execute_tool login")]
    ran_login = next(a for a in logged if a["callgate.status"] == "ok")
    assert '"user":"ana"' in ran_login["gen_ai.tool.call.arguments"]
    rejected = next(a for a in logged if a["callgate.status"] == "rejected")
    assert "gen_ai.tool.call.result" in rejected


def test_the_default_is_no_spans_and_a_bad_telemetry_is_refused(spans: Spans) -> None:
    """A gate given no Telemetry makes no span; Gate(telemetry=...) of another type and
    Telemetry's own bad settings raise DefinitionError naming the setting."""
    ran: list[str] = []
    gate = Gate(
        shop(ran, spans.provider.get_tracer("the application")),
        policy=POLICY,
        ledger=MemoryLedger(),
    )
    gate.run(authority=AUTHORITY).submit(
        [ToolCall(id="c", name="charge", arguments='{"amount": 1}')]
    )
    assert spans.finished() == []
    with pytest.raises(DefinitionError, match="Gate telemetry must be"):
        Gate(Registry(), ledger=MemoryLedger(), telemetry=spans.provider)  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="capture_content"):
        Telemetry(spans.provider, capture_content="yes")  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="tracer_provider"):
        Telemetry(object())
    with pytest.raises(DefinitionError, match="max_content_chars"):
        Telemetry(spans.provider, max_content_chars=10)


def test_a_handler_run_in_a_worker_thread_still_nests_its_spans(spans: Spans) -> None:
    """A sync handler with a timeout runs in a worker thread of the sync driver; the spans
    it makes there are still children of its call's span."""
    registry = Registry()
    tracer = spans.provider.get_tracer("the application")

    @registry.tool(effects="read:orders", risk="read", timeout=5)
    def slow_read(order_id: str) -> str:
        """A read with a timeout (so it runs in a worker thread)."""
        with tracer.start_as_current_span("orders.select"):
            return order_id

    gate = Gate(registry, ledger=MemoryLedger(), telemetry=Telemetry(spans.provider))
    [obs] = gate.run(authority=AUTHORITY).submit(
        [ToolCall(id="t", name="slow_read", arguments='{"order_id": "o-1"}')]
    )
    assert obs.status.value == "ok"
    query = spans.one("orders.select")
    assert query.parent is not None
    assert query.parent.span_id == spans.one("execute_tool slow_read").context.span_id


def test_calls_rejected_before_the_gate_get_spans_too(spans: Spans) -> None:
    """A rejection a provider adapter made (a cut-off call) and recorded with
    run.record_rejected gets its span: status rejected, its stage."""
    ran: list[str] = []
    run = gate_for(spans, ran).run(authority=AUTHORITY)
    cut = Observation(
        call_id="cut-1",
        tool="get_order",
        status=Status.REJECTED,
        stage=Stage.PARSE,
        content="Rejected at the parse stage: the arguments were cut off",
        retryable=True,
    )
    run.record_rejected([cut])
    span = spans.one("execute_tool get_order")
    assert attrs(span)["gen_ai.tool.call.id"] == "cut-1"
    assert attrs(span)["callgate.status"] == "rejected"
    assert attrs(span)["callgate.stage"] == "parse"
    assert span.status.status_code is StatusCode.ERROR


def test_a_refused_calls_hostile_name_and_id_are_bounded_and_redacted(spans: Spans) -> None:
    """An unknown tool's name and the call id are the model's unchecked text: on the span
    they are cut to a bounded length and credential-shaped text is redacted."""
    ran: list[str] = []
    run = gate_for(spans, ran).run(authority=AUTHORITY)
    name = "x" * 5000
    run.submit([ToolCall(id=f"id-{KEY}", name=name, arguments="{}")])
    [span] = spans.finished()
    assert len(span.name) < 200
    assert len(attrs(span)["gen_ai.tool.name"]) <= 128
    assert KEY not in attrs(span)["gen_ai.tool.call.id"]
    assert attrs(span)["callgate.status"] == "rejected"


def test_an_idempotency_conflict_names_its_rule_on_the_span(spans: Spans) -> None:
    """A refund reusing an operation id with other arguments is refused at stage execute:
    its span names the rule idempotency_conflict, not the policy's rule."""
    ran: list[str] = []
    run = gate_for(spans, ran).run(authority=AUTHORITY)
    first = '{"order_id": "o-1", "amount": 10, "operation_id": "op-9"}'
    second = '{"order_id": "o-1", "amount": 20, "operation_id": "op-9"}'
    run.submit([ToolCall(id="r1", name="refund", arguments=first)])
    [obs] = run.submit([ToolCall(id="r2", name="refund", arguments=second)])
    assert obs.status.value == "rejected"
    assert ran == ["refund"]
    conflict = next(
        s for s in spans.named("execute_tool refund") if attrs(s)["gen_ai.tool.call.id"] == "r2"
    )
    assert attrs(conflict)["callgate.stage"] == "execute"
    assert attrs(conflict)["callgate.rule"] == "idempotency_conflict"
    assert attrs(conflict)["callgate.decision"] == "admit"


def test_captured_content_is_cut_to_its_bound(spans: Spans) -> None:
    """With capture_content, a result longer than max_content_chars is cut to it; a call
    refused before validation carries no arguments."""
    registry = Registry()

    @registry.tool(effects="read:orders", risk="read")
    def dump(n: int) -> str:
        """A long read."""
        return "y" * n

    telemetry = Telemetry(spans.provider, capture_content=True, max_content_chars=150)
    gate = Gate(registry, ledger=MemoryLedger(), telemetry=telemetry)
    run = gate.run(authority=AUTHORITY)
    run.submit([ToolCall(id="d", name="dump", arguments='{"n": 5000}')])
    run.submit([ToolCall(id="e", name="dump", arguments='{"n": ')])
    done, refused = sorted(
        spans.named("execute_tool dump"), key=lambda s: attrs(s)["gen_ai.tool.call.id"]
    )
    assert len(attrs(done)["gen_ai.tool.call.result"]) <= 150
    assert attrs(done)["gen_ai.tool.call.result"].startswith("yyyy")
    assert "gen_ai.tool.call.arguments" not in attrs(refused)
    assert attrs(refused)["callgate.stage"] == "parse"


@DRIVERS
def test_a_batchs_call_spans_are_children_of_the_callers_span(spans: Spans, driver: str) -> None:
    """Calls of a batch run side by side (on the sync driver's own event loop, or the
    caller's) have the caller's current span as their parent: one trace per request."""
    ran: list[str] = []
    run = gate_for(spans, ran).run(authority=AUTHORITY)
    calls = [
        ToolCall(id="a", name="get_order", arguments='{"order_id":"o-1"}'),
        ToolCall(id="b", name="get_order", arguments='{"order_id":"o-2"}'),
        ToolCall(id="c", name="get_order", arguments='{"order_id":"bad"}'),
    ]
    outer = spans.provider.get_tracer("the application")
    if driver == "sync":
        with outer.start_as_current_span("request"):
            run.submit(calls)
    else:

        async def go() -> None:
            with outer.start_as_current_span("request"):
                await run.asubmit(calls)

        anyio.run(go)
    request = spans.one("request")
    tools = spans.named("execute_tool get_order")
    assert len(tools) == 3
    for span in tools:
        assert span.parent is not None
        assert span.parent.span_id == request.context.span_id


def test_a_sync_batch_submitted_inside_an_event_loop_keeps_the_callers_trace(
    spans: Spans,
) -> None:
    """A sync submit of a batch made from async code (callgate runs it on a helper thread)
    still has the caller's span as its calls' parent."""
    ran: list[str] = []
    run = gate_for(spans, ran).run(authority=AUTHORITY)
    calls = [
        ToolCall(id="a", name="get_order", arguments='{"order_id":"o-1"}'),
        ToolCall(id="b", name="get_order", arguments='{"order_id":"o-2"}'),
    ]
    outer = spans.provider.get_tracer("the application")

    async def go() -> None:
        with outer.start_as_current_span("request"):
            run.submit(calls)

    anyio.run(go)
    request = spans.one("request")
    for span in spans.named("execute_tool get_order"):
        assert span.parent is not None
        assert span.parent.span_id == request.context.span_id

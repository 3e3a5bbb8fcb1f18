"""OpenTelemetry spans for every call, following the GenAI semantic conventions.

An operator who already collects traces sees callgate's decisions in them:

* one ``execute_tool {tool}`` span per proposed call (``gen_ai.operation.name``
  ``execute_tool``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id`` — the id the
  model sent —, ``gen_ai.tool.type`` ``function``), with callgate's own
  attributes: ``callgate.status``, ``callgate.stage``, ``callgate.decision``
  (the policy's ``admit``, ``ask`` or ``deny``; absent when the call was
  refused before the authorize stage), ``callgate.rule``, ``callgate.approval.id``,
  ``callgate.run.id``, ``callgate.call.id`` (the name the ledger records the
  call under) and ``callgate.attempts``. A call that ran is traced while it
  runs, so the spans its handler makes are the span's children; a call
  refused before it ran (rejected at any stage, or waiting for approval) gets
  a span covering its batch's decision;
* ``chat {model}`` spans around each model call of the agent loop and an
  ``invoke_agent callgate`` span around each stretch of the loop (a run, a
  resumption), which the tool spans belong to.

Every span carries the GenAI conventions' required attributes:
``gen_ai.operation.name`` on all; ``gen_ai.provider.name`` on ``chat`` and
``invoke_agent``, named from the model object that answered (`provider_name`:
the scripted model is ``callgate.scripted``, never the format it speaks);
``gen_ai.agent.name`` on ``invoke_agent`` and on every tool span, the name of
the agent that made the call (a framework adapter names the framework's agent
through `agent_scope`; outside any agent, ``callgate``).

One execution, one ``execute_tool`` span: when a framework traces its own tool
executions (PydanticAI's instrumentation), callgate finds that span current
when the call reaches the gate and enriches it with its attributes instead of
nesting a second ``execute_tool`` span under it (GenAI back ends would count
the execution twice).

Arguments, results and effects (which are written from argument values) are
put on spans only when the deployer asks (``Telemetry(capture_content=True)``),
and then redacted by the gate's `Redactor` (secret fields, trusted-context values
and credential-shaped text scrubbed, also from effects and from arguments the
ledger keeps whole) and cut to ``max_content_chars``. The ids a model gave a
call are its text too: on every span they are bounded and redacted.

Tracing is off unless a `Telemetry` is passed to the gate
(``Gate(registry, telemetry=Telemetry())``): then every call costs one ``is
None`` test. ``Telemetry()`` uses the global tracer provider (the one the
application's OpenTelemetry set-up installed); ``Telemetry(tracer_provider=p)``
uses ``p``. Without the ``opentelemetry-api`` package (the ``otel`` extra) a
`Telemetry` does nothing, and says so once in the ``callgate`` log; with the
API but no SDK configured, its spans are OpenTelemetry's non-recording ones
and callgate skips building their attributes.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol, TypeVar

from callgate.calls import Observation, Stage, Status, ToolCall
from callgate.errors import DefinitionError
from callgate.redact import Redactor
from callgate.render import bounded

try:  # the otel extra; without it every span is skipped
    from opentelemetry import context as _otel_context
    from opentelemetry import trace as _otel_trace
except ImportError:  # pragma: no cover - exercised in a subprocess by the tests
    _otel_context = None  # type: ignore[assignment]
    _otel_trace = None  # type: ignore[assignment]

__all__ = [
    "Telemetry",
    "ToolSpan",
    "agent_scope",
    "provider_name",
    "traced_agent",
    "traced_chat",
]

_log = logging.getLogger("callgate")

_R = TypeVar("_R")


# GenAI semantic conventions (opentelemetry-semantic-conventions, gen_ai_attributes).
class _TracedSpec(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def version(self) -> str: ...


class _TracedRecord(Protocol):
    @property
    def arguments(self) -> str: ...
    @property
    def effects(self) -> tuple[str, ...]: ...
    @property
    def approval_id(self) -> str | None: ...
    @property
    def decided_by(self) -> str | None: ...


class TracedCall(Protocol):
    """What a span reads of an admitted call about to execute (`callgate.execute.Admitted`
    is one): named here, in the data model, so that telemetry imports no stage."""

    @property
    def call(self) -> ToolCall: ...
    @property
    def spec(self) -> _TracedSpec: ...
    @property
    def run_id(self) -> str: ...
    @property
    def secrets(self) -> tuple[str, ...]: ...
    @property
    def answer_id(self) -> str | None: ...
    @property
    def record(self) -> _TracedRecord | None: ...


OPERATION = "gen_ai.operation.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
PROVIDER = "gen_ai.provider.name"
CONVERSATION = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
ERROR_TYPE = "error.type"

# callgate's own.
STATUS = "callgate.status"
STAGE = "callgate.stage"
DECISION = "callgate.decision"
RULE = "callgate.rule"
APPROVAL_ID = "callgate.approval.id"
RUN_ID = "callgate.run.id"
CALL_ID = "callgate.call.id"
ATTEMPTS = "callgate.attempts"
TOOL_VERSION = "callgate.tool.version"
EFFECTS = "callgate.effects"
STEP = "callgate.step"
REASON = "callgate.agent.reason"

_PROVIDERS = {
    "openai_chat": "openai",
    "openai_responses": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
}
"""``gen_ai.provider.name`` by the provider format a model speaks (others: the format's name)."""
_CLIENT_PROVIDERS = {
    "callgate.llms.openai_model": "openai",
    "callgate.llms.anthropic_model": "anthropic",
    "callgate.llms.local": "llama.cpp",
    "callgate.llms.scripted": "callgate.scripted",
}
"""``gen_ai.provider.name`` of callgate's own model clients, by the module defining them."""
_DEFAULT_AGENT = "callgate"
"""``gen_ai.agent.name`` of a call made outside any named agent."""
_AGENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "callgate_agent_name", default=None
)
"""The name of the agent whose call is being made (`agent_scope`)."""


def provider_name(model: object) -> str:
    """``gen_ai.provider.name`` of a model object: its own ``provider`` attribute when it
    has one (a string), callgate's clients by what they talk to (the scripted model is
    ``callgate.scripted``), else the model's class name; never guessed from the format."""
    own = getattr(model, "provider", None)
    if isinstance(own, str) and own:
        return own
    for kind in type(model).__mro__:
        known = _CLIENT_PROVIDERS.get(kind.__module__)
        if known is not None:
            return known
    return type(model).__name__


@contextlib.contextmanager
def agent_scope(name: str | None) -> Iterator[None]:
    """Within the block, tool spans name ``name`` as ``gen_ai.agent.name`` (the framework
    agent making the calls); a ``None`` or empty name leaves the current one."""
    if not name:
        yield
        return
    token = _AGENT.set(bounded(name, _MAX_NAME_CHARS))
    try:
        yield
    finally:
        _AGENT.reset(token)


def _agent_name() -> str:
    return _AGENT.get() or _DEFAULT_AGENT


def _framework_tool_span(tool: str | None = None) -> Any | None:
    """The current span when it is another instrumentation's ``execute_tool`` span (of
    ``tool``, when given) that callgate has not enriched yet; else None."""
    if _otel_trace is None:
        return None
    span = _otel_trace.get_current_span()
    attributes = getattr(span, "attributes", None)
    if not span.is_recording() or not isinstance(attributes, Mapping):
        return None
    if attributes.get(OPERATION) != "execute_tool" or CALL_ID in attributes:
        return None
    if tool is not None and attributes.get(TOOL_NAME) not in (None, tool):
        return None
    return span


_MAX_NAME_CHARS = 128
"""The longest tool name or call id of a refused call a span carries."""
_FAILED = frozenset({Status.ERROR, Status.UNKNOWN, Status.REJECTED})
_DEFAULT_REDACTOR = Redactor()
"""Redacts a running call's id and effects when its span starts (the gate's own redactor,
with the deployer's patterns, is applied again when the span ends: `ToolSpan.finish`)."""
_BEFORE_POLICY = frozenset({Stage.PARSE, Stage.VALIDATE})


class Telemetry:
    """Where callgate's spans go and what they may carry; give it to ``Gate(telemetry=...)``.

    Args:
        tracer_provider: an OpenTelemetry ``TracerProvider`` (default: the global one,
            looked up through the API each time a span starts, so a provider the
            application installs later is used).
        capture_content: put arguments, results and effects on spans (redacted as the
            ledger stores them). Off by default: they are the application's data.
        max_content_chars: the longest argument or result text a span carries.
    """

    __slots__ = ("capture_content", "enabled", "max_content_chars", "tracer")

    def __init__(
        self,
        tracer_provider: Any | None = None,
        *,
        capture_content: bool = False,
        max_content_chars: int = 4000,
    ) -> None:
        if not isinstance(capture_content, bool):
            raise DefinitionError(
                f"Telemetry capture_content must be True or False, got {capture_content!r}"
            )
        if isinstance(max_content_chars, bool) or not isinstance(max_content_chars, int):
            raise DefinitionError(
                f"Telemetry max_content_chars must be an integer, got {max_content_chars!r}"
            )
        if max_content_chars < 100:
            raise DefinitionError(
                f"Telemetry max_content_chars must be at least 100, got {max_content_chars}"
            )
        self.capture_content = capture_content
        self.max_content_chars = max_content_chars
        self.enabled = _otel_trace is not None
        """False when the ``opentelemetry-api`` package is missing: no span is made."""
        self.tracer: Any = None
        if _otel_trace is None:
            _log.warning(
                "callgate: Telemetry was configured but the opentelemetry-api package is "
                "not installed, so no spans are made; install callgate[otel]"
            )
            return
        if tracer_provider is not None and not hasattr(tracer_provider, "get_tracer"):
            raise DefinitionError(
                "Telemetry tracer_provider must be an OpenTelemetry TracerProvider "
                f"(with get_tracer), got {type(tracer_provider).__name__}"
            )
        self.tracer = _otel_trace.get_tracer("callgate", tracer_provider=tracer_provider)

    # -- tool calls ------------------------------------------------------------------

    def tool(self, item: TracedCall) -> ToolSpan | None:
        """Start the span of an admitted call about to execute, and make it the current
        span (the handler's own spans become its children); None when tracing is off."""
        if self.tracer is None:
            return None
        name = item.spec.name
        enclosing = _framework_tool_span()
        if enclosing is not None:  # the framework's own span of this execution: enrich it
            span, token, owned = enclosing, None, False
        else:
            span = self.tracer.start_span(
                f"execute_tool {name}", kind=_otel_trace.SpanKind.INTERNAL
            )
            token = _otel_context.attach(_otel_trace.set_span_in_context(span))
            owned = True
        if span.is_recording():
            record = item.record
            attributes: dict[str, Any] = {
                OPERATION: "execute_tool",
                TOOL_NAME: name,
                TOOL_TYPE: "function",
                AGENT_NAME: _agent_name(),
                RUN_ID: item.run_id,
                **_hostile_attributes(item, _DEFAULT_REDACTOR, self),
            }
            if not owned:  # the framework's span keeps its own agent name and call id
                framework = getattr(span, "attributes", {})
                for kept in (AGENT_NAME, TOOL_CALL_ID):
                    if kept in framework:
                        attributes.pop(kept, None)
            if item.spec.description:
                attributes[TOOL_DESCRIPTION] = bounded(item.spec.description, 500)
            if item.spec.version:
                attributes[TOOL_VERSION] = item.spec.version
            if record is not None:
                attributes[DECISION] = "ask" if record.approval_id else "admit"
                if record.decided_by:
                    attributes[RULE] = record.decided_by
                if record.approval_id:
                    attributes[APPROVAL_ID] = record.approval_id
            span.set_attributes(attributes)
        return ToolSpan(self, span, token, item, owned=owned)

    def decided(
        self,
        run_id: str,
        observations: Iterable[Observation],
        started: float,
        redactor: Redactor,
        secrets: Iterable[str] = (),
    ) -> None:
        """Spans for calls settled without running (rejected at any stage, or waiting for
        a person), from ``started`` (a `time.time` value: when their batch was received)
        to now."""
        if self.tracer is None:
            return
        start = int(started * 1e9)
        secrets = tuple(secrets)
        observations = list(observations)
        for obs in observations:
            # A refused call's name and id are the model's text, unchecked: bounded and
            # redacted like any text callgate stores.
            tool = redactor.text(bounded(obs.tool, _MAX_NAME_CHARS), secrets)
            call_id = redactor.text(bounded(obs.call_id, _MAX_NAME_CHARS), secrets)
            enclosing = _framework_tool_span(obs.tool) if len(observations) == 1 else None
            span = enclosing or self.tracer.start_span(
                f"execute_tool {tool}",
                kind=_otel_trace.SpanKind.INTERNAL,
                start_time=start,
            )
            if span.is_recording():
                attributes: dict[str, Any] = {
                    OPERATION: "execute_tool",
                    TOOL_NAME: tool,
                    TOOL_CALL_ID: call_id,
                    TOOL_TYPE: "function",
                    AGENT_NAME: _agent_name(),
                    RUN_ID: run_id,
                    CALL_ID: call_id,
                    ATTEMPTS: obs.attempts,
                }
                if enclosing is not None:  # the framework's span keeps its own
                    framework = getattr(span, "attributes", {})
                    for kept in (AGENT_NAME, TOOL_CALL_ID, TOOL_NAME):
                        if kept in framework:
                            attributes.pop(kept, None)
                if obs.tool_version:
                    attributes[TOOL_VERSION] = obs.tool_version
                decision = _decision(obs)
                if decision is not None:
                    attributes[DECISION] = decision
                rule, approval_id = _rule_and_approval(obs)
                if rule is not None:
                    attributes[RULE] = rule
                if approval_id is not None:
                    attributes[APPROVAL_ID] = approval_id
                if self.capture_content:
                    attributes[TOOL_RESULT] = bounded(
                        redactor.text(obs.content, secrets), self.max_content_chars
                    )
                span.set_attributes(attributes)
                _settle(span, obs)
            if enclosing is None:  # the framework ends its own span
                span.end()

    # -- the agent loop --------------------------------------------------------------

    def _start(self, name: str, kind: Any, attributes: Mapping[str, Any]) -> tuple[Any, Any]:
        span = self.tracer.start_span(name, kind=kind)
        if span.is_recording():
            span.set_attributes(attributes)
        token = _otel_context.attach(_otel_trace.set_span_in_context(span))
        return span, token


class ToolSpan:
    """The span of one executing call: the current span until `finish` or `fail`."""

    __slots__ = ("item", "owned", "span", "telemetry", "token")

    def __init__(
        self, telemetry: Telemetry, span: Any, token: Any, item: TracedCall, *, owned: bool = True
    ) -> None:
        self.telemetry = telemetry
        self.span = span
        self.token = token
        self.item = item
        self.owned = owned
        """False when the span is the framework's own (enriched, never ended, by callgate)."""

    def _release(self) -> None:
        if self.token is not None:
            _otel_context.detach(self.token)

    def finish(self, obs: Observation, redactor: Redactor, secrets: Iterable[str] = ()) -> None:
        """End the span with the call's observation: its status, stage and attempts."""
        span = self.span
        self._release()
        if span.is_recording():
            telemetry = self.telemetry
            attributes: dict[str, Any] = {
                STATUS: obs.status.value,
                STAGE: obs.stage.value,
                ATTEMPTS: obs.attempts,
                **_hostile_attributes(self.item, redactor, telemetry, secrets),
            }
            rule, _ = _rule_and_approval(obs)
            if rule is not None and obs.status is Status.REJECTED:
                attributes[RULE] = rule  # an idempotency conflict overrides the policy's rule
            if telemetry.capture_content:
                attributes[TOOL_RESULT] = bounded(
                    redactor.text(obs.content, tuple(secrets)), telemetry.max_content_chars
                )
            span.set_attributes(attributes)
            _settle(span, obs)
        if self.owned:
            span.end()

    def fail(self, exc: BaseException) -> None:
        """End the span of a call interrupted while it ran (cancelled, interpreter exit):
        its outcome is unknown, as the ledger records it."""
        span = self.span
        self._release()
        if span.is_recording():
            span.set_attributes(
                {STATUS: Status.UNKNOWN.value, STAGE: Stage.EXECUTE.value, ERROR_TYPE: "cancelled"}
            )
            span.set_status(_otel_trace.Status(_otel_trace.StatusCode.ERROR, type(exc).__name__))
        if self.owned:
            span.end()


def _hostile_attributes(
    item: TracedCall, redactor: Redactor, telemetry: Telemetry, secrets: Iterable[str] = ()
) -> dict[str, Any]:
    """The attributes of a running call written from the model's text: its ids (the model
    chose them) and, with ``capture_content``, its arguments and effects (written from
    argument values); bounded, and redacted with the call's secrets (secret fields,
    trusted-context values) as well as credential-shaped text, as a refused call's are."""
    hidden = (*item.secrets, *secrets)
    call_id = redactor.text(bounded(item.call.id, _MAX_NAME_CHARS), hidden)
    answer = item.answer_id
    found: dict[str, Any] = {
        TOOL_CALL_ID: call_id
        if answer is None
        else redactor.text(bounded(answer, _MAX_NAME_CHARS), hidden),
        CALL_ID: call_id,
    }
    record = item.record
    if telemetry.capture_content and record is not None:
        found[TOOL_ARGUMENTS] = bounded(
            redactor.text(record.arguments, hidden), telemetry.max_content_chars
        )
        found[EFFECTS] = [redactor.text(effect, hidden) for effect in record.effects]
    return found


def _settle(span: Any, obs: Observation) -> None:
    """Status attributes and the span's status: an error for error, unknown and rejected."""
    span.set_attribute(STATUS, obs.status.value)
    span.set_attribute(STAGE, obs.stage.value)
    if obs.status in _FAILED:
        span.set_attribute(ERROR_TYPE, obs.status.value)
        span.set_status(
            _otel_trace.Status(
                _otel_trace.StatusCode.ERROR, f"{obs.status.value} at stage {obs.stage.value}"
            )
        )


def _decision(obs: Observation) -> str | None:
    """The policy's decision on a call that did not run, as far as its observation tells."""
    if obs.status is Status.PENDING:
        return "ask"
    if obs.status is not Status.REJECTED:
        return "admit"
    if obs.stage in _BEFORE_POLICY:
        return None
    if obs.stage is Stage.AUTHORIZE:
        rule, _ = _rule_and_approval(obs)
        return None if rule == "internal_error" else "deny"
    if obs.stage is Stage.APPROVE:
        return "ask"
    return "admit"  # refused later: schedule, execute


def _rule_and_approval(obs: Observation) -> tuple[str | None, str | None]:
    rule: str | None = None
    approval_id = obs.approval_id
    for detail in obs.details:
        if rule is None and isinstance(detail.get("rule"), str):
            rule = detail["rule"]
        if approval_id is None and isinstance(detail.get("approval_id"), str):
            approval_id = detail["approval_id"]
    return rule, approval_id


# -- the agent loop's spans ----------------------------------------------------------------


class _Usage(Protocol):
    input_tokens: int
    output_tokens: int


async def traced_chat(
    telemetry: Telemetry | None,
    complete: Callable[[], Awaitable[_R]],
    *,
    model: str,
    format: str,
    run_id: str,
    step: int,
    provider: str | None = None,
) -> _R:
    """Await ``complete()`` (one model call) inside a ``chat {model}`` span: the request
    model, provider, run and step; the response model and token usage when it answers;
    ``error.type`` when it raises or is cancelled (a time budget). ``provider``: the
    model's `provider_name` (without it, named from the format, which says only how the
    model speaks)."""
    if telemetry is None or telemetry.tracer is None:
        return await complete()
    span, token = telemetry._start(
        f"chat {model}",
        _otel_trace.SpanKind.CLIENT,
        {
            OPERATION: "chat",
            REQUEST_MODEL: model,
            PROVIDER: provider or _PROVIDERS.get(format, format),
            RUN_ID: run_id,
            CONVERSATION: run_id,
            STEP: step,
        },
    )
    try:
        response = await complete()
    except BaseException as exc:
        _otel_context.detach(token)
        if span.is_recording():
            kind = "cancelled" if not isinstance(exc, Exception) else type(exc).__name__
            span.set_attribute(ERROR_TYPE, kind)
            span.set_status(_otel_trace.Status(_otel_trace.StatusCode.ERROR, kind))
        span.end()
        raise
    _otel_context.detach(token)
    if span.is_recording():
        answered = getattr(response, "model", "")
        if isinstance(answered, str) and answered:
            span.set_attribute(RESPONSE_MODEL, answered)
        usage: _Usage | None = getattr(response, "usage", None)
        if usage is not None:
            span.set_attribute(INPUT_TOKENS, int(usage.input_tokens))
            span.set_attribute(OUTPUT_TOKENS, int(usage.output_tokens))
    span.end()
    return response


async def traced_agent(
    telemetry: Telemetry | None,
    drive: Callable[[], Awaitable[_R]],
    *,
    model: str,
    run_id: str,
    provider: str = "_OTHER",
    agent: str | None = None,
) -> _R:
    """Await ``drive()`` (a stretch of the agent loop: a run, or a resumption) inside an
    ``invoke_agent {agent}`` span, the parent of its chat and tool spans; the reason
    the stretch ended (``callgate.agent.reason``) when the result has one. ``provider``:
    the model's `provider_name`; ``agent``: the agent's name (default ``callgate``), also
    given to the tool spans of the stretch."""
    name = bounded(agent, _MAX_NAME_CHARS) if agent else _DEFAULT_AGENT
    if telemetry is None or telemetry.tracer is None:
        return await drive()
    span, token = telemetry._start(
        f"invoke_agent {name}",
        _otel_trace.SpanKind.INTERNAL,
        {
            OPERATION: "invoke_agent",
            AGENT_NAME: name,
            PROVIDER: provider,
            REQUEST_MODEL: model,
            RUN_ID: run_id,
            CONVERSATION: run_id,
        },
    )
    scope = _AGENT.set(name)
    try:
        result = await drive()
    except BaseException as exc:
        _AGENT.reset(scope)
        _otel_context.detach(token)
        if span.is_recording():
            span.set_attribute(ERROR_TYPE, type(exc).__name__)
            span.set_status(_otel_trace.Status(_otel_trace.StatusCode.ERROR, type(exc).__name__))
        span.end()
        raise
    _AGENT.reset(scope)
    _otel_context.detach(token)
    if span.is_recording():
        reason = getattr(result, "reason", None)
        if reason is not None:
            span.set_attribute(REASON, str(getattr(reason, "value", reason)))
    span.end()
    return result

"""Stage ``execute`` (and ``verify``): check → run → record, written once.

For each admitted call: claim the attempt in the ledger *before* the handler
runs (which also enforces the idempotency key), run the handler under its
timeout, classify what happened, check the postcondition, reconcile an
unknown outcome if the tool can, and record the outcome.

The logic is one generator (`_attempt_logic`) that yields the functions it
needs called; `execute_sync` and `execute_async` only differ in how they call
them, so sync and async tools share every rule.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import dataclasses
import functools
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import pydantic_core
from pydantic import BaseModel

from callgate.calls import Observation, Provenance, Stage, Status, ToolCall
from callgate.errors import OutcomeUnknown, ToolFailure
from callgate.evidence import Evidence
from callgate.ledger.base import (
    AttemptFinish,
    AttemptStart,
    CallRecord,
    Claim,
    ClaimKind,
    Ledger,
    Outcome,
)
from callgate.redact import Redactor
from callgate.render import bounded
from callgate.sync_loop import run_sync
from callgate.telemetry import Telemetry
from callgate.tools import CallContext, Risk, ToolSpec

__all__ = [
    "Admitted",
    "ExecutionSettings",
    "execute_async",
    "execute_sync",
    "may_retry",
    "reconcile_sync",
    "result_text",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionSettings:
    """Gate-wide execution knobs."""

    read_retries: int = 2
    """Extra attempts for a read-only call whose outcome was unknown."""
    default_timeout: float | None = None
    """Timeout for tools that declare none (None: no timeout)."""
    telemetry: Telemetry | None = None
    """Where each executed call's span goes (`callgate.telemetry`; None: no spans)."""


@dataclass(slots=True, kw_only=True)
class Admitted:
    """Everything execution needs about one admitted call."""

    call: ToolCall
    spec: ToolSpec
    arguments: BaseModel
    run_id: str
    principal: str
    idempotency_key: str
    request_hash: str
    trusted: Mapping[str, Any] = field(default_factory=dict)
    """The authority's trusted context (tenant, credentials), for `CallContext.context`."""
    attempt: int = 1
    """The attempt number the handler's `CallContext` starts with."""
    secrets: tuple[str, ...] = ()
    budgets: tuple[tuple[str, float, float], ...] = ()
    """What the call spends of each budget it counts against (`callgate.ledger.budgets`)."""
    record: CallRecord | None = None
    """The admission record, written to the ledger once the batch is planned."""
    offload: bool = False
    """Run a sync handler in a worker thread (set when several calls run concurrently)."""
    answer_id: str | None = None
    """The id the model sent, when the run records the call under another (``call.id``):
    an id the model reused for a new call (docs/design-notes.md, "Call ids")."""
    _context: CallContext | None = field(default=None, init=False, repr=False)

    @property
    def context(self) -> CallContext:
        """The trusted values a handler and the tool's hooks receive (built when first needed:
        most tools never ask for them)."""
        if self._context is None:
            self._context = CallContext(
                principal=self.principal,
                context=self.trusted,
                run_id=self.run_id,
                call_id=self.call.id,
                tool=self.spec.name,
                idempotency_key=self.idempotency_key,
                attempt=self.attempt,
            )
        return self._context

    def retry_context(self, attempt: int) -> CallContext:
        """A fresh context for a later attempt (nothing reported yet)."""
        self._context = dataclasses.replace(self.context, attempt=attempt, reported={})
        return self._context


class _Invoke:
    """A function the attempt logic needs called, and how."""

    __slots__ = ("args", "fn", "is_async", "kwargs", "offload", "timeout")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        timeout: float | None,
        offload: bool,
        is_async: bool,
    ) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.timeout = timeout
        self.offload = offload
        self.is_async = is_async


def _hook(
    fn: Callable[..., Any], args: tuple[Any, ...], timeout: float | None, offload: bool
) -> _Invoke:
    return _Invoke(fn, args, {}, timeout, offload, inspect.iscoroutinefunction(fn))


class _Record:
    """A ledger write the attempt logic needs done; the async driver awaits its async form.

    Yielding it (instead of calling the ledger) lets concurrent async calls
    share one commit (group commit) while the logic stays written once.
    """

    __slots__ = ("arg", "async_fn", "fn")

    def __init__(
        self, fn: Callable[[Any], Any], async_fn: Callable[[Any], Awaitable[Any]], arg: Any
    ) -> None:
        self.fn = fn
        self.async_fn = async_fn
        self.arg = arg


_MAX_ERROR_CHARS = 500


def result_text(result: Any) -> str:
    """The text a model sees for a handler's return value."""
    if isinstance(result, str):
        return result
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    try:
        return pydantic_core.to_json(result, fallback=str).decode()
    except (TypeError, ValueError, pydantic_core.PydanticSerializationError):
        return str(result)


def _cut(text: str, limit: int) -> tuple[str, int | None]:
    if len(text) <= limit:
        return text, None
    marker = (
        f"\n[callgate: result cut to {limit:,} of {len(text):,} characters; "
        "ask for a narrower query to see the rest]"
    )
    return text[:limit] + marker, len(text)


_STATUS = {s.value: s for s in Status}
_STAGE = {s.value: s for s in Stage}


def may_retry(spec: ToolSpec, status: Status) -> bool:
    if status is Status.ERROR or status is Status.REJECTED:
        return True
    if status is Status.PENDING:
        return False
    # ok or unknown: a repeat is safe only when it cannot double an effect. A
    # write_idempotent tool deduplicates by key, but only a business key survives
    # the model resending the call under a new id.
    if spec.risk is Risk.READ:
        return True
    return spec.risk is Risk.WRITE_IDEMPOTENT and spec.idempotency_key is not None


def _attempt_logic(
    item: Admitted,
    ledger: Ledger,
    evidence: Evidence,
    redactor: Redactor,
    settings: ExecutionSettings,
) -> Generator[_Invoke | _Record, Any, Observation]:
    spec = item.spec
    side = spec.side_effecting
    run_id, call_id, key = item.run_id, item.call.id, item.idempotency_key
    timeout = spec.timeout if spec.timeout is not None else settings.default_timeout
    attempts_allowed = 1 if side else 1 + max(0, settings.read_retries)
    # A read retried after an unknown outcome shares one timeout with its earlier attempts:
    # the model is never kept waiting longer than the timeout it is told about.
    ends = time.monotonic() + timeout if timeout is not None and attempts_allowed > 1 else None
    budget = timeout
    kwargs: dict[str, Any] = item.arguments.__dict__  # the call unpacks it into a new dict
    if spec.context_param is not None:
        kwargs = {**kwargs, spec.context_param: item.context}
    attempt = 0
    while True:
        attempt += 1
        final = False  # the handler said no further attempt may be made
        now = time.time()
        start = AttemptStart(
            run_id=run_id,
            call_id=call_id,
            tool=spec.name,
            tool_version=spec.version,
            attempt=attempt,
            idempotency_key=key,
            request_hash=item.request_hash,
            started_at=now,
            key_expires_at=now + spec.key_retention,
            side_effecting=side,
            budgets=item.budgets,
        )
        # Yielded, so the async driver awaits the ledger's async form (a ledger may share
        # one commit between concurrent callers) and the sync driver calls the sync one.
        claim: Claim = yield _Record(ledger.begin_attempt, ledger.abegin_attempt, start)
        if claim.kind is not ClaimKind.RUN:
            return _claim_observation(item, claim)
        if attempt > 1 and spec.context_param is not None:
            kwargs = {**kwargs, spec.context_param: item.retry_context(attempt)}
        if ends is not None:
            budget = max(ends - time.monotonic(), 0.001)
        try:
            try:
                result = yield _Invoke(spec.fn, (), kwargs, budget, item.offload, spec.is_async)
            except Exception as exc:
                final = isinstance(exc, OutcomeUnknown) and exc.final
                tried = (attempt, ends is not None)
                outcome, result = yield from _failed(item, exc, timeout, redactor, tried)
            else:
                if spec.verify is None:
                    outcome = Outcome(
                        status="ok", content=result_text(result), finished_at=time.time()
                    )
                else:
                    outcome, result = yield from _verified(item, result, timeout, redactor)
        except BaseException as exc:
            # Cancellation or interpreter exit while the handler ran: the effect may
            # have happened. Record that honestly, then let the cancellation go on.
            cancelled = _outcome("unknown", _cancelled_text(item), exc, redactor, item.secrets)
            ledger.finish_attempt(
                AttemptFinish(
                    run_id=run_id,
                    call_id=call_id,
                    attempt=attempt,
                    idempotency_key=key,
                    outcome=cancelled,
                    side_effecting=side,
                )
            )
            raise
        ctx = item._context
        if ctx is not None and ctx.reported:
            reported = ctx.reported.get("transaction_id")
            if reported is not None:
                outcome.transaction_id = reported
        # What the ledger holds and what the model reads are the same scrubbed text:
        # the call's secret values and credential-shaped strings never reach either.
        content = redactor.text(outcome.content, item.secrets)
        if content != outcome.content:
            outcome = dataclasses.replace(outcome, content=content)
        finish = AttemptFinish(
            run_id=run_id,
            call_id=call_id,
            attempt=attempt,
            idempotency_key=key,
            outcome=outcome,
            side_effecting=side,
        )
        yield _Record(ledger.finish_attempt, ledger.afinish_attempt, finish)
        if (
            outcome.status == "unknown"
            and not final
            and attempt < attempts_allowed
            and (ends is None or ends - time.monotonic() > _MIN_ATTEMPT_SECONDS)
        ):
            continue
        if outcome.status == "ok":
            evidence.note(call_id, spec.name, item.arguments.__dict__, result)
        return _observation(item, outcome, attempt, result)


_MIN_ATTEMPT_SECONDS = 0.01
"""A read is not retried with less time than this left of its timeout."""


def _cancelled_text(item: Admitted) -> str:
    if item.spec.side_effecting:
        return "the call was cancelled while running; the effect may have happened."
    return "the call was cancelled while running; this tool only reads, so retrying is safe."


def _failed(
    item: Admitted,
    exc: Exception,
    timeout: float | None,
    redactor: Redactor,
    shared: tuple[int, bool] = (1, False),
) -> Generator[_Invoke, Any, tuple[Outcome, Any]]:
    """The outcome of a handler that raised: ``error`` for a `ToolFailure`, else
    ``unknown``, which the tool's reconcile hook may settle. ``shared``: the attempt
    number, and whether the attempts share one timeout."""
    if isinstance(exc, ToolFailure):
        text = _failure_text(exc.message, item, redactor)
        return _outcome("error", text, exc, redactor, item.secrets), None
    text = _unknown_text(exc, timeout, item, redactor, shared)
    unknown = _outcome("unknown", text, exc, redactor, item.secrets)
    if item.spec.reconcile is None:
        return unknown, None
    outcome, result = yield from _reconcile(item, unknown, redactor)
    if outcome.status == "error" and isinstance(exc, TimeoutError) and not item.spec.is_async:
        # A sync handler past its timeout still runs in its worker thread (threads cannot
        # be stopped): "not found" may only mean "not yet", and freeing the key on it could
        # let a resend run the effect twice. Found means found; not found stays unknown,
        # holding its key, until a person resolves it. An async handler was cancelled.
        note = (
            " Its reconcile hook found no effect yet, but the handler may still be running, "
            "so the outcome stays unknown until a person resolves it."
        )
        return _outcome("unknown", text + note, exc, redactor, item.secrets), None
    return outcome, result


def _verified(
    item: Admitted, result: Any, timeout: float | None, redactor: Redactor
) -> Generator[_Invoke, Any, tuple[Outcome, Any]]:
    """The outcome of a handler that returned, once its postcondition is checked."""
    assert item.spec.verify is not None
    content = result_text(result)
    try:
        held = yield _hook(item.spec.verify, (item.arguments, result), timeout, item.offload)
    except Exception as exc:
        return _outcome(
            "unknown",
            "the tool returned but its postcondition could not be checked; "
            "the effect may or may not have happened. Do not retry this call blindly.",
            exc,
            redactor,
            item.secrets,
        ), None
    if not held:
        return Outcome(
            status="error",
            stage=Stage.VERIFY.value,
            content=(
                "the tool reported success but its postcondition does not hold in the "
                "authoritative state: the effect did not happen as requested."
            ),
            error="postcondition false",
            finished_at=time.time(),
        ), None
    return Outcome(status="ok", content=content, finished_at=time.time()), result


def _reconcile(
    item: Admitted, unknown: Outcome, redactor: Redactor
) -> Generator[_Invoke, Any, tuple[Outcome, Any]]:
    """Ask the tool's reconcile hook what really happened to an unknown attempt."""
    assert item.spec.reconcile is not None
    try:
        result = yield _hook(
            item.spec.reconcile, (item.arguments, item.context), item.spec.timeout, item.offload
        )
    except ToolFailure as exc:
        text = "reconciled: the effect did not happen. " + _failure_text(
            exc.message, item, redactor
        )
        return _outcome("error", text, exc, redactor, item.secrets, reconciled=True), None
    except Exception:
        return unknown, None
    return Outcome(
        status="ok", content=result_text(result), finished_at=time.time(), reconciled=True
    ), result


def _failure_text(message: str, item: Admitted, redactor: Redactor) -> str:
    return bounded(redactor.text(message, item.secrets), _MAX_ERROR_CHARS)


def _unknown_text(
    exc: BaseException,
    timeout: float | None,
    item: Admitted,
    r: Redactor,
    shared: tuple[int, bool] = (1, False),
) -> str:
    side = item.spec.side_effecting
    attempt, is_shared = shared
    if isinstance(exc, TimeoutError) and timeout and is_shared:
        tries = f"{attempt} attempt{'s' if attempt > 1 else ''}"
        head = (
            f"the tool did not finish within {timeout:g} s, the timeout shared by all attempts "
            f"of this call ({tries} made)"
        )
    elif isinstance(exc, TimeoutError):
        head = f"the tool did not finish within {timeout:g} s" if timeout else "the tool timed out"
    elif isinstance(exc, OutcomeUnknown):
        head = _failure_text(exc.message, item, r)
    else:
        # Never show str() of an arbitrary exception to the model: only its type.
        head = f"the tool failed unexpectedly ({type(exc).__name__})"
    if side:
        tail = (
            "The outcome is unknown: the effect may have happened. "
            "Do not repeat this call; check the current state first."
        )
    else:
        tail = "The outcome is unknown; this tool only reads, so retrying is safe."
    return f"{head}. {tail}"


def _outcome(
    status: str,
    content: str,
    exc: BaseException,
    redactor: Redactor,
    secrets: Collection[str] = (),
    *,
    reconciled: bool = False,
) -> Outcome:
    detail = redactor.text(f"{type(exc).__name__}: {exc}", secrets)[:_MAX_ERROR_CHARS]
    return Outcome(
        status=status,
        content=content,
        error=detail,
        finished_at=time.time(),
        reconciled=reconciled,
        retryable=exc.retryable if isinstance(exc, ToolFailure) else None,
    )


def _observation(item: Admitted, outcome: Outcome, attempts: int, result: Any) -> Observation:
    spec = item.spec
    content = outcome.content
    truncated = None
    if outcome.status == "ok":
        status = Status.OK
        provenance = Provenance.UNTRUSTED
        if len(content) > spec.max_result_chars:
            content, truncated = _cut(content, spec.max_result_chars)
    else:
        status = _STATUS[outcome.status]
        provenance = Provenance.GATE
    retryable = outcome.retryable
    return Observation(
        call_id=item.call.id,
        tool=spec.name,
        status=status,
        stage=_STAGE.get(outcome.stage) or Stage(outcome.stage),  # an old ledger's names too
        content=content,
        retryable=may_retry(spec, status) if retryable is None else retryable,
        provenance=provenance,
        result=result,
        tool_version=spec.version,
        repaired=item.call.repaired,
        attempts=attempts,
        truncated_from=truncated,
    )


def _claim_observation(item: Admitted, claim: Claim) -> Observation:
    spec = item.spec
    if claim.kind is ClaimKind.REPLAY and claim.outcome is not None:
        replayed = _observation(item, claim.outcome, 0, None)
        note = "[callgate: this idempotency key already ran; recorded outcome returned]\n"
        return Observation(
            call_id=replayed.call_id,
            tool=replayed.tool,
            status=replayed.status,
            stage=replayed.stage,
            content=note + replayed.content,
            retryable=False,  # sending it again can only replay the same answer
            provenance=replayed.provenance,
            tool_version=spec.version,
            details=({"rule": "idempotent_replay", "holder": list(claim.holder or ())},),
        )
    if claim.kind is ClaimKind.OVER_BUDGET:
        text = (
            f"Rejected at the execute stage:\n- over budget: {claim.reason}\nNothing was "
            "done. Do not send this call again in this run; tell the user the budget is spent."
        )
        rule, retryable = "over_budget", False
    elif claim.kind is ClaimKind.IN_PROGRESS:
        text = (
            "Rejected at the execute stage:\n- an earlier call with the same idempotency key "
            "is still running\nWait for its outcome; do not send this call again now."
        )
        rule, retryable = "idempotency_in_progress", False
    else:
        text = (
            "Rejected at the execute stage:\n- idempotency key reused with different "
            "arguments: this operation id already ran with other values\n"
            "Use a new operation id for a new operation, or repeat the original arguments."
        )
        rule, retryable = "idempotency_conflict", True
    return Observation(
        call_id=item.call.id,
        tool=spec.name,
        status=Status.REJECTED,
        stage=Stage.EXECUTE,
        content=text,
        retryable=retryable,
        tool_version=spec.version,
        details=({"rule": rule},),
    )


# -- drivers -----------------------------------------------------------------

_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _thread_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=32, thread_name_prefix="callgate-tool"
            )
        return _pool


_PLAIN_TYPES = frozenset({str, int, float, bool, dict, list, tuple, bytes, type(None)})


def _awaitable(value: Any) -> bool:
    """`inspect.isawaitable`, skipping its slow ABC check for plain results."""
    return type(value) not in _PLAIN_TYPES and inspect.isawaitable(value)


def _call_sync(step: _Invoke) -> Any:
    if step.timeout is None and not step.is_async:
        value = step.fn(*step.args, **step.kwargs)
        if _awaitable(value):
            return _run_coroutine_sync(lambda: value, None)
        return value
    bound = functools.partial(step.fn, *step.args, **step.kwargs)
    if step.is_async:
        return _run_coroutine_sync(bound, step.timeout)
    # The handler sees the caller's context variables (its trace span among them), as
    # anyio's worker threads give it on the async path.
    future = _thread_pool().submit(contextvars.copy_context().run, bound)
    try:
        value = future.result(timeout=step.timeout)
    except concurrent.futures.TimeoutError:
        if future.cancel():
            # Every worker was busy and the handler never started: nothing happened,
            # and it must not start later behind an "unknown" the model was told.
            raise ToolFailure(
                "the tool could not start within its timeout because every worker was "
                "busy; nothing happened. Try again later."
            ) from None
        raise TimeoutError(f"timed out after {step.timeout} s") from None
    if _awaitable(value):
        return _run_coroutine_sync(lambda: value, step.timeout)
    return value


def _run_coroutine_sync(make: Callable[[], Any], timeout: float | None) -> Any:
    async def runner() -> Any:
        if timeout is None:
            return await make()
        with anyio.fail_after(timeout):
            return await make()

    return run_sync(runner)


async def _call_async(step: _Invoke) -> Any:
    if step.is_async:
        if step.timeout is None:
            return await step.fn(*step.args, **step.kwargs)
        with anyio.fail_after(step.timeout):
            return await step.fn(*step.args, **step.kwargs)
    bound = functools.partial(step.fn, *step.args, **step.kwargs)
    if step.timeout is None and not step.offload:
        value = bound()
    else:
        with anyio.fail_after(step.timeout):
            value = await anyio.to_thread.run_sync(bound, abandon_on_cancel=True)
    if _awaitable(value):
        with anyio.fail_after(step.timeout):
            return await value
    return value


def execute_sync(
    item: Admitted,
    ledger: Ledger,
    evidence: Evidence,
    redactor: Redactor,
    settings: ExecutionSettings,
) -> Observation:
    """Execute one admitted call in the calling thread (no thread hop without a timeout)."""
    logic = _attempt_logic(item, ledger, evidence, redactor, settings)
    telemetry = settings.telemetry
    if telemetry is None:
        result: Observation = _drive_sync(logic)
        return result
    span = telemetry.tool(item)
    if span is None:
        result = _drive_sync(logic)
        return result
    try:
        result = _drive_sync(logic)
    except BaseException as exc:
        span.fail(exc)
        raise
    span.finish(result, redactor, item.secrets)
    return result


def reconcile_sync(item: Admitted, unknown: Outcome, redactor: Redactor) -> tuple[Outcome, Any]:
    """Ask the tool's reconcile hook what happened to an attempt whose outcome is ``unknown``.

    Used by crash recovery; the outcome is ``unknown`` again when the hook
    cannot tell.
    """
    return _drive_sync(_reconcile(item, unknown, redactor))  # type: ignore[no-any-return]


def _drive_sync(logic: Generator[_Invoke | _Record, Any, Any]) -> Any:
    """Run a step generator in the calling thread."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = logic.send(value) if error is None else logic.throw(error)
        except StopIteration as stop:
            return stop.value
        try:
            if isinstance(step, _Record):
                value, error = step.fn(step.arg), None
            else:
                value, error = _call_sync(step), None
        except BaseException as exc:
            value, error = None, exc


async def execute_async(
    item: Admitted,
    ledger: Ledger,
    evidence: Evidence,
    redactor: Redactor,
    settings: ExecutionSettings,
) -> Observation:
    """Execute one admitted call on the running event loop (inside its span, when traced)."""
    logic = _attempt_logic(item, ledger, evidence, redactor, settings)
    telemetry = settings.telemetry
    span = telemetry.tool(item) if telemetry is not None else None
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = logic.send(value) if error is None else logic.throw(error)
        except StopIteration as stop:
            result: Observation = stop.value
            if span is not None:
                span.finish(result, redactor, item.secrets)
            return result
        except BaseException as exc:  # the logic lets a cancellation go on, recorded
            if span is not None:
                span.fail(exc)
            raise
        try:
            if isinstance(step, _Record):
                value, error = await step.async_fn(step.arg), None
            else:
                value, error = await _call_async(step), None
        except BaseException as exc:
            value, error = None, exc

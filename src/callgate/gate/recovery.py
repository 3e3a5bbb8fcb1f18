"""Crash recovery: settle every call the ledger holds in ``running``, never by guessing.

A call is ``running`` in the ledger from the moment its attempt was recorded
until its outcome is. If the process stopped in between (a crash, a kill, a
power loss), the effect may or may not have happened, so the call is never
simply run again. On start, `recover` settles each one:

* a **read-only** tool had no effect: the call ends ``error`` ("send it
  again"), which is safe;
* a tool with a **reconcile hook**: the hook reads the authoritative record
  (the payment provider, the database) and the call ends ``ok`` or ``error``,
  marked reconciled; if the hook cannot tell, the call ends ``unknown``;
* otherwise the call ends ``unknown`` and waits for a person, who resolves it
  with ``callgate ledger resolve CALL_ID --as ok|error --note ...``.

An ``unknown`` call's idempotency key replays ``unknown``, so a retry of the
same operation cannot run it a second time while nobody knows what happened.

With a ledger shared by live workers (PostgreSQL), a worker must recover only
its own calls: give each worker a stable id (``PostgresLedger(dsn,
worker="billing-1")``) and call ``recover(..., worker="billing-1")`` on start.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from callgate.authorize.policy import principal_of
from callgate.calls import ToolCall
from callgate.execute import Admitted, reconcile_sync
from callgate.gate.admission import context_secrets
from callgate.ledger.base import (
    AttemptFinish,
    AttemptRecord,
    CallRecord,
    CallState,
    Ledger,
    Outcome,
)
from callgate.redact import Redactor
from callgate.tools import Registry, ToolSpec

__all__ = ["Recovered", "RecoveryReport", "recover"]

ACTOR = "recovery"


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovered:
    """One call recovery settled, and how."""

    run_id: str
    call_id: str
    tool: str
    status: str
    """``ok``, ``error`` or ``unknown``."""
    how: str
    """``reconcile hook``, ``read-only``, ``no reconcile hook``, ``hook could not tell``,
    ``tool not registered``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryReport:
    """What `recover` found and did."""

    calls: tuple[Recovered, ...] = ()

    @property
    def needs_person(self) -> tuple[Recovered, ...]:
        """The calls left ``unknown``: a person must find out what happened and resolve them."""
        return tuple(c for c in self.calls if c.status == "unknown")


def recover(
    ledger: Ledger,
    registry: Registry,
    *,
    redactor: Redactor | None = None,
    worker: str | None = None,
    context: Mapping[str, Any] | None = None,
) -> RecoveryReport:
    """Settle every ``running`` call of ``ledger`` (only ``worker``'s, if given).

    ``context`` is the trusted context handed to reconcile hooks (the
    ledger does not keep a run's context). Call this before new calls are
    submitted; a call is settled at most once, even if two processes recover
    at the same time (the ledger's transitions are conditional).
    """
    redactor = redactor or Redactor()
    settled = []
    for call in ledger.calls(state=CallState.RUNNING):
        attempts = ledger.attempts(call.run_id, call.call_id)
        last = attempts[-1] if attempts else None
        if worker is not None and (last is None or last.worker != worker):
            continue
        spec = registry.get(call.tool)
        outcome, how = _settle(call, last, spec, redactor, context or {})
        applied = ledger.finish_attempt(
            AttemptFinish(
                run_id=call.run_id,
                call_id=call.call_id,
                attempt=last.attempt if last is not None else max(call.attempts, 1),
                idempotency_key=call.idempotency_key or "",
                outcome=outcome,
                actor=ACTOR,
                side_effecting=spec.side_effecting if spec is not None else True,
            )
        )
        if applied:
            settled.append(
                Recovered(
                    run_id=call.run_id,
                    call_id=call.call_id,
                    tool=call.tool,
                    status=outcome.status,
                    how=how,
                )
            )
    return RecoveryReport(calls=tuple(settled))


def _settle(
    call: CallRecord,
    last: AttemptRecord | None,
    spec: ToolSpec | None,
    redactor: Redactor,
    context: Mapping[str, Any],
) -> tuple[Outcome, str]:
    now = time.time()
    if spec is None:
        return _unknown(
            f"the process stopped while this call ran, and tool '{call.tool}' is no longer "
            "registered, so its outcome cannot be reconciled"
        ), "tool not registered"
    if not spec.side_effecting:
        return Outcome(
            status="error",
            content=(
                "the process stopped while this read-only call ran; it had no effect. "
                "Send it again."
            ),
            error="interrupted: the process stopped",
            finished_at=now,
            reconciled=True,
        ), "read-only"
    unknown = _unknown(
        "the process stopped while this call ran: the effect may have happened. "
        "Do not repeat it; a person must check and resolve it."
    )
    if spec.reconcile is None:
        return unknown, "no reconcile hook"
    item = Admitted(
        call=ToolCall(id=call.call_id, name=call.tool, arguments=call.arguments),
        spec=spec,
        arguments=_arguments(spec, call.arguments),
        run_id=call.run_id,
        principal=principal_of(call.principal),
        trusted=context,
        idempotency_key=call.idempotency_key or "",
        attempt=last.attempt if last is not None else 1,
        request_hash=call.request_hash or "",
        secrets=context_secrets(context),
    )
    outcome, _ = reconcile_sync(item, unknown, redactor)
    if outcome is unknown:
        return unknown, "hook could not tell"
    # The context handed to the hook is scrubbed from its answer, as on the live path.
    content = redactor.text(outcome.content, item.secrets)
    if content != outcome.content:
        outcome = Outcome(
            status=outcome.status,
            content=content,
            error=outcome.error,
            stage=outcome.stage,
            finished_at=outcome.finished_at,
            reconciled=outcome.reconciled,
            transaction_id=outcome.transaction_id,
        )
    return outcome, "reconcile hook"


def _unknown(text: str) -> Outcome:
    return Outcome(
        status="unknown",
        content=text,
        error="interrupted: process stopped",
        finished_at=time.time(),
    )


def _arguments(spec: ToolSpec, stored: str) -> BaseModel:
    """The call's arguments rebuilt from the ledger (secret fields read ``[redacted]``)."""
    try:
        return spec.arguments_model.model_validate_json(stored)
    except ValidationError:
        try:
            values = json.loads(stored)
        except ValueError:
            values = {}
        return spec.arguments_model.model_construct(**(values if isinstance(values, dict) else {}))

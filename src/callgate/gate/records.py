"""The ledger records of a run's call decisions: one place where each is made.

`DecisionRecords` writes what `Admission` (gate/admission.py) decided of a call,
admitted, pending or rejected, and audits why a call needs a person or was
refused (its sink and intent findings), redacted with the call's secrets.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from callgate.authorize.policy import Decision
from callgate.calls import Stage, ToolCall
from callgate.execute import Admitted
from callgate.gate.run_state import GateParts, RunState
from callgate.ledger.base import CallRecord, CallState
from callgate.redact.calls import scrubbed_effects, scrubbed_findings
from callgate.tools import ToolSpec

__all__ = ["DecisionRecords", "findings_of"]


class DecisionRecords:
    """A run's decision records and findings (`Admission.records`; `Run` writes through it
    too). It reads the gate's configuration and the run's state, as `Admission` does."""

    __slots__ = ("gate", "run")

    def __init__(self, gate: GateParts, run: RunState) -> None:
        self.gate = gate
        self.run = run

    def effects(self, decision: Decision | None, secrets: Sequence[str]) -> tuple[str, ...]:
        """A decision's effect names as records hold them (`scrubbed_effects`)."""
        if decision is None:
            return ()
        return scrubbed_effects(self.gate.redactor, decision.effect_names, secrets)

    def findings(self, decision: Decision, secrets: Sequence[str]) -> tuple[Any, ...]:
        """A decision's findings (`findings_of`), redacted (`scrubbed_findings`)."""
        return scrubbed_findings(self.gate.redactor, findings_of(decision), secrets)

    def record_findings(self, call_id: str, decision: Decision, secrets: Sequence[str]) -> None:
        """Audit why a call needs a person or was refused: its sink and intent findings,
        redacted (a finding quotes an argument's value and the effect it was matched on)."""
        ledger = self.gate.ledger
        redactor = self.gate.redactor
        if decision.provenance:
            ledger.record_event(
                "provenance.untrusted_sink",
                run_id=self.run.id,
                call_id=call_id,
                data={
                    "findings": [redactor.value(f.as_dict(), secrets) for f in decision.provenance]
                },
            )
        if decision.intent is not None:
            ledger.record_event(
                f"intent.{decision.intent.rule}",
                run_id=self.run.id,
                call_id=call_id,
                data=redactor.value(decision.intent.as_dict(), secrets),
            )

    def record_admitted(self, item: Admitted) -> None:
        if item.record is not None:
            self.gate.ledger.record_decision(item.record)

    def record(
        self,
        call: ToolCall,
        spec: ToolSpec | None,
        state: CallState,
        stage: Stage,
        *,
        arguments: str,
        decision: Decision | None = None,
        request_hash: str | None = None,
        idempotency_key: str | None = None,
        approval_id: str | None = None,
        message: str = "",
        secrets: Sequence[str] = (),
    ) -> None:
        """Record a call's decision (arguments and message already redacted by the caller;
        its effects are redacted here with ``secrets``, the call's `_secrets`)."""
        self.gate.ledger.record_decision(
            self.call_record(
                call,
                spec,
                state,
                stage,
                arguments=arguments,
                decision=decision,
                request_hash=request_hash,
                idempotency_key=idempotency_key,
                approval_id=approval_id,
                message=message,
                secrets=secrets,
            )
        )

    def call_record(
        self,
        call: ToolCall,
        spec: ToolSpec | None,
        state: CallState,
        stage: Stage,
        *,
        arguments: str,
        decision: Decision | None = None,
        request_hash: str | None = None,
        idempotency_key: str | None = None,
        approval_id: str | None = None,
        message: str = "",
        secrets: Sequence[str] = (),
    ) -> CallRecord:
        """The one place a call's decision record is made, admitted, pending or rejected
        (its effects redacted here with ``secrets``, the call's `_secrets`)."""
        now = time.time()
        return CallRecord(
            run_id=self.run.id,
            call_id=call.id,
            tool=call.name,
            tool_version=spec.version if spec else None,
            principal=self.run.authority.recorded_as,
            arguments=arguments,
            state=state,
            stage=stage.value,
            request_hash=request_hash,
            idempotency_key=idempotency_key,
            decided_by=decision.rule if decision else None,
            message=message,
            effects=self.effects(decision, secrets or self.run.context_secrets),
            approval_id=approval_id,
            created_at=now,
            updated_at=now,
        )


def findings_of(decision: Decision) -> tuple[dict[str, Any], ...]:
    """A decision's findings as `Observation.details` entries: each sink value no trusted
    input vouches for, and the intent finding (rule, argument, value, source call id)."""
    found = [f.as_dict() for f in decision.provenance]
    if decision.intent is not None:
        found.append(decision.intent.as_dict())
    return tuple(found)

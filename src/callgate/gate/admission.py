"""Stages parse → validate → authorize → approve for one call, and how they are recorded.

`Admission` is the part of a `Run` that decides a single call: its typed
arguments, the policy's decision, the approval it needs, and the ledger
record of that decision (written by `DecisionRecords`, gate/records.py). `Run`
(gate/gate.py) wires batches through it, the scheduler and execution.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from typing import Any, NamedTuple

from pydantic import BaseModel

from callgate.approvals import ApprovalRequest, ApprovalStatus
from callgate.approve import (
    Asked,
    Refused,
    approve,
    denied_rejection,
    pending_observation,
    ran_under_key,
    replay_only,
    used_rejection,
    withheld_rejection,
)
from callgate.authorize.intent import batch_contention
from callgate.authorize.policy import Action, Decision, authorize
from callgate.authorize.provenance import OutputTrust, TrustIndex
from callgate.calls import Observation, Stage, Status, ToolCall
from callgate.canonical import canonical_arguments, digest
from callgate.execute import Admitted
from callgate.gate.records import DecisionRecords
from callgate.gate.run_state import GateParts, RunState
from callgate.ledger.base import CallState
from callgate.ledger.budgets import BudgetCharge, budget_grants, charges_for
from callgate.parse import ParsedArguments, may_be_deep, parse_arguments, screen_call
from callgate.redact import context_secrets
from callgate.redact.calls import (
    call_secrets,
    scrubbed_arguments,
    scrubbed_raw_arguments,
    scrubbed_rejection,
)
from callgate.render import Problem, Rejection
from callgate.schedule import BatchRefusal
from callgate.tools import ToolSpec
from callgate.validate import run_checks, unknown_tool, validate_arguments, validate_text_fast

__all__ = ["Admission", "Validated", "context_secrets", "raised_by_callgate"]

_log = logging.getLogger("callgate")

# The callgate package (this module is in callgate/gate/).
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class Validated(NamedTuple):
    """A call its parse and validate stages took: the call (marked if repaired), its tool
    and its typed arguments (`Admission.validate`)."""

    call: ToolCall
    spec: ToolSpec
    model: BaseModel


class Admission:
    """Single-call admission and its records, for one run (`Run` holds one).

    It reads the gate's configuration (`GateParts`) and reads and writes the run's
    state (`RunState`); it never sees the `Run` or the `Gate` themselves.
    """

    __slots__ = ("gate", "records", "run")

    def __init__(self, gate: GateParts, run: RunState) -> None:
        self.gate = gate
        self.run = run
        self.records = DecisionRecords(gate, run)

    def refused(self, call: ToolCall, refusal: BatchRefusal) -> Observation:
        """A call its batch refused (`callgate.schedule.batch_refusals`), recorded as its
        decision; a missing or repeated id, which names no one call, is audited instead."""
        spec = self.gate.registry.get(call.name)
        if refusal.recorded:
            return self._rejected(call, spec, refusal.rejection)
        self.gate.ledger.record_event(
            "call.bad_id",
            run_id=self.run.id,
            call_id=call.id or None,
            data={"tool": call.name, "message": refusal.rejection.problems[0].message},
        )
        return self._rejected(call, spec, refusal.rejection, record=False)

    def admit(self, call: ToolCall) -> Observation | Admitted:
        """Parse, validate, authorize and approve one call; answered under the id it came
        with, even when the run records it under a new one (`callgate.gate.call_names`). A
        failure of callgate's own code is logged and answered as such, never blamed on the
        call."""
        return self.decide(call, self.validate(call))

    def validate(self, call: ToolCall) -> Validated | Observation:
        """Stages parse and validate of one call: its typed arguments, or the observation
        of its rejection (recorded). A batch validates all its calls first, to find the
        calls that compete for a planned call (`contention`)."""
        try:
            validated = self._validate(call)
        except Exception as exc:
            return self._internal_error(call, exc)
        if type(validated) is Observation:
            validated.call_id = call.id
        return validated

    def decide(self, call: ToolCall, validated: Validated | Observation) -> Observation | Admitted:
        """Stages authorize and approve of a call `validate` took (an observation is
        already its answer); the batch's contention is read from the run
        (`RunState.contended`)."""
        if isinstance(validated, Observation):
            return validated
        try:
            decided = self._decide(validated)
        except Exception as exc:
            return self._internal_error(call, exc)
        if type(decided) is Observation:
            decided.call_id = call.id
        elif type(decided) is Admitted and decided.call.id != call.id:
            decided.answer_id = call.id
        return decided

    def contention(self, validated: Sequence[Validated | Observation]) -> dict[str, str]:
        """The calls of one batch (by the model's id) that compete for a planned call of
        the run's intents, with why (`callgate.authorize.intent.batch_contention`); empty
        when fewer than two calls were validated or no intent plans calls."""
        typed = [item for item in validated if isinstance(item, Validated)]
        if len(typed) < 2 or not any(intent.planned for intent in self.run.intents):
            return {}
        found = batch_contention(
            [(item.spec, item.model.__dict__) for item in typed],
            self.run.intents,
            self.run.evidence,
            self.absorb(),
        )
        return {typed[index].call.id: why for index, why in found.items()}

    def _validate(self, call: ToolCall) -> Validated | Observation:
        screened = screen_call(call.id, call.name, call.arguments)
        if screened is not None:
            return self._rejected(call, None, screened)
        spec = self.gate.registry.get(call.name)
        if spec is None:
            return self._rejected(call, None, unknown_tool(call.name, self.gate.registry))
        validated = self._validated(call, spec)
        if isinstance(validated, Observation):
            return validated
        return Validated(validated[0], spec, validated[1])

    def _decide(self, validated: Validated) -> Observation | Admitted:
        gate = self.gate
        call, spec, model = validated
        provenance = None
        if spec.sinks or self.run.intents or gate.policy.integrity_grants is not None:
            provenance = self.absorb()
        try:
            decision = authorize(
                spec,
                model,
                self.run.authority,
                gate.policy,
                self.run.evidence,
                provenance,
                cache=self.run.decisions,
                intents=self.run.intents,
                contended=self.run.contended.get(call.id, ""),
            )
        except Exception as exc:  # a precondition or rule predicate failed on these values
            if raised_by_callgate(exc):
                raise
            return self._hook_failed(call, spec, model, Stage.AUTHORIZE, exc)
        if decision.rejection is not None:
            return self._rejected(call, spec, decision.rejection, model=model, decision=decision)
        canonical = self._canonical(spec, model)
        request_hash = digest(spec.name, canonical)
        model_id = call.id
        name = self.run.names.name_for(
            model_id,
            spec.name,
            request_hash,
            side_effecting=spec.side_effecting,
            batch_ids=self.run.batch_ids,
        )
        if name != model_id:
            gate.ledger.record_event(
                "call.renamed", run_id=self.run.id, call_id=name, data={"model_id": model_id}
            )
            call = dataclasses.replace(call, id=name)
        key = self._idempotency_key(call, spec, model)
        approval_id = None
        executed = spec
        ran_as = None
        if decision.action is Action.ASK and spec.idempotency_key is not None:
            ran_as = ran_under_key(gate.ledger, spec, key, request_hash)
        if ran_as is not None:
            # The same operation already ran with these values: asking a person to approve
            # it again would approve nothing (its key only replays). Execution replays it.
            gate.ledger.record_event(
                "approval.not_needed",
                run_id=self.run.id,
                call_id=call.id,
                data={"rule": "idempotent_replay", "key": key, "holder": list(ran_as)},
            )
            executed = replay_only(spec)
        elif decision.action is Action.ASK:
            try:
                approved = self._approval(
                    call, spec, model, canonical, request_hash, decision, model_id
                )
            except Exception as exc:  # resource_version or preview failed on these values
                if raised_by_callgate(exc):
                    raise
                return self._hook_failed(call, spec, model, Stage.APPROVE, exc)
            if isinstance(approved, Observation):
                return approved
            approval_id = approved.id
        secrets = self._secrets(spec, model.__dict__)
        stored = self._redacted_arguments(spec, model, canonical, secrets)
        record = self.records.call_record(
            call,
            spec,
            CallState.ADMITTED,
            Stage.AUTHORIZE,
            arguments=stored,
            decision=decision,
            request_hash=request_hash,
            idempotency_key=key,
            approval_id=approval_id,
            secrets=secrets,
        )
        self.run.names.admitted(model_id, call.id, spec.name, request_hash)
        if self.run.budgets is None:
            self.run.budgets = budget_grants(self.run.authority.grants)
        charges: tuple[BudgetCharge, ...] = ()
        if self.run.budgets and spec.side_effecting:
            charges = charges_for(
                self.run.budgets,
                decision.effects,
                owner=self.run.authority.recorded_as,
                run_id=self.run.id,
            )
        return Admitted(
            record=record,
            call=call,
            spec=executed,
            arguments=model,
            run_id=self.run.id,
            principal=self.run.authority.principal,
            trusted=self.run.authority.context,
            idempotency_key=key,
            request_hash=request_hash,
            secrets=secrets,
            budgets=charges,
        )

    def _internal_error(self, call: ToolCall, exc: Exception) -> Observation:
        """A bug in callgate while deciding ``call``: logged with its traceback, audited,
        and answered as callgate's failure (nothing ran), never as the model's mistake."""
        _log.error(
            "callgate failed internally while deciding call %r of run %s",
            call.id,
            self.run.id,
            exc_info=exc,
        )
        try:
            self.gate.ledger.record_event(
                "gate.internal_error",
                run_id=self.run.id,
                call_id=call.id,
                data={"tool": call.name, "error": type(exc).__name__},
            )
        except Exception:  # the ledger may be what failed: the answer still goes out
            _log.exception("could not record the internal error of call %r", call.id)
        return Observation(
            call_id=call.id,
            tool=call.name,
            status=Status.REJECTED,
            stage=Stage.AUTHORIZE,
            content=(
                "Rejected: callgate failed internally while deciding this call "
                f"({type(exc).__name__}). This is not a problem with your call, and nothing "
                "was executed. Do not change the call because of this; tell the user the "
                "tool is unavailable, or try again later."
            ),
            retryable=True,
            details=({"rule": "internal_error", "error": type(exc).__name__},),
        )

    def _hook_failed(
        self, call: ToolCall, spec: ToolSpec, model: BaseModel, stage: Stage, exc: Exception
    ) -> Observation:
        """A tool's own hook (precondition, predicate, resource version, preview) raised on
        the values the model sent: the call is rejected, nothing runs, and only the
        exception's type reaches the model (its text goes to the ledger, redacted). It is
        logged too (logger ``callgate``, WARNING, its type and redacted text; no traceback,
        whose last line would quote it unredacted): the fault may be the hook's own, which
        the application's developer needs to see."""
        _log.warning(
            "the %s hook of tool %r raised on call %r of run %s: %s",
            stage.value,
            spec.name,
            call.id,
            self.run.id,
            self._scrubbed_error(spec, model, exc),
        )
        self.gate.ledger.record_event(
            "hook.failed",
            run_id=self.run.id,
            call_id=call.id,
            data={
                "tool": spec.name,
                "stage": stage.value,
                "error": self._scrubbed_error(spec, model, exc),
            },
        )
        rejection = Rejection(
            stage=stage,
            problems=(
                Problem(
                    rule="hook_failed",
                    message=f"the tool's {stage.value} check failed on these arguments "
                    f"({type(exc).__name__})",
                ),
            ),
            advice="Check that the values refer to things that exist (e.g. read them first), "
            "then send the call again; nothing was executed.",
        )
        return self._rejected(call, spec, rejection, model=model)

    def _validated(
        self, call: ToolCall, spec: ToolSpec
    ) -> tuple[ToolCall, BaseModel] | Observation:
        """Stages parse, schema and semantic: the call (marked if repaired) and typed arguments."""
        arguments = call.arguments
        if isinstance(arguments, str) and arguments and not may_be_deep(arguments):
            fast = validate_text_fast(spec, arguments)
            if fast is not None:
                checked = run_checks(spec, fast) if spec.checks else None
                return (call, fast) if checked is None else self._rejected(call, spec, checked)
        parsed = parse_arguments(arguments, repair=self.gate.repair)
        if isinstance(parsed, Rejection):
            return self._rejected(call, spec, parsed)
        if parsed.repaired:
            call = dataclasses.replace(call, repaired=True)
            self.gate.ledger.record_event(
                "parse.repaired",
                run_id=self.run.id,
                call_id=call.id,
                data={"tool": spec.name, "repairs": list(parsed.repairs)},
            )
        model = validate_arguments(spec, parsed.value, parsed.text)
        if isinstance(model, Rejection):
            return self._rejected(call, spec, model, raw=parsed)
        return call, model

    @staticmethod
    def _canonical(spec: ToolSpec, model: BaseModel) -> str:
        """Canonical JSON of validated arguments: equal arguments give equal text."""
        if spec.dump_is_canonical:
            return model.__pydantic_serializer__.to_json(model).decode()
        return canonical_arguments(model)

    def _approval(
        self,
        call: ToolCall,
        spec: ToolSpec,
        model: BaseModel,
        canonical: str,
        request_hash: str,
        decision: Decision,
        model_id: str,
    ) -> ApprovalRequest | Observation:
        """The approve stage (`callgate.approve`) for one call, and its records: the approval
        that releases exactly this call, or the observation of a call that does not run."""
        secrets = self._secrets(spec, model.__dict__)
        stored = self._redacted_arguments(spec, model, canonical, secrets)
        approved = approve(
            self.gate,
            run_id=self.run.id,
            principal=self.run.authority.recorded_as,
            waited=self.run.resuming.get(call.id),
            call=call,
            spec=spec,
            model=model,
            request_hash=request_hash,
            decision=decision,
            stored=stored,
            resumable=not spec.secret_fields and stored == canonical,
            effects=self.records.effects(decision, secrets),
            secrets=secrets,
        )
        if isinstance(approved, Refused):
            if approved.recorded:
                return self._rejected(
                    call, spec, approved.rejection, model=model, decision=decision
                )
            return self._rejected(call, spec, approved.rejection, record=False)
        if not isinstance(approved, Asked):
            return approved  # the approval spent on this call, or an outcome already recorded
        request = approved.request
        self.records.record_findings(call.id, decision, secrets)
        # Kept under the model's id: resumed, it is answered under that id, and the
        # run finds it waiting under its name (`CallNames.name_for`).
        self.run.pending[request.id] = dataclasses.replace(call, id=model_id)
        self.run.names.waiting(model_id, call.id, spec.name, request_hash)
        self.records.record(
            call,
            spec,
            CallState.PENDING,
            Stage.APPROVE,
            arguments=request.arguments_json,
            decision=decision,
            request_hash=request_hash,
            approval_id=request.id,
            message=f"approval requested: {request.preview}",
            secrets=secrets,
        )
        return pending_observation(
            call, spec, request, decision, self.records.findings(decision, secrets)
        )

    def withheld(self, request: ApprovalRequest) -> Observation:
        """A decided call rebuilt from the ledger without its arguments (secret fields)."""
        call = ToolCall(id=request.call_id, name=request.tool)
        spec = self.gate.registry.get(request.tool)
        if request.status is ApprovalStatus.DENIED:
            obs = self._rejected(call, spec, denied_rejection(request), record=False)
            self.records.record(
                call,
                spec,
                CallState.REJECTED,
                Stage.APPROVE,
                arguments=request.arguments_json,
                approval_id=request.id,
                message=obs.content,
            )
            return obs
        if request.status is ApprovalStatus.USED:
            return self._rejected(call, spec, used_rejection(request), record=False)
        return self._rejected(call, spec, withheld_rejection(request), record=False)

    # -- helpers -------------------------------------------------------------

    def _scrubbed_error(self, spec: ToolSpec, model: BaseModel, exc: Exception) -> str:
        """A hook's exception as the ledger may hold it (`Redactor.error`)."""
        return self.gate.redactor.error(exc, self._secrets(spec, model.__dict__))

    def _secrets(self, spec: ToolSpec | None, values: Any) -> tuple[str, ...]:
        """The values scrubbed from what is recorded or shown of one call (`call_secrets`)."""
        fields = spec.secret_fields if spec is not None else ()
        return call_secrets(self.gate.redactor, fields, values, self.run.context_secrets)

    def absorb(self) -> TrustIndex:
        """The run's trust index, with every observation recorded so far indexed."""
        provenance = self.run.provenance
        provenance.absorb(self.run.evidence, self._output_trust)
        return provenance

    def _output_trust(self, tool: str) -> OutputTrust | None:
        spec = self.gate.registry.get(tool)
        if spec is None or spec.output_trust is None:
            return None
        trust: OutputTrust = spec.output_trust  # the data model keeps it untyped (tools.py)
        return trust

    def _idempotency_key(self, call: ToolCall, spec: ToolSpec, model: BaseModel) -> str:
        """The tool's business key (scoped to the principal, the trusted scope and the tool),
        or the run and call ids."""
        if spec.idempotency_key is not None:
            business = spec.idempotency_key.key(model.__dict__)
            return "cg_" + digest(self.run.authority.scope_key, spec.name, business)[:32]
        return f"{self.run.id}/{call.id}"

    def _redacted_arguments(
        self,
        spec: ToolSpec,
        model: BaseModel,
        canonical: str | None = None,
        secrets: Sequence[str] = (),
    ) -> str:
        """Canonical arguments as the ledger may hold them (`scrubbed_arguments`)."""
        return scrubbed_arguments(
            self.gate.redactor,
            model,
            spec.secret_fields,
            (lambda: canonical) if canonical is not None else lambda: self._canonical(spec, model),
            secrets or self._secrets(spec, model.__dict__),
        )

    def _rejected(
        self,
        call: ToolCall,
        spec: ToolSpec | None,
        rejection: Rejection,
        *,
        model: BaseModel | None = None,
        raw: ParsedArguments | None = None,
        decision: Decision | None = None,
        record: bool = True,
    ) -> Observation:
        redactor = self.gate.redactor
        values = (
            model.__dict__
            if model is not None
            else raw.value
            if raw is not None
            else call.arguments
        )
        secrets = self._secrets(spec, values)
        if decision is not None:
            self.records.record_findings(call.id, decision, secrets)
        fields = spec.secret_fields if spec is not None else frozenset()
        message, details = scrubbed_rejection(redactor, rejection, fields, values, secrets)
        if decision is not None:
            details = (*details, *self.records.findings(decision, secrets))
        if record:
            if model is not None and spec is not None:
                arguments = self._redacted_arguments(spec, model, secrets=secrets)
            elif fields:
                arguments = redactor.withheld_arguments(values, fields, secrets)
            else:
                arguments = scrubbed_raw_arguments(
                    redactor,
                    call.arguments,
                    raw.value if raw is not None else None,
                    self.run.context_secrets,
                )
            self.records.record(
                call,
                spec,
                CallState.REJECTED,
                rejection.stage,
                arguments=arguments,
                decision=decision,
                message=message,
                secrets=secrets,
            )
        return Observation(
            call_id=call.id,
            tool=call.name,
            status=Status.REJECTED,
            stage=rejection.stage,
            content=message,
            retryable=rejection.retryable,
            tool_version=spec.version if spec else None,
            repaired=call.repaired,
            details=details,
        )


def raised_by_callgate(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by callgate's own code alone: every frame it passed
    through, from where it was caught to where it was raised, is in the callgate package.
    An exception from a tool's hook (or a library the hook called) passes through a frame
    of the application's code."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_PACKAGE):
            return False
        tb = tb.tb_next
    return True

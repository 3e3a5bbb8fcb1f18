"""`Gate` and `Run`: the pipeline stages wired together, and nothing else.

``run.submit(calls)`` takes the calls a model proposed and returns one
`Observation` per call, in the same order: parse → validate → authorize →
approve → schedule → execute. Nothing raises out of ``submit`` because of
what the model sent.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from callgate.approvals import (
    DEFAULT_APPROVAL_TTL,
    ApprovalRequest,
    Approvals,
    ApprovalStatus,
    denied_rejection,
    new_approval_id,
    used_rejection,
    withheld_rejection,
)
from callgate.calls import Observation, Stage, Status, ToolCall
from callgate.canonical import canonical_json, digest
from callgate.errors import DefinitionError
from callgate.evidence import Evidence
from callgate.execute import Admitted, ExecutionSettings, execute_async, execute_sync
from callgate.ledger import default_ledger
from callgate.ledger.base import CallRecord, CallState, Ledger
from callgate.messages import Problem, Rejection, bounded
from callgate.parse import ParsedArguments, parse_arguments
from callgate.policy import Action, Authority, Decision, Policy, authorize
from callgate.provenance import OutputTrust, TrustIndex
from callgate.recovery import RecoveryReport, recover
from callgate.redact import REDACTED, Redactor
from callgate.schedule import (
    Batch,
    dependency_failed,
    find_cycle,
    plan_batch,
    run_batch_async,
    run_batch_sync,
)
from callgate.tools import CallContext, Registry, ToolSpec
from callgate.validate import run_checks, unknown_tool, validate_arguments, validate_text_fast

__all__ = ["Gate", "Run"]


class Gate:
    """The controlled entry between proposed calls and their effects.

    Args:
        registry: the tools this gate can run.
        policy: rules over tools, effects and arguments (default: no rules,
            so granted effects suffice).
        ledger: where every decision, attempt and outcome is recorded
            (default: `SQLiteLedger` at ``./callgate.db``; `MemoryLedger` for tests).
        approvals: where approval requests wait for a person (default: the
            ledger's own store, `Ledger.approvals`: durable in a SQL ledger).
        read_retries: extra attempts for a read-only call whose outcome was unknown.
        default_timeout: seconds allowed to tools that declare no timeout.
        max_concurrency: calls of one batch running at once (tools may set a
            lower bound of their own with ``@tool(max_concurrency=...)``).
        max_batch_calls: calls one batch may propose; calls beyond the first
            ``max_batch_calls`` are rejected at stage ``schedule``, not run.
        batch_deadline: seconds a batch may take once scheduling starts (None:
            no deadline); ``submit(..., deadline=...)`` overrides it per batch.
        approval_ttl: seconds before an approval request expires.
        secret_patterns: regexes of credential-shaped text to redact everywhere.
        repair: try a conservative repair of argument text that is not JSON
            (``callgate.parse.repair_json``); a repaired call is marked ``repaired``.
    """

    def __init__(
        self,
        registry: Registry,
        *,
        policy: Policy | None = None,
        ledger: Ledger | None = None,
        approvals: Approvals | None = None,
        read_retries: int = 2,
        default_timeout: float | None = None,
        max_concurrency: int = 16,
        max_batch_calls: int = 64,
        batch_deadline: float | None = None,
        approval_ttl: float = DEFAULT_APPROVAL_TTL,
        secret_patterns: Iterable[str] | None = None,
        repair: bool = True,
    ) -> None:
        if not isinstance(registry, Registry):
            raise DefinitionError(f"Gate needs a Registry, got {type(registry).__name__}")
        self.registry = registry
        self.policy = policy if policy is not None else Policy()
        self.ledger = ledger if ledger is not None else default_ledger()
        self.approvals = approvals if approvals is not None else self.ledger.approvals()
        self.settings = ExecutionSettings(
            read_retries=read_retries, default_timeout=default_timeout
        )
        bounds = (("max_concurrency", max_concurrency), ("max_batch_calls", max_batch_calls))
        for name, value in bounds:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DefinitionError(f"Gate {name} must be a positive integer, got {value!r}")
        if batch_deadline is not None and not batch_deadline > 0:
            raise DefinitionError(
                f"Gate batch_deadline must be positive seconds or None, got {batch_deadline!r}"
            )
        self.max_concurrency = max_concurrency
        self.max_batch_calls = max_batch_calls
        self.batch_deadline = batch_deadline
        self.approval_ttl = approval_ttl
        self.redactor = Redactor() if secret_patterns is None else Redactor(secret_patterns)
        self.repair = repair

    def recover(
        self, *, worker: str | None = None, context: Mapping[str, Any] | None = None
    ) -> RecoveryReport:
        """Settle the calls the ledger holds in ``running``: call it on start.

        A reconcile hook decides each side-effecting call, or it is left
        ``unknown`` for a person (see `callgate.recovery`). ``worker``: only
        the calls that worker started (a ledger shared by live workers).
        """
        return recover(
            self.ledger, self.registry, redactor=self.redactor, worker=worker, context=context
        )

    def run(
        self,
        *,
        authority: Authority,
        run_id: str | None = None,
        trusted: Iterable[str] = (),
        trusted_values: Iterable[Any] = (),
    ) -> Run:
        """Start a run: a sequence of batches under one authority, sharing evidence.

        ``trusted`` is the run's trusted text (system, developer and user
        messages); ``trusted_values`` are values the application vouches for.
        Sink arguments must come from them or from trusted tool output.
        """
        if not isinstance(authority, Authority):
            raise DefinitionError(f"run() needs an Authority, got {type(authority).__name__}")
        if isinstance(trusted, str):
            trusted = [trusted]
        run = Run(self, authority, run_id or "run_" + uuid.uuid4().hex[:20])
        run.provenance = TrustIndex(trusted, trusted_values)
        return run

    def resume_run(
        self,
        run_id: str,
        *,
        authority: Authority,
        trusted: Iterable[str] = (),
        trusted_values: Iterable[Any] = (),
    ) -> Run:
        """Rebuild from the ledger a run that stopped waiting for approvals (another
        process, a restart); then ``run.resume()`` submits the calls decided since.

        The run gets back its pending calls (without asking the model again) and
        its evidence (the ``ok`` outcomes, for preconditions); ``trusted`` and
        ``trusted_values`` are given again, as to `run`. See `callgate.resume`.
        """
        from callgate.resume import rebuild

        run = self.run(
            authority=authority, run_id=run_id, trusted=trusted, trusted_values=trusted_values
        )
        rebuild(run)
        return run


class Run:
    """One agent run: its authority, its evidence, and the calls it submits."""

    def __init__(self, gate: Gate, authority: Authority, run_id: str) -> None:
        self.gate = gate
        self.authority = authority
        self.id = run_id
        self.evidence = Evidence()
        self.provenance = TrustIndex()
        self._pending: dict[str, ToolCall | None] = {}
        """Approval id → the call waiting for it (None: rebuilt without its arguments)."""
        self._resuming: dict[str, str] = {}

    def trust(self, text: str) -> None:
        """Add trusted text to the run, e.g. the user's next message."""
        self.provenance.add_trusted_text(text)

    def trust_value(self, value: Any, kind: str | None = None) -> None:
        """Vouch for one value (optionally of a kind, such as ``"file"``)."""
        self.provenance.add_trusted_value(value, kind)

    # -- public ------------------------------------------------------------

    def submit(
        self, calls: Iterable[ToolCall], *, deadline: float | None = None
    ) -> list[Observation]:
        """Run a batch of proposed calls; one observation per call, in the same order.

        Independent calls run concurrently (sync tools in worker threads, async
        tools on an event loop), conflicting ones in proposal order; see
        docs/schedule.md. A lone call runs in the calling thread. ``deadline``
        (seconds; default the gate's ``batch_deadline``) bounds the batch.
        """
        staged = self._admit_batch(calls)
        admitted = [s for s in staged if isinstance(s, Admitted)]
        if not admitted:
            return self._merge(staged, [])
        gate = self.gate
        limit = self._deadline(deadline)
        if len(admitted) == 1 and limit is None:
            item = admitted[0]
            one = execute_sync(item, gate.ledger, self.evidence, gate.redactor, gate.settings)
            return [one] if len(staged) == 1 else self._merge(staged, [one])
        done = run_batch_sync(
            self._plan(admitted),
            self._execute,
            max_concurrency=gate.max_concurrency,
            deadline=limit,
            on_skipped=self._skipped,
        )
        return self._merge(staged, done)

    async def asubmit(
        self, calls: Iterable[ToolCall], *, deadline: float | None = None
    ) -> list[Observation]:
        """Like `submit`, on the running event loop; independent calls run concurrently.

        If the caller is cancelled, calls not yet started are recorded as
        rejected (never started), running calls as ``unknown``, and the
        cancellation propagates.
        """
        staged = self._admit_batch(calls)
        admitted = [s for s in staged if isinstance(s, Admitted)]
        if not admitted:
            return self._merge(staged, [])
        limit = self._deadline(deadline)
        if len(staged) == 1 and limit is None:
            return [await self._execute(admitted[0])]
        done = await run_batch_async(
            self._plan(admitted),
            self._execute,
            max_concurrency=self.gate.max_concurrency,
            deadline=limit,
            on_skipped=self._skipped,
        )
        return self._merge(staged, done)

    def record_rejected(self, observations: Iterable[Observation]) -> None:
        """Record rejections made before the gate (e.g. a provider's cut-off call).

        Provider adapters reject some calls before they reach `submit`
        (duplicate ids, arguments cut off by the token limit); recording them
        here keeps the ledger a complete account of what the model proposed.
        """
        for obs in observations:
            if obs.status is not Status.REJECTED:
                raise ValueError(
                    f"record_rejected() takes rejected observations, got {obs.status.value} "
                    f"for call {obs.call_id!r}"
                )
            spec = self.gate.registry.get(obs.tool)
            self._record(
                ToolCall(id=obs.call_id, name=obs.tool),
                spec,
                CallState.REJECTED,
                obs.stage,
                arguments="{}",
                message=self.gate.redactor.text(obs.content),
            )

    def resume(self) -> list[Observation]:
        """Submit again the calls of this run whose approval has since been decided.

        Approved: the call runs, once (the approval is used up atomically, so a
        second resume, here or in another process, runs nothing). Denied:
        rejected at stage ``approval``. Still pending, or expired undecided:
        it stays. A call is checked again in full (policy, resource version)
        before it runs. In another process, rebuild the run with `Gate.resume_run`.
        """
        ready: list[ToolCall] = []
        withheld: list[Observation] = []
        for approval_id, call in list(self._pending.items()):
            request = self.gate.approvals.get(approval_id)
            if request is not None and request.status is ApprovalStatus.PENDING:
                continue
            del self._pending[approval_id]
            if call is not None:
                ready.append(call)
                self._resuming[call.id] = approval_id
            elif request is not None:
                withheld.append(self._withheld(request))
        try:
            return withheld + (self.submit(ready) if ready else [])
        finally:
            self._resuming.clear()

    @property
    def pending_approvals(self) -> list[str]:
        """Ids of the approval requests this run is waiting for."""
        return list(self._pending)

    # -- stages --------------------------------------------------------------

    def _deadline(self, deadline: float | None) -> float | None:
        """The batch deadline in seconds: the submit argument, else the gate's."""
        if deadline is None:
            return self.gate.batch_deadline
        if not deadline > 0:
            raise ValueError(f"deadline must be positive seconds or None, got {deadline!r}")
        return deadline

    @staticmethod
    def _plan(admitted: list[Admitted]) -> Batch:
        """The batch graph; with several calls, sync handlers go to worker threads."""
        if len(admitted) > 1:
            admitted = [dataclasses.replace(a, offload=True) for a in admitted]
        return plan_batch(admitted)

    async def _execute(self, item: Admitted) -> Observation:
        gate = self.gate
        return await execute_async(item, gate.ledger, self.evidence, gate.redactor, gate.settings)

    def _skipped(self, item: Admitted, obs: Observation) -> None:
        """Record a call the scheduler settled without running it (it was recorded admitted)."""
        if item.record is not None:
            self.gate.ledger.record_decision(
                dataclasses.replace(
                    item.record,
                    state=CallState.REJECTED,
                    stage=obs.stage.value,
                    message=obs.content,
                    updated_at=time.time(),
                )
            )

    @staticmethod
    def _merge(
        staged: Sequence[Observation | Admitted], results: Sequence[Observation]
    ) -> list[Observation]:
        """Observations in proposal order: staged ones as they are, executed ones in turn."""
        it = iter(results)
        return [next(it) if isinstance(s, Admitted) else s for s in staged]

    def _admit_batch(self, calls: Iterable[ToolCall]) -> list[Observation | Admitted]:
        """Admit each call; reject duplicates, dependency cycles and failed dependencies."""
        calls = list(calls)
        lone = len(calls) == 1 and isinstance(calls[0], ToolCall)
        if lone and calls[0].id and not calls[0].after:
            single = self._admit(calls[0])
            if isinstance(single, Admitted):
                self._record_admitted(single)
            return [single]
        for call in calls:
            if not isinstance(call, ToolCall):
                raise TypeError(
                    f"submit() takes ToolCall objects, got {type(call).__name__}; "
                    "use callgate.ToolCall(id=..., name=..., arguments=...)"
                )
        counts: dict[str, int] = {}
        for call in calls:
            counts[call.id] = counts.get(call.id, 0) + 1
        in_cycle = find_cycle(calls)
        staged: list[Observation | Admitted] = []
        for index, call in enumerate(calls):
            if counts[call.id] > 1 or not call.id:
                staged.append(self._bad_id(call))
            elif in_cycle:
                staged.append(self._cycle(call, in_cycle))
            elif index >= self.gate.max_batch_calls:
                staged.append(self._too_many(call, len(calls)))
            else:
                staged.append(self._admit(call))
        if any(c.after for c in calls):
            self._fail_dependents(staged)
        for item in staged:
            if isinstance(item, Admitted):
                self._record_admitted(item)
        return staged

    def _fail_dependents(self, staged: list[Observation | Admitted]) -> None:
        """Reject admitted calls that depend on a call of this batch that did not get admitted."""
        changed = True
        while changed:
            changed = False
            failed = {s.call_id: s for s in staged if isinstance(s, Observation)}
            for i, item in enumerate(staged):
                if isinstance(item, Admitted):
                    dep = next((failed[d] for d in item.call.after if d in failed), None)
                    if dep is not None:
                        obs = dependency_failed(item, dep)
                        self._record(
                            item.call,
                            item.spec,
                            CallState.REJECTED,
                            Stage.SCHEDULE,
                            arguments=item.record.arguments if item.record else "{}",
                            message=obs.content,
                        )
                        staged[i] = obs
                        changed = True

    def _cycle(self, call: ToolCall, cycle: Sequence[str]) -> Observation:
        """A cycle of ``after`` dependencies rejects the whole batch: nothing runs."""
        path = " -> ".join(bounded(c, 80) for c in [*cycle, cycle[0]])
        if call.id in cycle:
            text = f"the calls' 'after' dependencies form a cycle: {path}"
        else:
            text = f"the batch was not run because its 'after' dependencies form a cycle: {path}"
        rejection = Rejection(
            stage=Stage.SCHEDULE,
            problems=(Problem(rule="dependency_cycle", message=text),),
            advice="Nothing in this batch was executed. Send the calls again without the cycle.",
        )
        return self._rejected(call, self.gate.registry.get(call.name), rejection)

    def _too_many(self, call: ToolCall, proposed: int) -> Observation:
        """A call beyond the gate's per-batch bound: rejected, never silently dropped."""
        limit = self.gate.max_batch_calls
        rejection = Rejection(
            stage=Stage.SCHEDULE,
            problems=(
                Problem(
                    rule="batch_too_large",
                    message=f"this batch proposed {proposed} calls and at most {limit} run per "
                    f"batch; this call came after the first {limit}",
                ),
            ),
            advice="Nothing was executed for this call. Send it again in a later turn, once "
            "the results of this batch are in.",
        )
        return self._rejected(call, self.gate.registry.get(call.name), rejection)

    def _admit(self, call: ToolCall) -> Observation | Admitted:
        """Parse, validate, authorize and approve one call."""
        gate = self.gate
        spec = gate.registry.get(call.name)
        if spec is None:
            return self._rejected(call, None, unknown_tool(call.name, gate.registry))
        validated = self._validated(call, spec)
        if isinstance(validated, Observation):
            return validated
        call, model = validated
        provenance = None
        if spec.sinks:
            provenance = self.provenance
            provenance.absorb(self.evidence, self._output_trust)
        decision = authorize(spec, model, self.authority, gate.policy, self.evidence, provenance)
        if decision.rejection is not None:
            return self._rejected(call, spec, decision.rejection, model=model, decision=decision)
        canonical = self._canonical(spec, model)
        request_hash = digest(spec.name, canonical)
        approval_id = None
        if decision.action is Action.ASK:
            approved = self._approval(call, spec, model, canonical, request_hash, decision)
            if isinstance(approved, Observation):
                return approved
            approval_id = approved.id
        key = self._idempotency_key(call, spec, model)
        secrets = (
            gate.redactor.secret_values(model.__dict__, spec.secret_fields)
            if spec.secret_fields
            else ()
        )
        record = self._call_record(
            call,
            spec,
            CallState.ADMITTED,
            Stage.POLICY,
            arguments=self._redacted_arguments(spec, model, canonical),
            decision=decision,
            request_hash=request_hash,
            idempotency_key=key,
            approval_id=approval_id,
        )
        return Admitted(
            record=record,
            call=call,
            spec=spec,
            arguments=model,
            context=CallContext(
                principal=self.authority.principal,
                context=self.authority.context,
                run_id=self.id,
                call_id=call.id,
                tool=spec.name,
                idempotency_key=key,
            ),
            request_hash=request_hash,
            secrets=tuple(secrets),
        )

    def _validated(
        self, call: ToolCall, spec: ToolSpec
    ) -> tuple[ToolCall, BaseModel] | Observation:
        """Stages parse, schema and semantic: the call (marked if repaired) and typed arguments."""
        arguments = call.arguments
        if isinstance(arguments, str) and arguments:
            fast = validate_text_fast(spec, arguments)
            if fast is not None:
                checked = run_checks(spec, fast) if spec.checks else None
                return (call, fast) if checked is None else self._rejected(call, spec, checked)
        parsed = parse_arguments(arguments, repair=self.gate.repair)
        if isinstance(parsed, Rejection):
            return self._rejected(call, spec, parsed)
        if parsed.repaired:
            call = dataclasses.replace(call, repaired=True)
        model = validate_arguments(spec, parsed.value, parsed.text)
        if isinstance(model, Rejection):
            return self._rejected(call, spec, model, raw=parsed)
        return call, model

    @staticmethod
    def _canonical(spec: ToolSpec, model: BaseModel) -> str:
        """Canonical JSON of validated arguments: equal arguments give equal text."""
        if spec.dump_is_canonical:
            return model.model_dump_json()
        return canonical_json(model.model_dump(mode="json"))

    def _approval(
        self,
        call: ToolCall,
        spec: ToolSpec,
        model: BaseModel,
        canonical: str,
        request_hash: str,
        decision: Decision,
    ) -> ApprovalRequest | Observation:
        """An approval that releases exactly this call, or the pending/denied observation."""
        gate = self.gate
        principal = self.authority.principal
        version = spec.resource_version(model) if spec.resource_version is not None else None
        used = gate.approvals.consume(
            principal=principal,
            tool=spec.name,
            arguments_hash=request_hash,
            resource_version=version,
            used_by=f"{self.id}/{call.id}",
        )
        if used is not None:
            gate.ledger.record_event(
                "approval.used",
                run_id=self.id,
                call_id=call.id,
                data={
                    "actor": principal,
                    "approval_id": used.id,
                    "decided_by": used.decided_by,
                    "policy_version": gate.policy.version,
                },
            )
            return used
        waited = self._resuming.get(call.id)
        prior = gate.approvals.get(waited) if waited is not None else None
        if prior is not None and prior.status is ApprovalStatus.USED:
            # Another resume (in this process or another) released this call already.
            gate.ledger.record_event(
                "approval.reuse_refused",
                run_id=self.id,
                call_id=call.id,
                data={"actor": principal, "approval_id": prior.id, "used_by": prior.used_by},
            )
            return self._rejected(call, spec, used_rejection(prior), record=False)
        now = time.time()
        preview = spec.preview(model) if spec.preview else f"{spec.name}({canonical})"
        why = "; ".join(f.explain() for f in decision.provenance)
        if why:
            preview = f"{preview} [provenance: {why}]"
        stored = self._redacted_arguments(spec, model, canonical)
        request = gate.approvals.request(
            ApprovalRequest(
                id=new_approval_id(),
                run_id=self.id,
                call_id=call.id,
                principal=principal,
                tool=spec.name,
                arguments_json=stored,
                arguments_hash=request_hash,
                effects=tuple(str(e) for e in decision.effects),
                preview=gate.redactor.text(preview),
                created_at=now,
                expires_at=now + gate.approval_ttl,
                resource_version=version,
                policy_version=gate.policy.version,
                resumable=not spec.secret_fields and stored == canonical,
            )
        )
        if decision.provenance:
            gate.ledger.record_event(
                "provenance.untrusted_sink",
                run_id=self.id,
                call_id=call.id,
                data={"findings": [f.as_dict() for f in decision.provenance]},
            )
        if request.status is ApprovalStatus.DENIED:
            rejection = denied_rejection(request)
            return self._rejected(call, spec, rejection, model=model, decision=decision)
        self._pending[request.id] = call
        self._record(
            call,
            spec,
            CallState.PENDING,
            Stage.APPROVAL,
            arguments=request.arguments_json,
            decision=decision,
            request_hash=request_hash,
            approval_id=request.id,
            message=f"approval requested: {request.preview}",
        )
        return Observation(
            call_id=call.id,
            tool=spec.name,
            status=Status.PENDING,
            stage=Stage.APPROVAL,
            content=bounded(
                f"This call needs a person's approval and has not run (request {request.id}: "
                f"{request.preview}). Wait for the decision; a call with different arguments "
                "needs its own approval."
            ),
            retryable=False,
            approval_id=request.id,
            tool_version=spec.version,
            details=({"rule": decision.rule, "approval_id": request.id},),
        )

    def _withheld(self, request: ApprovalRequest) -> Observation:
        """A decided call rebuilt from the ledger without its arguments (secret fields)."""
        call = ToolCall(id=request.call_id, name=request.tool)
        spec = self.gate.registry.get(request.tool)
        if request.status is ApprovalStatus.DENIED:
            obs = self._rejected(call, spec, denied_rejection(request), record=False)
            self._record(
                call,
                spec,
                CallState.REJECTED,
                Stage.APPROVAL,
                arguments=request.arguments_json,
                approval_id=request.id,
                message=obs.content,
            )
            return obs
        if request.status is ApprovalStatus.USED:
            return self._rejected(call, spec, used_rejection(request), record=False)
        return self._rejected(call, spec, withheld_rejection(request), record=False)

    # -- helpers -------------------------------------------------------------

    def _output_trust(self, tool: str) -> OutputTrust | None:
        spec = self.gate.registry.get(tool)
        return spec.output_trust if spec is not None else None

    def _idempotency_key(self, call: ToolCall, spec: ToolSpec, model: BaseModel) -> str:
        """The tool's business key (scoped to principal and tool), or the run and call ids."""
        if spec.idempotency_key is not None:
            business = spec.idempotency_key.expand(model.__dict__)
            return "cg_" + digest(self.authority.principal, spec.name, business)[:32]
        return f"{self.id}/{call.id}"

    def _redacted_arguments(
        self, spec: ToolSpec, model: BaseModel, canonical: str | None = None
    ) -> str:
        """Canonical arguments as the ledger may hold them: secret fields and values scrubbed."""
        if spec.secret_fields:
            values = self.gate.redactor.arguments(model.model_dump(mode="json"), spec.secret_fields)
            canonical = canonical_json(values)
        elif canonical is None:
            canonical = self._canonical(spec, model)
        return self.gate.redactor.text(canonical)

    def _bad_id(self, call: ToolCall) -> Observation:
        text = (
            "the call has no id"
            if not call.id
            else f"the call id '{bounded(call.id, 80)}' appears twice in this batch"
        )
        rejection = Rejection(
            stage=Stage.PARSE,
            problems=(Problem(rule="call_id", message=text),),
            advice="Give every call in a batch its own id; nothing was executed for this call.",
        )
        return self._rejected(call, self.gate.registry.get(call.name), rejection, record=False)

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
        message = rejection.message
        if decision is not None and decision.provenance:
            self.gate.ledger.record_event(
                "provenance.untrusted_sink",
                run_id=self.id,
                call_id=call.id,
                data={"findings": [f.as_dict() for f in decision.provenance]},
            )
        if record:
            recorded = message
            if model is not None and spec is not None:
                arguments = self._redacted_arguments(spec, model)
            elif spec is not None and spec.secret_fields:
                arguments, recorded = self._without_secrets(spec, call, raw, message)
            else:
                arguments = self._raw_arguments(call, raw)
            self._record(
                call,
                spec,
                CallState.REJECTED,
                rejection.stage,
                arguments=arguments,
                decision=decision,
                message=recorded,
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
            details=tuple(p.as_dict() for p in rejection.problems),
        )

    def _raw_arguments(self, call: ToolCall, raw: ParsedArguments | None) -> str:
        if raw is not None:
            text = canonical_json(raw.value)
        elif isinstance(call.arguments, str):
            text = call.arguments
        else:
            try:
                text = canonical_json(dict(call.arguments))
            except (TypeError, ValueError):
                text = repr(call.arguments)
        return self.gate.redactor.text(bounded(text, 4000))

    def _without_secrets(
        self, spec: ToolSpec, call: ToolCall, raw: ParsedArguments | None, message: str
    ) -> tuple[str, str]:
        """Arguments and message of a rejected call as the ledger may hold them, for a tool
        with secret fields: those fields redacted, and their values scrubbed from the message.
        Arguments that could not be parsed are withheld whole, with the message's details."""
        redactor = self.gate.redactor
        values = raw.value if raw is not None else call.arguments
        if isinstance(values, Mapping):
            secrets = redactor.secret_values(values, spec.secret_fields)
            scrubbed = redactor.arguments(values, spec.secret_fields)
            try:
                text = canonical_json(scrubbed)
            except (TypeError, ValueError):
                text = REDACTED
            return redactor.text(bounded(text, 4000), secrets), redactor.text(message, secrets)
        head = message.split("\n", 1)[0]
        return REDACTED, f"{head}\n(details withheld: this tool has secret fields)"

    def _record_admitted(self, item: Admitted) -> None:
        if item.record is not None:
            self.gate.ledger.record_decision(item.record)

    def _record(
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
    ) -> None:
        self.gate.ledger.record_decision(
            self._call_record(
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
            )
        )

    def _call_record(
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
    ) -> CallRecord:
        now = time.time()
        return CallRecord(
            run_id=self.id,
            call_id=call.id,
            tool=call.name,
            tool_version=spec.version if spec else None,
            principal=self.authority.principal,
            arguments=arguments,
            state=state,
            stage=stage.value,
            request_hash=request_hash,
            idempotency_key=idempotency_key,
            decided_by=decision.rule if decision else None,
            message=message,
            effects=tuple(str(e) for e in decision.effects) if decision else (),
            approval_id=approval_id,
            created_at=now,
            updated_at=now,
        )

"""`Gate` and `Run`: the pipeline stages wired together, and nothing else.

``run.submit(calls)`` takes the calls a model proposed and returns one
`Observation` per call, in the same order: parse → validate → authorize →
approve → schedule → execute. Nothing raises out of ``submit`` because of
what the model sent.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from callgate.approvals import (
    DEFAULT_APPROVAL_TTL,
    Approvals,
    ApprovalStatus,
)
from callgate.authorize.intent import Intent
from callgate.authorize.policy import Authority, Policy
from callgate.authorize.provenance import TrustIndex
from callgate.calls import Observation, Stage, Status, ToolCall
from callgate.errors import DefinitionError, GateClosed
from callgate.evidence import Evidence
from callgate.execute import Admitted, ExecutionSettings, execute_async, execute_sync
from callgate.gate.admission import Admission, context_secrets
from callgate.gate.call_names import CallNames
from callgate.gate.recovery import RecoveryReport, recover
from callgate.gate.resume import Fact, exposed_fact, intent_fact, rebuild, restore, trusted_fact
from callgate.gate.run_state import RunState
from callgate.ledger import default_ledger
from callgate.ledger.base import CallState, Ledger, LedgerError
from callgate.redact import DEFAULT_SECRET_PATTERNS, Redactor, redactor_for
from callgate.schedule import (
    Batch,
    batch_refusals,
    follow_renames,
    plan_batch,
    reject_dependents,
    run_batch_async,
    run_batch_sync,
)
from callgate.telemetry import Telemetry
from callgate.tools import CallContext, Registry

_log = logging.getLogger("callgate")

__all__ = ["Gate", "Run", "running_run"]

_caller: contextvars.ContextVar[Run | None] = contextvars.ContextVar(
    "callgate_caller", default=None
)
"""The run whose handler is executing in this context: a run started there (a nested run)
inherits its intents and exposure (`Gate.run`)."""

_running: dict[tuple[str, str], Run] = {}
"""(run id, call name) → the run executing that call, for handlers that take a `CallContext`
(`running_run`). Entered when a batch starts executing, left when it ends."""


def running_run(context: CallContext) -> Run:
    """The run executing the handler that received ``context``: the re-entrant entry.

    A handler that composes other calls (the sandbox's ``run_python``, whose code calls
    tools) submits them through the *same* run with ``await run.asubmit(...)`` while it
    runs, so they are validated, authorized under the run's authority, approved and
    recorded like any call. Only a handler that asks for a `CallContext` is found, and
    only while its call executes; anything else raises `LookupError`.
    """
    try:
        return _running[context.run_id, context.call_id]
    except KeyError:
        raise LookupError(
            f"call {context.call_id!r} of run {context.run_id!r} is not executing in this "
            "process: running_run() works only inside a handler, with the CallContext "
            "it was given"
        ) from None


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
        secret_patterns: regexes of credential-shaped text to redact everywhere, in
            Python's syntax, run on RE2 in linear time; constructs RE2 cannot run
            (lookaround, backreferences, ``\\b``, anchors at the start or end of the
            text) raise `DefinitionError` here.
        repair: try a conservative repair of argument text that is not JSON
            (``callgate.parse.repair_json``); a repaired call is marked ``repaired``.
        telemetry: where every call's OpenTelemetry span goes (`callgate.telemetry`;
            None, the default: no spans).
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
        telemetry: Telemetry | None = None,
    ) -> None:
        if not isinstance(registry, Registry):
            raise DefinitionError(f"Gate needs a Registry, got {type(registry).__name__}")
        self.registry = registry
        self.policy = policy if policy is not None else Policy()
        self._owns_ledger = ledger is None
        self.closed = False
        """Whether `close` was called: then no run of this gate submits anything."""
        if ledger is None:
            ledger = default_ledger()
            _log.info(
                "callgate: no ledger given; recording to the SQLite ledger %s "
                "(Gate(ledger=...) chooses another)",
                getattr(ledger, "path", "?"),
            )
        self.ledger = ledger
        self.approvals = approvals if approvals is not None else self.ledger.approvals()
        if telemetry is not None and not isinstance(telemetry, Telemetry):
            raise DefinitionError(
                "Gate telemetry must be a callgate.telemetry.Telemetry or None, "
                f"got {type(telemetry).__name__}"
            )
        self.telemetry = telemetry
        self.settings = ExecutionSettings(
            read_retries=read_retries, default_timeout=default_timeout, telemetry=telemetry
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
        for name, seconds in (("default_timeout", default_timeout), ("approval_ttl", approval_ttl)):
            if seconds is not None and not seconds > 0:
                raise DefinitionError(f"Gate {name} must be positive seconds, got {seconds!r}")
        self.approval_ttl = approval_ttl
        # Patterns given here are added to the built-in ones, never replace them.
        patterns = (
            DEFAULT_SECRET_PATTERNS
            if secret_patterns is None
            else (*DEFAULT_SECRET_PATTERNS, *secret_patterns)
        )
        self.redactor: Redactor = (
            redactor_for(patterns)
            if all(isinstance(p, str) for p in patterns)
            else Redactor(patterns)  # refuses what is not a pattern, with the reason
        )
        self.repair = repair

    def close(self) -> None:
        """Close the gate: no run of it submits anything after this. The ledger the gate
        opened itself (the default SQLite file) is closed; a ledger passed in as
        ``Gate(ledger=...)`` is the caller's to close."""
        if self.closed:
            return
        self.closed = True
        if self._owns_ledger:
            self.ledger.close()

    def _check_open(self) -> None:
        if self.closed:
            raise GateClosed(
                "this gate was closed (Gate.close() or the end of its with-block); "
                "nothing was run. Make a new Gate to submit calls"
            )

    def __enter__(self) -> Gate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def recover(
        self, *, worker: str | None = None, context: Mapping[str, Any] | None = None
    ) -> RecoveryReport:
        """Settle the calls the ledger holds in ``running``: call it on start.

        A reconcile hook decides each side-effecting call, or it is left
        ``unknown`` for a person (see `callgate.gate.recovery`). ``worker``: only
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
        intent: Intent | None = None,
    ) -> Run:
        """Start a run: a sequence of batches under one authority, sharing evidence.

        ``trusted`` is the run's trusted text (system, developer and user
        messages); ``trusted_values`` are values the application vouches for.
        Sink arguments must come from them or from trusted tool output.
        ``intent`` narrows what the run may do once it has read untrusted content
        (`callgate.authorize.intent`); `Run.narrow` adds one later.
        """
        run = self._start(authority, run_id or "run_" + uuid.uuid4().hex[:20])
        facts: list[Fact] = []
        caller = _caller.get()
        if caller is not None:  # started inside a handler: the caller's bounds come along
            for inherited in caller.intents:
                run.state.intents = (*run.state.intents, inherited)
                facts.append(intent_fact(inherited))
            for source in caller.exposed_by:
                run.provenance.add_untrusted("", source)
                facts.append(exposed_fact(source, ""))
        facts += run._given(trusted, trusted_values, intent)
        if run_id is not None or facts:
            run._record(facts)
        return run

    def _start(self, authority: Authority, run_id: str) -> Run:
        if not isinstance(authority, Authority):
            raise DefinitionError(f"run() needs an Authority, got {type(authority).__name__}")
        self._check_open()
        return Run(self, authority, run_id)

    def resume_run(
        self,
        run_id: str,
        *,
        authority: Authority,
        trusted: Iterable[str] = (),
        trusted_values: Iterable[Any] = (),
        intent: Intent | None = None,
    ) -> Run:
        """Rebuild from the ledger a run that stopped waiting for approvals (another
        process, a restart); then ``run.resume()`` submits the calls decided since.

        The run gets back its pending calls (without asking the model again), its
        evidence (the ``ok`` outcomes, for preconditions), and everything the journal
        holds of it: its intents, trusted text, values and records, and what it had
        read (exposure). ``trusted``, ``trusted_values`` and ``intent`` add to those
        (an intent given here narrows the run further; none can widen it). Only the
        principal and trusted scope that opened the run may resume it. See
        `callgate.gate.resume`.
        """
        run = self._start(authority, run_id)
        run._record(run._given(trusted, trusted_values, intent))
        restore(run.state, self.ledger.run_facts(run_id))
        rebuild(self, run.state)
        return run


@dataclasses.dataclass(slots=True)
class _Work:
    """What `Run._prepare` decided for a batch, for either driver to carry out."""

    staged: list[Observation | Admitted] | None
    """Every call's admission in proposal order (None: a lone call)."""
    admitted: list[Admitted]
    rejected: Observation | None
    """A lone call's rejection."""
    batch: Batch | None
    """The batch graph, when several calls (or a deadline) need the scheduler."""
    limit: float | None
    started: float = 0.0
    """When the batch was received (`time.time`): where the spans of unrun calls start."""


class Run:
    """One agent run: its authority, its evidence, and the calls it submits.

    The run's state is a `RunState`, shared with its `Admission` (which decides
    each call) and with `callgate.gate.resume` (which rebuilds a run from the ledger).
    """

    def __init__(self, gate: Gate, authority: Authority, run_id: str) -> None:
        self.gate = gate
        self.state = RunState(
            id=run_id, authority=authority, context_secrets=context_secrets(authority.context)
        )
        self._admission = Admission(gate, self.state)

    @property
    def id(self) -> str:
        """The run id: every call of the run is recorded under it."""
        return self.state.id

    @property
    def authority(self) -> Authority:
        """Who the run acts for, and with which grants."""
        return self.state.authority

    @property
    def evidence(self) -> Evidence:
        """What the run's calls returned, for later preconditions."""
        return self.state.evidence

    @evidence.setter
    def evidence(self, evidence: Evidence) -> None:
        self.state.evidence = evidence

    @property
    def provenance(self) -> TrustIndex:
        """The run's trusted inputs, for sink checks."""
        return self.state.provenance

    @provenance.setter
    def provenance(self, index: TrustIndex) -> None:
        self.state.provenance = index

    @property
    def names(self) -> CallNames:
        """The names this run records its calls under (`callgate.gate.call_names`)."""
        return self.state.names

    def trust(self, text: str) -> None:
        """Add trusted text to the run, e.g. the user's next message (recorded in the
        journal, so a resumed run trusts it too)."""
        self._record(self._given([text], (), None))

    def trust_value(self, value: Any, kind: str | None = None) -> None:
        """Vouch for one value (optionally of a kind, such as ``"file"``)."""
        self.provenance.add_trusted_value(value, kind)
        if isinstance(value, str):  # stored as the redactor leaves it (narrower, never wider)
            value = self.gate.redactor.text(value, self.state.context_secrets)
        self._record([trusted_fact(values=[(value, kind)])])

    def trust_record(
        self, record: Mapping[str, Any], kinds: Mapping[str, str] | None = None
    ) -> None:
        """Vouch for one record of the application's (an address-book entry, a saved payee):
        its values are trusted (of the kinds ``kinds`` gives by field path) and kept together,
        so that a request naming the payee by name names its IBAN (``named_targets``)."""
        self.provenance.add_trusted_record(record, kinds)
        self._record([trusted_fact(records=[(record, kinds)])])

    def untrusted(self, text: str, *, source: str) -> None:
        """Record untrusted text the run read by another way than a tool call (a document
        put into the prompt): the run counts as exposed from now on (intent checks), here
        and in a resumed run (the journal records it)."""
        self.provenance.add_untrusted(text, source)
        scrubbed = self.gate.redactor.text(text, self.state.context_secrets)
        self._record([exposed_fact(source, scrubbed)])

    def narrow(self, intent: Intent) -> None:
        """Narrow the run to ``intent`` as well: after untrusted content, a call must be
        inside every intent of the run. There is no way to widen them again."""
        self._checked(intent, "narrow()")
        self.state.intents = (*self.state.intents, intent)
        self._record([intent_fact(intent)])

    def _checked(self, intent: Intent, where: str) -> None:
        """`DefinitionError` when ``intent`` is no Intent, or names a tool or parameter the
        gate does not have (`Intent.check`): raised where the intent is written."""
        if not isinstance(intent, Intent):
            raise DefinitionError(f"{where} takes an Intent, got {type(intent).__name__}")
        intent.check(self.gate.registry)

    def _given(
        self, trusted: Iterable[str], trusted_values: Iterable[Any], intent: Intent | None
    ) -> list[Fact]:
        """Take trusted text, values and an intent given by the application into the run;
        the journal records that say so."""
        if intent is not None:  # before anything is taken: a wrong intent takes nothing
            self._checked(intent, "intent=")
        if isinstance(trusted, str):
            trusted = [trusted]
        texts, values = list(trusted), list(trusted_values)
        facts: list[Fact] = []
        for text in texts:
            self.provenance.add_trusted_text(text)
        for value in values:
            self.provenance.add_trusted_value(value)
        if texts or values:
            scrub = self.gate.redactor.text
            secrets = self.state.context_secrets
            facts.append(
                trusted_fact(
                    texts=[scrub(t, secrets) for t in texts],
                    values=[(scrub(v, secrets) if isinstance(v, str) else v, None) for v in values],
                )
            )
        if intent is not None:
            self.state.intents = (*self.state.intents, intent)
            facts.append(intent_fact(intent))
        return facts

    def _record(self, facts: Sequence[Fact]) -> None:
        """Write the run's facts to the journal under its owner (`Ledger.record_run`); a
        run id another principal or scope opened is refused."""
        owner = self.authority.recorded_as
        other = self.gate.ledger.record_run(self.id, owner=owner, facts=facts)
        if other is not None:
            raise LedgerError(
                f"run id {self.id!r} belongs to {other!r}, not {owner!r}: a run id is scoped "
                "to the principal and trusted scope that opened it (as idempotency keys are), "
                "so one user's run never answers another's calls: resume it under the "
                "authority it ran with, or give each user's run its own id (omit run_id "
                "for a fresh one)"
            )

    @property
    def intents(self) -> tuple[Intent, ...]:
        """The run's intents, oldest first (`narrow`)."""
        return self.state.intents

    @property
    def exposed_by(self) -> tuple[str, ...]:
        """Call ids (or sources) of the untrusted content this run has read, oldest first;
        empty while it has read only trusted input (then its intent is not consulted)."""
        self._admission.absorb()
        return self.provenance.exposed_by

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
        work = self._prepare(calls, deadline)
        entered = self._enter(work.admitted)
        try:
            if work.batch is not None:
                done = run_batch_sync(
                    work.batch,
                    self._execute,
                    max_concurrency=self.gate.max_concurrency,
                    deadline=work.limit,
                    on_skipped=self._skipped,
                )
            elif work.admitted:  # one call, run here, in this thread
                gate = self.gate
                item = work.admitted[0]
                token = _caller.set(self)
                try:
                    done = [
                        execute_sync(item, gate.ledger, self.evidence, gate.redactor, gate.settings)
                    ]
                finally:
                    _caller.reset(token)
            else:
                done = []
        finally:
            self._leave(entered)
        return self._conclude(work, done)

    async def asubmit(
        self, calls: Iterable[ToolCall], *, deadline: float | None = None
    ) -> list[Observation]:
        """Like `submit`, on the running event loop; independent calls run concurrently.

        If the caller is cancelled, calls not yet started are recorded as
        rejected (never started), running calls as ``unknown``, and the
        cancellation propagates.
        """
        work = self._prepare(calls, deadline)
        entered = self._enter(work.admitted)
        try:
            if work.batch is not None:
                done = await run_batch_async(
                    work.batch,
                    self._execute,
                    max_concurrency=self.gate.max_concurrency,
                    deadline=work.limit,
                    on_skipped=self._skipped,
                )
            elif work.admitted:  # one call, awaited here
                item = work.admitted[0]
                item.offload = True  # a sync handler never blocks the caller's event loop
                done = [await self._execute(item)]
            else:
                done = []
        finally:
            self._leave(entered)
        return self._conclude(work, done)

    def _enter(self, admitted: Sequence[Admitted]) -> list[tuple[str, str]] | None:
        """Make this run findable by `running_run` from the handlers about to run that take
        a `CallContext` (the others cannot ask). None when there are none (the hot path)."""
        entered = None
        for item in admitted:
            if item.spec.context_param is not None:
                key = (self.state.id, item.call.id)
                _running[key] = self
                if entered is None:
                    entered = [key]
                else:
                    entered.append(key)
        return entered

    @staticmethod
    def _leave(entered: list[tuple[str, str]] | None) -> None:
        if entered is None:
            return
        for key in entered:
            _running.pop(key, None)

    def _prepare(self, calls: Iterable[ToolCall], deadline: float | None) -> _Work:
        """Everything before execution, for both drivers: admit the calls and record them,
        and say what runs: nothing, one call in place, or a batch (several calls, or a
        deadline to keep)."""
        self.gate._check_open()
        started = time.time()
        limit = self._deadline(deadline)  # a bad deadline fails before anything is decided
        calls = list(calls)  # any iterable of calls: a list, a tuple, a generator
        for call in calls:
            if not isinstance(call, ToolCall):
                raise TypeError(
                    f"submit() takes ToolCall objects, got {type(call).__name__}; "
                    "use callgate.ToolCall(id=..., name=..., arguments=...)"
                )
        lone = self._lone(calls) if limit is None else None
        if lone is not None:  # the common case: one plain call
            return _Work(
                staged=None,
                admitted=[lone] if isinstance(lone, Admitted) else [],
                rejected=None if isinstance(lone, Admitted) else lone,
                batch=None,
                limit=None,
                started=started,
            )
        staged = self._admit_batch(calls)
        admitted = [s for s in staged if isinstance(s, Admitted)]
        batch = None
        if len(admitted) > 1 or (admitted and limit is not None):
            batch = self._plan(admitted, limit)
        return _Work(
            staged=staged,
            admitted=admitted,
            rejected=None,
            batch=batch,
            limit=limit,
            started=started,
        )

    def _conclude(self, work: _Work, done: list[Observation]) -> list[Observation]:
        """Everything after execution, for both drivers: settle what ran (restore the
        model's ids, give back unused approvals) and answer in proposal order."""
        if self.gate.telemetry is not None:  # the calls that ran have their spans already
            unrun = [work.rejected] if work.rejected is not None else []
            if work.staged is not None:
                unrun = [s for s in work.staged if isinstance(s, Observation)]
                unrun += [o for o in done if o.stage is Stage.SCHEDULE]
            self._trace(unrun, work.started)
        if work.staged is None:  # a lone call
            if work.rejected is not None:
                return [work.rejected]
            item, one = work.admitted[0], done[0]
            if one.status is not Status.OK or item.answer_id is not None:
                self._settled(work.admitted, done)  # an ok call with its own id: nothing to do
            return done
        if work.admitted:
            self._settled(work.admitted, done)
        return self._merge(work.staged, done)

    def _trace(self, observations: Sequence[Observation], started: float) -> None:
        """The spans of calls settled without running (`callgate.telemetry`)."""
        telemetry = self.gate.telemetry
        if telemetry is not None and observations:
            telemetry.decided(
                self.id, observations, started, self.gate.redactor, self.state.context_secrets
            )

    def _settled(self, admitted: Sequence[Admitted], results: Sequence[Observation]) -> None:
        """After execution: answer each call under the id the model sent (`Admitted.answer_id`),
        and give back the approvals of calls stopped before their handler ran."""
        for item, obs in zip(admitted, results, strict=True):
            if item.answer_id is not None:
                obs.call_id = item.answer_id
            if obs.status is Status.ERROR:  # did not happen: the same call may run again
                self.names.errored(item.call.id)
        self._release_unrun(admitted, results)

    def _release_unrun(self, admitted: Sequence[Admitted], results: Sequence[Observation]) -> None:
        """Give back the approvals of calls that were stopped before their handler ran
        (a failed dependency, a deadline, an idempotency conflict): never used, they
        still release exactly one execution of the same call."""
        for item, obs in zip(admitted, results, strict=True):
            if (
                item.record is not None
                and item.record.approval_id is not None
                and obs.status is Status.REJECTED
            ):
                self.gate.approvals.release(
                    item.record.approval_id, used_by=f"{self.id}/{item.call.id}"
                )

    def record_rejected(self, observations: Iterable[Observation]) -> None:
        """Record rejections made before the gate (e.g. a provider's cut-off call).

        Provider adapters reject some calls before they reach `submit`
        (duplicate ids, arguments cut off by the token limit); recording them
        here keeps the ledger a complete account of what the model proposed.
        """
        observations = list(observations)
        started = time.time()
        for obs in observations:
            if obs.status is not Status.REJECTED:
                raise ValueError(
                    f"record_rejected() takes rejected observations, got {obs.status.value} "
                    f"for call {obs.call_id!r}"
                )
            spec = self.gate.registry.get(obs.tool)
            self._admission.records.record(
                ToolCall(id=obs.call_id, name=obs.tool),
                spec,
                CallState.REJECTED,
                obs.stage,
                arguments="{}",
                message=self.gate.redactor.text(obs.content),
            )
        self._trace(observations, started)

    def resume(self) -> list[Observation]:
        """Submit again the calls of this run whose approval has since been decided.

        Approved: the call runs, once (the approval is used up atomically, so a
        second resume, here or in another process, runs nothing). Denied:
        rejected at stage ``approve``. Still pending, or expired undecided:
        it stays. A call is checked again in full (policy, resource version)
        before it runs. In another process, rebuild the run with `Gate.resume_run`.
        """
        started = time.time()
        ready: list[ToolCall] = []
        withheld: list[Observation] = []
        for approval_id, call in list(self.state.pending.items()):
            request = self.gate.approvals.get(approval_id)
            if request is not None and request.status is ApprovalStatus.PENDING:
                continue
            del self.state.pending[approval_id]
            if call is not None:
                ready.append(call)
                self.state.resuming[call.id] = approval_id
            elif request is not None:
                withheld.append(self._admission.withheld(request))
        self._trace(withheld, started)
        try:
            return withheld + (self.submit(ready) if ready else [])
        finally:
            self.state.resuming.clear()

    @property
    def pending_approvals(self) -> list[str]:
        """Ids of the approval requests this run is waiting for: not one already used (the
        model proposed the call again and the approval released it under that id;
        `resume` answers the waiting call with that outcome)."""
        approvals = self.gate.approvals
        return [
            approval_id
            for approval_id in self.state.pending
            if (request := approvals.get(approval_id)) is None
            or request.status is not ApprovalStatus.USED
        ]

    # -- stages --------------------------------------------------------------

    def _deadline(self, deadline: float | None) -> float | None:
        """The batch deadline in seconds: the submit argument, else the gate's."""
        if deadline is None:
            return self.gate.batch_deadline
        if not deadline > 0:
            raise ValueError(f"deadline must be positive seconds or None, got {deadline!r}")
        return deadline

    @staticmethod
    def _plan(admitted: list[Admitted], deadline: float | None) -> Batch:
        """The batch graph; with several calls or a deadline, sync handlers go to worker
        threads (so they can run side by side, and the deadline can stop waiting)."""
        if len(admitted) > 1 or deadline is not None:
            for item in admitted:  # made for this batch: set in place
                item.offload = True
        return plan_batch(admitted)

    async def _execute(self, item: Admitted) -> Observation:
        gate = self.gate
        token = _caller.set(self)  # this task's context: what its handler sees
        try:
            return await execute_async(
                item, gate.ledger, self.evidence, gate.redactor, gate.settings
            )
        finally:
            _caller.reset(token)

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

    def _lone(self, calls: list[ToolCall]) -> Observation | Admitted | None:
        """A batch of one plain call, admitted (and recorded) or rejected; None for any
        other batch, which takes the batch path."""
        if len(calls) != 1:
            return None
        call = calls[0]
        if not call.id or call.after:
            return None
        single = self._admission.admit(call)
        if type(single) is Admitted:
            self._admission.records.record_admitted(single)
        return single

    def _admit_batch(self, calls: list[ToolCall]) -> list[Observation | Admitted]:
        """Admit each call; reject duplicates, dependency cycles and failed dependencies."""
        refusals = batch_refusals(calls, self.gate.max_batch_calls)
        admission = self._admission
        # No new name may take one of the batch's ids (`CallNames.name_for`).
        self.state.batch_ids = tuple(dict.fromkeys(call.id for call in calls))
        try:
            if len(calls) > 1 and any(intent.planned for intent in self.state.intents):
                # Every call is validated before any is decided, so that two calls competing
                # for one planned call are both seen (`Admission.contention`): neither
                # takes it. (A call rejected by validation is then recorded first.)
                validated = [
                    admission.validate(call)
                    if refusal is None
                    else admission.refused(call, refusal)
                    for call, refusal in zip(calls, refusals, strict=True)
                ]
                self.state.contended = admission.contention(validated)
                staged = [
                    admission.decide(call, item)
                    for call, item in zip(calls, validated, strict=True)
                ]
            else:
                staged = [
                    admission.admit(call) if refusal is None else admission.refused(call, refusal)
                    for call, refusal in zip(calls, refusals, strict=True)
                ]
        finally:
            self.state.batch_ids = ()
            self.state.contended = {}
        if any(c.after for c in calls):
            reject_dependents(staged, self._dependency_failed)
            follow_renames(staged)
        for item in staged:
            if isinstance(item, Admitted):
                self._admission.records.record_admitted(item)
        return staged

    def _dependency_failed(self, item: Admitted, obs: Observation) -> None:
        """Record an admitted call the schedule stage rejected because a call it depends on
        was not admitted, and give back its approval."""
        self._release_unrun([item], [obs])
        self._admission.records.record(
            item.call,
            item.spec,
            CallState.REJECTED,
            Stage.SCHEDULE,
            arguments=item.record.arguments if item.record else "{}",
            message=obs.content,
        )

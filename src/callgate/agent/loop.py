"""The agent loop: the model proposes, the gate decides, observations go back.

```python
agent = Agent(model, gate, budgets=Budgets(steps=12))
result = agent.run("Where is my order o-1?", authority=authority)
if result.paused:                       # a call waits for a person's approval
    gate.approvals.approve(result.pending_approvals[0], by="lead@shop")
    result = agent.resume(result)       # the approved call runs once; the model goes on
print(result.reason, result.answer)
```

Each step shows the model only the tools this run's authority could use
(`callgate.agent.exposure`), calls it, extracts the calls in its provider
format, submits them through the run (`Run.asubmit`), bounds each result
(`callgate.agent.paging`), decides in trusted code what happens next
(`callgate.agent.triage`), and sends the observations back, until the model
answers without calls or a budget ends the run. Every step is recorded in
the ledger under the run id (`callgate.agent.transcript`); the run's records
are in `callgate.agent.state`. The loop is written once, async; ``run`` and
``resume`` drive it on the calling thread's own event loop, kept between calls
(`callgate.sync_loop`), so a model's SDK client, bound to the loop it first ran
on, serves every run of that thread (in async code, use ``arun`` and ``aresume``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import anyio
import anyio.to_thread

from callgate.agent.exposure import exposed_tools
from callgate.agent.paging import (
    READ_RESULT,
    READ_RESULT_EFFECT,
    READ_RESULT_SPEC,
    ResultStore,
    paging_registry,
    store_context,
)
from callgate.agent.planning import PLAN_SPEC, plan_instruction, read_plan
from callgate.agent.state import AgentResult, Budgets, HeldBatch, RunState, StopReason
from callgate.agent.transcript import Recorder, TranscriptEntry
from callgate.agent.triage import Oscillation, boundary_rule
from callgate.authorize.intent import Intent
from callgate.authorize.policy import Authority
from callgate.calls import Observation, Provenance, Status, ToolCall
from callgate.errors import DefinitionError
from callgate.gate import Gate
from callgate.llms.base import Model, ModelRequest, ModelResponse
from callgate.llms.formats import Format, get_format
from callgate.providers.base import Extraction
from callgate.sync_loop import run_sync
from callgate.telemetry import provider_name, traced_agent, traced_chat

__all__ = ["Agent", "AgentResult", "Budgets", "StopReason"]

_Exported = dict[tuple[Any, ...], tuple[list[dict[str, Any]], list[str]]]
_EXPORTED: weakref.WeakKeyDictionary[Gate, _Exported] = weakref.WeakKeyDictionary()
"""Exported tool definitions per gate, shared by its agents: exporting a registry costs
more than a whole turn, and agents are often made one per request."""
_EXPORTED_PER_GATE = 256


class Agent:
    """The model/tool loop over one gate; see the module docstring.

    Args:
        model: the model adapter (`callgate.llms`).
        gate: the gate every proposed call goes through.
        budgets: the run's limits (`Budgets`).
        system: the default system prompt (trusted text of every run).
        repeat_limit: the same failing call this many times ends the run.
        result_chars: an ``ok`` result longer than this reaches the model cut,
            with a handle to page through the rest.
        paging: offer the built-in ``read_result`` tool for cut results.
        halt_on_boundary: end the run at the first attempted crossing of the
            authority boundary (it is always recorded as ``security.boundary``).
        on_event: called with every transcript entry as it is recorded
            (progress displays, live transcripts).
        plan_first: begin every run with a planning turn: the model, having seen
            only the system prompt and the user's message, names the tools it will
            use, and they become the run's intent (`callgate.agent.planning`).
        name: the agent's name in traces (``gen_ai.agent.name``; default ``callgate``).
    """

    def __init__(
        self,
        model: Model,
        gate: Gate,
        *,
        budgets: Budgets | None = None,
        system: str | None = None,
        repeat_limit: int = 3,
        result_chars: int = 4000,
        paging: bool = True,
        halt_on_boundary: bool = False,
        on_event: Callable[[TranscriptEntry], None] | None = None,
        plan_first: bool = False,
        name: str = "callgate",
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise DefinitionError(f"Agent name must be a non-empty string, got {name!r}")
        self.name = name
        if not isinstance(model, Model):
            raise DefinitionError(f"Agent needs a callgate.llms.Model, got {type(model).__name__}")
        if not isinstance(gate, Gate):
            raise DefinitionError(f"Agent needs a Gate, got {type(gate).__name__}")
        if isinstance(repeat_limit, bool) or not isinstance(repeat_limit, int) or repeat_limit < 2:
            raise DefinitionError(f"repeat_limit must be an integer >= 2, got {repeat_limit!r}")
        if result_chars < 500:
            raise DefinitionError(f"result_chars must be at least 500, got {result_chars}")
        if paging and READ_RESULT in gate.registry:
            raise DefinitionError(
                f"the registry has a tool named {READ_RESULT!r}, the name of the agent's "
                "built-in paging tool; rename it or pass paging=False"
            )
        self.model = model
        self.gate = gate
        self.format: Format = get_format(model.format)
        self.budgets = budgets if budgets is not None else Budgets()
        self.system = system
        self.repeat_limit = repeat_limit
        self.result_chars = result_chars
        self.halt_on_boundary = halt_on_boundary
        self.on_event = on_event
        self.plan_first = plan_first
        self._paging_gate: Gate | None = None
        if paging:
            self._paging_gate = Gate(
                paging_registry(),
                ledger=gate.ledger,
                approvals=gate.approvals,
                telemetry=gate.telemetry,
            )
            self._paging_gate.redactor = gate.redactor
        self._secret_tools = {s.name: s.secret_fields for s in gate.registry if s.secret_fields}
        self._tools = _EXPORTED.setdefault(gate, {})

    # -- public ----------------------------------------------------------------------

    def tools_for(self, authority: Authority) -> list[str]:
        """The names of the tools a run with this authority is shown (least privilege)."""
        return list(self._tool_definitions(authority)[1])

    def run(
        self,
        user_message: str,
        *,
        authority: Authority,
        system: str | None = None,
        run_id: str | None = None,
        intent: Intent | None = None,
        plan_first: bool | None = None,
        trusted_values: Iterable[Any] = (),
        trusted_records: Iterable[tuple[Mapping[str, Any], Mapping[str, str] | None]] = (),
    ) -> AgentResult:
        """Run the loop to an answer, a pause or a budget; see `arun`."""
        call = functools.partial(
            self.arun,
            user_message,
            authority=authority,
            system=system,
            run_id=run_id,
            intent=intent,
            plan_first=plan_first,
            trusted_values=trusted_values,
            trusted_records=trusted_records,
        )
        return run_sync(call)

    async def arun(
        self,
        user_message: str,
        *,
        authority: Authority,
        system: str | None = None,
        run_id: str | None = None,
        intent: Intent | None = None,
        plan_first: bool | None = None,
        trusted_values: Iterable[Any] = (),
        trusted_records: Iterable[tuple[Mapping[str, Any], Mapping[str, str] | None]] = (),
    ) -> AgentResult:
        """Start a run for ``user_message`` under ``authority``.

        The user's message and the system prompt are the run's trusted text
        (sink arguments may come from them), and so are ``trusted_values`` (values the
        application vouches for) and ``trusted_records`` (``(record, kinds)`` pairs: its
        address book or saved payees, whole, `Run.trust_record`). ``intent``: what the
        request needs (`callgate.authorize.intent`); ``plan_first`` (default: the
        agent's) adds the model's own plan to it. Never raises because of what the
        model sent or a tool did; `AgentResult.reason` says how it ended.
        """
        state = self._start(user_message, authority, system, run_id, intent, trusted_values)
        for record, kinds in trusted_records:
            state.run.trust_record(record, kinds)
        state.planning = self.plan_first if plan_first is None else plan_first
        drive = functools.partial(self._drive, state, None)
        telemetry = self.gate.telemetry
        return await traced_agent(
            telemetry,
            drive,
            model=self.model.name,
            run_id=state.run.id,
            provider=provider_name(self.model),
            agent=self.name,
        )

    def resume(self, result: AgentResult) -> AgentResult:
        """Continue a paused run once its approvals are decided; see `aresume`."""
        return run_sync(functools.partial(self.aresume, result))

    async def aresume(self, result: AgentResult) -> AgentResult:
        """Continue a paused run: decided calls run (approved) or are refused (denied),
        then the whole paused batch goes back to the model.

        Calls of the batch that already ran are not run again, and the model is
        not asked again for the paused calls. If some approvals are still
        pending, the result is paused again and nothing is sent to the model.
        """
        state = result._state
        if state is None or state.finished or state.held is None:
            raise ValueError(
                f"run {result.run_id} is not paused (it ended: {result.reason.value}); "
                "only a result whose .paused is True can be resumed"
            )
        drive = functools.partial(self._drive, state, state.held)
        telemetry = self.gate.telemetry
        return await traced_agent(
            telemetry,
            drive,
            model=self.model.name,
            run_id=state.run.id,
            provider=provider_name(self.model),
            agent=self.name,
        )

    # -- the loop ------------------------------------------------------------------------

    def _start(
        self,
        user_message: str,
        authority: Authority,
        system: str | None,
        run_id: str | None,
        intent: Intent | None = None,
        trusted_values: Iterable[Any] = (),
    ) -> RunState:
        system = system if system is not None else self.system
        trusted = [text for text in (system, user_message) if text]
        run = self.gate.run(
            authority=authority,
            run_id=run_id,
            trusted=trusted,
            trusted_values=trusted_values,
            intent=intent,
        )
        tools, names = self._tool_definitions(authority)
        first = self.format.user(user_message)
        state = RunState(
            run=run,
            record=Recorder(self.gate.ledger, run.id, self.gate.redactor, self.on_event),
            pager=ResultStore(self.gate.ledger, run.id, self.result_chars),
            system=system,
            tools=tools,
            messages=[first],
            oscillation=Oscillation(self.repeat_limit),
        )
        state.record.started(
            model=self.model.name,
            format=self.format.name,
            principal=authority.principal,
            system=system,
            user=user_message,
            tools=names,
            budgets=dataclasses.asdict(self.budgets),
            messages=[first],
        )
        return state

    async def _drive(self, state: RunState, held: HeldBatch | None) -> AgentResult:
        state.since = time.perf_counter()
        try:
            if held is not None:
                ended = await self._resume_held(state, held)
                if ended is not None:
                    return ended
            if state.planning:
                state.planning = False
                ended = await self._plan(state)
                if ended is not None:
                    return ended
            while True:
                ended = await self._step(state)
                if ended is not None:
                    return ended
        finally:
            state.active += time.perf_counter() - state.since

    async def _plan(self, state: RunState) -> AgentResult | None:
        """The planning turn (`callgate.agent.planning`): the model names the tools it will
        use, seeing only trusted input; the run is narrowed to them. Nothing runs."""
        names = [n for n in self._tool_definitions(state.run.authority)[1] if n != READ_RESULT]
        state.steps += 1
        request = ModelRequest(
            system=plan_instruction(state.system, names, self.gate.registry),
            messages=list(state.messages),
            tools=self.format.tool_definitions([PLAN_SPEC]),
            format=self.format.name,
            step=state.steps,
        )
        complete = functools.partial(
            traced_chat,
            self.gate.telemetry,
            functools.partial(self.model.complete, request),
            model=self.model.name,
            provider=provider_name(self.model),
            format=self.format.name,
            run_id=state.run.id,
            step=state.steps,
        )
        remaining = self._remaining(state)
        response: ModelResponse | None = None
        try:
            if remaining is None:
                response = await complete()
            else:
                with anyio.move_on_after(max(remaining, 0.001)):
                    response = await complete()
        except Exception as exc:
            detail = f"planning turn: {type(exc).__name__}: {exc}"
            return self._stop(state, StopReason.MODEL_ERROR, detail, error=exc)
        if response is None:
            return self._stop(state, StopReason.MAX_SECONDS, "the model did not plan in time")
        if response.usage is not None:
            state.usage = state.usage + response.usage
        extraction = self.format.extract(response.raw)
        plan = read_plan(extraction, names, self.gate.registry)
        state.run.narrow(plan.intent)
        state.record(
            "agent.plan",
            {
                "step": state.steps,
                "tools": list(plan.intent.tools),
                "arguments": {t: dict(c) for t, c in plan.intent.arguments.items()},
                "ignored": list(plan.ignored),
                "calls": [c.as_record() for c in plan.intent.planned],
                "errors": list(plan.errors),
                "read": plan.read,
                "text": extraction.text,
            },
        )
        return None

    async def _step(self, state: RunState) -> AgentResult | None:
        """One model call and its batch; a result when the run ends or pauses."""
        budgets = self.budgets
        if state.steps >= budgets.steps:
            return self._stop(state, StopReason.MAX_STEPS, f"{budgets.steps} model calls made")
        if budgets.tokens is not None and state.usage.total >= budgets.tokens:
            return self._stop(
                state, StopReason.MAX_TOKENS, f"{state.usage.total} of {budgets.tokens} tokens used"
            )
        state.steps += 1
        step = state.steps
        request = ModelRequest(
            system=state.system,
            messages=state.messages,
            tools=state.tools,
            format=self.format.name,
            step=step,
        )
        remaining = self._remaining(state)
        if remaining is not None and remaining <= 0:
            return self._stop(state, StopReason.MAX_SECONDS, f"{budgets.seconds:g} s of work used")
        try:
            response: ModelResponse | None = None
            complete = functools.partial(
                traced_chat,
                self.gate.telemetry,
                functools.partial(self.model.complete, request),
                model=self.model.name,
                provider=provider_name(self.model),
                format=self.format.name,
                run_id=state.run.id,
                step=step,
            )
            if remaining is None:
                response = await complete()
            else:
                with anyio.move_on_after(remaining):
                    response = await complete()
        except Exception as exc:
            detail = f"step {step}: {type(exc).__name__}: {exc}"
            return self._stop(state, StopReason.MODEL_ERROR, detail, error=exc)
        if response is None:
            return self._stop(
                state, StopReason.MAX_SECONDS, f"the model did not answer within {remaining:.1f} s"
            )
        if response.usage is not None:
            state.usage = state.usage + response.usage
        fmt = self.format
        extraction = fmt.extract(response.raw)
        turn = fmt.assistant(response.raw)
        state.messages.extend(turn)
        secrets = self._secrets(extraction) if self._secret_tools else ()
        state.record.model_turn(step, turn, extraction, response.usage, secrets)
        if not extraction.items:
            if extraction.refusal:
                return self._stop(
                    state, StopReason.REFUSED, "the model refused", answer=extraction.refusal
                )
            if extraction.truncated:
                detail = "the answer was cut off by the model's output limit"
                return self._stop(state, StopReason.TRUNCATED, detail, answer=extraction.text)
            return self._stop(
                state, StopReason.ANSWERED, "the model answered", answer=extraction.text
            )
        proposed = len(extraction.items)
        if state.tool_calls + proposed > budgets.tool_calls:
            detail = (
                f"step {step} proposed {proposed} calls and {state.tool_calls} of the "
                f"{budgets.tool_calls} allowed were used; the batch was not run"
            )
            return self._stop(state, StopReason.MAX_TOOL_CALLS, detail)
        state.tool_calls += proposed
        rejected = extraction.rejected
        if rejected:
            state.run.record_rejected(rejected)
        submitted = await self._submit(state, extraction)
        if submitted is None:
            detail = f"the calls of step {step} did not finish within {budgets.seconds:g} s"
            return self._stop(state, StopReason.MAX_SECONDS, detail)
        calls, batch = submitted
        return self._answer(state, HeldBatch(step, calls, batch), range(len(batch)))

    async def _submit(
        self, state: RunState, extraction: Extraction
    ) -> tuple[dict[str, ToolCall], list[Observation]] | None:
        """Run the batch's calls; the calls by ledger id and one observation per item, in order.

        A call id the model already used earlier in the run gets a new ledger id
        (``id~step``), so that it is not taken for the earlier call; the model
        reads its own id back. None when the time budget ran out mid-batch.
        """
        calls: dict[str, ToolCall] = {}
        gated: list[ToolCall] = []
        builtin: list[ToolCall] = []
        for call in extraction.calls:
            if call.id in state.seen_ids:
                ledger_id = f"{call.id}~{state.steps}"
                state.model_ids[ledger_id] = call.id
                call = dataclasses.replace(call, id=ledger_id)
            state.seen_ids.add(call.id)
            calls[call.id] = call
            paged = call.name == READ_RESULT and self._paging_gate is not None
            (builtin if paged else gated).append(call)
        remaining = self._remaining(state)
        results: list[Observation] = []
        if remaining is None:
            results = await self._execute(state, gated, builtin)
        else:
            with anyio.move_on_after(max(remaining, 0.001)) as scope:
                results = await self._execute(state, gated, builtin)
            if scope.cancelled_caught:
                return None
        by_id = {obs.call_id: obs for obs in results}
        ids = iter(calls)
        batch = [
            by_id[next(ids)] if isinstance(item, ToolCall) else item for item in extraction.items
        ]
        return calls, batch

    async def _execute(
        self, state: RunState, gated: list[ToolCall], builtin: list[ToolCall]
    ) -> list[Observation]:
        results = await state.run.asubmit(gated) if gated else []
        if builtin:
            if state.paging is None:
                assert self._paging_gate is not None
                authority = Authority(
                    principal=state.run.authority.principal,
                    grants=[READ_RESULT_EFFECT],
                    context=store_context(state.pager),
                )
                # A run id of its own: its authority's scope (the result store) is not the
                # run's, and a run id belongs to one principal and scope (docs/ledger.md).
                state.paging = self._paging_gate.run(
                    authority=authority, run_id=f"{state.run.id}~paging"
                )
            results = [*results, *await state.paging.asubmit(builtin)]
        return results

    def _answer(self, state: RunState, held: HeldBatch, fresh: Sequence[int]) -> AgentResult | None:
        """Decide on the fresh observations of a batch, then pause, stop, or send it back."""
        stop: tuple[StopReason, str] | None = None
        untrusted_before = state.read_untrusted
        for index in fresh:
            obs = state.pager.bound(held.batch[index])
            held.batch[index] = obs
            state.observations.append(obs)
            rule = boundary_rule(obs, untrusted_before)
            if rule is not None:
                state.record.boundary(obs, rule, untrusted_before, state.untrusted_calls[-5:])
                if self.halt_on_boundary and stop is None:
                    stop = (StopReason.SECURITY, f"call {obs.call_id} ({obs.tool}): {rule}")
            call = held.calls.get(obs.call_id)
            repeated = state.oscillation.see(call, obs) if call is not None else None
            if repeated is not None and stop is None:
                stop = (StopReason.OSCILLATION, repeated)
            if obs.status is Status.UNKNOWN and self._side_effecting(obs.tool) and stop is None:
                stop = (
                    StopReason.UNRESOLVED,
                    f"call {obs.call_id} ({obs.tool}) ended unknown and could not be reconciled: "
                    "a person must settle it in the ledger before anything else is tried",
                )
            if obs.status is Status.OK and obs.provenance is Provenance.UNTRUSTED:
                state.read_untrusted = True
                state.untrusted_calls.append(obs.call_id)
        waiting = [o for o in held.batch if o.status is Status.PENDING]
        if waiting and stop is None:
            state.held = held
            state.record.paused(held.step, waiting)
            ids = ", ".join(str(o.approval_id) for o in waiting)
            return self._result(state, StopReason.AWAITING_APPROVAL, f"awaiting approval: {ids}")
        state.held = None
        shown = [self._as_model_sees(state, o) for o in held.batch]
        messages = self.format.render(shown)
        state.messages.extend(messages)
        state.record.observations(held.step, held.batch, messages)
        return self._stop(state, *stop) if stop is not None else None

    async def _resume_held(self, state: RunState, held: HeldBatch) -> AgentResult | None:
        pending = {o.approval_id: o for o in held.batch if o.status is Status.PENDING}
        approvals = self.gate.approvals
        decided = await anyio.to_thread.run_sync(state.run.resume)
        by_id = {obs.call_id: obs for obs in decided}
        fresh = [i for i, o in enumerate(held.batch) if o.call_id in by_id]
        for index in fresh:
            held.batch[index] = by_id[held.batch[index].call_id]
        decisions = []
        for approval_id, obs in pending.items():
            request = approvals.get(approval_id) if approval_id else None
            status = request.status.value if request else "missing"
            decisions.append(
                {
                    "approval_id": approval_id,
                    "call_id": obs.call_id,
                    "status": "approved" if status == "used" else status,
                    "decided_by": request.decided_by if request else None,
                    "reason": request.reason if request else None,
                }
            )
        state.record.resumed(held.step, decisions)
        return self._answer(state, held, fresh)

    # -- helpers ---------------------------------------------------------------------------

    def _tool_definitions(self, authority: Authority) -> tuple[list[dict[str, Any]], list[str]]:
        # The registry may change between runs (a live MCP registry): key on its contents.
        key = (
            self.format.name,
            self._paging_gate is not None,
            tuple(g if isinstance(g, str) else g.text for g in authority.grants),
            self.gate.policy.version,
            tuple((spec.name, spec.version) for spec in self.gate.registry),
        )
        cached = self._tools.get(key)
        if cached is None:
            specs = exposed_tools(self.gate.registry, authority, self.gate.policy)
            if self._paging_gate is not None:
                specs.append(READ_RESULT_SPEC)
            cached = (self.format.tool_definitions(specs), [s.name for s in specs])
            if len(self._tools) >= _EXPORTED_PER_GATE:  # many distinct authorities: start over
                self._tools.clear()
            self._tools[key] = cached
        return cached

    def _remaining(self, state: RunState) -> float | None:
        if self.budgets.seconds is None:
            return None
        return self.budgets.seconds - state.active - (time.perf_counter() - state.since)

    def _side_effecting(self, tool: str) -> bool:
        spec = self.gate.registry.get(tool)
        return spec is not None and spec.side_effecting

    def _as_model_sees(self, state: RunState, obs: Observation) -> Observation:
        original = state.model_ids.get(obs.call_id)
        return obs if original is None else dataclasses.replace(obs, call_id=original)

    def _secrets(self, extraction: Extraction) -> list[str]:
        """Values of secret arguments in the model's turn, to scrub from the transcript."""
        found: list[str] = []
        for call in extraction.calls:
            fields = self._secret_tools.get(call.name)
            if not fields:
                continue
            arguments: Any = call.arguments
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    continue
            if isinstance(arguments, Mapping):
                found.extend(str(arguments[f]) for f in fields if arguments.get(f) is not None)
        return found

    def _stop(
        self,
        state: RunState,
        reason: StopReason,
        detail: str,
        *,
        answer: str = "",
        error: BaseException | None = None,
    ) -> AgentResult:
        state.finished = True
        state.record.stopped(
            reason=reason.value,
            detail=detail,
            answer=answer,
            steps=state.steps,
            tool_calls=state.tool_calls,
            usage=dataclasses.asdict(state.usage),
        )
        return self._result(state, reason, detail, answer=answer, error=error)

    @staticmethod
    def _result(
        state: RunState,
        reason: StopReason,
        detail: str,
        *,
        answer: str = "",
        error: BaseException | None = None,
    ) -> AgentResult:
        held = state.held
        pending = (
            tuple(str(o.approval_id) for o in held.batch if o.status is Status.PENDING)
            if held is not None and not state.finished
            else ()
        )
        return AgentResult(
            run_id=state.run.id,
            reason=reason,
            detail=detail,
            answer=answer,
            steps=state.steps,
            tool_calls=state.tool_calls,
            usage=state.usage,
            elapsed=state.active + (time.perf_counter() - state.since),
            observations=tuple(state.observations),
            pending_approvals=pending,
            messages=list(state.messages),
            error=error,
            _state=state,
        )

"""The schedule stage's checks on a whole batch, and the rejections it writes.

Before any call of a batch is decided on its own, the batch itself is checked: every
call needs an id of its own (a missing or repeated id is refused at ``parse``, see
`callgate.parse.bad_call_id`), ``after`` dependencies must not form a cycle (then
nothing runs), and at most the gate's ``max_batch_calls`` calls are taken. After the
calls are admitted, a call whose ``after`` names a call that was not admitted is
rejected, and ``after`` follows the names calls are recorded under. While the batch
runs, the runner (`callgate.schedule.run`) writes the rejections of calls it never
starts and the observations of calls the deadline cut off.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from callgate.calls import Observation, Stage, Status, ToolCall
from callgate.execute import Admitted, may_retry
from callgate.parse import bad_call_id
from callgate.render import Problem, Rejection, bounded
from callgate.schedule.plan import find_cycle

__all__ = [
    "BatchRefusal",
    "batch_refusals",
    "cancelled_at_deadline",
    "dependency_failed",
    "follow_renames",
    "not_started",
    "reject_dependents",
]


@dataclass(frozen=True, slots=True)
class BatchRefusal:
    """A call the batch it came in refuses before it is decided on its own."""

    rejection: Rejection
    recorded: bool
    """Whether it is recorded as the call's decision: not for a missing or repeated id,
    which names no one call (the refusal is audited instead)."""


def batch_refusals(calls: Sequence[ToolCall], max_batch_calls: int) -> list[BatchRefusal | None]:
    """Each call's refusal by its batch, in proposal order (None: decide it on its own): a
    missing or repeated id; every call, when ``after`` dependencies form a cycle; each
    call after the first ``max_batch_calls``."""
    counts = Counter(call.id for call in calls)
    cycle = find_cycle(calls)
    refusals: list[BatchRefusal | None] = []
    for index, call in enumerate(calls):
        if counts[call.id] > 1 or not call.id:
            refusals.append(BatchRefusal(bad_call_id(call.id), recorded=False))
        elif cycle:
            refusals.append(BatchRefusal(_cycle(call, cycle), recorded=True))
        elif index >= max_batch_calls:
            refusals.append(BatchRefusal(_too_many(len(calls), max_batch_calls), recorded=True))
        else:
            refusals.append(None)
    return refusals


def _cycle(call: ToolCall, cycle: Sequence[str]) -> Rejection:
    """A cycle of ``after`` dependencies rejects the whole batch: nothing runs."""
    path = " -> ".join(bounded(c, 80) for c in [*cycle, cycle[0]])
    if call.id in cycle:
        text = f"the calls' 'after' dependencies form a cycle: {path}"
    else:
        text = f"the batch was not run because its 'after' dependencies form a cycle: {path}"
    return Rejection(
        stage=Stage.SCHEDULE,
        problems=(Problem(rule="dependency_cycle", message=text),),
        advice="Nothing in this batch was executed. Send the calls again without the cycle.",
    )


def _too_many(proposed: int, limit: int) -> Rejection:
    """A call beyond the gate's per-batch bound: rejected, never silently dropped."""
    return Rejection(
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


def reject_dependents(
    staged: list[Observation | Admitted], settle: Callable[[Admitted, Observation], None]
) -> None:
    """Replace in ``staged`` each admitted call whose ``after`` names a call of the batch
    that was not admitted (or was itself replaced so) by its rejection, answered under
    the id the model sent; ``settle`` records each (and gives back its approval)."""
    changed = True
    while changed:
        changed = False
        failed = {s.call_id: s for s in staged if isinstance(s, Observation)}
        for i, item in enumerate(staged):
            if isinstance(item, Admitted):
                dep = next((failed[d] for d in item.call.after if d in failed), None)
                if dep is not None:
                    obs = dependency_failed(item, dep)
                    obs.call_id = item.answer_id or item.call.id
                    settle(item, obs)
                    staged[i] = obs
                    changed = True


def follow_renames(staged: list[Observation | Admitted]) -> None:
    """Point ``after`` at the names calls are recorded under, where the run gave a call a
    new one (`callgate.gate.call_names`): the batch is planned by those names."""
    names = {
        s.answer_id: s.call.id
        for s in staged
        if isinstance(s, Admitted) and s.answer_id is not None
    }
    if not names:
        return
    for s in staged:
        if isinstance(s, Admitted) and any(d in names for d in s.call.after):
            s.call = dataclasses.replace(s.call, after=tuple(names.get(d, d) for d in s.call.after))


# -- observations the scheduler writes ----------------------------------------


def _schedule_rejection(
    item: Admitted, problem: Problem, advice: str, details: dict[str, object]
) -> Observation:
    rejection = Rejection(stage=Stage.SCHEDULE, problems=(problem,), advice=advice)
    return Observation(
        call_id=item.call.id,
        tool=item.spec.name,
        status=Status.REJECTED,
        stage=Stage.SCHEDULE,
        content=rejection.message,
        retryable=True,
        tool_version=item.spec.version,
        repaired=item.call.repaired,
        details=({**problem.as_dict(), **details},),
    )


def dependency_failed(item: Admitted, dep: Observation) -> Observation:
    """The rejection of a call whose data dependency did not succeed."""
    return _schedule_rejection(
        item,
        Problem(
            rule="dependency_failed",
            message=f"this call depends on call '{dep.call_id}' ({dep.tool}), which ended "
            f"'{dep.status.value}'",
        ),
        "Nothing was executed for this call. Resolve that call first, then send this one again.",
        {"dependency": dep.call_id},
    )


def not_started(item: Admitted, *, deadline: float | None) -> Observation:
    """The rejection of a call that never started: deadline passed, or batch cancelled."""
    if deadline is not None:
        problem = Problem(
            rule="batch_deadline",
            message=f"the batch deadline of {deadline:g} s passed before this call could start",
        )
        advice = (
            "Nothing was executed for this call. Send it again if it is still needed, "
            "in a smaller batch or after the calls it waited for."
        )
    else:
        problem = Problem(
            rule="batch_cancelled",
            message="the batch was cancelled before this call could start",
        )
        advice = "Nothing was executed for this call. Send it again if it is still needed."
    return _schedule_rejection(item, problem, advice, {})


def cancelled_at_deadline(item: Admitted, deadline: float) -> Observation:
    """The observation of a call that was still running when the batch deadline passed."""
    spec = item.spec
    if spec.side_effecting:
        tail = (
            "The outcome is unknown: the effect may have happened. "
            "Do not repeat this call; check the current state first."
        )
    else:
        tail = "The outcome is unknown; this tool only reads, so retrying is safe."
    return Observation(
        call_id=item.call.id,
        tool=spec.name,
        status=Status.UNKNOWN,
        stage=Stage.EXECUTE,
        content=f"the batch deadline of {deadline:g} s passed while this call was running, "
        f"so it was cancelled. {tail}",
        retryable=may_retry(spec, Status.UNKNOWN),
        tool_version=spec.version,
        repaired=item.call.repaired,
        details=({"rule": "batch_deadline", "deadline": deadline},),
    )

"""The grammar decision from the record: is constraining worth it, ``p_f·c_r > c_g + q``?

Read from a ledger's audit trail, per model and tool set (the tools shown in
the run's ``agent.started`` event):

* **p_f**, the parse-failure rate of *unconstrained* decoding: calls rejected
  at the ``parse`` or ``schema`` stage over calls proposed, with a 95 %
  Wilson interval;
* **c_r**, the cost of a retry: the seconds (and tokens) of the model turn
  that followed an observation holding such a rejection, from the
  transcript's timestamps and usage; with no rejection on record, the mean
  model turn stands in (and the report says so);
* **c_g**, the cost of constraining per model call: the time spent masking
  plus the grammar's compile time shared out over the calls that used it,
  from ``model.decode`` events (`callgate.llms.local.record_decodes`), plus
  the extra decode time per call against the unconstrained runs when both
  exist;
* **q**, the grammar tax: the success rate of unconstrained runs minus that
  of constrained runs on the same tasks (``eval.graded`` events pair them by
  task), times the value of a success in seconds (``success_value``); with
  no grades, a run succeeds when at least one of its calls ended ``ok``.

A lab's runs (`callgate.eval.lab`: ``eval.run`` names the task and the lab,
``eval.verdict`` holds the verifier's verdict, ``model.decode`` the decodes)
are read the same way: a run's success is its verifier's verdict (or its
``eval.graded`` grade), never "a call ended ok"; a run with neither has no
success and stays out of q. ``decide(records, labs=[...])`` keeps the runs of
the labs named (a free lab and a constrained lab of one model).

Runs that never ended (no ``agent.stopped``: a process killed mid-run) are
left out; a task run more than once counts its last run when pairing.

The unit of every term is the task: calls of one task are not independent, so
p_f (over calls), c_r, c_g and q all have a percentile bootstrap over tasks
(p_f over tasks, one first turn each, has its Wilson interval; the two sides
are combined by interval arithmetic). No interval is drawn from fewer than
`MIN_TASKS` tasks: a term with fewer makes the verdict "not enough data",
naming how many more tasks (runs) it needs. Otherwise the verdict is one of
"constrain", "do not constrain" or "undecided", with the break-even value of
a success. A term that cannot be measured at all is named, never guessed.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, overload

from callgate.eval import stats
from callgate.eval.intervals import Interval, clustered, wilson

__all__ = [
    "DECODE_EVENT",
    "GRADE_EVENT",
    "MIN_TASKS",
    "Decision",
    "Interval",
    "decide",
    "decisions_json",
    "wilson",
]

DECODE_EVENT = "model.decode"
"""One model call's decode timings (`callgate.llms.local.DecodeStats`)."""
GRADE_EVENT = "eval.graded"
"""A run's grade: ``{"task": id, "success": bool}``."""
_SHAPE_STAGES = frozenset({"parse", "schema"})
"""Where a call of the wrong shape is rejected, as older ledgers name the stages; a newer one
records ``validate`` for the schema and the tool's own checks, told apart by the rule
(`_shape_failure`)."""
MIN_TASKS = 5
"""The fewest tasks a term's interval is drawn from; below it the verdict is "not enough
data" (a bootstrap over 1 to 4 units gives intervals far narrower than the truth)."""
_EVAL_RUN = "eval.run"
_EVAL_VERDICT = "eval.verdict"


class _Record(Protocol):
    """What is read of an audit record (`callgate.ledger.AuditRecord` has it)."""

    @property
    def kind(self) -> str: ...
    @property
    def run_id(self) -> str: ...
    @property
    def at(self) -> float: ...
    @property
    def data(self) -> Mapping[str, Any]: ...


@dataclass(slots=True)
class _Run:
    run_id: str
    model: str
    mode: str
    tools: tuple[str, ...]
    task: str
    proposed: int = 0
    shape_failures: int = 0
    turns: list[tuple[float, dict[str, float]]] = field(default_factory=list)  # (seconds, usage)
    retry_turns: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    decodes: list[Mapping[str, Any]] = field(default_factory=list)
    ok_calls: int = 0
    graded: bool | None = None
    expected: str | None = None
    """The tool a graded task expected, ``""`` for a lab task (it needs calls, of any tool),
    None where no call was expected of the run."""
    ended: bool = False
    first_calls: int | None = None
    failures_by_step: dict[int, int] = field(default_factory=dict)
    lab: str = ""

    @property
    def cut_off(self) -> int:
        """Parse and schema failures in turns that ran out of output tokens (``max_tokens``)."""
        steps = {d.get("step") for d in self.decodes if d.get("stopped") == "length"}
        return sum(n for step, n in self.failures_by_step.items() if step in steps)

    @property
    def first_turn_failed(self) -> bool:
        """The first turn should have called and did not produce a well-formed call: it
        proposed none, or one was rejected at parse or schema."""
        return not self.first_calls or self.failures_by_step.get(1, 0) > 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """The decision rule's terms and verdict for one model and tool set."""

    model: str
    tools: tuple[str, ...]
    runs: Mapping[str, int]
    """Runs per decoding mode (``none``, ``llguidance``, ``gbnf``...)."""
    proposed: int
    shape_failures: int
    p_f: Interval
    p_f_unit: str
    """What p_f counts: calls over proposals, or (graded tasks that expected a call)
    first turns without a well-formed call over tasks."""
    c_r: Interval | None
    c_r_source: str
    c_r_tokens: Interval | None
    c_g: Interval | None
    c_g_parts: Mapping[str, float]
    success: Mapping[str, Interval]
    paired_tasks: int
    q_rate: Interval | None
    success_value: float
    constrained_mode: str
    failure_rates: Mapping[str, Interval]
    """Parse-and-schema failures over calls proposed, per mode."""
    cut_off: Mapping[str, int]
    """Of those failures, per mode, the ones in turns cut off at the output token limit:
    a grammar cannot help a call that is not finished."""
    verdict: str
    reason: str
    break_even: float | None
    """The value of a success (seconds) at which the verdict would flip, when one exists."""
    units: Mapping[str, int] = field(default_factory=dict)
    """Tasks behind each term (p_f, c_r, c_g, q): the unit every interval resamples."""

    @property
    def lhs(self) -> Interval | None:
        """p_f·c_r: the expected retry cost per call without constraining."""
        return None if self.c_r is None else self.p_f.times(self.c_r)

    @property
    def rhs(self) -> Interval | None:
        """c_g + q: the cost per call of constraining."""
        if self.c_g is None:
            return None
        return self.c_g + (self.q or Interval(0.0, 0.0, 0.0))

    @property
    def q(self) -> Interval | None:
        """The grammar tax in seconds per call: success-rate loss × the value of a success."""
        return None if self.q_rate is None else self.q_rate.scaled(self.success_value)

    def as_dict(self) -> dict[str, Any]:
        """The decision as plain data (``--json``)."""

        def iv(x: Interval | None) -> list[float | None] | None:
            if x is None:
                return None
            return [None if math.isnan(v) else v for v in (x.value, x.low, x.high)]

        return {
            "model": self.model,
            "tools": list(self.tools),
            "runs": dict(self.runs),
            "proposed": self.proposed,
            "shape_failures": self.shape_failures,
            "p_f": iv(self.p_f),
            "p_f_unit": self.p_f_unit,
            "failure_rates": {k: iv(v) for k, v in self.failure_rates.items()},
            "cut_off": dict(self.cut_off),
            "c_r_seconds": iv(self.c_r),
            "c_r_source": self.c_r_source,
            "c_r_tokens": iv(self.c_r_tokens),
            "c_g_seconds": iv(self.c_g),
            "c_g_parts": dict(self.c_g_parts),
            "success": {k: iv(v) for k, v in self.success.items()},
            "paired_tasks": self.paired_tasks,
            "q_rate": iv(self.q_rate),
            "success_value_seconds": self.success_value,
            "q_seconds": iv(self.q),
            "lhs": iv(self.lhs),
            "rhs": iv(self.rhs),
            "verdict": self.verdict,
            "reason": self.reason,
            "break_even_success_value": self.break_even,
            "tasks_per_term": dict(self.units),
            "min_tasks": MIN_TASKS,
        }


def _runs(records: Iterable[_Record]) -> list[_Run]:
    runs: dict[str, _Run] = {}
    last: dict[str, tuple[float, bool]] = {}  # run -> (time of the last event, it held a rejection)
    labbed: dict[str, tuple[str, str]] = {}  # run -> (task, lab) from its eval.run event
    for record in records:
        run = runs.get(record.run_id)
        data = record.data if isinstance(record.data, Mapping) else {}
        if record.kind == _EVAL_RUN:
            labbed[record.run_id] = (str(data.get("task", "")), str(data.get("lab", "")))
            continue
        if record.kind == "agent.started":
            name = str(data.get("model", ""))
            base, _, mode = name.partition("+")
            runs[record.run_id] = _Run(
                run_id=record.run_id,
                model=base,
                mode=mode or "none",
                tools=tuple(sorted(str(t) for t in _list(data.get("tools")))),
                task=str(data.get("user", "")),
            )
            if record.run_id in labbed:
                runs[record.run_id].task, runs[record.run_id].lab = labbed[record.run_id]
                runs[record.run_id].expected = ""  # a lab task needs calls, of any tool
            last[record.run_id] = (record.at, False)
            continue
        if run is None:
            continue
        if record.kind == "agent.model":
            calls = _list(data.get("calls"))
            run.proposed += len(calls)
            if data.get("step") == 1:
                run.first_calls = len(calls)
            since, after_rejection = last.get(run.run_id, (record.at, False))
            usage = _usage(data.get("usage"))
            turn = (max(record.at - since, 0.0), usage)
            run.turns.append(turn)
            if after_rejection:
                run.retry_turns.append(turn)
            last[run.run_id] = (record.at, False)
        elif record.kind == "agent.observations":
            results = [r for r in _list(data.get("results")) if isinstance(r, Mapping)]
            failed = sum(1 for r in results if r.get("status") == "rejected" and _shape_failure(r))
            run.shape_failures += failed
            step = data.get("step")
            if isinstance(step, int):
                run.failures_by_step[step] = run.failures_by_step.get(step, 0) + failed
            run.ok_calls += sum(1 for r in results if r.get("status") == "ok")
            last[run.run_id] = (record.at, failed > 0)
        elif record.kind == DECODE_EVENT and isinstance(data, Mapping):
            run.decodes.append(data)
            if data.get("constraint") and data.get("constraint") != "none":
                run.mode = str(data["constraint"])
        elif record.kind == "agent.stopped":
            run.ended = True
        elif record.kind == _EVAL_VERDICT:
            run.graded = data.get("passed") is True
        elif record.kind == GRADE_EVENT:
            run.graded = bool(data.get("success"))
            if isinstance(data.get("expected"), str):
                run.expected = data["expected"]
            if data.get("task"):
                run.task = str(data["task"])
    return [run for run in runs.values() if run.ended]


def _list(value: Any) -> list[Any]:
    """A list read from record data; anything else (a ledger edited by hand) is empty."""
    return value if isinstance(value, list) else []


def _usage(value: Any) -> dict[str, float]:
    """Token counts read from record data; what is not a count is left out."""
    if not isinstance(value, Mapping):
        return {}
    return {
        k: float(v)
        for k, v in value.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    }


def _number(value: Any) -> float:
    """A non-negative number read from record data (0 for anything else)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return max(float(value), 0.0)
    return 0.0


def decide(
    records: Iterable[_Record],
    *,
    success_value: float = 60.0,
    seed: int = 0,
    labs: Iterable[str] | None = None,
) -> list[Decision]:
    """The decision rule per (model, tool set) of the agent runs in ``records`` (an audit
    trail, oldest first); with ``labs``, only the runs of those labs. ``success_value``
    prices a success in seconds, to put q in the same unit as the other terms."""
    wanted = None if labs is None else set(labs)
    groups: dict[tuple[str, tuple[str, ...]], list[_Run]] = defaultdict(list)
    for run in _runs(records):
        if wanted is not None and run.lab not in wanted:
            continue
        groups[(run.model, run.tools)].append(run)
    return [
        _decide(model, tools, runs, success_value, seed)
        for (model, tools), runs in sorted(groups.items())
    ]


def _decide(
    model: str, tools: tuple[str, ...], runs: list[_Run], success_value: float, seed: int
) -> Decision:
    by_mode: dict[str, list[_Run]] = defaultdict(list)
    for run in runs:
        by_mode[run.mode].append(run)
    free = by_mode.get("none", [])
    constrained_modes = sorted(m for m in by_mode if m != "none")
    constrained_mode = constrained_modes[0] if constrained_modes else ""
    constrained = by_mode.get(constrained_mode, [])
    failure_rates = {
        mode: _bare(
            *clustered([(_task(r), r.shape_failures, r.proposed) for r in rs], seed, rate=True)
        )
        for mode, rs in sorted(by_mode.items())
    }
    proposed = sum(r.proposed for r in free)
    failures = sum(r.shape_failures for r in free)
    p_f, p_f_tasks = clustered(
        [(_task(r), r.shape_failures, r.proposed) for r in free], seed, rate=True
    )
    p_f_unit = (
        "calls rejected at parse or schema over calls proposed (interval: bootstrap over tasks)"
    )
    if free and all(r.expected is not None for r in free):
        # Every task expected a call: a first turn without a well-formed call is the
        # failure a retry pays for, whether the call was broken or never written.
        last = {_task(r): r for r in free}
        proposed = len(last)
        failures = sum(r.first_turn_failed for r in last.values())
        p_f = wilson(failures, proposed)
        p_f_tasks = proposed
        p_f_unit = (
            "first turns of tasks that expected a call without a well-formed call "
            "(none proposed, or rejected at parse or schema) over tasks"
        )
    # c_r: the turns after a rejection; else any turn (of free runs, else of all runs).
    source = "the turns that followed a parse or schema rejection"
    retry_runs = [(r, r.retry_turns) for r in free if r.retry_turns]
    if not retry_runs:
        retry_runs = [(r, r.retry_turns) for r in runs if r.retry_turns]
        source += " (in constrained runs: no free run had one)"
    if not retry_runs:
        retry_runs = [(r, r.turns) for r in free if r.turns] or [
            (r, r.turns) for r in runs if r.turns
        ]
        source = "no rejection on record: the mean model turn stands in"
    c_r: Interval | None = None
    c_r_tokens: Interval | None = None
    c_r_tasks = 0
    if retry_runs:
        c_r, c_r_tasks = clustered(
            [(_task(r), sum(t for t, _ in turns), len(turns)) for r, turns in retry_runs], seed
        )
        c_r_tokens, _ = clustered(
            [
                (
                    _task(r),
                    sum(u.get("input_tokens", 0.0) + u.get("output_tokens", 0.0) for _, u in turns),
                    len(turns),
                )
                for r, turns in retry_runs
            ],
            seed,
        )
    # the share of free tasks with a retry turn: how often a new task adds one to c_r
    free_tasks = {_task(r) for r in free}
    retry_share = (
        len({_task(r) for r in free if r.retry_turns}) / len(free_tasks) if free_tasks else 0.0
    )
    c_g, parts, c_g_tasks = _constraining_cost(free, constrained, seed)
    success = {}
    for mode, rs in sorted(by_mode.items()):
        judged = {_task(r): r.graded for r in rs if r.graded is not None}
        success[mode] = wilson(sum(1 for v in judged.values() if v), len(judged))
    q_rate, paired = _tax(free, constrained, seed)
    units = {"p_f": p_f_tasks, "c_r": c_r_tasks, "c_g": c_g_tasks, "q": paired}
    verdict, reason, break_even = _verdict(p_f, c_r, c_g, q_rate, success_value, proposed)
    short = _shortfall(
        units, retry_share, q_rate is not None, c_r_is_retry="stands in" not in source
    )
    # c_g + q below 0 decides for constraining whatever p_f and c_r are (p_f·c_r >= 0), so
    # a shortfall in those two alone leaves the verdict standing
    below_zero = None
    if short and c_g is not None and all(t.startswith(("p_f", "c_r")) for t in short):
        rhs = c_g + (q_rate.scaled(success_value) if q_rate is not None else Interval(0, 0, 0))
        below_zero = rhs if rhs.high < 0 else None
    # no interval from fewer than MIN_TASKS tasks: the estimate alone is shown
    p_f, c_r, c_r_tokens, c_g, q_rate = (
        _bare(p_f, units["p_f"]),
        _bare(c_r, units["c_r"]),
        _bare(c_r_tokens, units["c_r"]),
        _bare(c_g, units["c_g"]),
        _bare(q_rate, units["q"]),
    )
    if below_zero is not None:
        verdict, reason, break_even = (
            "constrain",
            f"c_g + q = {below_zero} s lies below 0 and p_f·c_r is never negative: "
            "constraining pays whatever p_f and c_r are (fewer than "
            f"{MIN_TASKS} tasks behind them: " + "; ".join(short) + ")",
            None,
        )
    elif short and verdict == "undecided" and reason.startswith("cannot compute"):
        reason += f"; and fewer than {MIN_TASKS} tasks behind: " + "; ".join(short)
    elif short:
        verdict, reason, break_even = (
            "not enough data",
            f"no interval is drawn from fewer than {MIN_TASKS} tasks: " + "; ".join(short),
            None,
        )
    return Decision(
        model=model,
        tools=tools,
        runs={mode: len(rs) for mode, rs in sorted(by_mode.items())},
        proposed=proposed,
        shape_failures=failures,
        p_f=p_f,
        p_f_unit=p_f_unit,
        c_r=c_r,
        c_r_source=source,
        c_r_tokens=c_r_tokens,
        c_g=c_g,
        c_g_parts=parts,
        success=success,
        paired_tasks=paired,
        q_rate=q_rate,
        success_value=success_value,
        constrained_mode=constrained_mode,
        failure_rates=failure_rates,
        cut_off={mode: sum(r.cut_off for r in rs) for mode, rs in sorted(by_mode.items())},
        verdict=verdict,
        reason=reason,
        break_even=break_even,
        units=units,
    )


@overload
def _bare(x: Interval, tasks: int) -> Interval: ...
@overload
def _bare(x: None, tasks: int) -> None: ...
def _bare(x: Interval | None, tasks: int) -> Interval | None:
    """``x`` without its interval when fewer than `MIN_TASKS` tasks are behind it."""
    if x is None or tasks >= MIN_TASKS:
        return x
    return Interval(x.value, math.nan, math.nan)


def _task(run: _Run) -> str:
    """The unit a run belongs to: its task (a run with none is its own unit)."""
    return run.task or run.run_id


def _shortfall(
    units: Mapping[str, int], retry_share: float, q_measured: bool, *, c_r_is_retry: bool
) -> list[str]:
    """What each term lacks of `MIN_TASKS` tasks, and how many more runs would supply it."""
    out = []
    n = units.get("p_f", 0)
    if 0 < n < MIN_TASKS:
        out.append(f"p_f has {n} task(s): {MIN_TASKS - n} more free run(s) of new tasks")
    n = units.get("c_r", 0)
    if 0 < n < MIN_TASKS:
        more = MIN_TASKS - n
        what = "task(s) with a parse or schema rejection" if c_r_is_retry else "task(s)"
        if c_r_is_retry and retry_share > 0:
            runs = math.ceil(more / retry_share)
            hint = (
                f", about {runs} more free run(s) at the {retry_share:.0%} of tasks seen with one"
            )
        else:
            hint = ""
        out.append(f"c_r has {n} {what}: {more} more{hint}")
    n = units.get("c_g", 0)
    if 0 < n < MIN_TASKS:
        out.append(f"c_g has {n} constrained task(s): {MIN_TASKS - n} more constrained run(s)")
    n = units.get("q", 0)
    if q_measured and n < MIN_TASKS:
        out.append(
            f"q has {n} task(s) run both ways with a verdict: {MIN_TASKS - n} more task(s) "
            "run free and constrained"
        )
    return out


def _constraining_cost(
    free: list[_Run], constrained: list[_Run], seed: int
) -> tuple[Interval | None, dict[str, float], int]:
    """Per constrained model call: masking + the compile time shared out over the calls
    that used the grammar + the extra decode seconds per output token against free runs;
    its interval resamples tasks; and the number of tasks."""
    decodes = [d for r in constrained for d in r.decodes]
    owners = [_task(r) for r in constrained for _ in r.decodes]
    if not decodes:
        return None, {}, 0
    uses: dict[str, int] = defaultdict(int)
    compile_total: dict[str, float] = defaultdict(float)
    for d in decodes:
        uses[str(d.get("grammar", ""))] += 1
        compile_total[str(d.get("grammar", ""))] += _number(d.get("compile_seconds"))
    free_decodes = [d for r in free for d in r.decodes]
    free_tokens = sum(_number(d.get("output_tokens")) for d in free_decodes)
    free_seconds = sum(_number(d.get("decode_seconds")) for d in free_decodes)
    per_token_free = free_seconds / free_tokens if free_tokens else None
    per_call: list[float] = []
    masks: list[float] = []
    for d in decodes:
        key = str(d.get("grammar", ""))
        share = compile_total[key] / uses[key]
        tokens = _number(d.get("output_tokens"))
        mask = _number(d.get("mask_seconds"))
        if per_token_free is not None and tokens:
            # The whole slowdown of a token, masking included (llama.cpp's grammar
            # sampler masks inside decoding, where it cannot be timed apart).
            slower = _number(d.get("decode_seconds")) - per_token_free * tokens
            extra = max(slower, mask)  # never less than the masking measured in the call
        else:
            extra = mask
        masks.append(mask)
        per_call.append(share + extra)
    parts = {
        "compile_seconds_per_call": sum(compile_total.values()) / len(decodes),
        "mask_seconds_per_call": sum(masks) / len(masks),
        "calls": float(len(decodes)),
    }
    if per_token_free is not None:
        parts["free_decode_seconds_per_token"] = per_token_free
    found, tasks = clustered([(t, c, 1.0) for t, c in zip(owners, per_call, strict=True)], seed)
    return found, parts, tasks


def _tax(free: list[_Run], constrained: list[_Run], seed: int) -> tuple[Interval | None, int]:
    """Success rate free − constrained over the tasks both ran, bootstrapped over tasks."""
    # a task's last run with a verdict (or grade); a run with neither has no success
    free_by_task = {_task(r): r.graded for r in free if r.graded is not None}
    constrained_by_task = {_task(r): r.graded for r in constrained if r.graded is not None}
    paired = [(free_by_task[t], ok) for t, ok in constrained_by_task.items() if t in free_by_task]
    if not paired:
        return None, 0
    found = stats.paired_bootstrap(
        [float(a) for a, _ in paired], [float(b) for _, b in paired], seed=seed
    )
    return Interval(found.value, found.low, found.high), len(paired)


def _verdict(
    p_f: Interval,
    c_r: Interval | None,
    c_g: Interval | None,
    q_rate: Interval | None,
    value: float,
    proposed: int,
) -> tuple[str, str, float | None]:
    missing = []
    if proposed == 0:
        missing.append("p_f (no unconstrained run proposed a call or expected one)")
    if c_r is None:
        missing.append("c_r (no model turn on record)")
    if c_g is None:
        missing.append("c_g (no model.decode event of a constrained run)")
    if missing or c_r is None or c_g is None:
        return "undecided", "cannot compute " + "; ".join(missing), None
    lhs = p_f.times(c_r)
    q = q_rate.scaled(value) if q_rate is not None else Interval(0.0, 0.0, 0.0)
    rhs = c_g + q
    note = "" if q_rate is not None else " (q not measured: no task ran both ways; taken as 0)"
    break_even = None
    if q_rate is not None and q_rate.value > 0 and lhs.value > c_g.value:
        break_even = (lhs.value - c_g.value) / q_rate.value
    if lhs.low > rhs.high:
        return (
            "constrain",
            f"p_f·c_r = {lhs} s > c_g + q = {rhs} s: their 95 % intervals do not overlap{note}",
            break_even,
        )
    if lhs.high < rhs.low:
        return (
            "do not constrain",
            f"p_f·c_r = {lhs} s < c_g + q = {rhs} s: their 95 % intervals do not overlap{note}",
            break_even,
        )
    side = ">" if lhs.value > rhs.value else "<="
    return (
        "undecided",
        f"p_f·c_r = {lhs} s {side} c_g + q = {rhs} s at the estimates, but the 95 % intervals "
        f"overlap: more runs are needed{note}",
        break_even,
    )


def decisions_json(decisions: Sequence[Decision]) -> str:
    """The decisions as JSON text."""
    return json.dumps([d.as_dict() for d in decisions], indent=2, allow_nan=False, default=str)


def _shape_failure(result: Mapping[str, Any]) -> bool:
    """Whether a rejected call's result says its shape was wrong (a grammar would have made
    it right): rejected at parse, or at validate by the schema rather than by the tool's own
    check (rule ``semantic``, which no grammar can prevent)."""
    stage = result.get("stage")
    if stage in _SHAPE_STAGES:
        return True
    return stage == "validate" and result.get("rule") != "semantic"

"""Evaluation runs read back from the ledger: what each run proposed, what became of each
call, and the verifier's verdict.

The lab writes one event of its own when it starts (``eval.lab``: its id,
the model named by file, hash, decoding mode and parameters, the surfaces,
the task set and its deviations from the pre-registration; read back by
`read_labs`) and two around each agent run (``eval.run``: task, surface,
complexity, kind, model, lab; ``eval.verdict``: passed, exit code, seconds);
a local model's decodes are ``model.decode`` events of the run; everything
else is the agent's transcript (``agent.started``,
``agent.model``, ``agent.observations``, ``agent.stopped``). `read_runs`
needs nothing but the ledger's records, so a funnel can be computed from a
ledger file long after the run, on another machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from callgate.eval.surfaces import coarse_operation
from callgate.ledger.base import AuditRecord, LedgerQueries

__all__ = ["CallView", "LabView", "RunView", "parse_arguments", "read_labs", "read_runs"]

EVAL_RUN = "eval.run"
EVAL_VERDICT = "eval.verdict"
EVAL_LAB = "eval.lab"


@dataclass(frozen=True, slots=True, kw_only=True)
class LabView:
    """One lab as its ``eval.lab`` record states it: what ran, with which model, and what
    departed from the pre-registration."""

    lab: str
    model: Mapping[str, Any]
    """The model: ``spec``, ``name``, and for a local model ``file``, ``sha256``,
    ``decoding`` and ``parameters``; for a policy its rates and seed."""
    surfaces: tuple[str, ...] = ()
    tasks: str = ""
    deviations: tuple[str, ...] = ()
    at: float = 0.0

    def model_line(self) -> str:
        """The model in one line, for every report."""
        m = self.model
        parts = [str(m.get("spec") or m.get("name") or "(unnamed)")]
        if m.get("file"):
            parts.append(f"file {m['file']}")
        if m.get("sha256"):
            parts.append(f"sha256 {str(m['sha256'])[:16]}…")
        if m.get("decoding"):
            parts.append(f"decoding {m['decoding']}")
        params = _map(m.get("parameters"))
        if params:
            parts.append("parameters " + ", ".join(f"{k}={params[k]}" for k in sorted(params)))
        return "; ".join(parts)


def read_labs(ledger: LedgerQueries) -> list[LabView]:
    """Every lab recorded in ``ledger`` (its ``eval.lab`` events), oldest first."""
    return labs_from_records(ledger.audit())


def labs_from_records(records: Iterable[AuditRecord]) -> list[LabView]:
    """`read_labs` over records already read."""
    out: list[LabView] = []
    for rec in records:
        if rec.kind != EVAL_LAB:
            continue
        data: Mapping[str, Any] = rec.data if isinstance(rec.data, Mapping) else {}
        out.append(
            LabView(
                lab=str(data.get("lab", "")),
                model=dict(_map(data.get("model"))),
                surfaces=tuple(str(s) for s in _list(data.get("surfaces"))),
                tasks=str(data.get("tasks", "")),
                deviations=tuple(str(d) for d in _list(data.get("deviations"))),
                at=float(rec.at),
            )
        )
    return out


@dataclass(slots=True, kw_only=True)
class CallView:
    """One proposed call of a run and what became of it."""

    call_id: str
    tool: str
    arguments: str | None
    """The argument text the model sent (None when the call could not be read)."""
    status: str = "missing"
    """``ok``, ``error``, ``unknown``, ``rejected``, ``pending``, or ``missing`` (no answer)."""
    stage: str = ""
    content: str = ""
    step: int = 0

    @property
    def label(self) -> str:
        """The tool, and for the coarse ``do`` tool the operation: ``do(read)``."""
        if self.tool != "do":
            return self.tool
        args = parse_arguments(self.arguments)
        op = args.get("op") if isinstance(args, dict) else None
        kind = coarse_operation(op) if isinstance(op, str) else None
        return f"do({kind or '?'})"


@dataclass(slots=True, kw_only=True)
class RunView:
    """One evaluation run: its task and surface, its calls, its turns, its verdict."""

    run_id: str
    task: str = ""
    surface: str = ""
    complexity: str = ""
    kind: str = ""
    model: str = ""
    lab: str = ""
    tools: tuple[str, ...] = ()
    """The tools the model was shown."""
    tool_definitions: list[Any] = field(default_factory=list)
    calls: list[CallView] = field(default_factory=list)
    model_turns: int = 0
    turn_messages: list[Any] = field(default_factory=list)
    """What the model wrote, turn by turn (its messages as recorded)."""
    result_texts: list[str] = field(default_factory=list)
    reported_tokens: int = 0
    passed: bool | None = None
    reason: str = ""


def _int(value: Any, default: int = 0) -> int:
    """A count from record data, or ``default`` when it is not a whole number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return int(value) if value == value and abs(value) < 2**53 else default


def _list(value: Any) -> list[Any]:
    """A list from record data (anything else is empty)."""
    return list(value) if isinstance(value, list | tuple) else []


def _map(value: Any) -> Mapping[str, Any]:
    """A mapping from record data (anything else is empty)."""
    return value if isinstance(value, Mapping) else {}


def parse_arguments(text: str | None) -> Any:
    """The model's argument text decoded as JSON, or None when it is not JSON."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def read_runs(ledger: LedgerQueries, *, lab: str | Iterable[str] | None = None) -> list[RunView]:
    """Every evaluation run (one with an ``eval.run`` event) in ``ledger``, in order; with
    ``lab``, only the runs of that lab id (or of those ids)."""
    return runs_from_records(ledger.audit(), lab=lab)


def runs_from_records(
    records: Iterable[AuditRecord], *, lab: str | Iterable[str] | None = None
) -> list[RunView]:
    """`read_runs` over records already read."""
    wanted = None if lab is None else ({lab} if isinstance(lab, str) else set(lab))
    runs: dict[str, RunView] = {}
    by_call: dict[tuple[str, str], CallView] = {}
    for rec in records:
        data: Mapping[str, Any] = rec.data if isinstance(rec.data, Mapping) else {}
        if rec.kind == EVAL_RUN:
            runs[rec.run_id] = RunView(
                run_id=rec.run_id,
                task=str(data.get("task", "")),
                surface=str(data.get("surface", "")),
                complexity=str(data.get("complexity", "")),
                kind=str(data.get("kind", "")),
                model=str(data.get("model", "")),
                lab=str(data.get("lab", "")),
                tool_definitions=_list(data.get("tool_definitions")),
            )
            continue
        run = runs.get(rec.run_id)
        if run is None:
            continue
        if rec.kind == "agent.started":
            run.tools = tuple(str(t) for t in _list(data.get("tools")))
        elif rec.kind == "agent.model":
            run.model_turns += 1
            step = _int(data.get("step"), run.model_turns)
            run.turn_messages.append(data.get("messages", []))
            usage = _map(data.get("usage"))
            run.reported_tokens += _int(usage.get("input_tokens"))
            run.reported_tokens += _int(usage.get("output_tokens"))
            for proposed in _list(data.get("calls")):
                if not isinstance(proposed, Mapping):
                    continue
                arguments = proposed.get("arguments")
                view = CallView(
                    call_id=str(proposed.get("call_id", "")),
                    tool=str(proposed.get("tool", "") or ""),
                    arguments=arguments if isinstance(arguments, str) else None,
                    step=step,
                )
                run.calls.append(view)
                by_call[(rec.run_id, f"{step}/{view.call_id}")] = view
        elif rec.kind == "agent.observations":
            step = _int(data.get("step"))
            for result in _list(data.get("results")):
                if not isinstance(result, Mapping):
                    continue
                # A reused id is recorded as ``id~step``; the model's turn holds ``id``.
                call_id = str(result.get("call_id", "")).split("~")[0]
                key = (rec.run_id, f"{step}/{call_id}")
                found = by_call.get(key)
                content = str(result.get("content", ""))
                run.result_texts.append(content)
                if found is not None and found.status == "missing":
                    view = found
                    view.status = str(result.get("status", "missing"))
                    view.stage = str(result.get("stage", ""))
                    view.content = content
        elif rec.kind == "agent.stopped":
            run.reason = str(data.get("reason", ""))
        elif rec.kind == EVAL_VERDICT:
            run.passed = bool(data.get("passed"))
    every = list(runs.values())
    return [r for r in every if wanted is None or r.lab in wanted]

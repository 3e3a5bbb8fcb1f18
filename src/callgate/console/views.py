"""What the console's pages show, read from the ledger: runs, a run's timeline, a funnel.

Pure functions of ledger records (no I/O of their own, nothing decided): the
routes in `callgate.console.app` read the ledger and hand the records here.
Values stay as stored; the templates show them as text (`callgate.console.text`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from callgate.approvals import ApprovalRequest
from callgate.ledger.base import AuditRecord, CallRecord, CallState, audit_hash, audit_json

__all__ = [
    "Evaluation",
    "Event",
    "Funnel",
    "FunnelStep",
    "Rate",
    "RateRow",
    "RunSummary",
    "approval_fields",
    "funnel",
    "provenance_findings",
    "runs",
    "split_preview",
    "timeline",
]

_NOTE = " [provenance: "


def split_preview(preview: str) -> tuple[str, str]:
    """The preview and the provenance note the gate appends (``[provenance: …]``)."""
    head, sep, tail = preview.partition(_NOTE)
    return (head, tail.removesuffix("]")) if sep else (preview, "")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """One run as the runs list shows it."""

    run_id: str
    principal: str
    first_at: float
    last_at: float
    calls: int
    states: tuple[tuple[str, int], ...]
    """Calls per state, in the order of `CallState`."""
    pending: int


def runs(calls: Iterable[CallRecord]) -> list[RunSummary]:
    """The runs these calls belong to, the most recently active first."""
    grouped: dict[str, list[CallRecord]] = {}
    for c in calls:
        grouped.setdefault(c.run_id, []).append(c)
    found = []
    for run_id, items in grouped.items():
        counts = {s.value: 0 for s in CallState}
        for c in items:
            counts[c.state.value] = counts.get(c.state.value, 0) + 1
        found.append(
            RunSummary(
                run_id=run_id,
                principal=items[0].principal,
                first_at=min(c.created_at for c in items),
                last_at=max(c.updated_at for c in items),
                calls=len(items),
                states=tuple((s, n) for s, n in counts.items() if n),
                pending=counts[CallState.PENDING.value],
            )
        )
    found.sort(key=lambda r: r.last_at, reverse=True)
    return found


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One journal record of a run, as its timeline shows it."""

    seq: int
    at: float
    kind: str
    category: str
    """``model``, ``proposal``, ``rejection``, ``approval``, ``attempt``, ``outcome``,
    ``reconciliation``, ``security``, ``agent`` or ``other`` (the style of its row)."""
    title: str
    call_id: str | None
    fields: tuple[tuple[str, Any, bool], ...] = ()
    """``(label, value, multiline)``: the record's parts worth reading."""
    data: str = ""
    """The whole record's data, as indented JSON."""
    suspect: bool = False
    """At or after the first record the chain check found broken."""
    edited: bool = False
    """Its content does not match its own hash (checked on every page, not cached)."""


_SECURITY_PREFIXES = ("security.", "provenance.", "approval.forged", "idempotency.forged")
_STAGE_TITLES = {
    "call.admitted": "admitted",
    "call.pending": "waits for a person's approval",
    "call.proposed": "proposed",
}


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _items(value: Any) -> list[Any]:
    """A list field of a record, or nothing: an edited record may hold anything there."""
    return list(value) if isinstance(value, list | tuple) else []


def _model_calls(calls: Any) -> str:
    if not isinstance(calls, list):
        return _text(calls)
    lines = []
    for c in calls:
        if isinstance(c, Mapping):
            lines.append(
                f"{_text(c.get('call_id'))}: {_text(c.get('tool'))}({_text(c.get('arguments'))})"
            )
        else:
            lines.append(_text(c))
    return "\n".join(lines)


def _results(results: Any) -> str:
    if not isinstance(results, list):
        return _text(results)
    lines = []
    for r in results:
        if isinstance(r, Mapping):
            lines.append(
                f"{_text(r.get('call_id'))} {_text(r.get('tool'))}: {_text(r.get('status'))}"
                f" at {_text(r.get('stage'))}"
            )
        else:
            lines.append(_text(r))
    return "\n".join(lines)


def _describe(r: AuditRecord) -> tuple[str, str, list[tuple[str, Any, bool]]]:
    """The category, title and fields of one record."""
    d: Mapping[str, Any] = r.data if isinstance(r.data, Mapping) else {}
    kind = r.kind
    if kind == "agent.model":
        return (
            "model",
            f"model turn {_text(d.get('step'))}",
            [("said", d.get("text"), True), ("proposed", _model_calls(d.get("calls")), True)],
        )
    if kind == "agent.started":
        return (
            "agent",
            "run started",
            [
                ("model", d.get("model"), False),
                ("principal", d.get("principal"), False),
                ("user", d.get("user"), True),
            ],
        )
    if kind == "agent.observations":
        return (
            "agent",
            f"results sent back to the model (turn {_text(d.get('step'))})",
            [("results", _results(d.get("results")), True)],
        )
    if kind == "agent.stopped":
        return (
            "agent",
            f"run stopped: {_text(d.get('reason'))}",
            [("detail", d.get("detail"), False), ("answer", d.get("answer"), True)],
        )
    if kind in ("agent.paused", "agent.resumed"):
        what = "approvals" if kind == "agent.paused" else "decisions"
        return ("agent", kind.replace("agent.", "run "), [(what, _text(d.get(what)), True)])
    if kind.startswith("call."):
        base = [
            ("tool", d.get("tool"), False),
            ("arguments", d.get("arguments"), True),
            ("effects", ", ".join(map(_text, _items(d.get("effects")))), False),
            ("decided by", d.get("decided_by"), False),
        ]
        if kind == "call.rejected":
            stage = _text(d.get("stage"))
            return (
                "rejection",
                f"rejected at stage {stage}",
                [*base, ("message", d.get("message"), True)],
            )
        if kind == "call.renamed":
            return ("other", "call id renamed", [("data", _text(d), True)])
        return ("proposal", _STAGE_TITLES.get(kind, kind), base)
    if kind == "attempt.started":
        return (
            "attempt",
            f"attempt {_text(d.get('attempt'))} started",
            [
                ("idempotency key", d.get("idempotency_key"), False),
                ("side effects", "yes" if d.get("side_effecting") else "no", False),
            ],
        )
    if kind.startswith("attempt."):
        status = kind[len("attempt.") :]
        reconciled = bool(d.get("reconciled"))
        fields = [
            ("content", d.get("content"), True),
            ("error", d.get("error"), True),
            ("by", d.get("actor"), False),
        ]
        if "note" in d:
            fields.append(("note", d.get("note"), True))
        if reconciled:
            return ("reconciliation", f"outcome {status} (reconciled)", fields)
        return ("outcome", f"outcome {status}", fields)
    if kind.startswith(_SECURITY_PREFIXES):
        return ("security", f"security event: {kind}", [("data", _text(d), True)])
    if kind.startswith("approval."):
        what = kind[len("approval.") :]
        fields = [
            ("approval", d.get("approval_id"), False),
            ("by", d.get("actor"), False),
        ]
        if what == "requested":
            fields += [
                ("preview", d.get("preview"), True),
                ("effects", _text(d.get("effects")), False),
            ]
        if d.get("reason"):
            fields.append(("reason", d.get("reason"), True))
        return ("approval", f"approval {what}", fields)
    return ("other", kind, [])


def _own_hash_holds(r: AuditRecord) -> bool:
    """Whether the record's content still matches its hash (an edit that did not also rewrite
    the hash, and every later record's link, shows here at once)."""
    data = r.data_json or audit_json(r.data)
    return audit_hash(r.prev_hash, r.seq, r.at, r.kind, r.run_id, r.call_id, data) == r.hash


def timeline(records: Sequence[AuditRecord], first_bad_seq: int | None = None) -> list[Event]:
    """A run's records in journal order, each described for a reader."""
    events = []
    for r in records:
        category, title, fields = _describe(r)
        events.append(
            Event(
                seq=r.seq,
                at=r.at,
                kind=r.kind,
                category=category,
                title=title,
                call_id=r.call_id,
                fields=tuple((k, v, m) for k, v, m in fields if v not in (None, "", [], {})),
                data=json.dumps(r.data, indent=2, ensure_ascii=False, sort_keys=True, default=str),
                suspect=first_bad_seq is not None and r.seq >= first_bad_seq,
                edited=not _own_hash_holds(r),
            )
        )
    return events


def provenance_findings(records: Iterable[AuditRecord]) -> list[dict[str, Any]]:
    """The untrusted-sink findings recorded for a call: argument, value, kind, source."""
    found = []
    for r in records:
        if r.kind != "provenance.untrusted_sink" or not isinstance(r.data, Mapping):
            continue
        for f in _items(r.data.get("findings")):
            if isinstance(f, Mapping):
                found.append(
                    {
                        "argument": _text(f.get("argument")),
                        "value": _text(f.get("value")),
                        "kind": _text(f.get("kind")),
                        "tainted_by": ", ".join(map(_text, _items(f.get("tainted_by")))),
                    }
                )
    return found


@dataclass(frozen=True, slots=True, kw_only=True)
class FunnelStep:
    """One bar of the stage funnel: how many calls got past ``label``."""

    label: str
    count: int
    share: float
    """``count`` over the calls proposed (0 to 1)."""
    lost: int = 0
    """Calls that stopped here (rejected, or still waiting at the approval)."""


_PAST = ("parse", "schema", "semantic", "policy", "approval", "schedule", "execute")
_LABELS = {
    "parse": "parsed",
    "schema": "valid (schema)",
    "semantic": "valid (semantic)",
    "policy": "authorized (policy)",
    "approval": "approved or not asked",
    "schedule": "scheduled",
    "execute": "executed",
}


def _stopped_at(call: CallRecord) -> str | None:
    """The stage a call stopped before passing (None: it ran, or may still run)."""
    if call.state is CallState.REJECTED:
        return call.stage if call.stage in _PAST else "execute"
    if call.state is CallState.PENDING:
        return "approval"
    if call.state in (CallState.PROPOSED,):
        return "parse"
    if call.state is CallState.ADMITTED:
        return "execute"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Funnel:
    """The stage funnel of a set of calls."""

    proposed: int
    steps: tuple[FunnelStep, ...] = field(default_factory=tuple)


def funnel(calls: Sequence[CallRecord]) -> Funnel:
    """How many of ``calls`` got past each stage, then how many ended ``ok``.

    A rejected call stops at its stage (a rejection at ``verify`` or an idempotency
    conflict at ``execute`` counts as not executed); a pending call stops at the
    approval; an admitted call that has not run yet stops before ``executed``.
    """
    total = len(calls)
    stopped: dict[str, int] = dict.fromkeys(_PAST, 0)
    for c in calls:
        where = _stopped_at(c)
        if where is not None:
            stopped[where] += 1
    steps = []
    remaining = total
    for stage in _PAST:
        remaining -= stopped[stage]
        steps.append(
            FunnelStep(
                label=_LABELS[stage],
                count=remaining,
                share=remaining / total if total else 0.0,
                lost=stopped[stage],
            )
        )
    ok = sum(1 for c in calls if c.state is CallState.OK)
    steps.append(
        FunnelStep(label="ok", count=ok, share=ok / total if total else 0.0, lost=remaining - ok)
    )
    return Funnel(proposed=total, steps=tuple(steps))


def approval_fields(request: ApprovalRequest) -> list[tuple[str, Any, bool]]:
    """The parts of a request a person reads before deciding, in that order."""
    preview, note = split_preview(request.preview)
    return [
        ("preview", preview, True),
        ("tool", request.tool, False),
        ("effects", ", ".join(request.effects), False),
        ("principal", request.principal, False),
        ("provenance", note, True),
        ("resource version", request.resource_version or "", False),
        ("policy version", request.policy_version or "", False),
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class Rate:
    """One rate of the evaluation funnel with its interval (0 to 1; NaN: not measured)."""

    name: str
    value: float
    low: float
    high: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RateRow:
    """One group of calls of the evaluation funnel (a surface, or everything)."""

    label: str
    calls: int
    rates: tuple[Rate, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluation:
    """The evaluation funnel, when the ledger holds evaluation runs (verdicts of a verifier).

    The console does not compute it: whoever builds the console passes a function
    that does (``callgate console`` uses `callgate.eval` when it is installed).
    """

    runs: int
    unverified: int
    rows: tuple[RateRow, ...]

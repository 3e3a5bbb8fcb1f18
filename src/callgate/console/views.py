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
from callgate.calls import Stage
from callgate.ledger.base import AuditRecord, CallRecord, CallState, audit_hash, audit_json

__all__ = [
    "STATES",
    "Evaluation",
    "Event",
    "Funnel",
    "FunnelStep",
    "Rate",
    "RateRow",
    "RunSummary",
    "approval_fields",
    "confirmation_reasons",
    "funnel",
    "place_in_run",
    "provenance_findings",
    "runs",
    "shown_state",
    "split_preview",
    "timeline",
    "user_request",
]

_NOTE = " [provenance: "

STATES: tuple[tuple[str, str], ...] = (
    ("ok", "ran; its outcome is known"),
    ("error", "failed before any effect (nothing happened)"),
    ("unknown", "may have happened: never retried blindly"),
    ("rejected", "stopped before running (parse, schema, policy...)"),
    ("pending", "waiting for a person"),
    ("approved", "a person approved it; it runs when the run resumes"),
    ("denied", "a person denied it"),
    ("expired", "its approval expired undecided"),
)
"""The states a call is shown in, each with its own colour (the legend says what each means)."""
_HIGH_RISK = ("spend:", "disclose:")
"""Effects whose approval asks the person to confirm (money out, data out)."""


def shown_state(call: CallRecord, approvals: Mapping[str, str]) -> str:
    """The state a call is shown in: its ledger state, except that a call waiting for an
    approval already decided shows that decision (``approved``, ``denied``, ``expired``),
    not ``pending``, until the run resumes and records the outcome."""
    state = call.state.value
    if call.state is CallState.PENDING and call.approval_id:
        decided = approvals.get(call.approval_id)
        if decided is not None and decided != "pending":
            return decided
    return state


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


def runs(
    calls: Iterable[CallRecord], approvals: Mapping[str, str] | None = None
) -> list[RunSummary]:
    """The runs these calls belong to, the most recently active first; ``approvals`` (the
    state of each approval by id) shows a decided call as decided (`shown_state`)."""
    grouped: dict[str, list[CallRecord]] = {}
    for c in calls:
        grouped.setdefault(c.run_id, []).append(c)
    found = []
    decided = approvals or {}
    for run_id, items in grouped.items():
        counts = {s.value: 0 for s in CallState}
        for c in items:
            shown = shown_state(c, decided)
            counts[shown] = counts.get(shown, 0) + 1
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
    status: str = ""
    """An outcome's status or an approval's decision (``ok``, ``error``, ``unknown``,
    ``denied``...): the colour of its row."""


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
                status=_status_of(r.kind),
            )
        )
    return events


_STATUS_OF_KIND = {
    "call.rejected": "rejected",
    "call.pending": "pending",
    "approval.requested": "pending",
    "approval.approved": "approved",
    "approval.denied": "denied",
    "approval.expired": "expired",
}


def _status_of(kind: str) -> str:
    """The status a record's row is coloured by (empty: none)."""
    if kind.startswith("attempt.") and kind != "attempt.started":
        status = kind[len("attempt.") :]
        return status if status in ("ok", "error", "unknown") else ""
    return _STATUS_OF_KIND.get(kind, "")


def confirmation_reasons(
    request: ApprovalRequest, findings: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Why approving ``request`` needs a second, explicit confirmation (empty: it does
    not): values only untrusted text vouches for (provenance), or money or data going out."""
    reasons = []
    _, note = split_preview(request.preview)
    if findings or note:
        names = sorted({str(f.get("argument", "")) for f in findings} - {""})
        reasons.append(
            "provenance: "
            + (", ".join(repr(n) for n in names) + " " if names else "a value ")
            + "comes only from untrusted text (a tool's output, a fetched page)"
        )
    risky = [e for e in request.effects if e.startswith(_HIGH_RISK)]
    if risky:
        reasons.append("high risk: " + ", ".join(risky))
    return reasons


def user_request(records: Iterable[AuditRecord]) -> str:
    """What the user asked, as the run's start recorded it (empty: not recorded)."""
    for r in records:
        if r.kind == "agent.started" and isinstance(r.data, Mapping):
            return _text(r.data.get("user"))
    return ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Place:
    """Where a call stands in its run: its position and the run's calls around it."""

    index: int
    """1-based position of the call among the run's calls."""
    total: int
    calls: tuple[tuple[str, str, str, bool], ...]
    """``(call id, tool, shown state, is this call)``, in the order they were proposed."""


def place_in_run(calls: Iterable[CallRecord], call_id: str, approvals: Mapping[str, str]) -> Place:
    """The call's place among its run's calls (in the order they were proposed)."""
    ordered = sorted(calls, key=lambda c: c.created_at)
    index = next((i for i, c in enumerate(ordered, 1) if c.call_id == call_id), 0)
    return Place(
        index=index,
        total=len(ordered),
        calls=tuple(
            (c.call_id, c.tool, shown_state(c, approvals), c.call_id == call_id) for c in ordered
        ),
    )


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


_PAST = ("parse", "validate", "authorize", "approve", "schedule", "execute")
_LABELS = {
    "parse": "parsed",
    "validate": "valid",
    "authorize": "authorized",
    "approve": "approved or not asked",
    "schedule": "scheduled",
    "execute": "executed",
}


def _stopped_at(call: CallRecord) -> str | None:
    """The stage a call stopped before passing (None: it ran, or may still run); a stage
    an older ledger recorded under its old name (``schema``, ``policy``) counts as its own."""
    if call.state is CallState.REJECTED:
        try:
            stage = Stage(call.stage).value
        except ValueError:
            return "execute"
        return stage if stage in _PAST else "execute"
    if call.state is CallState.PENDING:
        return "approve"
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

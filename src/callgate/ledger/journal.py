"""The journal: every state change of a ledger is one hash-chained record, and the
state the gate decides by is derived from the records.

A record says what happened (a decision, an attempt's start or end, a key that
answered for another call, an approval requested, decided, used or released);
`apply` is the one function that turns a record into the rows it changes: the
call, its idempotency key, an approval. The SQL ledgers keep those rows as
tables beside the journal so that the gate reads one row, not the history,
and write them only through `apply`; `derive` replays a whole journal from
nothing, so ``verify`` can recompute every row and report any that differs
(an edited, inserted or deleted index row, a flipped approval), and any record
that breaks the rules it was written under (`apply`'s problems).

Attempts are not kept as rows: a call's attempts are read from its records
(`attempts_from`). Records that change nothing (security events, renamed ids,
reuse refusals) are audited and ignored here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from callgate.approvals import ApprovalRequest, ApprovalStatus
from callgate.ledger.base import (
    AttemptRecord,
    AuditRecord,
    CallRecord,
    CallState,
    Outcome,
    begin_states,
    key_is_free,
    may_decide,
    may_finish,
)
from callgate.ledger.record_data import (
    ApprovalDecided,
    ApprovalForged,
    ApprovalRequested,
    ApprovalUsed,
    AttemptEnded,
    AttemptStarted,
    Decision,
    KeyAnswered,
    KeyForged,
    float_or,
    read,
)
from callgate.ledger.records import APPROVAL_CHANGES, OUTCOMES, RecordKind

__all__ = [
    "FORGED",
    "MIGRATED",
    "RUN_FACT",
    "UNREADABLE",
    "Derived",
    "IndexState",
    "KeyRow",
    "apply",
    "attempts_from",
    "changes_state",
    "derive",
    "outcome_from_record",
    "start",
]

UNREADABLE = (TypeError, ValueError, KeyError, AttributeError, OverflowError)
"""What reading a record whose data was edited (wrong types, missing fields, a number no
float or int column holds) raises."""
FORGED = RecordKind.APPROVAL_FORGED.value
"""The record of an approval row found to differ from its records (and restored)."""
RUN_FACT = "run."
"""The prefix of a run's own records: ``run.opened`` (who owns the run id), ``run.intent``,
``run.trusted``, ``run.exposed`` (`callgate.ledger.base.Ledger.record_run`)."""
MIGRATED = RecordKind.LEDGER_MIGRATED.value
"""The record that opens a migrated journal's state: the ``migrated.*`` records after it
carry every row of the older ledger; state records before it are history only."""

_DECISIONS = frozenset(
    {CallState.PROPOSED, CallState.REJECTED, CallState.PENDING, CallState.ADMITTED}
)
_OUTCOMES = OUTCOMES
_APPROVAL_CHANGES = APPROVAL_CHANGES


def changes_state(kind: str) -> bool:
    """Whether records of ``kind`` change rows (so only the ledger itself may write them)."""
    if kind.startswith("call."):
        return kind[5:] in {s.value for s in _DECISIONS}
    if kind.startswith("attempt."):
        return kind == "attempt.started" or kind[8:] in _OUTCOMES
    if kind.startswith(RUN_FACT):
        return True  # who owns a run, and what it trusts and has read (`Ledger.record_run`)
    return (
        kind in _APPROVAL_CHANGES
        or kind == MIGRATED
        or kind.startswith("journal.")
        or kind.startswith("migrated.")
        or (kind.startswith("idempotency.") and kind != "idempotency.forged")
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyRow:
    """An idempotency key: which attempt holds it, and how that attempt ended."""

    key: str
    request_hash: str
    run_id: str
    call_id: str
    attempt: int
    expires_at: float
    status: str | None = None
    """The holder's outcome (``ok``, ``error``, ``unknown``); None while it runs."""
    outcome_seq: int | None = None
    """The journal record that holds the outcome (its content is replayed from there)."""


class IndexState(Protocol):
    """The rows `apply` reads and writes: a dictionary (`Derived`) or a SQL transaction.

    `apply` changes a call row in place (and hands it to `put_call`): an owner that
    keeps rows across transactions must drop them when one fails (`RowCache`)."""

    def call(self, run_id: str, call_id: str) -> CallRecord | None: ...

    def put_call(self, row: CallRecord, *, status_only: bool = False) -> None:
        """Store ``row``; ``status_only``: only its state, stage, attempts, reconciled
        flag and time changed (a cheaper write)."""

    def key(self, key: str) -> KeyRow | None: ...

    def put_key(self, row: KeyRow) -> None: ...

    def approval(self, approval_id: str) -> ApprovalRequest | None: ...

    def put_approval(self, row: ApprovalRequest) -> None: ...

    def add_orphan(self, run_id: str, call_id: str, seq: int) -> None:
        """List a record of no call (``call_id`` ""), or of a call with no row yet."""

    def reset(self) -> None: ...


# -- what each record holds -------------------------------------------------------------


def outcome_from_record(data: Mapping[str, Any], attempt: int | None = None) -> Outcome | None:
    """The outcome an ``attempt.<status>`` record holds (or, in a ``migrated.call`` record,
    that of ``attempt``)."""
    if "attempts" in data:  # migrated.call
        for a in data.get("attempts") or ():
            if attempt is None or a.get("attempt") == attempt:
                found = a.get("outcome")
                if found:
                    return _outcome(found)
        return None
    return AttemptEnded.decode(data, 0.0).outcome


def _outcome(d: Mapping[str, Any]) -> Outcome:
    """The outcome a ``migrated.call`` record keeps of an attempt."""
    return Outcome(
        status=str(d.get("status")),
        content=str(d.get("content") or ""),
        error=d.get("error"),
        stage=str(d.get("stage") or "execute"),
        finished_at=float_or(d.get("finished_at"), 0.0),
        reconciled=bool(d.get("reconciled")),
        transaction_id=d.get("transaction_id"),
    )


def _outcome_dict(o: Outcome) -> dict[str, Any]:
    return {
        "status": o.status,
        "content": o.content,
        "error": o.error,
        "stage": o.stage,
        "finished_at": o.finished_at,
        "reconciled": o.reconciled,
        "transaction_id": o.transaction_id,
    }


# -- the fold --------------------------------------------------------------------------------


def apply(st: IndexState, rec: AuditRecord) -> str | None:
    """`change`, then list the record under its call (`link`)."""
    problem = change(st, rec)
    link(st, rec)
    return problem


def link(st: IndexState, rec: AuditRecord) -> None:
    """List ``rec`` in its call's row, or, for a record of no call or of a call that has no
    row, among the orphans: how a call's (or a run's) records are found without an index."""
    if rec.call_id is not None:
        row = st.call(rec.run_id, rec.call_id)
        if row is not None:
            if not row.records or row.records[-1] != rec.seq:
                row.records = (*row.records, rec.seq)
            st.put_call(row, status_only=True)
            return
    st.add_orphan(rec.run_id, rec.call_id or "", rec.seq)


def change(st: IndexState, rec: AuditRecord) -> str | None:
    """Change the rows ``rec`` changes; a problem when the record breaks a rule.

    A decision the call's state no longer allows changes nothing and is no
    problem (a call id that comes back is audited, never re-decided). The
    problems are what `verify` reports: no ledger writes such a record.
    """
    kind = rec.kind
    data = rec.data
    if kind.startswith("call."):
        return _decision(st, rec)
    if kind == "attempt.started":
        return _started(st, rec) if rec.call_id is not None else None
    if kind.startswith("attempt."):
        return _finished(st, rec)
    if kind.startswith("idempotency."):
        return _settled(st, rec)
    if kind in _APPROVAL_CHANGES:
        return _approval(st, rec)
    if kind == MIGRATED:
        st.reset()
        for orphan in data.get("orphans") or ():
            st.add_orphan(str(orphan[0]), str(orphan[1]), int(orphan[2]))
        return None
    if kind.startswith("migrated."):
        return _migrated(st, rec)
    del data
    return None


def _decision(st: IndexState, rec: AuditRecord) -> str | None:
    try:
        state = CallState(rec.kind[5:])
    except ValueError:
        return None
    if state not in _DECISIONS or rec.call_id is None:
        return None  # an event about a call (call.bad_id, call.renamed)
    current = st.call(rec.run_id, rec.call_id)
    if current is not None and not may_decide(current.state, state):
        return None
    d = read(Decision, rec.data) or Decision.decode(rec.data, rec.at)
    st.put_call(
        CallRecord(
            run_id=rec.run_id,
            call_id=rec.call_id,
            tool=d.tool,
            tool_version=d.tool_version,
            principal=d.actor,
            arguments=d.arguments,
            state=state,
            stage=d.stage,
            request_hash=d.request_hash,
            idempotency_key=d.idempotency_key,
            decided_by=d.decided_by,
            message=d.message,
            effects=d.effects,
            approval_id=d.approval_id,
            attempts=0,
            reconciled=False,
            created_at=d.created_at,
            updated_at=d.updated_at,
            records=current.records if current is not None else (),
        )
    )
    return None


def _started(st: IndexState, rec: AuditRecord) -> str | None:
    return start(st, rec, read(AttemptStarted, rec.data) or AttemptStarted.decode(rec.data, rec.at))


def start(st: IndexState, rec: AuditRecord, d: AttemptStarted) -> str | None:
    """Change the rows attempt.started record ``rec`` changes, ``d`` its data decoded."""
    assert rec.call_id is not None
    attempt = d.attempt
    side = d.side_effecting
    started = d.started_at
    current = st.call(rec.run_id, rec.call_id)
    problem = None
    if current is not None and current.state in begin_states(side, attempt):
        current.state = CallState.RUNNING
        current.attempts = attempt
        current.updated_at = started
        st.put_call(current, status_only=True)
    elif current is not None and side:
        problem = f"starts an attempt of a call that was {current.state.value}"
    if side:
        key = d.idempotency_key
        held = st.key(key)
        if held is not None and not _claimable(held, started):
            problem = problem or (
                f"takes idempotency key {key!r} while the attempt of "
                f"{held.run_id}/{held.call_id} holds it"
            )
        st.put_key(
            KeyRow(
                key=key,
                request_hash=d.request_hash,
                run_id=rec.run_id,
                call_id=rec.call_id,
                attempt=attempt,
                expires_at=d.key_expires_at,
            )
        )
    return problem


def _claimable(key: KeyRow, now: float) -> bool:
    """Whether a new attempt may take ``key`` (`callgate.ledger.base.key_is_free`)."""
    return key_is_free(key.status, key.expires_at, now)


def _finished(st: IndexState, rec: AuditRecord) -> str | None:
    status = rec.kind[8:]
    if status not in _OUTCOMES or rec.call_id is None:
        return None
    d = read(AttemptEnded, rec.data) or AttemptEnded.decode(rec.data, rec.at, status)
    reconciled = d.reconciled
    finished = d.finished_at
    current = st.call(rec.run_id, rec.call_id)
    if not may_finish(current.state if current is not None else None, d):
        state = current.state.value if current is not None else "absent"
        return f"ends an attempt of a call that was {state}"
    if current is not None:
        current.state = CallState(status)
        current.stage = d.stage
        current.reconciled = current.reconciled or reconciled
        current.updated_at = finished
        st.put_call(current, status_only=True)
    key = st.key(d.idempotency_key) if d.idempotency_key else None
    if key is not None and key.run_id == rec.run_id and key.call_id == rec.call_id:
        st.put_key(
            KeyRow(
                key=key.key,
                request_hash=key.request_hash,
                run_id=key.run_id,
                call_id=key.call_id,
                attempt=key.attempt,
                expires_at=key.expires_at,
                status=status,
                outcome_seq=rec.seq,
            )
        )
    return None


def _settled(st: IndexState, rec: AuditRecord) -> str | None:
    """A key answered for another call: the call settles without running (if admitted)."""
    if rec.call_id is None or not isinstance(rec.data.get("settled"), str):
        return None
    d = read(KeyAnswered, rec.data) or KeyAnswered.decode(rec.data, rec.at)
    assert d.settled is not None
    current = st.call(rec.run_id, rec.call_id)
    if current is not None and current.state is CallState.ADMITTED:
        current.state = CallState(d.settled)
        current.stage = d.stage
        current.attempts = 0
        current.updated_at = d.started_at
        st.put_call(current, status_only=True)
    return None


def _approval(st: IndexState, rec: AuditRecord) -> str | None:
    what = rec.kind[9:]
    if what == "requested":
        asked = ApprovalRequested.decode(rec.data, rec.at)
        st.put_approval(asked.request(rec.run_id, rec.call_id or ""))
        return None
    approval_id = str(rec.data.get("approval_id"))
    current = st.approval(approval_id)
    if current is None:
        return f"{what} approval {approval_id}, which was never requested"
    if what in ("approved", "denied"):
        decided = ApprovalDecided.decode(rec.data, rec.at)
        if current.status is not ApprovalStatus.PENDING:
            return f"decides approval {approval_id}, which was {current.status.value}"
        st.put_approval(
            dataclasses.replace(
                current,
                status=ApprovalStatus(what),
                decided_by=decided.actor,
                decided_at=decided.decided_at,
                reason=decided.reason,
                decision_seq=rec.seq,
            )
        )
    elif what == "used":
        used = ApprovalUsed.decode(rec.data, rec.at)
        if current.status is not ApprovalStatus.APPROVED:
            return f"uses approval {approval_id}, which was {current.status.value}"
        if current.expires_at <= used.used_at:
            return f"uses approval {approval_id} after it expired"
        st.put_approval(
            dataclasses.replace(
                current, status=ApprovalStatus.USED, used_at=used.used_at, used_by=used.used_by
            )
        )
    elif what == "released":
        if current.status is not ApprovalStatus.USED:
            return f"releases approval {approval_id}, which was {current.status.value}"
        st.put_approval(
            dataclasses.replace(current, status=ApprovalStatus.APPROVED, used_at=None, used_by=None)
        )
    return None


def _migrated(st: IndexState, rec: AuditRecord) -> str | None:
    d = rec.data
    if rec.kind == "migrated.call":
        row = d.get("row") or {}
        st.put_call(
            CallRecord(
                **{
                    **row,
                    "state": CallState(row["state"]),
                    "effects": tuple(row.get("effects") or ()),
                    "records": tuple(int(n) for n in d.get("history") or ()),
                }
            )
        )
    elif rec.kind == "migrated.key":
        st.put_key(KeyRow(**{**(d.get("row") or {}), "outcome_seq": d.get("outcome_seq")}))
    elif rec.kind == "migrated.approval":
        row = dict(d.get("row") or {})
        row["status"] = ApprovalStatus(row["status"])
        row["effects"] = tuple(row.get("effects") or ())
        if row["status"] in (ApprovalStatus.APPROVED, ApprovalStatus.DENIED, ApprovalStatus.USED):
            row["decision_seq"] = rec.seq
        st.put_approval(ApprovalRequest(**row))
    return None


# -- a whole journal ---------------------------------------------------------------------------


class Derived:
    """Rows derived from records in memory: what `derive` returns."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, str], CallRecord] = {}
        self.keys: dict[str, KeyRow] = {}
        self.approvals: dict[str, ApprovalRequest] = {}
        self.orphans: set[tuple[str, str, int]] = set()

    def call(self, run_id: str, call_id: str) -> CallRecord | None:
        return self.calls.get((run_id, call_id))

    def put_call(self, row: CallRecord, *, status_only: bool = False) -> None:
        self.calls[(row.run_id, row.call_id)] = row

    def key(self, key: str) -> KeyRow | None:
        return self.keys.get(key)

    def put_key(self, row: KeyRow) -> None:
        self.keys[row.key] = row

    def approval(self, approval_id: str) -> ApprovalRequest | None:
        return self.approvals.get(approval_id)

    def put_approval(self, row: ApprovalRequest) -> None:
        self.approvals[row.id] = row

    def add_orphan(self, run_id: str, call_id: str, seq: int) -> None:
        self.orphans.add((run_id, call_id, seq))

    def reset(self) -> None:
        self.calls.clear()
        self.keys.clear()
        self.approvals.clear()
        self.orphans.clear()


def derive(records: Iterable[AuditRecord]) -> tuple[Derived, list[str]]:
    """Replay ``records`` from nothing: the rows they make, and the rule problems found."""
    state = Derived()
    problems: list[str] = []
    replayed = list(records)
    for i in range(len(replayed) - 1, -1, -1):
        if replayed[i].kind == MIGRATED:  # what came before is an older ledger's history
            replayed = replayed[i:]
            break
    for rec in replayed:
        try:
            problem = apply(state, rec)
        except UNREADABLE as exc:
            problem = f"its data cannot be read as a {rec.kind} record ({type(exc).__name__})"
        if problem is None and rec.kind == FORGED:
            forged = ApprovalForged.decode(rec.data)
            problem = (
                f"the ledger found approval {forged.approval_id} forged and restored "
                f"it from the journal ({forged.problem}): the database was edited"
            )
        elif problem is None and rec.kind == RecordKind.KEY_FORGED:
            edited = KeyForged.decode(rec.data)
            problem = (
                f"the ledger found idempotency key {edited.idempotency_key!r} edited "
                f"({edited.problem}) and answered from the journal"
            )
        if problem is not None:
            problems.append(f"record {rec.seq} ({rec.kind}): {problem}")
    return state, problems


def attempts_from(records: Sequence[AuditRecord], worker: str = "") -> list[AttemptRecord]:
    """One call's attempts, from its records in order."""
    found: dict[int, AttemptRecord] = {}
    for rec in records:
        try:
            found = _attempt_step(found, rec, worker)
        except UNREADABLE:
            continue  # an unreadable record (verify reports it)
    return [found[n] for n in sorted(found)]


def _attempt_step(
    found: dict[int, AttemptRecord], rec: AuditRecord, worker: str
) -> dict[int, AttemptRecord]:
    """One record's change to a call's attempts (`attempts_from`)."""
    d = rec.data
    if rec.kind == "migrated.call":
        found = {}
        for a in d.get("attempts") or ():
            outcome = a.get("outcome")
            found[int(a["attempt"])] = AttemptRecord(
                run_id=rec.run_id,
                call_id=rec.call_id or "",
                attempt=int(a["attempt"]),
                tool_version=str(a.get("tool_version")),
                idempotency_key=str(a.get("idempotency_key")),
                request_hash=str(a.get("request_hash")),
                started_at=float_or(a.get("started_at"), 0.0),
                worker=str(a.get("worker") or ""),
                outcome=_outcome(outcome) if outcome else None,
            )
    elif rec.kind == "attempt.started" and "started_at" in d:
        s = AttemptStarted.decode(d, rec.at)
        if s.attempt not in found:
            found[s.attempt] = AttemptRecord(
                run_id=rec.run_id,
                call_id=rec.call_id or "",
                attempt=s.attempt,
                tool_version=s.tool_version,
                idempotency_key=s.idempotency_key,
                request_hash=s.request_hash,
                started_at=s.started_at,
                worker=s.actor or worker,
            )
    elif rec.kind[8:] in _OUTCOMES and rec.kind.startswith("attempt.") and "content" in d:
        e = AttemptEnded.decode(d, 0.0, rec.kind[8:])
        if e.attempt in found:
            found[e.attempt] = dataclasses.replace(found[e.attempt], outcome=e.outcome)
    return found


def migrated_call_data(
    call: CallRecord, attempts: Sequence[AttemptRecord], history: Sequence[int] = ()
) -> dict[str, Any]:
    """The data of a ``migrated.call`` record: the row and the attempts of a v2 ledger."""
    row = {f.name: getattr(call, f.name) for f in dataclasses.fields(call)}
    row["state"] = call.state.value
    row["effects"] = list(call.effects)
    row.pop("records", None)
    return {
        "actor": "migration",
        "history": list(history),
        "row": row,
        "attempts": [
            {
                "attempt": a.attempt,
                "tool_version": a.tool_version,
                "idempotency_key": a.idempotency_key,
                "request_hash": a.request_hash,
                "started_at": a.started_at,
                "worker": a.worker,
                "outcome": _outcome_dict(a.outcome) if a.outcome is not None else None,
            }
            for a in attempts
        ],
    }

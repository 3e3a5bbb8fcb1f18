"""`MemoryLedger`: the ledger kept in process memory, for tests and quick scripts.

It applies the same rules as the durable backends (`callgate.ledger.base`):
forward-only states, the idempotency matching rule, a hash-chained audit
trail. The chain is computed when the trail is read, so the hot path pays
nothing for it.

Everything is kept as tuples of plain values (strings, numbers, tuples):
Python's garbage collector stops tracking such tuples, so a ledger holding
a million calls adds nothing to every later collection's walk.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from callgate.errors import LedgerError
from callgate.ledger.base import (
    GENESIS,
    AttemptFinish,
    AttemptRecord,
    AttemptStart,
    AuditCheck,
    AuditRecord,
    CallRecord,
    CallState,
    Claim,
    ClaimKind,
    Ledger,
    Outcome,
    audit_hash,
    audit_json,
    begin_states,
    claim_for_key,
    default_worker,
    may_decide,
    may_finish,
    settled_state,
    verify_chain,
)
from callgate.ledger.budgets import BudgetBook, BudgetCharge
from callgate.ledger.journal import changes_state, derive
from callgate.ledger.record_data import AttemptEnded, AttemptStarted, Decision, KeyAnswered

__all__ = ["MemoryLedger"]

RUN = Claim(kind=ClaimKind.RUN)
_STATES = {s.value: s for s in CallState}

# Row layouts (plain tuples):
#   decision: run_id, call_id, tool, tool_version, principal, arguments, request_hash,
#             idempotency_key, decided_by, message, effects, approval_id, created_at
#   status:   state, stage, attempts, reconciled, updated_at
#   outcome:  status, content, error, stage, finished_at, reconciled, transaction_id, retryable
#   attempt:  attempt, tool_version, idempotency_key, request_hash, started_at, outcome | None
#   key:      request_hash, holder, expires_at, outcome | None
Row = tuple[Any, ...]

# The journal's own entries are tagged with these (events carry their kind, a string,
# so no event can pass for one).
_DECISION, _START, _FINISH = range(3)


def _decision_row(r: CallRecord) -> Row:
    return (
        r.run_id,
        r.call_id,
        r.tool,
        r.tool_version,
        r.principal,
        r.arguments,
        r.request_hash,
        r.idempotency_key,
        r.decided_by,
        r.message,
        r.effects,
        r.approval_id,
        r.created_at,
    )


def _outcome_row(o: Outcome) -> Row:
    return (
        o.status,
        o.content,
        o.error,
        o.stage,
        o.finished_at,
        o.reconciled,
        o.transaction_id,
        o.retryable,
    )


def _outcome(row: Row) -> Outcome:
    return Outcome(
        status=row[0],
        content=row[1],
        error=row[2],
        stage=row[3],
        finished_at=row[4],
        reconciled=row[5],
        transaction_id=row[6],
        retryable=row[7],
    )


def _record(d: Row, s: Row) -> CallRecord:
    return CallRecord(
        run_id=d[0],
        call_id=d[1],
        tool=d[2],
        tool_version=d[3],
        principal=d[4],
        arguments=d[5],
        request_hash=d[6],
        idempotency_key=d[7],
        decided_by=d[8],
        message=d[9],
        effects=d[10],
        approval_id=d[11],
        created_at=d[12],
        state=_STATES[s[0]],
        stage=s[1],
        attempts=s[2],
        reconciled=s[3],
        updated_at=s[4],
    )


class MemoryLedger(Ledger):
    """A journal of plain tuples, and the two indexes the hot path decides by (each
    call's state, each idempotency key), behind one lock. Nothing survives the process.

    Call and attempt records and the audit trail are built from the journal
    when they are read, so that a call costs a few dictionary operations.
    """

    def __init__(self, *, worker: str | None = None) -> None:
        self.worker = worker or default_worker()
        self._lock = threading.Lock()
        self._status: dict[tuple[str, str], Row] = {}
        self._keys: dict[str, Row] = {}
        # Everything that happened, flat: kind, run id, call id, payload, time (five
        # slots per entry, all plain values).
        self._journal: list[Any] = []
        # Views built from the journal when read, and how far each has read it.
        self._decisions: dict[tuple[str, str], Row] = {}
        self._attempts: dict[tuple[str, str], list[Row]] = {}
        self._viewed = 0
        self._audit: list[AuditRecord] = []
        self._audited = 0
        self._chained = 0
        self._budgets = BudgetBook()
        self._owners: dict[str, str] = {}
        """Run id → who owns it (`Ledger.record_run`)."""

    def _run_owner(self, run_id: str) -> str | None:
        with self._lock:
            return self._owners.get(run_id)

    def run_facts(self, run_id: str) -> Sequence[AuditRecord]:
        """The ``run.*`` records of one run, oldest first: this ledger writes them with no
        call id (None), so a resumed run gets its intents and trusted input back."""
        return [
            r
            for r in self.records(run_id=run_id)
            if r.call_id is None and r.kind.startswith("run.")
        ]

    def _record_run_fact(self, kind: str, run_id: str, data: Mapping[str, Any]) -> None:
        with self._lock:
            if kind == "run.opened":
                self._owners.setdefault(run_id, str(data.get("actor")))
            self._journal += (kind, run_id, None, dict(data), time.time())

    def record_decision(self, record: CallRecord) -> None:
        ident = (record.run_id, record.call_id)
        row = _decision_row(record)
        state = record.state.value
        updated = record.updated_at or time.time()
        with self._lock:
            current = self._status.get(ident)
            applied = current is None or may_decide(_STATES[current[0]], record.state)
            if applied:
                self._status[ident] = (state, record.stage, 0, False, updated)
            if ident[0] not in self._owners:
                self._owners[ident[0]] = record.principal
            self._journal += (
                _DECISION,
                ident[0],
                ident[1],
                (row, state, record.stage, applied),
                updated,
            )

    def begin_attempt(self, start: AttemptStart) -> Claim:
        ident = (start.run_id, start.call_id)
        with self._lock:
            status = self._status.get(ident)
            if start.side_effecting:
                key = self._keys.get(start.idempotency_key)
                claim = (
                    None
                    if key is None
                    else claim_for_key(
                        start,
                        request_hash=key[0],
                        holder=key[1],
                        expires_at=key[2],
                        outcome=None if key[3] is None else _outcome(key[3]),
                    )
                )
                if claim is None and status is not None and status[0] != "admitted":
                    # The call already ran (its id came back): never a second execution.
                    claim = Claim(kind=ClaimKind.IN_PROGRESS, holder=ident)
                if claim is None and start.budgets:
                    why = self._budgets.refusal([BudgetCharge(*b) for b in start.budgets])
                    if why is not None:
                        claim = Claim(kind=ClaimKind.OVER_BUDGET, holder=ident, reason=why)
                    else:
                        self._budgets.charge(*ident, [b[:2] for b in start.budgets])
                if claim is not None:
                    self._settle_without_running(ident, claim, start.started_at)
                    return claim
                self._keys[start.idempotency_key] = (
                    start.request_hash,
                    ident,
                    start.key_expires_at,
                    None,
                )
            if status is not None and (
                status[0] == "admitted"
                or _STATES[status[0]] in begin_states(start.side_effecting, start.attempt)
            ):
                self._status[ident] = (
                    "running",
                    status[1],
                    start.attempt,
                    status[3],
                    start.started_at,
                )
            self._journal += (
                _START,
                ident[0],
                ident[1],
                (
                    start.attempt,
                    start.idempotency_key,
                    start.request_hash,
                    start.tool_version,
                    start.side_effecting,
                    start.key_expires_at,
                ),
                start.started_at,
            )
            return RUN

    def _settle_without_running(self, ident: tuple[str, str], claim: Claim, now: float) -> None:
        """Move a call that will not run to its final state, and audit why."""
        status = self._status.get(ident)
        state, stage = settled_state(claim)
        answered = KeyAnswered(actor=self.worker, holder=claim.holder)
        if status is not None and status[0] == "admitted":
            self._status[ident] = (state.value, stage, 0, status[3], now)
            answered = KeyAnswered(
                actor=self.worker,
                holder=claim.holder,
                settled=state.value,
                stage=stage,
                started_at=now,
            )
        kind = f"idempotency.{claim.kind.value}"
        self._journal += (kind, ident[0], ident[1], answered.encode(), time.time())

    def finish_attempt(self, finish: AttemptFinish) -> bool:
        outcome = finish.outcome
        ident = (finish.run_id, finish.call_id)
        row = _outcome_row(outcome)
        with self._lock:
            status = self._status.get(ident)
            if not may_finish(_STATES[status[0]] if status is not None else None, outcome):
                return False
            key = self._keys.get(finish.idempotency_key)
            if key is not None and key[1] == ident:
                self._keys[finish.idempotency_key] = (key[0], key[1], key[2], row)
            if outcome.status == "error":
                self._budgets.give_back(*ident)
            if status is not None:
                self._status[ident] = (
                    outcome.status,
                    outcome.stage,
                    status[2],
                    status[3] or outcome.reconciled,
                    outcome.finished_at,
                )
            self._journal += (
                _FINISH,
                ident[0],
                ident[1],
                (finish.attempt, finish.actor, finish.note, row, finish.idempotency_key),
                outcome.finished_at or time.time(),
            )
            return True

    def record_event(
        self, kind: str, *, run_id: str, call_id: str | None, data: Mapping[str, Any]
    ) -> None:
        if not isinstance(kind, str) or changes_state(kind):
            raise LedgerError(
                f"{kind!r} records change the ledger's state, so only the ledger writes them; "
                "record the event under another kind"
            )
        self._record_change(kind, run_id=run_id, call_id=call_id, data=data)

    def _record_change(
        self, kind: str, *, run_id: str, call_id: str | None, data: Mapping[str, Any]
    ) -> None:
        """Append a record as given: for this ledger's own approval store."""
        with self._lock:
            self._journal += (kind, run_id, call_id, dict(data), time.time())

    # -- reads ---------------------------------------------------------------------

    def _view(self) -> None:
        """Bring the call and attempt views up to the end of the journal."""
        journal = self._journal
        for i in range(self._viewed, len(journal), 5):
            kind, run_id, call_id, payload, _ = journal[i : i + 5]
            if kind is _DECISION:
                if payload[3]:
                    self._decisions[(run_id, call_id)] = payload[0]
            elif kind is _START:
                attempt, key, request_hash, tool_version = payload[:4]
                row = (attempt, tool_version, key, request_hash, journal[i + 4], None)
                self._attempts.setdefault((run_id, call_id), []).append(row)
            elif kind is _FINISH:
                rows = self._attempts.get((run_id, call_id), [])
                for n, a in enumerate(rows):
                    if a[0] == payload[0]:
                        rows[n] = (*a[:5], payload[3])
        self._viewed = len(journal)

    def get_call(self, run_id: str, call_id: str) -> CallRecord | None:
        ident = (run_id, call_id)
        with self._lock:
            self._view()
            decision = self._decisions.get(ident)
            return _record(decision, self._status[ident]) if decision is not None else None

    def calls(
        self,
        *,
        run_id: str | None = None,
        state: CallState | None = None,
        call_id: str | None = None,
        newest: int | None = None,
    ) -> Sequence[CallRecord]:
        with self._lock:
            self._view()
            found = []
            for ident, decision in self._decisions.items():
                status = self._status[ident]
                if (
                    (run_id is None or ident[0] == run_id)
                    and (call_id is None or ident[1] == call_id)
                    and (state is None or status[0] == state.value)
                ):
                    found.append(_record(decision, status))
            return found[max(len(found) - newest, 0) :] if newest is not None else found

    def attempts(self, run_id: str, call_id: str) -> Sequence[AttemptRecord]:
        with self._lock:
            self._view()
            rows = list(self._attempts.get((run_id, call_id), ()))
        return [
            AttemptRecord(
                run_id=run_id,
                call_id=call_id,
                attempt=a[0],
                tool_version=a[1],
                idempotency_key=a[2],
                request_hash=a[3],
                started_at=a[4],
                worker=self.worker,
                outcome=None if a[5] is None else _outcome(a[5]),
            )
            for a in rows
        ]

    def verify(self) -> AuditCheck:
        """Verify the chain, and that every call's state is what its records make of it
        (the same fold the SQL ledgers' rows are derived by)."""
        records = self.audit()
        checked = verify_chain(records, self.audit_head())
        derived, problems = derive(records)
        for call in self.calls():
            want = derived.calls.get((call.run_id, call.call_id))
            if want is None or dataclasses.replace(want, records=()) != call:
                problems.append(
                    f"call {call.run_id}/{call.call_id}: its state differs from its records"
                )
        if not problems:
            return checked
        return AuditCheck(
            ok=False,
            records=checked.records,
            head=checked.head,
            problems=(*checked.problems, *problems),
            first_bad_seq=checked.first_bad_seq,
        )

    def audit(self) -> Sequence[AuditRecord]:
        with self._lock:
            self._chain()
            return list(self._audit)

    def audit_head(self) -> tuple[int, str] | None:
        with self._lock:
            self._chain()
            return (len(self._audit), self._audit[-1].hash) if self._audit else None

    def _materialize(self) -> None:
        """Turn the events noted on the hot path into audit records, in order."""
        journal = self._journal
        for i in range(self._audited, len(journal), 5):
            kind, run_id, call_id, payload, at = journal[i : i + 5]
            if kind is _DECISION:
                d, state, stage, _ = payload
                self._append(
                    f"call.{state}",
                    run_id,
                    call_id,
                    at,
                    Decision(
                        actor=d[4],
                        tool=d[2],
                        tool_version=d[3],
                        arguments=d[5],
                        stage=stage,
                        decided_by=d[8],
                        effects=d[10],
                        approval_id=d[11],
                        message=d[9],
                        request_hash=d[6],
                        idempotency_key=d[7],
                        created_at=d[12],
                        updated_at=at,
                    ).encode(),
                )
            elif kind is _START:
                attempt, key, request_hash, tool_version, side, expires = payload
                self._append(
                    "attempt.started",
                    run_id,
                    call_id,
                    at,
                    AttemptStarted(
                        actor=self.worker,
                        attempt=attempt,
                        idempotency_key=key,
                        request_hash=request_hash,
                        tool_version=tool_version,
                        started_at=at,
                        key_expires_at=expires,
                        side_effecting=side,
                    ).encode(),
                )
            elif kind is _FINISH:
                attempt, actor, note, outcome, key = payload
                finish = AttemptFinish(
                    run_id=run_id,
                    call_id=call_id,
                    attempt=attempt,
                    idempotency_key=key,
                    outcome=_outcome(outcome),
                    actor=actor,
                    note=note,
                )
                ended = AttemptEnded.of(finish, self.worker)
                self._append(f"attempt.{outcome[0]}", run_id, call_id, at, ended.encode())
            else:
                self._append(kind, run_id, call_id, at, payload)
        self._audited = len(journal)

    def _append(
        self, kind: str, run_id: str, call_id: str | None, at: float, data: Mapping[str, Any]
    ) -> None:
        self._audit.append(
            AuditRecord(
                seq=len(self._audit) + 1,
                at=at,
                kind=kind,
                run_id=run_id,
                call_id=call_id,
                data=data,
            )
        )

    def _chain(self) -> None:
        """Hash the records appended since the last read."""
        self._materialize()
        audit = self._audit
        prev = audit[self._chained - 1].hash if self._chained else GENESIS
        for i in range(self._chained, len(audit)):
            r = audit[i]
            data = audit_json(r.data)
            h = audit_hash(prev, r.seq, r.at, r.kind, r.run_id, r.call_id, data)
            audit[i] = AuditRecord(
                seq=r.seq,
                at=r.at,
                kind=r.kind,
                run_id=r.run_id,
                call_id=r.call_id,
                data=r.data,
                prev_hash=prev,
                hash=h,
                data_json=data,
            )
            prev = h
        self._chained = len(audit)

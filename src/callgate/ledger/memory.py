"""`MemoryLedger`: the ledger kept in process memory, for tests and quick scripts.

It applies the same rules as the durable backends (`callgate.ledger.base`):
forward-only states, the idempotency matching rule, a hash-chained audit
trail. The chain is computed when the trail is read, so the hot path pays
nothing for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from callgate.ledger.base import (
    GENESIS,
    AttemptFinish,
    AttemptRecord,
    AttemptStart,
    AuditRecord,
    CallRecord,
    CallState,
    Claim,
    ClaimKind,
    Ledger,
    audit_hash,
    audit_json,
    begin_states,
    claim_for_key,
    default_worker,
    finish_data,
    may_decide,
    may_finish,
    settled_state,
)

__all__ = ["MemoryLedger"]

_RUN = Claim(kind=ClaimKind.RUN)


class _Key:
    __slots__ = ("expires_at", "holder", "outcome", "request_hash")

    def __init__(self, request_hash: str, holder: tuple[str, str], expires_at: float) -> None:
        self.request_hash = request_hash
        self.holder = holder
        self.expires_at = expires_at
        self.outcome: Any = None


class MemoryLedger(Ledger):
    """Everything in dicts behind one lock. Nothing survives the process.

    The hot path stores references to the (immutable by convention) records
    it is given and builds audit records only when the trail is read, so a
    call costs a few dictionary operations. A `CallRecord` passed to
    `record_decision` belongs to the ledger afterwards; reads return copies.
    """

    def __init__(self, *, worker: str | None = None) -> None:
        self.worker = worker or default_worker()
        self._lock = threading.Lock()
        self._calls: dict[tuple[str, str], CallRecord] = {}
        self._attempts: dict[tuple[str, str], list[Any]] = {}
        """Per call: start, outcome, start, outcome, ... (flat, one list per call)."""
        self._keys: dict[str, _Key] = {}
        # Events noted on the hot path, flat: kind, payload, two extras, time (five slots,
        # no tuple per event, so the garbage collector has fewer objects to walk).
        self._pending: list[Any] = []
        self._audit: list[AuditRecord] = []
        self._chained = 0

    def _event(self, kind: str, run_id: str, call_id: str | None, data: Mapping[str, Any]) -> None:
        self._pending.extend((kind, (run_id, call_id, data), None, None, time.time()))

    def record_decision(self, record: CallRecord) -> None:
        ident = (record.run_id, record.call_id)
        with self._lock:
            current = self._calls.get(ident)
            if current is None or may_decide(current.state, record.state):
                self._calls[ident] = record
            # State and stage change later on the same object: note them now.
            self._pending.extend(
                ("decision", record, record.state, record.stage, record.updated_at or time.time())
            )

    def begin_attempt(self, start: AttemptStart) -> Claim:
        ident = (start.run_id, start.call_id)
        with self._lock:
            call = self._calls.get(ident)
            if start.side_effecting:
                key = self._keys.get(start.idempotency_key)
                claim = (
                    None
                    if key is None
                    else claim_for_key(
                        start,
                        request_hash=key.request_hash,
                        holder=key.holder,
                        expires_at=key.expires_at,
                        outcome=key.outcome,
                    )
                )
                if claim is None and call is not None and call.state is not CallState.ADMITTED:
                    # The call already ran (its id came back): never a second execution.
                    claim = Claim(kind=ClaimKind.IN_PROGRESS, holder=ident)
                if claim is not None:
                    self._settle_without_running(ident, claim, start.started_at)
                    return claim
                self._keys[start.idempotency_key] = _Key(
                    start.request_hash, ident, start.key_expires_at
                )
            attempts = self._attempts.get(ident)
            if attempts is None:
                self._attempts[ident] = [start, None]
            else:
                attempts += (start, None)
            if call is not None and call.state in begin_states(start.side_effecting, start.attempt):
                call.state = CallState.RUNNING
                call.attempts = start.attempt
                call.updated_at = start.started_at
            self._pending.extend(("start", start, None, None, start.started_at))
            return _RUN

    def _settle_without_running(self, ident: tuple[str, str], claim: Claim, now: float) -> None:
        """Move a call that will not run to its final state, and audit why."""
        call = self._calls.get(ident)
        state, stage = settled_state(claim)
        if call is not None and call.state is CallState.ADMITTED:
            call.state, call.stage, call.updated_at = state, stage, now
        self._event(
            f"idempotency.{claim.kind.value}",
            ident[0],
            ident[1],
            {"actor": self.worker, "holder": list(claim.holder) if claim.holder else None},
        )

    def finish_attempt(self, finish: AttemptFinish) -> bool:
        outcome = finish.outcome
        ident = (finish.run_id, finish.call_id)
        with self._lock:
            call = self._calls.get(ident)
            if not may_finish(call.state if call is not None else None, outcome):
                return False
            key = self._keys.get(finish.idempotency_key)
            if key is not None and key.holder == ident:
                key.outcome = outcome
            attempts = self._attempts.get(ident, [])
            for i in range(0, len(attempts), 2):
                if attempts[i].attempt == finish.attempt:
                    attempts[i + 1] = outcome
            if call is not None:
                call.state = CallState(outcome.status)
                call.reconciled = call.reconciled or outcome.reconciled
                call.updated_at = outcome.finished_at
                call.stage = outcome.stage
            self._pending.extend(("finish", finish, None, None, outcome.finished_at or time.time()))
            return True

    def record_event(
        self, kind: str, *, run_id: str, call_id: str | None, data: Mapping[str, Any]
    ) -> None:
        with self._lock:
            self._event(kind, run_id, call_id, dict(data))

    def get_call(self, run_id: str, call_id: str) -> CallRecord | None:
        with self._lock:
            call = self._calls.get((run_id, call_id))
            return replace(call) if call is not None else None

    def calls(
        self,
        *,
        run_id: str | None = None,
        state: CallState | None = None,
        call_id: str | None = None,
    ) -> Sequence[CallRecord]:
        with self._lock:
            return [
                replace(c)
                for c in self._calls.values()
                if (run_id is None or c.run_id == run_id)
                and (state is None or c.state is state)
                and (call_id is None or c.call_id == call_id)
            ]

    def attempts(self, run_id: str, call_id: str) -> Sequence[AttemptRecord]:
        with self._lock:
            flat = list(self._attempts.get((run_id, call_id), ()))
        pairs = zip(flat[0::2], flat[1::2], strict=True)
        return [
            AttemptRecord(
                run_id=start.run_id,
                call_id=start.call_id,
                attempt=start.attempt,
                tool_version=start.tool_version,
                idempotency_key=start.idempotency_key,
                request_hash=start.request_hash,
                started_at=start.started_at,
                worker=self.worker,
                outcome=outcome,
            )
            for start, outcome in pairs
        ]

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
        pending = self._pending
        for i in range(0, len(pending), 5):
            kind, payload, state, stage, at = pending[i : i + 5]
            if kind == "decision":
                record: CallRecord = payload
                self._append(
                    f"call.{state.value}",
                    record.run_id,
                    record.call_id,
                    at,
                    {
                        "actor": record.principal,
                        "tool": record.tool,
                        "tool_version": record.tool_version,
                        "arguments": record.arguments,
                        "stage": stage,
                        "decided_by": record.decided_by,
                        "effects": list(record.effects),
                        "approval_id": record.approval_id,
                        "message": record.message,
                    },
                )
            elif kind == "start":
                start: AttemptStart = payload
                self._append(
                    "attempt.started",
                    start.run_id,
                    start.call_id,
                    at,
                    {
                        "actor": self.worker,
                        "attempt": start.attempt,
                        "idempotency_key": start.idempotency_key,
                        "request_hash": start.request_hash,
                        "tool_version": start.tool_version,
                    },
                )
            elif kind == "finish":
                finish: AttemptFinish = payload
                self._append(
                    f"attempt.{finish.outcome.status}",
                    finish.run_id,
                    finish.call_id,
                    at,
                    finish_data(finish, self.worker),
                )
            else:
                run_id, call_id, data = payload
                self._append(kind, run_id, call_id, at, data)
        self._pending.clear()

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
            audit[i] = replace(r, prev_hash=prev, hash=h, data_json=data)
            prev = h
        self._chained = len(audit)

"""`MemoryLedger`: the ledger kept in process memory, for tests and quick scripts."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from callgate.ledger.base import (
    AttemptFinish,
    AttemptRecord,
    AttemptStart,
    AuditRecord,
    CallRecord,
    CallState,
    Claim,
    ClaimKind,
    Ledger,
)

__all__ = ["MemoryLedger"]


class _Key:
    __slots__ = ("expires_at", "holder", "outcome", "request_hash")

    def __init__(self, request_hash: str, holder: tuple[str, str], expires_at: float) -> None:
        self.request_hash = request_hash
        self.holder = holder
        self.expires_at = expires_at
        self.outcome: Any = None


class MemoryLedger(Ledger):
    """Everything in dicts behind one lock. Nothing survives the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[tuple[str, str], CallRecord] = {}
        self._attempts: dict[tuple[str, str], list[AttemptRecord]] = {}
        self._keys: dict[str, _Key] = {}
        self._audit: list[AuditRecord] = []

    def _event(self, kind: str, run_id: str, call_id: str | None, data: Mapping[str, Any]) -> None:
        self._audit.append(
            AuditRecord(
                seq=len(self._audit) + 1,
                at=time.time(),
                kind=kind,
                run_id=run_id,
                call_id=call_id,
                data=data,
            )
        )

    def record_decision(self, record: CallRecord) -> None:
        with self._lock:
            self._calls[(record.run_id, record.call_id)] = record
            self._event(
                f"call.{record.state.value}",
                record.run_id,
                record.call_id,
                {
                    "tool": record.tool,
                    "tool_version": record.tool_version,
                    "principal": record.principal,
                    "arguments": record.arguments,
                    "stage": record.stage,
                    "decided_by": record.decided_by,
                    "effects": list(record.effects),
                },
            )

    def begin_attempt(self, start: AttemptStart) -> Claim:
        ident = (start.run_id, start.call_id)
        with self._lock:
            claim = self._check_key(start) if start.side_effecting else None
            if claim is not None:
                self._settle_without_running(ident, claim, start.started_at)
                return claim
            if start.side_effecting:
                self._keys[start.idempotency_key] = _Key(
                    start.request_hash, ident, start.key_expires_at
                )
            self._attempts.setdefault(ident, []).append(
                AttemptRecord(
                    run_id=start.run_id,
                    call_id=start.call_id,
                    attempt=start.attempt,
                    tool_version=start.tool_version,
                    idempotency_key=start.idempotency_key,
                    request_hash=start.request_hash,
                    started_at=start.started_at,
                )
            )
            call = self._calls.get(ident)
            if call is not None:
                self._calls[ident] = replace(
                    call,
                    state=CallState.RUNNING,
                    attempts=start.attempt,
                    updated_at=start.started_at,
                )
            self._event(
                "attempt.started",
                start.run_id,
                start.call_id,
                {"attempt": start.attempt, "idempotency_key": start.idempotency_key},
            )
            return Claim(kind=ClaimKind.RUN)

    def _check_key(self, start: AttemptStart) -> Claim | None:
        """The claim decided by an existing, unexpired key; None if the attempt may run."""
        key = self._keys.get(start.idempotency_key)
        if key is None or key.expires_at <= start.started_at:
            return None
        if key.request_hash != start.request_hash:
            return Claim(kind=ClaimKind.CONFLICT, holder=key.holder)
        if key.outcome is None:
            if key.holder == (start.run_id, start.call_id):
                return None
            return Claim(kind=ClaimKind.IN_PROGRESS, holder=key.holder)
        # Finished, or unknown: an unknown outcome is never re-run blindly.
        return Claim(kind=ClaimKind.REPLAY, outcome=key.outcome, holder=key.holder)

    def _settle_without_running(self, ident: tuple[str, str], claim: Claim, now: float) -> None:
        """Move a call that will not run to its final state, and audit why."""
        call = self._calls.get(ident)
        if claim.kind is ClaimKind.REPLAY and claim.outcome is not None:
            state, stage = CallState(claim.outcome.status), claim.outcome.stage
        else:
            state, stage = CallState.REJECTED, "execute"
        if call is not None:
            self._calls[ident] = replace(call, state=state, stage=stage, updated_at=now)
        self._event(
            f"idempotency.{claim.kind.value}",
            ident[0],
            ident[1],
            {"holder": list(claim.holder) if claim.holder else None},
        )

    def finish_attempt(self, finish: AttemptFinish) -> None:
        outcome = finish.outcome
        ident = (finish.run_id, finish.call_id)
        with self._lock:
            key = self._keys.get(finish.idempotency_key)
            if key is not None and key.holder == ident:
                key.outcome = outcome
            attempts = self._attempts.get(ident, [])
            for i, a in enumerate(attempts):
                if a.attempt == finish.attempt:
                    attempts[i] = replace(a, outcome=outcome)
            call = self._calls.get(ident)
            if call is not None:
                self._calls[ident] = replace(
                    call,
                    state=CallState(outcome.status),
                    reconciled=call.reconciled or outcome.reconciled,
                    updated_at=outcome.finished_at,
                    stage=outcome.stage,
                )
            self._event(
                f"attempt.{outcome.status}",
                finish.run_id,
                finish.call_id,
                {
                    "attempt": finish.attempt,
                    "error": outcome.error,
                    "reconciled": outcome.reconciled,
                },
            )

    def record_event(
        self, kind: str, *, run_id: str, call_id: str | None, data: Mapping[str, Any]
    ) -> None:
        with self._lock:
            self._event(kind, run_id, call_id, data)

    def get_call(self, run_id: str, call_id: str) -> CallRecord | None:
        return self._calls.get((run_id, call_id))

    def calls(
        self, *, run_id: str | None = None, state: CallState | None = None
    ) -> Sequence[CallRecord]:
        with self._lock:
            return [
                c
                for c in self._calls.values()
                if (run_id is None or c.run_id == run_id) and (state is None or c.state is state)
            ]

    def attempts(self, run_id: str, call_id: str) -> Sequence[AttemptRecord]:
        return list(self._attempts.get((run_id, call_id), ()))

    def audit(self) -> Sequence[AuditRecord]:
        return list(self._audit)

"""The ledger interface: the authoritative record of every call.

It holds what was proposed, what was decided, every attempt and every
outcome, and answers the one question that must be atomic: *may this
attempt run?* (`Ledger.begin_attempt`, which also enforces idempotency keys).
Backends: `MemoryLedger` here; SQLite and PostgreSQL build on the same records.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AttemptFinish",
    "AttemptRecord",
    "AttemptStart",
    "AuditRecord",
    "CallRecord",
    "CallState",
    "Claim",
    "ClaimKind",
    "Ledger",
    "Outcome",
]


class CallState(enum.StrEnum):
    """Where a call stands.

    ``proposed → rejected | pending → admitted → running → ok | error | unknown``
    """

    PROPOSED = "proposed"
    REJECTED = "rejected"
    PENDING = "pending"
    ADMITTED = "admitted"
    RUNNING = "running"
    OK = "ok"
    ERROR = "error"
    UNKNOWN = "unknown"

    @property
    def terminal(self) -> bool:
        """Whether nothing more will happen to the call by itself."""
        return self in (CallState.REJECTED, CallState.OK, CallState.ERROR, CallState.UNKNOWN)


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRecord:
    """One proposed call and the gate's decision about it."""

    run_id: str
    call_id: str
    tool: str
    tool_version: str | None
    principal: str
    arguments: str
    """Canonical JSON of the arguments, secret fields redacted."""
    state: CallState
    stage: str
    request_hash: str | None = None
    idempotency_key: str | None = None
    decided_by: str | None = None
    """The policy rule (or check) that decided the call."""
    message: str = ""
    effects: tuple[str, ...] = ()
    approval_id: str | None = None
    attempts: int = 0
    reconciled: bool = False
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How an attempt ended."""

    status: str
    """``ok``, ``error`` or ``unknown``."""
    content: str
    """The full model-facing text (the serialized result for ``ok``)."""
    error: str | None = None
    """A redacted description for developers (exception type and message)."""
    stage: str = "execute"
    """``execute``, or ``verify`` when the postcondition decided the outcome."""
    finished_at: float = 0.0
    reconciled: bool = False
    transaction_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptStart:
    """An attempt about to run; recorded (durably, for side effects) before the handler runs."""

    run_id: str
    call_id: str
    tool: str
    tool_version: str
    attempt: int
    idempotency_key: str
    request_hash: str
    started_at: float
    key_expires_at: float
    side_effecting: bool


class ClaimKind(enum.StrEnum):
    """The ledger's answer to "may this attempt run?"."""

    RUN = "run"
    """No attempt holds the key: run the handler."""
    REPLAY = "replay"
    """The key already finished with the same request: return the recorded outcome."""
    IN_PROGRESS = "in_progress"
    """The key is held by an attempt still running: do not run a second one."""
    CONFLICT = "conflict"
    """The key was used with different arguments: reject."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """The answer to `Ledger.begin_attempt`."""

    kind: ClaimKind
    outcome: Outcome | None = None
    holder: tuple[str, str] | None = None
    """``(run_id, call_id)`` of the call that first used the key."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptFinish:
    """The end of an attempt."""

    run_id: str
    call_id: str
    attempt: int
    idempotency_key: str
    outcome: Outcome


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRecord:
    """One attempt as the ledger holds it."""

    run_id: str
    call_id: str
    attempt: int
    tool_version: str
    idempotency_key: str
    request_hash: str
    started_at: float
    outcome: Outcome | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRecord:
    """One entry of the audit trail."""

    seq: int
    at: float
    kind: str
    run_id: str
    call_id: str | None
    data: Mapping[str, Any] = field(default_factory=dict)


class Ledger(abc.ABC):
    """Where calls, attempts and outcomes are recorded. Small on purpose: four writes."""

    @abc.abstractmethod
    def record_decision(self, record: CallRecord) -> None:
        """Record a proposed call and its decision (rejected, pending or admitted)."""

    @abc.abstractmethod
    def begin_attempt(self, start: AttemptStart) -> Claim:
        """Atomically claim the idempotency key and record the attempt as running.

        Same key and request hash, finished: `ClaimKind.REPLAY`. Same key,
        still running: `ClaimKind.IN_PROGRESS`. Same key, different request
        hash: `ClaimKind.CONFLICT`. Expired keys count as absent.
        """

    @abc.abstractmethod
    def finish_attempt(self, finish: AttemptFinish) -> None:
        """Record how an attempt ended and release its key with the outcome."""

    @abc.abstractmethod
    def record_event(
        self, kind: str, *, run_id: str, call_id: str | None, data: Mapping[str, Any]
    ) -> None:
        """Append an audit event that is not a state change (e.g. an approval decision)."""

    @abc.abstractmethod
    def get_call(self, run_id: str, call_id: str) -> CallRecord | None:
        """The record of one call, or None."""

    @abc.abstractmethod
    def calls(
        self, *, run_id: str | None = None, state: CallState | None = None
    ) -> Sequence[CallRecord]:
        """Call records, oldest first, optionally filtered."""

    @abc.abstractmethod
    def attempts(self, run_id: str, call_id: str) -> Sequence[AttemptRecord]:
        """Every attempt of one call, in order."""

    @abc.abstractmethod
    def audit(self) -> Sequence[AuditRecord]:
        """The audit trail, oldest first."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; the memory ledger has none."""

"""Ledgers: the authoritative record of calls, attempts, outcomes and the audit trail."""

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
    Outcome,
)
from callgate.ledger.memory import MemoryLedger

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
    "MemoryLedger",
    "Outcome",
]

"""Ledgers: the authoritative record of calls, attempts, outcomes and the audit trail.

`MemoryLedger` for tests, `SQLiteLedger` (one file; the default `Gate` keeps
``./callgate.db``) and `PostgresLedger` (many workers). See docs/ledger.md.
"""

from callgate.ledger.base import (
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
    LedgerError,
    LedgerQueries,
    Outcome,
)
from callgate.ledger.memory import MemoryLedger
from callgate.ledger.postgres import PostgresLedger
from callgate.ledger.sqlite import DEFAULT_PATH, SQLiteLedger

__all__ = [
    "DEFAULT_PATH",
    "AttemptFinish",
    "AttemptRecord",
    "AttemptStart",
    "AuditCheck",
    "AuditRecord",
    "CallRecord",
    "CallState",
    "Claim",
    "ClaimKind",
    "Ledger",
    "LedgerError",
    "LedgerQueries",
    "MemoryLedger",
    "Outcome",
    "PostgresLedger",
    "SQLiteLedger",
    "default_ledger",
]


def default_ledger() -> Ledger:
    """The ledger a `Gate` uses when given none: `SQLiteLedger` at ``./callgate.db``."""
    return SQLiteLedger(DEFAULT_PATH)

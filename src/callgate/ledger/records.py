"""The journal's record kinds and an outcome's statuses, named once.

Every kind of record a ledger writes is a member of `RecordKind` (its value is the
text stored in the journal's ``kind`` column); `OutcomeStatus` is how an attempt
ended. Both are `enum.StrEnum`, so a member compares equal to its stored text and
records read back from a database need no conversion. Kinds a gate or an
application records as events (``note.*``, ``call.renamed``, ...) are free text and
are not members.
"""

from __future__ import annotations

import enum

__all__ = ["APPROVAL_CHANGES", "DECISIONS", "OUTCOMES", "OutcomeStatus", "RecordKind"]


class OutcomeStatus(enum.StrEnum):
    """How an attempt ended (`callgate.ledger.base.Outcome.status`)."""

    OK = "ok"
    ERROR = "error"
    UNKNOWN = "unknown"


class RecordKind(enum.StrEnum):
    """Every kind of record the ledger writes itself (and so refuses from `record_event`)."""

    CALL_PROPOSED = "call.proposed"
    CALL_REJECTED = "call.rejected"
    CALL_PENDING = "call.pending"
    CALL_ADMITTED = "call.admitted"
    ATTEMPT_STARTED = "attempt.started"
    ATTEMPT_OK = "attempt.ok"
    ATTEMPT_ERROR = "attempt.error"
    ATTEMPT_UNKNOWN = "attempt.unknown"
    KEY_REPLAY = "idempotency.replay"
    KEY_IN_PROGRESS = "idempotency.in_progress"
    KEY_CONFLICT = "idempotency.conflict"
    KEY_OVER_BUDGET = "idempotency.over_budget"
    KEY_FORGED = "idempotency.forged"
    APPROVAL_REQUESTED = "approval.requested"
    APPROVAL_APPROVED = "approval.approved"
    APPROVAL_DENIED = "approval.denied"
    APPROVAL_USED = "approval.used"
    APPROVAL_RELEASED = "approval.released"
    APPROVAL_FORGED = "approval.forged"
    RUN_OPENED = "run.opened"
    RUN_INTENT = "run.intent"
    RUN_TRUSTED = "run.trusted"
    RUN_EXPOSED = "run.exposed"
    LEDGER_MIGRATED = "ledger.migrated"
    MIGRATED_CALL = "migrated.call"
    MIGRATED_KEY = "migrated.key"
    MIGRATED_APPROVAL = "migrated.approval"
    CHECKPOINT = "journal.checkpoint"

    @classmethod
    def attempt_end(cls, status: str) -> RecordKind:
        """The kind of the record of an attempt that ended with ``status``."""
        return cls("attempt." + OutcomeStatus(status).value)


OUTCOMES = frozenset(s.value for s in OutcomeStatus)
"""The statuses an attempt ends with, as stored."""
DECISIONS = frozenset({"proposed", "rejected", "pending", "admitted"})
"""The call states a decision record sets."""
APPROVAL_CHANGES = frozenset(
    {
        RecordKind.APPROVAL_REQUESTED,
        RecordKind.APPROVAL_APPROVED,
        RecordKind.APPROVAL_DENIED,
        RecordKind.APPROVAL_USED,
        RecordKind.APPROVAL_RELEASED,
    }
)
"""The kinds that change an approval's row."""

"""The SQL ledgers' codecs: each table's row and the value it holds, both ways, in one place.

A call, an idempotency key, an approval and a journal record each have a reader
(``*_from_row``, over the columns of `callgate.ledger.sql_statements`) and a writer
(``*_row``) side by side, so a column added to one is added to the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pydantic_core

from callgate.approvals import ApprovalRequest, ApprovalStatus
from callgate.ledger.base import AuditRecord, CallRecord, CallState
from callgate.ledger.chains import ANCHOR
from callgate.ledger.journal import KeyRow

__all__ = [
    "approval_from_row",
    "approval_row",
    "call_from_row",
    "call_row",
    "dumps",
    "key_from_row",
    "key_row",
    "record_from_row",
    "record_row",
    "seqs_from",
    "seqs_text",
    "unparsed",
]


def dumps(data: Any) -> str:
    """The text a record's data is stored (and hashed) as."""
    return pydantic_core.to_json(data, fallback=str).decode()


# -- rows ---------------------------------------------------------------------------------


def call_from_row(r: Sequence[Any]) -> CallRecord:
    return CallRecord(
        run_id=r[0],
        call_id=r[1],
        tool=r[2],
        tool_version=r[3],
        principal=r[4],
        arguments=r[5],
        state=CallState(r[6]),
        stage=r[7],
        request_hash=r[8],
        idempotency_key=r[9],
        decided_by=r[10],
        message=r[11],
        effects=tuple(pydantic_core.from_json(r[12])),
        approval_id=r[13],
        attempts=r[14],
        reconciled=bool(r[15]),
        created_at=r[16],
        updated_at=r[17],
        records=seqs_from(r[18]) if len(r) > 18 else (),
    )


def call_row(c: CallRecord) -> tuple[Any, ...]:
    return (
        c.run_id,
        c.call_id,
        c.tool,
        c.tool_version,
        c.principal,
        c.arguments,
        c.state.value,
        c.stage,
        c.request_hash,
        c.idempotency_key,
        c.decided_by,
        c.message,
        dumps(list(c.effects)),
        c.approval_id,
        c.attempts,
        int(c.reconciled),
        c.created_at,
        c.updated_at,
        seqs_text(c.records),
    )


def seqs_text(seqs: tuple[int, ...]) -> str:
    """A call's record numbers as stored: ``1,2,5``."""
    return ",".join(map(str, seqs))


def seqs_from(text: str | None) -> tuple[int, ...]:
    """A call's record numbers from their stored text; a malformed entry is skipped (an edit
    `verify` reports)."""
    if not text:
        return ()
    return tuple(int(x) for x in text.split(",") if x.isdigit())


def key_from_row(r: Sequence[Any]) -> KeyRow:
    return KeyRow(
        key=r[0],
        request_hash=r[1],
        run_id=r[2],
        call_id=r[3],
        attempt=r[4],
        expires_at=r[5],
        status=r[6],
        outcome_seq=r[7],
    )


def key_row(k: KeyRow) -> tuple[Any, ...]:
    return (
        k.key,
        k.request_hash,
        k.run_id,
        k.call_id,
        k.attempt,
        k.expires_at,
        k.status,
        k.outcome_seq,
    )


def approval_from_row(r: Sequence[Any]) -> ApprovalRequest:
    return ApprovalRequest(
        id=r[0],
        run_id=r[1],
        call_id=r[2],
        principal=r[3],
        tool=r[4],
        arguments_json=r[5],
        arguments_hash=r[6],
        resource_version=r[7],
        effects=tuple(pydantic_core.from_json(r[8])),
        preview=r[9],
        policy_version=r[10],
        created_at=r[11],
        expires_at=r[12],
        status=ApprovalStatus(r[13]),
        decided_by=r[14],
        decided_at=r[15],
        reason=r[16],
        used_at=r[17],
        used_by=r[18],
        resumable=bool(r[19]),
        decision_seq=r[20],
    )


def approval_row(a: ApprovalRequest) -> tuple[Any, ...]:
    return (
        a.id,
        a.run_id,
        a.call_id,
        a.principal,
        a.tool,
        a.arguments_json,
        a.arguments_hash,
        a.resource_version,
        dumps(list(a.effects)),
        a.preview,
        a.policy_version,
        a.created_at,
        a.expires_at,
        a.status.value,
        a.decided_by,
        a.decided_at,
        a.reason,
        a.used_at,
        a.used_by,
        int(a.resumable),
        a.decision_seq,
    )


_ANCHORED = '{"' + ANCHOR + '":'


def record_from_row(r: Sequence[Any]) -> AuditRecord:
    """A journal row (`JOURNAL_COLUMNS`: the chain is the ninth column) as a record; data
    that is not a JSON object is kept as ``{"unreadable": text}`` (an edited record: its
    hash says so)."""
    text = r[5]
    try:
        data = pydantic_core.from_json(text)
    except ValueError:
        data = {"unreadable": text}
    if not isinstance(data, dict):
        data = {"value": data}
    elif ANCHOR in data and text.startswith(_ANCHORED):
        del data[ANCHOR]  # the ledger's own (`callgate.ledger.chains.ANCHOR`): kept in the text
    return AuditRecord(
        seq=r[0],
        at=r[1],
        kind=r[2],
        run_id=r[3],
        call_id=r[4],
        data=data,
        prev_hash=r[6],
        hash=r[7],
        data_json=text,
        chain=r[8] if len(r) > 8 else None,
    )


def record_row(rec: AuditRecord) -> tuple[Any, ...]:
    """A record as its journal row (`JOURNAL_COLUMNS`)."""
    return (
        rec.seq,
        rec.at,
        rec.kind,
        rec.run_id,
        rec.call_id,
        rec.data_json,
        rec.prev_hash,
        rec.hash,
        rec.chain,
    )


def unparsed(r: Sequence[Any]) -> AuditRecord:
    """A journal row whose data the truth's fold does not read: its text, for the hash."""
    return AuditRecord(
        seq=r[0],
        at=r[1],
        kind=r[2],
        run_id=r[3],
        call_id=r[4],
        prev_hash=r[6],
        hash=r[7],
        data_json=r[5],
        chain=r[8] if len(r) > 8 else None,
    )

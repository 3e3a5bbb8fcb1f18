"""`SqlApprovals`: approval requests in a SQL ledger's database (SQLite or PostgreSQL).

Every change is a journal record of the ledger (``approval.requested``,
``approval.approved``/``denied``, ``approval.used``, ``approval.released``),
written in one of its transactions, and the ``approvals`` table is derived from
those records (`callgate.ledger.journal`). Writers take turns on the journal's
head, so a decision and a use are atomic across processes: two processes racing
for one approval, one appends its use and the other finds it used. Exactly one
call runs.

A use is checked against the journal, not the table: the approval's decision
record must exist, approve exactly this request, hash to its content and link
to the record before it (`callgate.ledger.sql_writes.decision_problem`). A row
flipped to ``approved`` by a direct ``UPDATE`` is never spent: the attempt is
recorded as ``approval.forged`` and the call waits for a real decision.

A decision commits durably; a request and a use commit like a rejection
(visible to every process at once; made durable by the next durable commit,
at the latest the attempt that follows the use).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from callgate.approvals import ApprovalRequest, Approvals, ApprovalStatus, check_decider
from callgate.errors import ApprovalError
from callgate.ledger.sql_statements import APPROVAL_COLUMNS
from callgate.ledger.sql_writes import (
    CONSUME,
    DECIDE_APPROVAL,
    RELEASE,
    REQUEST,
    Consume,
    Item,
    approval_from_row,
)


class _Ledger(Protocol):
    """What the store needs of its ledger (`callgate.ledger.sql.SqlLedger` builds the store
    and hands itself in): a transaction of items, the deferred writes flushed, a read."""

    def _transact(self, items: Sequence[Item], *, durable: bool) -> list[Any]: ...

    def _flush(self) -> None: ...

    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[Any]: ...


__all__ = ["SqlApprovals"]

_SELECT = f"SELECT {APPROVAL_COLUMNS} FROM approvals"


class SqlApprovals(Approvals):
    """The approval requests of one SQL ledger; see the module docstring."""

    def __init__(self, ledger: _Ledger) -> None:
        self.ledger = ledger

    def _write(self, kind: int, payload: Any, *, durable: bool = False) -> Any:
        return self.ledger._transact(((kind, payload),), durable=durable)[0]

    def request(self, request: ApprovalRequest) -> ApprovalRequest:
        result: ApprovalRequest = self._write(REQUEST, request)
        return result

    def consume(
        self,
        *,
        principal: str,
        tool: str,
        arguments_hash: str,
        resource_version: str | None,
        run_id: str,
        now: float | None = None,
        used_by: str | None = None,
    ) -> ApprovalRequest | None:
        at = time.time() if now is None else now
        result: ApprovalRequest | None = self._write(
            CONSUME,
            Consume(
                principal=principal,
                tool=tool,
                arguments_hash=arguments_hash,
                resource_version=resource_version,
                run_id=run_id,
                now=at,
                used_by=used_by,
            ),
        )
        return result

    def release(self, approval_id: str, *, used_by: str) -> bool:
        return bool(self._write(RELEASE, (approval_id, used_by)))

    def decide(
        self, approval_id: str, *, approve: bool, by: str, reason: str | None = None
    ) -> ApprovalRequest:
        check_decider(by)
        result: ApprovalRequest | str = self._write(
            DECIDE_APPROVAL, (approval_id, approve, by, reason, time.time()), durable=True
        )
        if isinstance(result, str):
            raise ApprovalError(result)
        return result

    def get(self, approval_id: str) -> ApprovalRequest | None:
        self.ledger._flush()
        rows = self.ledger._query(f"{_SELECT} WHERE id = ?", (approval_id,))
        return approval_from_row(rows[0]) if rows else None

    def list(self, status: ApprovalStatus | None = None) -> Sequence[ApprovalRequest]:
        now = time.time()
        where: str
        params: list[Any] = []
        if status is None:
            where = ""
        elif status is ApprovalStatus.EXPIRED:
            where = " WHERE status IN ('pending', 'approved') AND expires_at <= ?"
            params.append(now)
        elif status in (ApprovalStatus.PENDING, ApprovalStatus.APPROVED):
            where = " WHERE status = ? AND expires_at > ?"
            params.extend((ApprovalStatus(status).value, now))
        else:
            where = " WHERE status = ?"
            params.append(ApprovalStatus(status).value)
        self.ledger._flush()
        rows = self.ledger._query(f"{_SELECT}{where} ORDER BY created_at, id", params)
        return [approval_from_row(r) for r in rows]

    def __repr__(self) -> str:
        return f"SqlApprovals({self.ledger!r})"

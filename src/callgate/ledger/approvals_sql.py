"""`SqlApprovals`: approval requests in a SQL ledger's database (SQLite or PostgreSQL).

The table is created by the ledger's schema migration 2 (`callgate.ledger.sql_schema`).
Every change is one transaction of the ledger (an ``APPLY`` item), together
with its audit record, so a request or a decision is never stored without
being audited. The two changes that must be atomic across processes are
single conditional statements:

* a decision: ``UPDATE … WHERE id = ? AND status = 'pending' AND expires_at > now``;
* a use: ``UPDATE … WHERE id = (the oldest approved, unexpired request bound to
  the effect) AND status = 'approved' AND expires_at > now RETURNING …``.
  Two processes racing for one approval: one statement changes the row, the
  other finds it no longer approved (SQLite serializes writers; PostgreSQL
  re-checks the condition on the row it waited for). Exactly one call runs.

A decision commits durably; a request and a use commit like a rejection
(visible to every process at once; made durable by the next durable commit,
at the latest the attempt that follows the use).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from callgate.approvals import (
    ApprovalRequest,
    Approvals,
    ApprovalStatus,
    check_decider,
    decided_data,
    requested_data,
    undecidable,
)
from callgate.errors import ApprovalError
from callgate.ledger.sql import SqlLedger
from callgate.ledger.sql_writes import APPLY, _Tx

__all__ = ["SqlApprovals"]

_COLUMNS = (
    "id, run_id, call_id, principal, tool, arguments_json, arguments_hash, resource_version, "
    "effects, preview, policy_version, created_at, expires_at, status, decided_by, decided_at, "
    "reason, used_at, used_by, resumable"
)
_SELECT = f"SELECT {_COLUMNS} FROM approvals"
_OPEN = "('pending', 'approved', 'denied')"


def _effect(resource_version: str | None) -> str:
    """The condition binding a row to one effect in one run (``?``: principal, tool, hash,
    run id[, version]); see `ApprovalRequest.binds`."""
    version = "resource_version IS NULL" if resource_version is None else "resource_version = ?"
    return f"principal = ? AND tool = ? AND arguments_hash = ? AND run_id = ? AND {version}"


def _effect_params(
    principal: str, tool: str, arguments_hash: str, run_id: str, resource_version: str | None
) -> list[Any]:
    params: list[Any] = [principal, tool, arguments_hash, run_id]
    if resource_version is not None:
        params.append(resource_version)
    return params


def _request_from(r: Sequence[Any]) -> ApprovalRequest:
    return ApprovalRequest(
        id=r[0],
        run_id=r[1],
        call_id=r[2],
        principal=r[3],
        tool=r[4],
        arguments_json=r[5],
        arguments_hash=r[6],
        resource_version=r[7],
        effects=tuple(json.loads(r[8])),
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
    )


class SqlApprovals(Approvals):
    """The approval requests of one SQL ledger; see the module docstring."""

    def __init__(self, ledger: SqlLedger) -> None:
        self.ledger = ledger

    def _apply(self, fn: Any, *, durable: bool = False) -> Any:
        """Run ``fn(tx)`` in one transaction of the ledger; ``fn`` must not raise."""
        return self.ledger._transact(((APPLY, fn),), durable=durable)[0]

    def request(self, request: ApprovalRequest) -> ApprovalRequest:
        def insert(tx: _Tx) -> ApprovalRequest:
            found = tx.x(
                f"{_SELECT} WHERE {_effect(request.resource_version)} "
                f"AND status IN {_OPEN} AND expires_at > ? ORDER BY created_at LIMIT 1",
                [
                    *_effect_params(
                        request.principal,
                        request.tool,
                        request.arguments_hash,
                        request.run_id,
                        request.resource_version,
                    ),
                    request.created_at,
                ],
            ).fetchone()
            if found is not None:
                return _request_from(found)
            tx.x(
                f"INSERT INTO approvals ({_COLUMNS}) VALUES ({', '.join('?' * 20)})",
                (
                    request.id,
                    request.run_id,
                    request.call_id,
                    request.principal,
                    request.tool,
                    request.arguments_json,
                    request.arguments_hash,
                    request.resource_version,
                    json.dumps(list(request.effects)),
                    request.preview,
                    request.policy_version,
                    request.created_at,
                    request.expires_at,
                    request.status.value,
                    request.decided_by,
                    request.decided_at,
                    request.reason,
                    request.used_at,
                    request.used_by,
                    int(request.resumable),
                ),
            )
            tx.event("approval.requested", request.run_id, request.call_id, requested_data(request))
            return request

        result: ApprovalRequest = self._apply(insert)
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
        rows = self.ledger._query(
            "UPDATE approvals SET status = 'used', used_at = ?, used_by = ? WHERE id = ("
            f"SELECT id FROM approvals WHERE {_effect(resource_version)} "
            "AND status = 'approved' AND expires_at > ? ORDER BY created_at LIMIT 1"
            f") AND status = 'approved' AND expires_at > ? RETURNING {_COLUMNS}",
            [
                at,
                used_by,
                *_effect_params(principal, tool, arguments_hash, run_id, resource_version),
                at,
                at,
            ],
        )
        return _request_from(rows[0]) if rows else None

    def release(self, approval_id: str, *, used_by: str) -> bool:
        rows = self.ledger._query(
            "UPDATE approvals SET status = 'approved', used_at = NULL, used_by = NULL "
            "WHERE id = ? AND status = 'used' AND used_by = ? RETURNING id",
            [approval_id, used_by],
        )
        if rows:
            self.ledger.record_event(
                "approval.released",
                run_id=used_by.split("/", 1)[0],
                call_id=used_by.split("/", 1)[-1],
                data={"approval_id": approval_id, "by": used_by},
            )
        return bool(rows)

    def decide(
        self, approval_id: str, *, approve: bool, by: str, reason: str | None = None
    ) -> ApprovalRequest:
        check_decider(by)
        now = time.time()
        status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED

        def update(tx: _Tx) -> ApprovalRequest | str:
            row = tx.x(
                "UPDATE approvals SET status = ?, decided_by = ?, decided_at = ?, reason = ? "
                "WHERE id = ? AND status = 'pending' AND expires_at > ? "
                f"RETURNING {_COLUMNS}",
                (status.value, by, now, reason, approval_id, now),
            ).fetchone()
            if row is None:
                current = tx.x(f"{_SELECT} WHERE id = ?", (approval_id,)).fetchone()
                return undecidable(
                    _request_from(current) if current is not None else None, approval_id, now
                )
            decided = _request_from(row)
            tx.event(
                f"approval.{status.value}", decided.run_id, decided.call_id, decided_data(decided)
            )
            return decided

        result: ApprovalRequest | str = self._apply(update, durable=True)
        if isinstance(result, str):
            raise ApprovalError(result)
        return result

    def get(self, approval_id: str) -> ApprovalRequest | None:
        rows = self.ledger._query(f"{_SELECT} WHERE id = ?", (approval_id,))
        return _request_from(rows[0]) if rows else None

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
        rows = self.ledger._query(f"{_SELECT}{where} ORDER BY created_at, id", params)
        return [_request_from(r) for r in rows]

    def __repr__(self) -> str:
        return f"SqlApprovals({self.ledger!r})"

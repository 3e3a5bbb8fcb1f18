"""Stage ``approval``: an ``ask`` decision waits for a person, bound to the exact effect.

An approval covers one call only: the same principal, tool, canonical
arguments (by hash) and resource version, before its expiry, once. Changed
arguments are a different effect and need a new approval.
"""

from __future__ import annotations

import abc
import enum
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace

from callgate.errors import ApprovalError

__all__ = ["ApprovalRequest", "ApprovalStatus", "Approvals", "MemoryApprovals"]

DEFAULT_APPROVAL_TTL = 24 * 3600.0


class ApprovalStatus(enum.StrEnum):
    """Where an approval request stands."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    USED = "used"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """A request for a person to approve exactly one call."""

    id: str
    run_id: str
    call_id: str
    principal: str
    tool: str
    arguments_json: str
    arguments_hash: str
    effects: tuple[str, ...]
    preview: str
    created_at: float
    expires_at: float
    resource_version: str | None = None
    policy_version: str | None = None
    status: ApprovalStatus = ApprovalStatus.PENDING
    decided_by: str | None = None
    reason: str | None = None

    def binds(
        self, *, principal: str, tool: str, arguments_hash: str, resource_version: str | None
    ) -> bool:
        """Whether this request is for exactly that effect."""
        return (
            self.principal == principal
            and self.tool == tool
            and self.arguments_hash == arguments_hash
            and self.resource_version == resource_version
        )


class Approvals(abc.ABC):
    """Where approval requests live. Decisions come from trusted code or a person."""

    @abc.abstractmethod
    def request(self, request: ApprovalRequest) -> ApprovalRequest:
        """Store ``request``, or return the unexpired pending, approved or denied request
        already bound to the same effect (a denied call stays denied until it expires)."""

    @abc.abstractmethod
    def consume(
        self,
        *,
        principal: str,
        tool: str,
        arguments_hash: str,
        resource_version: str | None,
        now: float | None = None,
    ) -> ApprovalRequest | None:
        """Use up an approved, unexpired request bound to that exact effect, if one exists."""

    @abc.abstractmethod
    def decide(
        self, approval_id: str, *, approve: bool, by: str, reason: str | None = None
    ) -> ApprovalRequest:
        """Approve or deny a pending request; errors for unknown, decided or expired ones."""

    @abc.abstractmethod
    def get(self, approval_id: str) -> ApprovalRequest | None:
        """The request with that id, or None."""

    @abc.abstractmethod
    def list(self, status: ApprovalStatus | None = None) -> Sequence[ApprovalRequest]:
        """Every request, or those with ``status``, oldest first."""

    def approve(self, approval_id: str, *, by: str) -> ApprovalRequest:
        """Approve a pending request: it releases exactly that call, once."""
        return self.decide(approval_id, approve=True, by=by)

    def deny(self, approval_id: str, *, by: str, reason: str) -> ApprovalRequest:
        """Deny a pending request."""
        return self.decide(approval_id, approve=False, by=by, reason=reason)


def new_approval_id() -> str:
    """A fresh, unguessable approval id."""
    return "apr_" + uuid.uuid4().hex[:20]


class MemoryApprovals(Approvals):
    """Approvals kept in memory: for tests and single-process use."""

    def __init__(self) -> None:
        self._items: dict[str, ApprovalRequest] = {}
        self._lock = threading.Lock()

    def request(self, request: ApprovalRequest) -> ApprovalRequest:
        with self._lock:
            for item in self._items.values():
                if (
                    item.status
                    in (ApprovalStatus.PENDING, ApprovalStatus.APPROVED, ApprovalStatus.DENIED)
                    and item.expires_at > request.created_at
                    and item.binds(
                        principal=request.principal,
                        tool=request.tool,
                        arguments_hash=request.arguments_hash,
                        resource_version=request.resource_version,
                    )
                ):
                    return item
            self._items[request.id] = request
            return request

    def consume(
        self,
        *,
        principal: str,
        tool: str,
        arguments_hash: str,
        resource_version: str | None,
        now: float | None = None,
    ) -> ApprovalRequest | None:
        now = time.time() if now is None else now
        with self._lock:
            for item in self._items.values():
                if (
                    item.status is ApprovalStatus.APPROVED
                    and item.expires_at > now
                    and item.binds(
                        principal=principal,
                        tool=tool,
                        arguments_hash=arguments_hash,
                        resource_version=resource_version,
                    )
                ):
                    used = replace(item, status=ApprovalStatus.USED)
                    self._items[item.id] = used
                    return used
        return None

    def decide(
        self, approval_id: str, *, approve: bool, by: str, reason: str | None = None
    ) -> ApprovalRequest:
        with self._lock:
            item = self._items.get(approval_id)
            if item is None:
                raise ApprovalError(f"no approval request has the id {approval_id!r}")
            if item.status is not ApprovalStatus.PENDING:
                raise ApprovalError(
                    f"approval {approval_id} is already {item.status.value}; "
                    "only a pending request can be decided"
                )
            if item.expires_at <= time.time():
                raise ApprovalError(
                    f"approval {approval_id} expired; the call must be proposed again"
                )
            status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED
            decided = replace(item, status=status, decided_by=by, reason=reason)
            self._items[approval_id] = decided
            return decided

    def get(self, approval_id: str) -> ApprovalRequest | None:
        return self._items.get(approval_id)

    def list(self, status: ApprovalStatus | None = None) -> Sequence[ApprovalRequest]:
        return [i for i in self._items.values() if status is None or i.status is status]

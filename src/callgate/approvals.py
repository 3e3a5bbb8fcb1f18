"""The approval store: an ``ask`` decision's request waits here for a person, bound to
the exact effect (the approve stage, which asks and spends them, is `callgate.approve`).

An approval covers one call only: the same principal, tool, canonical
arguments (by hash) and resource version, before its expiry, once. Changed
arguments are a different effect and need a new approval.

Where requests live is the ledger's business (`Ledger.approvals`): the SQL
ledgers keep them in their database (`callgate.ledger.approvals_sql`), so a
request survives a restart and is decided from another process
(``callgate approvals approve ID``); `MemoryApprovals` keeps them beside a
memory ledger. Every request and decision is an audit record in that ledger;
the gate audits each use. See docs/approvals.md.
"""

from __future__ import annotations

import abc
import enum
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from callgate.errors import ApprovalError


class EventLog(Protocol):
    """Where a `MemoryApprovals` audits requests and decisions: a ledger (any `Ledger`)."""

    def record_event(
        self, kind: str, *, run_id: str, call_id: str | None, data: Mapping[str, Any]
    ) -> None: ...


__all__ = ["ApprovalRequest", "ApprovalStatus", "Approvals", "MemoryApprovals"]

DEFAULT_APPROVAL_TTL = 24 * 3600.0


class ApprovalStatus(enum.StrEnum):
    """Where an approval request stands.

    ``pending → approved → used`` or ``pending → denied``. ``expired`` is
    never stored: it is what a pending or approved request has become once
    its expiry passed (`ApprovalRequest.state`).
    """

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    USED = "used"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """A request for a person to approve exactly one call."""

    id: str
    run_id: str
    call_id: str
    principal: str
    tool: str
    arguments_json: str
    """Canonical JSON of the arguments, secret fields and credential-shaped text redacted."""
    arguments_hash: str
    effects: tuple[str, ...]
    preview: str
    created_at: float
    expires_at: float
    resource_version: str | None = None
    policy_version: str | None = None
    """The version of the policy that asked; a decision is granted under it."""
    status: ApprovalStatus = ApprovalStatus.PENDING
    decided_by: str | None = None
    decided_at: float | None = None
    reason: str | None = None
    used_at: float | None = None
    used_by: str | None = None
    """``run_id/call_id`` of the call the approval released."""
    resumable: bool = False
    """Whether ``arguments_json`` is exactly the call's arguments (nothing was redacted),
    so that another process can submit the call again from the ledger (`Gate.resume_run`)."""
    decision_seq: int | None = None
    """The journal record of its decision (SQL ledgers): a use is checked against that
    record, never against the stored status alone (`callgate.ledger.journal`)."""

    def binds(
        self,
        *,
        principal: str,
        tool: str,
        arguments_hash: str,
        resource_version: str | None,
        run_id: str,
    ) -> bool:
        """Whether this request is for exactly that effect, in that run.

        Within a run the exact effect is the call's identity (a model may send a
        pending call again under a new id); outside it nothing matches, so no other
        run (another tenant's identical call included) can spend the approval.
        """
        return (
            self.principal == principal
            and self.tool == tool
            and self.arguments_hash == arguments_hash
            and self.resource_version == resource_version
            and self.run_id == run_id
        )

    def state(self, now: float | None = None) -> ApprovalStatus:
        """The status as of ``now``: a pending or approved request past its expiry is expired."""
        live = self.status in (ApprovalStatus.PENDING, ApprovalStatus.APPROVED)
        if live and self.expires_at <= (time.time() if now is None else now):
            return ApprovalStatus.EXPIRED
        return self.status


class Approvals(abc.ABC):
    """Where approval requests live. Decisions come from trusted code or a person.

    Every backend applies the same rules: a request is decided once, only
    while pending and unexpired, by someone named; an approved request is
    used at most once (`consume` is atomic), only before its expiry.
    """

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
        run_id: str,
        now: float | None = None,
        used_by: str | None = None,
    ) -> ApprovalRequest | None:
        """Atomically use up an approved, unexpired request bound to that exact effect in
        run ``run_id``, if one exists: no other run can spend it (another tenant's
        identical call included). ``used_by`` (``run_id/call_id``) records which call
        it released."""

    @abc.abstractmethod
    def decide(
        self, approval_id: str, *, approve: bool, by: str, reason: str | None = None
    ) -> ApprovalRequest:
        """Approve or deny a pending request; `ApprovalError` for an unknown, decided, used
        or expired one (nothing changes then)."""

    @abc.abstractmethod
    def get(self, approval_id: str) -> ApprovalRequest | None:
        """The request with that id, as stored (see `ApprovalRequest.state`), or None."""

    @abc.abstractmethod
    def list(self, status: ApprovalStatus | None = None) -> Sequence[ApprovalRequest]:
        """Every request, or those whose `ApprovalRequest.state` is ``status``, oldest first."""

    @abc.abstractmethod
    def release(self, approval_id: str, *, used_by: str) -> bool:
        """Give back an approval that ``used_by`` took but whose call never ran.

        Used when a call admitted under an approval is then stopped before its
        handler (a failed dependency, a deadline, an idempotency conflict): the
        approval is approved again, still single-use. True if it was released.
        """

    def approve(self, approval_id: str, *, by: str) -> ApprovalRequest:
        """Approve a pending request: it releases exactly that call, once."""
        return self.decide(approval_id, approve=True, by=by)

    def deny(self, approval_id: str, *, by: str, reason: str) -> ApprovalRequest:
        """Deny a pending request."""
        return self.decide(approval_id, approve=False, by=by, reason=reason)


def new_approval_id() -> str:
    """A fresh, unguessable approval id."""
    return "apr_" + uuid.uuid4().hex[:20]


# -- rules every store shares ------------------------------------------------------------


def check_decider(by: str) -> None:
    """A decision names who made it."""
    if not isinstance(by, str) or not by.strip():
        raise ApprovalError("say who decides the approval (by=...): a person or a service name")


def undecidable(request: ApprovalRequest | None, approval_id: str, now: float) -> str:
    """Why ``request`` cannot be decided now (the message of an `ApprovalError`)."""
    if request is None:
        return f"no approval request has the id {approval_id!r}"
    if request.status is ApprovalStatus.USED:
        return (
            f"approval {approval_id} is already used: its call ran "
            f"({request.used_by or 'see the ledger'}); nothing was changed"
        )
    if request.status is not ApprovalStatus.PENDING:
        return (
            f"approval {approval_id} is already {request.status.value} by "
            f"{request.decided_by or 'someone'}; only a pending request can be decided"
        )
    if request.expires_at <= now:
        return f"approval {approval_id} expired; the call must be proposed again"
    return f"approval {approval_id} changed while it was being decided; look at it again"


def requested_data(request: ApprovalRequest) -> dict[str, Any]:
    """The audit data of a new request."""
    return {
        "actor": request.principal,
        "approval_id": request.id,
        "tool": request.tool,
        "arguments": request.arguments_json,
        "arguments_hash": request.arguments_hash,
        "resource_version": request.resource_version,
        "effects": list(request.effects),
        "preview": request.preview,
        "policy_version": request.policy_version,
        "expires_at": request.expires_at,
        "created_at": request.created_at,
        "resumable": request.resumable,
    }


def decided_data(request: ApprovalRequest) -> dict[str, Any]:
    """The audit data of a decision."""
    return {
        "actor": request.decided_by,
        "approval_id": request.id,
        "principal": request.principal,
        "expires_at": request.expires_at,
        "tool": request.tool,
        "arguments_hash": request.arguments_hash,
        "resource_version": request.resource_version,
        "policy_version": request.policy_version,
        "reason": request.reason,
        "decided_at": request.decided_at,
    }


def used_data(request: ApprovalRequest) -> dict[str, Any]:
    """The audit data of a use: which call the approval released, and when."""
    return {
        "actor": request.principal,
        "approval_id": request.id,
        "decided_by": request.decided_by,
        "used_at": request.used_at,
        "used_by": request.used_by,
    }


# -- in memory -----------------------------------------------------------------------------


def _no_ledger() -> None:
    return None


class MemoryApprovals(Approvals):
    """Approvals kept in memory: for tests and single-process use.

    Given a ``ledger``, new requests and decisions are audited in it (a
    `MemoryLedger` hands out one such store: `Ledger.approvals`).
    """

    def __init__(self, ledger: EventLog | None = None) -> None:
        self._items: dict[str, ApprovalRequest] = {}
        self._lock = threading.Lock()
        self._ledger: Callable[[], EventLog | None] = (lambda: ledger) if ledger else _no_ledger

    @classmethod
    def owned_by(cls, ledger: EventLog) -> MemoryApprovals:
        """The store a ledger hands out as its own (`Ledger.approvals`): it refers to the
        ledger weakly, so that the two form no reference cycle and a dropped ledger is
        freed at once, not at the next full garbage collection."""
        store = cls()
        store._ledger = weakref.ref(ledger)
        return store

    def _audit(self, kind: str, request: ApprovalRequest, data: Mapping[str, Any]) -> None:
        ledger = self._ledger()
        if ledger is not None:
            # A memory ledger takes its own store's state changes unchecked; any other
            # ledger records them through its public API (which may refuse them).
            record = getattr(ledger, "_record_change", ledger.record_event)
            record(kind, run_id=request.run_id, call_id=request.call_id, data=data)

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
                        run_id=request.run_id,
                    )
                ):
                    return item
            self._items[request.id] = request
        self._audit("approval.requested", request, requested_data(request))
        return request

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
                        run_id=run_id,
                    )
                ):
                    used = replace(item, status=ApprovalStatus.USED, used_at=now, used_by=used_by)
                    self._items[item.id] = used
                    break
            else:
                return None
        self._audit("approval.used", used, used_data(used))
        return used

    def release(self, approval_id: str, *, used_by: str) -> bool:
        with self._lock:
            item = self._items.get(approval_id)
            if item is None or item.status is not ApprovalStatus.USED or item.used_by != used_by:
                return False
            released = replace(item, status=ApprovalStatus.APPROVED, used_at=None, used_by=None)
            self._items[approval_id] = released
        self._audit("approval.released", released, {"approval_id": approval_id, "by": used_by})
        return True

    def decide(
        self, approval_id: str, *, approve: bool, by: str, reason: str | None = None
    ) -> ApprovalRequest:
        check_decider(by)
        now = time.time()
        with self._lock:
            item = self._items.get(approval_id)
            if item is None or item.status is not ApprovalStatus.PENDING or item.expires_at <= now:
                raise ApprovalError(undecidable(item, approval_id, now))
            status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED
            decided = replace(item, status=status, decided_by=by, decided_at=now, reason=reason)
            self._items[approval_id] = decided
        self._audit(f"approval.{status.value}", decided, decided_data(decided))
        return decided

    def get(self, approval_id: str) -> ApprovalRequest | None:
        return self._items.get(approval_id)

    def list(self, status: ApprovalStatus | None = None) -> Sequence[ApprovalRequest]:
        now = time.time()
        with self._lock:
            items = list(self._items.values())
        return [i for i in items if status is None or i.state(now) is status]

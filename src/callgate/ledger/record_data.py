"""What each kind of journal record holds: one dataclass per kind, its encoder and its
decoder side by side.

``encode`` builds the record's data exactly as it has always been stored (the SQL ledgers
keep the fields in the order written here, so the text their hashes cover never changes;
`tests/ledger/test_record_data.py` pins every kind's text). ``decode`` reads stored data
back leniently: a missing field, or a number no float or stored count holds (``1e400``,
``NaN``, ``9**400``), takes its default (`number_or`, `float_or`, `int_or`; a key's
expiry past every float, or not a number, is infinite: `expiry_or`), so an edited record
is read (and reported by its hash) rather than raising, and a re-signed one is read as
far as it can be (`tests/ledger/test_record_numbers.py`). ``of`` builds each record as
its stored text decodes: the typed record a writer folds is the one a reader of the
journal gets (`tests/ledger/test_record_codecs.py`).

The data of approval records is built by `callgate.approvals` (``requested_data``,
``decided_data``, ``used_data``), a layer below the ledger that the in-memory approval
store writes through: `ApprovalRequested`, `ApprovalDecided` and `ApprovalUsed` encode
with those functions and decode here.
The ``migrated.*`` records of a migration are written and read by
`callgate.ledger.migrate` and `callgate.ledger.journal`.

Records are values: the dataclasses are not frozen only because a frozen one costs twice
as much to build, and the fold builds one per record it reads (`callgate.ledger.journal`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from callgate.approvals import ApprovalRequest, decided_data, requested_data, used_data
from callgate.ledger.base import AttemptFinish, AttemptStart, CallRecord, Outcome

__all__ = [
    "ApprovalDecided",
    "ApprovalForged",
    "ApprovalRequested",
    "ApprovalUsed",
    "AttemptEnded",
    "AttemptStarted",
    "Checkpoint",
    "Decision",
    "Encoded",
    "KeyAnswered",
    "KeyForged",
    "Released",
    "RunOpened",
    "charges",
    "expiry_or",
    "float_or",
    "int_or",
    "number_or",
    "read",
]

_R = TypeVar("_R")


class Encoded(dict[str, Any]):
    """A record's data as this process encoded it, carrying the typed record it was encoded
    from (``body``): the journal's fold reads that (`read`) rather than decoding the data it
    was just given. It is stored, hashed and compared as the plain JSON object it is. The
    kinds every call writes (`Decision`, `AttemptStarted`, `AttemptEnded`, `KeyAnswered`)
    encode into one."""

    __slots__ = ("body",)

    body: Any


def read(cls: type[_R], data: Mapping[str, Any]) -> _R | None:
    """The typed record ``data`` was encoded from by this process (None: decode it)."""
    if type(data) is Encoded:
        body = data.body
        if type(body) is cls:
            return body
    return None


def number_or(value: Any, default: float) -> float:
    """A stored time: ``value`` when it is a finite number a float holds, else ``default``
    (the record's time)."""
    if isinstance(value, int | float):
        try:
            found = float(value)
        except OverflowError:  # an int past 1.8e308
            return default
        if found - found == 0.0:  # not inf, -inf or NaN
            return found
    return default


def float_or(value: Any, default: float) -> float:
    """``float(value or default)``, or ``default`` where that raises or is not finite."""
    try:
        found = float(value or default)
    except (TypeError, ValueError, OverflowError):
        return default
    return found if found - found == 0.0 else default


def expiry_or(value: Any, default: float) -> float:
    """A key's expiry, ``float(value or default)``. What cannot have been written by a
    ledger holds the key for good (infinity: an edit never frees a key): a number too large
    for a float, infinity or NaN (as ``1e400`` always read), a value that is no number. Only
    a number too small for a float (or minus infinity) is ``default`` (expired)."""
    try:
        found = float(value or default)
    except OverflowError:
        return float("inf") if value > 0 else default
    except (TypeError, ValueError):
        return float("inf")
    if found != found or found == float("inf"):
        return float("inf")
    return default if found == float("-inf") else found


_INT_MAX = 2**31 - 1
"""The largest count an SQL ``INTEGER`` column holds on every backend (PostgreSQL's)."""


def int_or(value: Any, default: int) -> int:
    """``int(value or default)`` (an attempt's number), or ``default`` where that raises or
    falls outside what an ``INTEGER`` column holds."""
    try:
        found = int(value or default)
    except (TypeError, ValueError, OverflowError):
        return default
    return found if -_INT_MAX <= found <= _INT_MAX else default


def _amount(value: Any) -> float:
    """A budget charge's amount as a float; an int too large for one is infinite (as the
    same number written ``1e400`` reads), so it spends every budget rather than none."""
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


@dataclass(slots=True, kw_only=True)
class Decision:
    """A ``call.<proposed|rejected|pending|admitted>`` record: the whole decision."""

    actor: str
    tool: str
    tool_version: str | None
    arguments: str
    stage: str
    decided_by: str | None
    effects: tuple[str, ...]
    approval_id: str | None
    message: str
    request_hash: str | None
    idempotency_key: str | None
    created_at: float
    updated_at: float

    @classmethod
    def of(cls, r: CallRecord, at: float) -> Decision:
        """The decision in call record ``r``, made at ``at`` (when ``r`` has no time), as its
        stored data decodes."""
        return cls(
            actor=str(r.principal),
            tool=str(r.tool),
            tool_version=r.tool_version,
            arguments=str(r.arguments),
            stage=str(r.stage),
            decided_by=r.decided_by,
            effects=tuple(r.effects or ()),
            approval_id=r.approval_id,
            message=str(r.message or ""),
            request_hash=r.request_hash,
            idempotency_key=r.idempotency_key,
            created_at=number_or(r.created_at, at),
            updated_at=number_or(r.updated_at or at, at),
        )

    def encode(self) -> Encoded:
        data = Encoded(
            actor=self.actor,
            tool=self.tool,
            tool_version=self.tool_version,
            arguments=self.arguments,
            stage=self.stage,
            decided_by=self.decided_by,
            effects=list(self.effects),
            approval_id=self.approval_id,
            message=self.message,
            request_hash=self.request_hash,
            idempotency_key=self.idempotency_key,
            created_at=self.created_at,
            updated_at=self.updated_at,
        )
        data.body = self
        return data

    @classmethod
    def decode(cls, d: Mapping[str, Any], at: float) -> Decision:
        """``d`` read back; times that are not numbers are the record's time ``at``."""
        get = d.get
        return cls(
            actor=str(get("actor")),
            tool=str(get("tool")),
            tool_version=get("tool_version"),
            arguments=str(get("arguments")),
            stage=str(get("stage")),
            decided_by=get("decided_by"),
            effects=tuple(get("effects") or ()),
            approval_id=get("approval_id"),
            message=str(get("message") or ""),
            request_hash=get("request_hash"),
            idempotency_key=get("idempotency_key"),
            created_at=number_or(get("created_at"), at),
            updated_at=number_or(get("updated_at"), at),
        )


@dataclass(slots=True, kw_only=True)
class AttemptStarted:
    """An ``attempt.started`` record; for a side effect, the key it takes and what it spends
    of each budget (`callgate.ledger.budgets`)."""

    actor: str
    attempt: int
    idempotency_key: str
    request_hash: str
    tool_version: str
    started_at: float
    key_expires_at: float
    side_effecting: bool
    budgets: tuple[tuple[str, float], ...] = ()
    """(budget key, amount): stored only when there are any."""

    @classmethod
    def of(cls, s: AttemptStart, worker: str, at: float | None = None) -> AttemptStarted:
        """The start ``s``, as its stored data decodes (``at``: the time a start with no
        time is given; now by default)."""
        now = time.time() if at is None else at
        return cls(
            actor=str(worker or ""),
            attempt=int_or(s.attempt, 1),
            idempotency_key=str(s.idempotency_key),
            request_hash=str(s.request_hash),
            tool_version=str(s.tool_version),
            started_at=number_or(s.started_at, now),
            key_expires_at=expiry_or(s.key_expires_at, 0.0),
            side_effecting=bool(s.side_effecting),
            budgets=tuple((str(key), _amount(amount)) for key, amount, _ in s.budgets),
        )

    def encode(self) -> Encoded:
        data = Encoded(
            actor=self.actor,
            attempt=self.attempt,
            idempotency_key=self.idempotency_key,
            request_hash=self.request_hash,
            tool_version=self.tool_version,
            started_at=self.started_at,
            key_expires_at=self.key_expires_at,
            side_effecting=self.side_effecting,
        )
        data.body = self
        if self.budgets:
            data["budgets"] = [[key, amount] for key, amount in self.budgets]
        return data

    @classmethod
    def decode(cls, d: Mapping[str, Any], at: float) -> AttemptStarted:
        get = d.get
        return cls(
            actor=str(get("actor") or ""),
            attempt=int_or(get("attempt"), 1),
            idempotency_key=str(get("idempotency_key")),
            request_hash=str(get("request_hash")),
            tool_version=str(get("tool_version")),
            started_at=number_or(get("started_at"), at),
            key_expires_at=expiry_or(get("key_expires_at"), 0.0),
            side_effecting=bool(get("side_effecting", True)),
            budgets=charges(get("budgets")),
        )


def charges(value: Any) -> tuple[tuple[str, float], ...]:
    """Stored budget charges ``[[key, amount], ...]``; anything else (an edit) is none."""
    if not isinstance(value, list):
        return ()
    try:
        return tuple((str(key), _amount(amount)) for key, amount in value)
    except (TypeError, ValueError):
        return ()


@dataclass(slots=True, kw_only=True)
class AttemptEnded:
    """An ``attempt.<ok|error|unknown>`` record: the whole outcome, content included, who
    settled it and the evidence it left."""

    actor: str
    attempt: int
    status: str
    stage: str
    error: str | None
    reconciled: bool
    transaction_id: str | None
    evidence_id: str | None
    note: str | None
    """A person's note for a manual resolution: stored only when there is one."""
    content: str
    finished_at: float
    idempotency_key: str

    @classmethod
    def of(cls, f: AttemptFinish, worker: str, at: float | None = None) -> AttemptEnded:
        """The end ``f``, as its stored data decodes (``at``: the time an outcome with no
        finish time is given; now by default)."""
        o = f.outcome
        key = f.idempotency_key
        return cls(
            actor=str(f.actor or worker or ""),
            attempt=int_or(f.attempt, 1),
            status=str(o.status),
            stage=str(o.stage or "execute"),
            error=o.error,
            reconciled=bool(o.reconciled),
            transaction_id=o.transaction_id,
            evidence_id=f.call_id if o.status == "ok" else None,
            note=None if f.note is None else str(f.note),
            content=str(o.content or ""),
            finished_at=number_or(o.finished_at, time.time() if at is None else at),
            idempotency_key=key if isinstance(key, str) else "",
        )

    def encode(self) -> Encoded:
        data = Encoded(
            actor=self.actor,
            attempt=self.attempt,
            status=self.status,
            stage=self.stage,
            error=self.error,
            reconciled=self.reconciled,
            transaction_id=self.transaction_id,
            evidence_id=self.evidence_id,
        )
        data.body = self
        if self.note is not None:
            data["note"] = self.note
        data["content"] = self.content
        data["finished_at"] = self.finished_at
        data["idempotency_key"] = self.idempotency_key
        return data

    @classmethod
    def decode(cls, d: Mapping[str, Any], at: float, status: str | None = None) -> AttemptEnded:
        """``d`` read back; ``status``: the one the record's kind says (else the stored one)."""
        get = d.get
        key = get("idempotency_key")
        note = get("note")
        return cls(
            actor=str(get("actor") or ""),
            attempt=int_or(get("attempt"), 1),
            status=str(get("status")) if status is None else status,
            stage=str(get("stage") or "execute"),
            error=get("error"),
            reconciled=bool(get("reconciled")),
            transaction_id=get("transaction_id"),
            evidence_id=get("evidence_id"),
            note=None if note is None else str(note),
            content=str(get("content") or ""),
            finished_at=number_or(get("finished_at"), at),
            idempotency_key=key if isinstance(key, str) else "",
        )

    @property
    def outcome(self) -> Outcome:
        """The outcome it holds."""
        return Outcome(
            status=self.status,
            content=self.content,
            error=self.error,
            stage=self.stage,
            finished_at=self.finished_at,
            reconciled=self.reconciled,
            transaction_id=self.transaction_id,
        )


@dataclass(slots=True, kw_only=True)
class KeyAnswered:
    """An ``idempotency.<replay|in_progress|conflict|over_budget>`` record: a key (or a
    budget) answered for another call, which then did not run; an admitted call settles
    (``settled``) without running."""

    actor: str
    holder: tuple[str, str] | None
    settled: str | None = None
    stage: str = "execute"
    started_at: float = 0.0

    def encode(self) -> Encoded:
        data = Encoded(
            actor=self.actor,
            holder=list(self.holder) if self.holder else None,
        )
        data.body = self
        if self.settled is not None:
            data["settled"] = self.settled
            data["stage"] = self.stage
            data["started_at"] = self.started_at
        return data

    @classmethod
    def decode(cls, d: Mapping[str, Any], at: float) -> KeyAnswered:
        get = d.get
        holder = get("holder")
        settled = get("settled")
        if not isinstance(settled, str):  # the call did not settle: nothing more is kept
            settled, at = None, 0.0
        return cls(
            actor=str(get("actor") or ""),
            holder=(str(holder[0]), str(holder[1]))
            if isinstance(holder, list) and len(holder) == 2
            else None,
            settled=settled,
            stage=str(get("stage") or "execute") if settled else "execute",
            started_at=number_or(get("started_at"), at),
        )


@dataclass(slots=True, kw_only=True)
class KeyForged:
    """An ``idempotency.forged`` record: a key's row differed from the journal."""

    actor: str
    idempotency_key: str
    problem: str

    def encode(self) -> dict[str, Any]:
        return {
            "actor": self.actor,
            "idempotency_key": self.idempotency_key,
            "problem": self.problem,
        }

    @classmethod
    def decode(cls, d: Mapping[str, Any]) -> KeyForged:
        return cls(
            actor=str(d.get("actor") or ""),
            idempotency_key=str(d.get("idempotency_key")),
            problem=str(d.get("problem")),
        )


@dataclass(slots=True, kw_only=True)
class ApprovalForged:
    """An ``approval.forged`` record: an approval's row differed from its records."""

    actor: str
    approval_id: str
    problem: str

    def encode(self) -> dict[str, Any]:
        return {"actor": self.actor, "approval_id": self.approval_id, "problem": self.problem}

    @classmethod
    def decode(cls, d: Mapping[str, Any]) -> ApprovalForged:
        return cls(
            actor=str(d.get("actor") or ""),
            approval_id=str(d.get("approval_id")),
            problem=str(d.get("problem")),
        )


@dataclass(slots=True, kw_only=True)
class Released:
    """An ``approval.released`` record: a used approval given back by the call that took
    it (``by``), whose handler never ran."""

    approval_id: str
    by: str

    def encode(self) -> dict[str, Any]:
        return {"approval_id": self.approval_id, "by": self.by}

    @classmethod
    def decode(cls, d: Mapping[str, Any]) -> Released:
        return cls(approval_id=str(d.get("approval_id")), by=str(d.get("by")))


@dataclass(slots=True, kw_only=True)
class RunOpened:
    """A ``run.opened`` record (who owns the run id), and the ``actor`` every other
    ``run.*`` record (``run.intent``, ``run.trusted``, ``run.exposed``) adds to its facts."""

    actor: str

    def encode(self, facts: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``{"actor": ...}``, or a fact's data with the owner added last."""
        return {"actor": self.actor} if facts is None else {**facts, "actor": self.actor}

    @classmethod
    def decode(cls, d: Mapping[str, Any]) -> RunOpened:
        return cls(actor=str(d.get("actor")))


@dataclass(slots=True, kw_only=True)
class Checkpoint:
    """A ``journal.checkpoint`` record: the heads ``[chain, seq, hash]`` it binds
    (`callgate.ledger.chains`), sorted."""

    actor: str
    heads: tuple[tuple[str, int, str], ...]

    @classmethod
    def of(cls, rows: Sequence[tuple[str, int, str]], actor: str) -> Checkpoint:
        return cls(actor=actor, heads=tuple(sorted(rows)))

    def encode(self) -> dict[str, Any]:
        return {"actor": self.actor, "heads": [[c, s, h] for c, s, h in self.heads]}

    @classmethod
    def decode(cls, d: Mapping[str, Any]) -> Checkpoint:
        """The heads read back; an entry that is not ``[chain, seq, hash]`` raises
        ValueError (TypeError for one that is not a list)."""
        found = []
        for entry in d.get("heads") or ():
            chain, seq, h = entry
            if not isinstance(chain, str) or not isinstance(h, str):
                raise ValueError("a head entry is not [chain, seq, hash]")
            try:
                found.append((chain, int(seq), h))
            except OverflowError as exc:
                raise ValueError(f"a head entry's record number is {seq!r}") from exc
        return cls(actor=str(d.get("actor") or ""), heads=tuple(found))


@dataclass(slots=True, kw_only=True)
class ApprovalRequested:
    """An ``approval.requested`` record: the request as a person will decide it."""

    actor: str
    approval_id: str
    tool: str
    arguments: str
    arguments_hash: str
    resource_version: str | None
    effects: tuple[str, ...]
    preview: str
    policy_version: str | None
    expires_at: float
    created_at: float
    resumable: bool

    encode = staticmethod(requested_data)
    """The data of a new request (`callgate.approvals.requested_data`)."""

    @classmethod
    def decode(cls, d: Mapping[str, Any], at: float) -> ApprovalRequested:
        get = d.get
        return cls(
            actor=str(get("actor")),
            approval_id=str(get("approval_id")),
            tool=str(get("tool")),
            arguments=str(get("arguments")),
            arguments_hash=str(get("arguments_hash")),
            resource_version=get("resource_version"),
            effects=tuple(get("effects") or ()),
            preview=str(get("preview") or ""),
            policy_version=get("policy_version"),
            expires_at=float_or(get("expires_at"), 0.0),
            created_at=float_or(get("created_at"), at),
            resumable=bool(get("resumable")),
        )

    def request(self, run_id: str, call_id: str) -> ApprovalRequest:
        """The pending request it records."""
        return ApprovalRequest(
            id=self.approval_id,
            run_id=run_id,
            call_id=call_id,
            principal=self.actor,
            tool=self.tool,
            arguments_json=self.arguments,
            arguments_hash=self.arguments_hash,
            resource_version=self.resource_version,
            effects=self.effects,
            preview=self.preview,
            policy_version=self.policy_version,
            created_at=self.created_at,
            expires_at=self.expires_at,
            resumable=self.resumable,
        )


@dataclass(slots=True, kw_only=True)
class ApprovalDecided:
    """An ``approval.approved`` or ``approval.denied`` record: who decided, when and why,
    and the request's identity the decision binds (checked when the approval is spent)."""

    actor: str | None
    approval_id: str
    principal: str | None
    expires_at: float | None
    tool: str | None
    arguments_hash: str | None
    resource_version: str | None
    policy_version: str | None
    reason: str | None
    decided_at: float

    encode = staticmethod(decided_data)
    """The data of a decision (`callgate.approvals.decided_data`)."""

    @classmethod
    def decode(cls, d: Mapping[str, Any], at: float) -> ApprovalDecided:
        get = d.get
        return cls(
            actor=get("actor"),
            approval_id=str(get("approval_id")),
            principal=get("principal"),
            expires_at=get("expires_at"),
            tool=get("tool"),
            arguments_hash=get("arguments_hash"),
            resource_version=get("resource_version"),
            policy_version=get("policy_version"),
            reason=get("reason"),
            decided_at=float_or(get("decided_at"), at),
        )


@dataclass(slots=True, kw_only=True)
class ApprovalUsed:
    """An ``approval.used`` record: the call it released (``used_by``), and when."""

    actor: str | None
    approval_id: str
    decided_by: str | None
    used_at: float
    used_by: str | None

    encode = staticmethod(used_data)
    """The data of a use (`callgate.approvals.used_data`)."""

    @classmethod
    def decode(cls, d: Mapping[str, Any], at: float) -> ApprovalUsed:
        get = d.get
        return cls(
            actor=get("actor"),
            approval_id=str(get("approval_id")),
            decided_by=get("decided_by"),
            used_at=float_or(get("used_at"), at),
            used_by=get("used_by"),
        )

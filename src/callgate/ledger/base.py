"""The ledger interface: the authoritative record of every call.

It holds what was proposed, what was decided, every attempt and every
outcome, and answers the one question that must be atomic: *may this
attempt run?* (`Ledger.begin_attempt`, which also enforces idempotency keys).

Backends: `MemoryLedger` (tests), `SQLiteLedger` (the embedded default) and
`PostgresLedger` (many workers sharing one ledger). The rules every backend
must apply identically live here, once: which state changes are allowed
(`may_decide`, `may_finish`), how an existing idempotency key answers a new
attempt (`claim_for_key`), and how the audit trail is chained and verified
(`audit_hash`, `verify_chain`).

Call states::

    proposed ─▶ rejected
        │
        └─────▶ pending ─▶ admitted ─▶ running ─▶ ok | error | unknown
                   │                                            │
                   └─▶ rejected               unknown ─▶ ok | error  (reconciled)

Transitions only go forward. A read-only call whose attempt ended
``unknown`` may be attempted again (``unknown → running``); a side-effecting
one never is: its ``unknown`` is settled by the tool's reconcile hook or by a
person (`Ledger.resolve`).
"""

from __future__ import annotations

import abc
import enum
import hashlib
import hmac
import json
import os
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from callgate.approvals import Approvals, MemoryApprovals
from callgate.errors import LedgerError
from callgate.ledger.records import OutcomeStatus

__all__ = [
    "GENESIS",
    "AttemptFinish",
    "AttemptRecord",
    "AttemptStart",
    "AuditCheck",
    "AuditRecord",
    "CallRecord",
    "CallState",
    "Claim",
    "ClaimKind",
    "Ending",
    "Ledger",
    "LedgerError",
    "LedgerQueries",
    "Outcome",
    "audit_hash",
    "audit_json",
    "begin_states",
    "claim_for_key",
    "default_worker",
    "key_is_free",
    "may_decide",
    "may_finish",
    "settled_state",
    "verify_chain",
]


class CallState(enum.StrEnum):
    """Where a call stands.

    ``proposed → rejected | pending → admitted → running → ok | error | unknown``,
    and ``unknown → ok | error`` once reconciled.
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


# A decision may replace a call's record only while nothing has run yet.
# A rejected call never ran and holds no key: an id the model sends again after a
# rejection is decided afresh (docs/design-notes.md, "Call ids").
_DECIDABLE_FROM: dict[CallState, frozenset[CallState]] = {
    CallState.PROPOSED: frozenset({CallState.PROPOSED}),
    CallState.PENDING: frozenset({CallState.PROPOSED, CallState.PENDING, CallState.REJECTED}),
    CallState.REJECTED: frozenset(
        {CallState.PROPOSED, CallState.PENDING, CallState.ADMITTED, CallState.REJECTED}
    ),
    CallState.ADMITTED: frozenset({CallState.PROPOSED, CallState.PENDING, CallState.REJECTED}),
}


def may_decide(current: CallState | None, new: CallState) -> bool:
    """Whether ``record_decision`` may move a call from ``current`` (None: no record) to ``new``.

    A call id that comes back after its call ran keeps its first record: the
    new decision is audited, the record is not rewritten.
    """
    if new not in _DECIDABLE_FROM:
        return False
    return current is None or current in _DECIDABLE_FROM[new]


class Ending(Protocol):
    """What `may_finish` reads of an attempt's end: an `Outcome`, or the record of one
    (`callgate.ledger.record_data.AttemptEnded`)."""

    @property
    def status(self) -> str: ...

    @property
    def reconciled(self) -> bool: ...


def may_finish(current: CallState | None, outcome: Ending) -> bool:
    """Whether an attempt's outcome may be written over a call in state ``current``.

    ``running → ok | error | unknown``; ``unknown → ok | error`` only for a
    reconciled outcome (a reconcile hook or a person said what happened).
    """
    if current is None or current is CallState.RUNNING:
        return True
    return current is CallState.UNKNOWN and outcome.reconciled and outcome.status != "unknown"


def begin_states(side_effecting: bool, attempt: int) -> tuple[CallState, ...]:
    """The states an attempt may start from: ``admitted`` (a read retry: ``unknown``)."""
    if attempt > 1 and not side_effecting:
        return (CallState.ADMITTED, CallState.UNKNOWN)
    return (CallState.ADMITTED,)


@dataclass(slots=True, kw_only=True)
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
    records: tuple[int, ...] = ()
    """The journal records of this call since its row exists, oldest first (SQL ledgers:
    how `Ledger.records` finds a call's records without scanning the journal)."""


@dataclass(slots=True, kw_only=True)
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
    retryable: bool | None = None
    """For ``error``: whether the same call may succeed later (`ToolFailure.retryable`).
    Not stored by durable backends; a replayed error counts as retryable."""


@dataclass(slots=True, kw_only=True)
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
    budgets: tuple[tuple[str, float, float], ...] = ()
    """What the attempt spends of each budget it counts against: (key, amount, limit)
    (`callgate.ledger.budgets.BudgetCharge`); checked and charged with the key."""


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
    OVER_BUDGET = "over_budget"
    """The attempt would pass a budget (``spend:USD<=50/run``): reject (`Claim.reason`)."""


@dataclass(slots=True, kw_only=True)
class Claim:
    """The answer to `Ledger.begin_attempt`."""

    kind: ClaimKind
    outcome: Outcome | None = None
    holder: tuple[str, str] | None = None
    """``(run_id, call_id)`` of the call that first used the key."""
    reason: str | None = None
    """For ``OVER_BUDGET``: which budget, its limit and what is spent."""


def claim_for_key(
    start: AttemptStart,
    *,
    request_hash: str,
    holder: tuple[str, str],
    expires_at: float,
    outcome: Outcome | None,
) -> Claim | None:
    """How an existing key answers a new attempt; None when the attempt may take the key.

    The matching rule, the same in every backend: a key whose attempt ended
    ``error`` (a failure before commit, or a reconcile hook that found the
    effect did not happen) counts as absent, since a result is kept for a key
    only if the operation may have taken effect; an expired key whose
    outcome is ``ok`` counts as absent; a key whose
    outcome is not known (still running, crashed, ``unknown``) never expires,
    since taking it over could run the effect twice; a different request hash
    is a conflict; an unfinished key is in progress (even for the call that
    holds it: after a crash it is the reconcile hook's to settle, never a
    second run); a finished key replays its outcome, including ``unknown``,
    which is never re-run blindly.
    """
    if outcome is not None and key_is_free(outcome.status, expires_at, start.started_at):
        return None
    if request_hash != start.request_hash:
        return Claim(kind=ClaimKind.CONFLICT, holder=holder)
    if outcome is None:
        return Claim(kind=ClaimKind.IN_PROGRESS, holder=holder)
    return Claim(kind=ClaimKind.REPLAY, outcome=outcome, holder=holder)


def key_is_free(status: str | None, expires_at: float, now: float) -> bool:
    """Whether an idempotency key whose attempt ended ``status`` (None: still running) may
    be taken by a new attempt at ``now``: the rule every backend and the journal's fold
    apply, written once.

    A key whose attempt ended ``error`` holds nothing (the effect did not happen:
    Stripe's rule); one that ended ``ok`` is free once it expired; a key whose outcome
    is not known (running, crashed, ``unknown``) never frees, since taking it over
    could run the effect twice."""
    if status == OutcomeStatus.ERROR:
        return True
    return status == OutcomeStatus.OK and expires_at <= now


def settled_state(claim: Claim) -> tuple[CallState, str]:
    """The state and stage of a call that will not run because of ``claim``."""
    if claim.kind is ClaimKind.REPLAY and claim.outcome is not None:
        return CallState(claim.outcome.status), claim.outcome.stage
    return CallState.REJECTED, "execute"


@dataclass(slots=True, kw_only=True)
class AttemptFinish:
    """The end of an attempt."""

    run_id: str
    call_id: str
    attempt: int
    idempotency_key: str
    outcome: Outcome
    actor: str | None = None
    """Who settled the outcome when it is not the attempt itself: a person, or ``recovery``."""
    note: str | None = None
    """The person's note for a manual resolution."""
    side_effecting: bool = True
    """False for a read-only tool: its outcome need not wait for the disk."""


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
    worker: str = ""
    """The worker (process) that ran the attempt; recovery can be limited to one worker."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRecord:
    """One entry of the audit trail, chained to the one before it by ``prev_hash``."""

    seq: int
    at: float
    kind: str
    run_id: str
    call_id: str | None
    data: Mapping[str, Any] = field(default_factory=dict)
    prev_hash: str = ""
    hash: str = ""
    data_json: str = ""
    """``data`` exactly as stored; the hash covers this text."""
    chain: str | None = None
    """The chain it links into when not its run's (`callgate.ledger.chains.chain_of`): only
    the records of a schema-3 ledger, which kept one chain for all runs."""


GENESIS = "0" * 64
"""The ``prev_hash`` of the first audit record."""


def audit_json(data: Mapping[str, Any]) -> str:
    """The exact text an audit record's data is hashed and stored as."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def audit_hash(
    prev_hash: str,
    seq: int,
    at: float,
    kind: str,
    run_id: str,
    call_id: str | None,
    data: str,
    key: bytes | None = None,
) -> str:
    """The hash of one audit record: SHA-256 over the previous hash and every field, or,
    for a keyed chain (``key``), HMAC-SHA-256 under that key (`chain_key`).

    ``data`` is the record's data exactly as stored (`AuditRecord.data_json`).
    Variable fields are length-prefixed, so no two records share an encoding.
    """
    cid = "-" if call_id is None else f"{len(call_id)}:{call_id}"
    blob = f"{prev_hash}|{seq}|{at!r}|{len(kind)}:{kind}|{len(run_id)}:{run_id}|{cid}|{data}"
    raw = blob.encode("utf-8", "surrogatepass")
    if key is not None:
        return hmac.new(key, raw, hashlib.sha256).hexdigest()
    return hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditCheck:
    """The result of verifying the audit chain."""

    ok: bool
    records: int
    head: str
    """The hash of the last record: keep it elsewhere to detect a rewrite of the whole chain."""
    problems: tuple[str, ...] = ()
    first_bad_seq: int | None = None


def verify_chain(
    records: Sequence[AuditRecord], head: tuple[int, str] | None, key: bytes | None = None
) -> AuditCheck:
    """Check every record's hash and link, and that the chain ends at the recorded head.

    An edited record breaks its own hash; a deleted record breaks the next
    record's link (and the sequence); a deleted tail no longer ends at the head.
    """
    problems: list[str] = []
    first_bad: int | None = None
    prev = GENESIS
    expected_seq = 1
    for r in records:
        if r.seq != expected_seq:
            problems.append(
                f"record {r.seq}: expected sequence number {expected_seq}; "
                f"{r.seq - expected_seq} record(s) before it are missing"
            )
        if r.prev_hash != prev:
            problems.append(f"record {r.seq}: does not link to the record before it")
        data = r.data_json or audit_json(r.data)
        if audit_hash(r.prev_hash, r.seq, r.at, r.kind, r.run_id, r.call_id, data, key) != r.hash:
            problems.append(f"record {r.seq}: its content does not match its hash (edited)")
        if problems and first_bad is None:
            first_bad = r.seq
        prev = r.hash
        expected_seq = r.seq + 1
    last = (records[-1].seq, records[-1].hash) if records else (0, GENESIS)
    if head is not None and head != last:
        problems.append(
            f"the chain ends at record {last[0]} but the ledger's head is record {head[0]}: "
            "records at the end were deleted or the head was altered"
        )
        if first_bad is None:
            first_bad = last[0] + 1
    return AuditCheck(
        ok=not problems,
        records=len(records),
        head=last[1],
        problems=tuple(problems),
        first_bad_seq=first_bad,
    )


_APPROVALS_LOCK = threading.Lock()


def default_worker() -> str:
    """``host:pid``: the worker id of a process that was given none."""
    return f"{socket.gethostname()}:{os.getpid()}"


class LedgerQueries(abc.ABC):
    """What readers ask a ledger: calls, attempts and journal records, by run, call, key or
    time, and whether the journal verifies. ``callgate ledger`` and the console read
    through this; the gate writes through `Ledger`, which is also one of these."""

    @abc.abstractmethod
    def get_call(self, run_id: str, call_id: str) -> CallRecord | None:
        """The record of one call, or None."""

    @abc.abstractmethod
    def calls(
        self,
        *,
        run_id: str | None = None,
        state: CallState | None = None,
        call_id: str | None = None,
        newest: int | None = None,
    ) -> Sequence[CallRecord]:
        """Call records, oldest first, optionally filtered; ``newest``: only the last N
        (the SQL ledgers read only those)."""

    @abc.abstractmethod
    def attempts(self, run_id: str, call_id: str) -> Sequence[AttemptRecord]:
        """Every attempt of one call, in order."""

    @abc.abstractmethod
    def audit(self) -> Sequence[AuditRecord]:
        """The audit trail, oldest first, each record chained to the one before."""

    def audit_head(self) -> tuple[int, str] | None:
        """``(seq, hash)`` of the last audit record as the ledger recorded it separately."""
        return None

    def records(
        self,
        *,
        run_id: str | None = None,
        call_id: str | None = None,
        since: float | None = None,
        until: float | None = None,
        after: int = 0,
        limit: int | None = None,
        key: str | None = None,
    ) -> Sequence[AuditRecord]:
        """Journal records, oldest first: those of one run or call, or of the calls that
        used idempotency ``key``; those whose time is in ``[since, until)``, after record
        number ``after``, at most ``limit``.

        The SQL ledgers find a run's, a call's or a key's records through the calls'
        rows, in time proportional to the answer; this default filters `audit`.
        """
        keyed = (
            None
            if key is None
            else {(c.run_id, c.call_id) for c in self.calls() if c.idempotency_key == key}
        )
        found = [
            r
            for r in self.audit()
            if r.seq > after
            and (keyed is None or (r.run_id, r.call_id) in keyed)
            and (run_id is None or r.run_id == run_id)
            and (call_id is None or r.call_id == call_id)
            and (since is None or r.at >= since)
            and (until is None or r.at < until)
        ]
        return found[:limit] if limit is not None else found

    def verify(self) -> AuditCheck:
        """Verify the audit chain: an edited, deleted or truncated record is reported."""
        return verify_chain(self.audit(), self.audit_head())


class Ledger(LedgerQueries):
    """Where calls, attempts and outcomes are recorded: what the gate writes.

    Four writes (a decision, an attempt's start and end, an event), their async
    twins (`abegin_attempt`, `afinish_attempt`: they default to the sync ones
    and exist so a backend can share one commit among concurrent calls), a
    person's resolution, and the approval store; the queries are
    `LedgerQueries`'. A backend implements the abstract methods of both.
    """

    worker: str = ""
    """The id this process's attempts are recorded under (see `callgate.recovery`)."""
    _approvals_store: Approvals | None = None
    _runs_lock: threading.Lock | None = None

    @abc.abstractmethod
    def record_decision(self, record: CallRecord) -> None:
        """Record a proposed call and its decision (rejected, pending or admitted).

        A call that already ran keeps its record (see `may_decide`); the new
        decision is still audited.
        """

    @abc.abstractmethod
    def begin_attempt(self, start: AttemptStart) -> Claim:
        """Atomically claim the idempotency key and record the attempt as running.

        Same key and request hash, finished: `ClaimKind.REPLAY`. Same key,
        still running: `ClaimKind.IN_PROGRESS`. Same key, different request
        hash: `ClaimKind.CONFLICT`. Expired keys count as absent. For a
        side-effecting call the attempt is durable when this returns.
        """

    @abc.abstractmethod
    def finish_attempt(self, finish: AttemptFinish) -> bool:
        """Record how an attempt ended; False if the call's state forbids it (`may_finish`)."""

    @abc.abstractmethod
    def record_event(
        self, kind: str, *, run_id: str, call_id: str | None, data: Mapping[str, Any]
    ) -> None:
        """Append an audit event that is not a state change (e.g. an approval decision)."""

    async def abegin_attempt(self, start: AttemptStart) -> Claim:
        """`begin_attempt` for async callers; backends may share commits between callers."""
        return self.begin_attempt(start)

    async def afinish_attempt(self, finish: AttemptFinish) -> bool:
        """`finish_attempt` for async callers; backends may share commits between callers."""
        return self.finish_attempt(finish)

    def resolve(self, run_id: str, call_id: str, *, status: str, by: str, note: str) -> CallRecord:
        """A person settles an ``unknown`` call as ``ok`` or ``error``; audited with the note.

        Raises `LedgerError` when the call does not exist or is not ``unknown``.
        """
        if status not in ("ok", "error"):
            raise LedgerError(f"resolve a call as 'ok' or 'error', not {status!r}")
        if not by.strip() or not note.strip():
            raise LedgerError("a resolution needs who resolved it (by) and a note saying why")
        call = self.get_call(run_id, call_id)
        if call is None:
            raise LedgerError(f"no call {call_id!r} in run {run_id!r}; list calls to find it")
        if call.state is not CallState.UNKNOWN:
            raise LedgerError(
                f"call {call_id!r} is {call.state.value}; only an unknown call can be resolved"
            )
        attempts = self.attempts(run_id, call_id)
        number = attempts[-1].attempt if attempts else max(call.attempts, 1)
        what = "happened" if status == "ok" else "did not happen"
        outcome = Outcome(
            status=status,
            content=f"resolved by {by}: the effect {what}. {note}",
            finished_at=time.time(),
            reconciled=True,
        )
        applied = self.finish_attempt(
            AttemptFinish(
                run_id=run_id,
                call_id=call_id,
                attempt=number,
                idempotency_key=call.idempotency_key or "",
                outcome=outcome,
                actor=by,
                note=note,
            )
        )
        settled = self.get_call(run_id, call_id)
        if not applied or settled is None:
            raise LedgerError(f"call {call_id!r} changed while it was being resolved; try again")
        return settled

    def record_run(
        self,
        run_id: str,
        *,
        owner: str,
        facts: Sequence[tuple[str, Mapping[str, Any]]] = (),
    ) -> str | None:
        """Claim ``run_id`` for ``owner`` (the principal and trusted scope a run records its
        calls as) and append the run's ``facts`` (``run.intent``, ``run.trusted``,
        ``run.exposed`` records: what the run trusts and has read), atomically.

        A run id is scoped like an idempotency key: the first owner keeps it. When another
        owner holds it (a ``run.opened`` record, or a call of the run decided for another
        principal), nothing is written and that owner is returned; else None.
        """
        with self._run_lock():
            found = self._run_owner(run_id)
            if found is not None and found != owner:
                return found
            written: list[tuple[str, Mapping[str, Any]]] = list(facts)
            if found is None:
                written.insert(0, ("run.opened", {}))
            for kind, data in written:
                self._record_run_fact(kind, run_id, {**data, "actor": owner})
        return None

    def run_facts(self, run_id: str) -> Sequence[AuditRecord]:
        """The ``run.*`` records of one run, oldest first (`record_run`); the SQL ledgers read
        them from the journal itself, never from a row."""
        return [r for r in self.records(run_id=run_id, call_id="") if r.kind.startswith("run.")]

    def _run_owner(self, run_id: str) -> str | None:
        """Who owns ``run_id``: the ``run.opened`` record's actor, else the principal of the
        run's first call. The default reads the run's records; backends keep an index."""
        for r in self.run_facts(run_id):
            if r.kind == "run.opened":
                return str(r.data.get("actor"))
        first = self.calls(run_id=run_id)
        return first[0].principal if first else None

    def _record_run_fact(self, kind: str, run_id: str, data: Mapping[str, Any]) -> None:
        """Append one ``run.*`` record (only `record_run` writes them)."""
        raise NotImplementedError(f"{type(self).__name__} does not record runs")

    def _run_lock(self) -> threading.Lock:
        with _APPROVALS_LOCK:
            lock: threading.Lock | None = getattr(self, "_runs_lock", None)
            if lock is None:
                lock = threading.Lock()
                self._runs_lock = lock
            return lock

    def approvals(self) -> Approvals:
        """Where this ledger keeps approval requests; a `Gate` given none uses this store.

        The default keeps them in memory beside the ledger (one store per ledger)
        and audits requests and decisions in it; the SQL ledgers keep them in
        their database, where they survive a restart.
        """
        with _APPROVALS_LOCK:
            if self._approvals_store is None:
                self._approvals_store = MemoryApprovals.owned_by(self)
            return self._approvals_store

    def close(self) -> None:
        """Release resources; the memory ledger has none."""

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        """``with SQLiteLedger(path) as ledger:`` closes it at the end."""
        self.close()

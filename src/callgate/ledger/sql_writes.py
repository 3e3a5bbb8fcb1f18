"""The SQL ledgers' write rules: what each item of a transaction decides and appends.

`run_items` applies a transaction's items in order over an open
`callgate.ledger.sql_tx.Transaction`: first it locks what they will change (their
runs' chains, and the idempotency keys and budgets they may take:
`items_locks`), then each item reads the rows it decides by (the call, the key,
the approval), appends the records that say what happened, and
`callgate.ledger.journal.apply` turns each record into the rows it changes. A key or
an approval is decided by the journal's own answer (`true_key`, `true_approval`,
`callgate.ledger.truth`), never by its row alone.

The rows' codecs are in `callgate.ledger.sql_codecs`, the transaction in
`callgate.ledger.sql_tx`; both are importable from here too.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from callgate.approvals import ApprovalRequest, ApprovalStatus, undecidable
from callgate.errors import LedgerError
from callgate.ledger.base import (
    AttemptFinish,
    AttemptStart,
    AuditRecord,
    CallRecord,
    CallState,
    Claim,
    ClaimKind,
    Outcome,
    audit_hash,
    claim_for_key,
    may_finish,
    settled_state,
)
from callgate.ledger.budgets import BudgetCharge
from callgate.ledger.chains import CHECKPOINT, LEGACY_CHAIN, ROOT_CHAIN
from callgate.ledger.journal import MIGRATED, KeyRow, outcome_from_record
from callgate.ledger.record_data import (
    ApprovalDecided,
    ApprovalForged,
    ApprovalRequested,
    ApprovalUsed,
    AttemptEnded,
    AttemptStarted,
    Checkpoint,
    Decision,
    KeyAnswered,
    KeyForged,
    Released,
    RunOpened,
    read,
)
from callgate.ledger.records import RecordKind
from callgate.ledger.sql_codecs import (
    approval_from_row,
    call_from_row,
    key_from_row,
    record_from_row,
    seqs_from,
)
from callgate.ledger.sql_statements import BIND_CHAIN
from callgate.ledger.sql_tx import RowCache, Transaction

__all__ = [
    "BEGIN",
    "CHECKPOINT_ITEM",
    "CONSUME",
    "DECIDE",
    "DECIDE_APPROVAL",
    "EVENT",
    "FINISH",
    "RELEASE",
    "REQUEST",
    "RUN",
    "RUN_OPEN",
    "RUN_READ",
    "Consume",
    "Item",
    "Plan",
    "RowCache",
    "Transaction",
    "approval_from_row",
    "call_from_row",
    "items_locks",
    "key_from_row",
    "record_from_row",
    "run_items",
    "seqs_from",
    "true_approval",
    "true_key",
]

(
    DECIDE,
    BEGIN,
    FINISH,
    EVENT,
    REQUEST,
    DECIDE_APPROVAL,
    CONSUME,
    RELEASE,
    RUN_OPEN,
    RUN_READ,
    CHECKPOINT_ITEM,
) = range(11)
Item = tuple[int, Any]
"""One write: its kind and its payload (plain data, so that `storable` can rewrite it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Consume:
    """The payload of a ``CONSUME`` item: the effect an approval must be bound to."""

    principal: str
    tool: str
    arguments_hash: str
    resource_version: str | None
    run_id: str
    now: float
    used_by: str | None


_K = RecordKind
"""The kinds of record written here (`callgate.ledger.records`)."""


# -- the truth ---------------------------------------------------------------------------


def true_key(tx: Transaction, name: str) -> KeyRow | None:
    """The idempotency key as the journal makes it, its row compared with it; a
    different row is recorded (``idempotency.forged``) and restored. A key this
    transaction changed is its own; without a truth (a migration) the row."""
    row = tx.key(name)
    if tx.truth is None or name in tx._dirty_keys:
        return row
    tx.catch_up()
    truth = tx.truth.key(name)
    if truth == row:
        return row
    assert row is not None or truth is not None
    holder = truth if truth is not None else row
    assert holder is not None
    tx.append(
        _K.KEY_FORGED,
        holder.run_id,
        holder.call_id,
        KeyForged(actor=tx.worker, idempotency_key=name, problem=_key_problem(row, truth)).encode(),
    )
    if truth is not None:
        tx.put_key(truth)
        return truth
    # A row the journal never made: hold the key rather than run twice.
    return KeyRow(
        key=row.key if row is not None else name,
        request_hash=holder.request_hash,
        run_id=holder.run_id,
        call_id=holder.call_id,
        attempt=holder.attempt,
        expires_at=holder.expires_at,
        status="unknown",
        outcome_seq=None,
    )


def true_approval(tx: Transaction, approval_id: str) -> ApprovalRequest | None:
    """The approval as the journal makes it; one this transaction changed is its own;
    without a truth (a migration) the row."""
    if tx.truth is None or approval_id in tx._dirty_approvals:
        return tx.approval(approval_id)
    tx.catch_up()
    return tx.truth.state.approvals.get(approval_id)


# -- the items ------------------------------------------------------------------------------


def _key_problem(row: KeyRow | None, truth: KeyRow | None) -> str:
    if row is None:
        return f"its row is missing; the journal says {truth.status if truth else None}"
    if truth is None:
        return f"its row says {row.status or 'running'}, but no journal record took the key"
    changed = [
        name
        for name in ("status", "run_id", "call_id", "request_hash", "expires_at", "attempt")
        if getattr(row, name) != getattr(truth, name)
    ] or ["outcome_seq"]
    return (
        f"its row differs from the journal ({', '.join(changed)}): the row says "
        f"{row.status or 'running'}, the journal {truth.status or 'running'}"
    )


RUN = Claim(kind=ClaimKind.RUN)
"""The claim of an attempt that may run."""


def _decide(tx: Transaction, r: CallRecord) -> None:
    tx.append(f"call.{r.state.value}", r.run_id, r.call_id, Decision.of(r, time.time()).encode())


def _begin(tx: Transaction, s: AttemptStart) -> Claim:
    """Take the key and start the attempt, or say why it may not run (the call settles)."""
    if not s.side_effecting:
        _start(tx, s)
        return RUN
    current = tx.call(s.run_id, s.call_id)
    key = true_key(tx, s.idempotency_key)  # never the row alone (`callgate.ledger.truth`)
    claim: Claim | None = None
    if key is not None:
        known = None if key.status is None else Outcome(status=key.status, content="")
        claim = claim_for_key(
            s,
            request_hash=key.request_hash,
            holder=(key.run_id, key.call_id),
            expires_at=key.expires_at,
            outcome=known,
        )
        if claim is not None and claim.kind is ClaimKind.REPLAY:
            claim = Claim(kind=ClaimKind.REPLAY, outcome=_key_outcome(tx, key), holder=claim.holder)
    if claim is None and current is not None and current.state is not CallState.ADMITTED:
        # The call id came back after its call ran: never a second execution.
        claim = Claim(kind=ClaimKind.IN_PROGRESS, holder=(s.run_id, s.call_id))
    if claim is None and s.budgets and tx.truth is not None:
        # Spent by the journal, and by attempts started earlier in this transaction.
        extra: dict[str, float] = {}
        for rec in tx.appended:
            if rec.kind == _K.ATTEMPT_STARTED:
                for budget, amount in _started(rec).budgets:
                    extra[budget] = extra.get(budget, 0.0) + amount
        why = tx.truth.state.budgets.refusal([BudgetCharge(*b) for b in s.budgets], extra)
        if why is not None:
            claim = Claim(kind=ClaimKind.OVER_BUDGET, holder=(s.run_id, s.call_id), reason=why)
    if claim is None:
        _start(tx, s)
        return RUN
    answered = KeyAnswered(actor=tx.worker, holder=claim.holder)
    if current is not None and current.state is CallState.ADMITTED:
        state, stage = settled_state(claim)
        answered = KeyAnswered(
            actor=tx.worker,
            holder=claim.holder,
            settled=state.value,
            stage=stage,
            started_at=s.started_at,
        )
    tx.append(f"idempotency.{claim.kind.value}", s.run_id, s.call_id, answered.encode())
    return claim


def _started(rec: AuditRecord) -> AttemptStarted:
    return read(AttemptStarted, rec.data) or AttemptStarted.decode(rec.data, rec.at)


def _start(tx: Transaction, s: AttemptStart) -> None:
    data = AttemptStarted.of(s, tx.worker).encode()
    tx.append(_K.ATTEMPT_STARTED, s.run_id, s.call_id, data)


def _key_outcome(tx: Transaction, key: KeyRow) -> Outcome:
    """The outcome a key replays, read from the record that holds it."""
    if key.outcome_seq is not None:
        rec = tx.record(key.outcome_seq)
        if rec is not None:
            found = outcome_from_record(rec.data, key.attempt)
            if found is not None and found.status == key.status:
                return found
    return Outcome(status=str(key.status), content="")


def _finish(tx: Transaction, f: AttemptFinish) -> bool:
    current = tx.call(f.run_id, f.call_id)
    if not may_finish(current.state if current is not None else None, f.outcome):
        return False
    ended = AttemptEnded.of(f, tx.worker)
    tx.append(f"attempt.{f.outcome.status}", f.run_id, f.call_id, ended.encode())
    return True


# -- approvals --------------------------------------------------------------------------------

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


def _request(tx: Transaction, request: ApprovalRequest) -> ApprovalRequest:
    """Store a request, or return the open one already bound to the same effect."""
    params = _effect_params(
        request.principal,
        request.tool,
        request.arguments_hash,
        request.run_id,
        request.resource_version,
    )
    rows = tx.x(
        f"SELECT id FROM approvals WHERE {_effect(request.resource_version)} "
        f"AND status IN {_OPEN} AND expires_at > ? ORDER BY created_at, id",
        [*params, request.created_at],
    ).fetchall()
    for (approval_id,) in rows:
        found = tx.approval(approval_id)
        if (
            found is not None
            and found.status
            in (ApprovalStatus.PENDING, ApprovalStatus.APPROVED, ApprovalStatus.DENIED)
            and found.expires_at > request.created_at
            and found.binds(
                principal=request.principal,
                tool=request.tool,
                arguments_hash=request.arguments_hash,
                resource_version=request.resource_version,
                run_id=request.run_id,
            )
        ):
            return found
    tx.append(
        _K.APPROVAL_REQUESTED, request.run_id, request.call_id, ApprovalRequested.encode(request)
    )
    stored = tx.approval(request.id)
    assert stored is not None
    return stored


def _decide_approval(
    tx: Transaction, payload: tuple[str, bool, str, str | None, float]
) -> ApprovalRequest | str:
    approval_id, approve, by, reason, now = payload
    current = tx.approval(approval_id)
    if current is not None:
        current = _checked(tx, current) or tx.approval(approval_id)
    if current is None or current.status is not ApprovalStatus.PENDING or current.expires_at <= now:
        return undecidable(current, approval_id, now)
    status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED
    decided = replace(current, status=status, decided_by=by, decided_at=now, reason=reason)
    tx.append(
        f"approval.{status.value}", current.run_id, current.call_id, ApprovalDecided.encode(decided)
    )
    stored = tx.approval(approval_id)
    assert stored is not None
    return stored


def _consume(tx: Transaction, c: Consume) -> ApprovalRequest | None:
    """Use the oldest approval bound to the effect whose decision is in the journal."""
    rows = tx.x(
        f"SELECT id FROM approvals WHERE {_effect(c.resource_version)} "
        "AND status = 'approved' AND expires_at > ? ORDER BY created_at, id",
        [
            *_effect_params(c.principal, c.tool, c.arguments_hash, c.run_id, c.resource_version),
            c.now,
        ],
    ).fetchall()
    for (approval_id,) in rows:
        row = tx.approval(approval_id)
        if row is None:
            continue
        row = _checked(tx, row)
        if (
            row is None
            or row.status is not ApprovalStatus.APPROVED
            or row.expires_at <= c.now
            or not row.binds(
                principal=c.principal,
                tool=c.tool,
                arguments_hash=c.arguments_hash,
                resource_version=c.resource_version,
                run_id=c.run_id,
            )
        ):
            continue
        used = replace(row, status=ApprovalStatus.USED, used_at=c.now, used_by=c.used_by)
        tx.append("approval.used", row.run_id, row.call_id, ApprovalUsed.encode(used))
        return tx.approval(approval_id)
    return None


def _checked(tx: Transaction, row: ApprovalRequest) -> ApprovalRequest | None:
    """The approval as the journal makes it; a row that differs is restored from the journal,
    and the difference recorded (``approval.forged``), so a forged row is never spent and a
    person can still decide the real request."""
    truth = true_approval(tx, row.id)
    problem = None
    if truth is None:
        problem = "no approval.requested record has its id"
    elif truth != row:
        problem = _differs(truth, row)
    elif truth.status is ApprovalStatus.APPROVED:
        problem = decision_problem(tx, truth)
    if problem is None:
        return truth
    tx.append(
        _K.APPROVAL_FORGED,
        row.run_id,
        row.call_id,
        ApprovalForged(actor=tx.worker, approval_id=row.id, problem=problem).encode(),
    )
    if truth is not None and truth != row:
        tx.put_approval(truth)
        return truth if truth.status is not ApprovalStatus.APPROVED else None
    return None


def _differs(truth: ApprovalRequest, row: ApprovalRequest) -> str:
    changed = [
        name
        for name in ("status", "decided_by", "decision_seq", "arguments_hash", "expires_at")
        if getattr(truth, name) != getattr(row, name)
    ] or ["a field"]
    return (
        f"its row differs from its records ({', '.join(changed)}): the row says "
        f"{row.status.value}, the journal {truth.status.value}"
    )


def decision_problem(tx: Transaction, row: ApprovalRequest) -> str | None:
    """Why the journal does not show ``row`` approved (None: it does).

    The decision record must be an approval of exactly this request (its id, run,
    principal, tool, arguments, resource version and expiry), hash to its content,
    and link to the record before it.
    """
    seq = row.decision_seq
    if seq is None:
        return "no decision record: its approved status was not written by a decision"
    rec = tx.record(seq)
    if rec is None:
        return f"its decision record {seq} is missing"
    d: Mapping[str, Any] = rec.data
    if rec.kind == _K.MIGRATED_APPROVAL:
        d = rec.data.get("row") or {}
        expected = {"approved", "used"}
        if d.get("status") not in expected:
            return f"record {seq} does not approve it"
    elif rec.kind != _K.APPROVAL_APPROVED:
        return f"record {seq} is {rec.kind}, not its approval"
    fields = {
        "approval_id" if rec.kind == _K.APPROVAL_APPROVED else "id": row.id,
        "tool": row.tool,
        "arguments_hash": row.arguments_hash,
        "resource_version": row.resource_version,
        "principal": row.principal,
        "expires_at": row.expires_at,
    }
    for name, value in fields.items():
        if d.get(name) != value:
            return f"its {name.replace('_', ' ')} differs from its decision record {seq}"
    if rec.run_id != row.run_id:
        return f"its run differs from its decision record {seq}"
    if audit_hash(
        rec.prev_hash,
        rec.seq,
        rec.at,
        rec.kind,
        rec.run_id,
        rec.call_id,
        rec.data_json,
        tx.chain_key,
    ) != (rec.hash):
        return f"its decision record {seq} was edited"
    if rec.chain == LEGACY_CHAIN:
        before = tx.record(seq - 1) if seq > 1 else None
        if seq > 1 and (before is None or before.hash != rec.prev_hash):
            return f"its decision record {seq} does not link to the record before it"
    # A record of a run's chain: the truth folded it, its link checked (`true_approval`).
    return None


def _run_open(
    tx: Transaction, payload: tuple[str, str, Sequence[tuple[str, Mapping[str, Any]]]]
) -> str | None:
    """Claim a run id and append its facts (`callgate.ledger.base.Ledger.record_run`), the
    owner read from the journal itself; the other owner, if another holds it."""
    run_id, owner, facts = payload
    found = _owner(tx, run_id)
    if found is not None and found != owner:
        return found
    if found is None:
        tx.append(_K.RUN_OPENED, run_id, None, RunOpened(actor=owner).encode())
    for kind, data in facts:
        tx.append(kind, run_id, None, RunOpened(actor=owner).encode(data))
    return None


def _owner(tx: Transaction, run_id: str) -> str | None:
    """Who owns ``run_id`` by the journal (this transaction's own records included)."""
    for rec in reversed(tx.appended):
        if rec.run_id == run_id and rec.kind == _K.RUN_OPENED:
            return RunOpened.decode(rec.data).actor
    tx.catch_up()
    assert tx.truth is not None
    found = tx.truth.state.owners.get(run_id)
    if found is None:
        row = tx.x("SELECT principal FROM calls WHERE run_id = ? LIMIT 1", (run_id,)).fetchone()
        found = None if row is None else str(row[0])  # a row the journal does not explain
    return found


def _run_read(tx: Transaction, run_id: str) -> list[AuditRecord]:
    """A run's ``run.*`` records, from the journal (`callgate.ledger.truth`)."""
    tx.catch_up()
    assert tx.truth is not None
    return list(tx.truth.state.facts.get(run_id, ()))


def _release(tx: Transaction, payload: tuple[str, str]) -> bool:
    approval_id, used_by = payload
    row = tx.approval(approval_id)
    if row is None or row.status is not ApprovalStatus.USED or row.used_by != used_by:
        return False
    released = Released(approval_id=approval_id, by=used_by)
    tx.append(_K.APPROVAL_RELEASED, row.run_id, row.call_id, released.encode())
    return True


# -- a transaction ------------------------------------------------------------------------------


class Plan:
    """What a transaction's items lock and read (`items_locks`)."""

    __slots__ = ("calls", "keys", "names", "runs", "truth")

    def __init__(self) -> None:
        self.runs: set[str] = set()
        self.names: set[str] = set()
        """Idempotency keys (``key:…``) and budgets (``budget:…``)."""
        self.calls: dict[tuple[str, str], None] = {}
        self.keys: dict[str, None] = {}
        self.truth = False
        """Whether an item asks the journal's own answer (`callgate.ledger.truth`)."""


def items_locks(tx: Transaction, items: Sequence[Item]) -> Plan:
    """The runs whose chains ``items`` write, the idempotency keys and budgets they may
    change (what a transaction locks before it draws a record number), and the rows they
    will read."""
    plan = Plan()
    runs, names = plan.runs, plan.names
    approvals: list[str] = []
    for kind, payload in items:
        if kind in (DECIDE, BEGIN, FINISH):
            runs.add(payload.run_id)
            plan.calls[(payload.run_id, payload.call_id)] = None
            if kind == BEGIN and payload.side_effecting:
                names.add("key:" + payload.idempotency_key)
                names.update("budget:" + b[0] for b in payload.budgets)
                plan.keys[payload.idempotency_key] = None
                plan.truth = True
            elif kind == FINISH and payload.idempotency_key:
                names.add("key:" + payload.idempotency_key)
                plan.keys[payload.idempotency_key] = None
        elif kind == EVENT:
            runs.add(payload[1])
        elif kind in (REQUEST, CONSUME):
            runs.add(payload.run_id)
            plan.truth = plan.truth or kind == CONSUME
        elif kind in (DECIDE_APPROVAL, RELEASE):
            approvals.append(payload[0])
            plan.truth = True
        elif kind in (RUN_OPEN, RUN_READ):
            if kind == RUN_OPEN:
                runs.add(payload[0])
            plan.truth = True
        elif kind == CHECKPOINT_ITEM:
            runs.add("")
            plan.truth = True
    for approval_id in approvals:  # an approval's run, from its row (the truth checks it)
        row = tx.x("SELECT run_id FROM approvals WHERE id = ?", (approval_id,)).fetchone()
        if row is not None:
            runs.add(str(row[0]))
    return plan


def _checkpoint(tx: Transaction, actor: str) -> int:
    """Bind the chain heads no checkpoint binds yet into one record of the root chain.

    Which heads are unbound comes from the journal itself (`JournalTruth.unbound`: the
    chains whose records the hashed checkpoints do not bind yet), not from a row flag; and
    a checkpoint binds only heads numbered below its own, so that reading the journal by
    number always meets a bound record before the checkpoint that binds it."""
    truth = tx.truth
    if truth is None:  # a migration: nobody else writes, the head rows are the journal's
        tx.flush()
        heads = tx.sql.unbound(tx.cur, ROOT_CHAIN)
    else:
        try:
            tx.catch_up()
        except LedgerError:
            return 0  # a journal that does not verify gets no checkpoint vouching for it
        drawn = tx._numbers  # the numbers drawn with the locks, if any
        heads = truth.unbound(below=drawn[0] if drawn else None)
    if not heads:
        return 0
    tx.append(CHECKPOINT, "", None, Checkpoint.of(heads, actor).encode())
    if truth is None:
        for chain, seq, _ in heads:
            tx.emit(BIND_CHAIN, (chain, seq))
    return len(heads)


def run_items(tx: Transaction, items: Sequence[Item]) -> list[Any]:
    """Lock what the items change, apply every item in order, then write what they
    appended and changed."""
    tx.plan(sum(2 if kind in (BEGIN, DECIDE_APPROVAL, CONSUME) else 1 for kind, _ in items))
    plan = items_locks(tx, items)
    tx.acquire(
        plan.runs, plan.names, calls=list(plan.calls), keys=list(plan.keys), truth=plan.truth
    )
    results: list[Any] = []
    for kind, payload in items:
        if kind == DECIDE:
            _decide(tx, payload)
            results.append(None)
        elif kind == BEGIN:
            results.append(_begin(tx, payload))
        elif kind == FINISH:
            results.append(_finish(tx, payload))
        elif kind == EVENT:
            event_kind, run_id, call_id, data = payload
            tx.append(event_kind, run_id, call_id, data)
            results.append(None)
        elif kind == REQUEST:
            results.append(_request(tx, payload))
        elif kind == DECIDE_APPROVAL:
            results.append(_decide_approval(tx, payload))
        elif kind == CONSUME:
            results.append(_consume(tx, payload))
        elif kind == RELEASE:
            results.append(_release(tx, payload))
        elif kind == RUN_OPEN:
            results.append(_run_open(tx, payload))
        elif kind == RUN_READ:
            results.append(_run_read(tx, payload))
        elif kind == CHECKPOINT_ITEM:
            results.append(_checkpoint(tx, payload))
        else:  # pragma: no cover - a programming error
            raise ValueError(f"unknown ledger item kind {kind}")
    truth = tx.truth
    if truth is not None and not tx._caught_up and truth.follows(tx.appended):
        # Nothing was written since the truth's last record: fold these as its own once
        # committed (`Transaction.committed`), not read back, parsed and hashed again.
        tx._caught_up = True
    tx.write()
    return results


def migrated_marker(tx: Transaction, data: Mapping[str, Any]) -> None:
    """Open a migrated journal's state (`callgate.ledger.journal.MIGRATED`)."""
    tx.append(MIGRATED, "", None, data)

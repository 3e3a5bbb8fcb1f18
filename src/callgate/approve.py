"""Stage ``approve``: whether a person approved this exact call.

A call the policy sends to a person (``ask``) runs only under an approval of exactly it:
the same principal, tool, canonical arguments (by hash) and resource version, before the
request expires, once. This stage spends such an approval, or asks for one (the request
waits in the approval store, `callgate.approvals`), or answers from what the ledger
already holds: a denial, an approval another call of the run already used, the outcome
of the same operation already run under its idempotency key.

It decides and says what it decided; `callgate.gate.admission` records it in the ledger
and keeps the run's books (which calls wait, under which names).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from callgate.approvals import ApprovalRequest, Approvals, ApprovalStatus, new_approval_id
from callgate.authorize.policy import Decision, Policy
from callgate.calls import Observation, Provenance, Stage, Status, ToolCall
from callgate.errors import ToolFailure
from callgate.ledger.base import Ledger
from callgate.redact import Redactor
from callgate.render import Problem, Rejection, bounded, shown
from callgate.tools import ToolSpec

__all__ = [
    "ApproveParts",
    "Asked",
    "Refused",
    "approve",
    "denied_rejection",
    "pending_observation",
    "ran_under_key",
    "replay_only",
    "used_rejection",
    "withheld_rejection",
]


class ApproveParts(Protocol):
    """What the approve stage reads of the gate's configuration (`callgate.gate.Gate`)."""

    approvals: Approvals
    ledger: Ledger
    redactor: Redactor
    approval_ttl: float
    policy: Policy


@dataclass(frozen=True, slots=True)
class Asked:
    """A person was asked: the request waits (or was just denied by a standing rule)."""

    request: ApprovalRequest


@dataclass(frozen=True, slots=True)
class Refused:
    """The call does not run; ``recorded``: whether it is recorded as the call's decision."""

    rejection: Rejection
    recorded: bool


def approve(
    parts: ApproveParts,
    *,
    run_id: str,
    principal: str,
    waited: str | None,
    call: ToolCall,
    spec: ToolSpec,
    model: BaseModel,
    request_hash: str,
    decision: Decision,
    stored: str,
    resumable: bool,
    effects: tuple[str, ...],
    secrets: tuple[str, ...],
) -> ApprovalRequest | Asked | Refused | Observation:
    """Spend the approval that releases exactly this call (returned), or answer without
    running it: the approval asked for (`Asked`), a refusal (`Refused`), or the recorded
    outcome of the same call proposed again and released under another id (`Observation`).

    ``waited``: the approval this call waited for, when it is resumed; ``stored``: its
    arguments as the ledger may hold them (``resumable``: they are the whole arguments);
    ``effects`` and ``secrets``: its effect names, redacted, and the values to redact.
    """
    version = spec.resource_version(model) if spec.resource_version is not None else None
    used = parts.approvals.consume(
        principal=principal,
        tool=spec.name,
        arguments_hash=request_hash,
        resource_version=version,
        run_id=run_id,
        used_by=f"{run_id}/{call.id}",
    )
    if used is not None:  # the store recorded the use (``approval.used``)
        return used
    prior = parts.approvals.get(waited) if waited is not None else None
    if prior is not None and prior.status is ApprovalStatus.USED:
        released = released_as(parts.ledger, run_id, call, spec, prior)
        if released is not None:
            return released
        # Another resume (in this process or another) released this call already.
        parts.ledger.record_event(
            "approval.reuse_refused",
            run_id=run_id,
            call_id=call.id,
            data={"actor": principal, "approval_id": prior.id, "used_by": prior.used_by},
        )
        return Refused(used_rejection(prior), recorded=False)
    now = time.time()
    preview = spec.preview(model) if spec.preview else f"{spec.name}({stored})"
    why = "; ".join(f.explain() for f in decision.provenance)
    if why:
        preview = f"{preview} [provenance: {why}]"
    if decision.intent is not None:
        preview = f"{preview} [intent: {decision.intent.explain()}]"
    request = parts.approvals.request(
        ApprovalRequest(
            id=new_approval_id(),
            run_id=run_id,
            call_id=call.id,
            principal=principal,
            tool=spec.name,
            arguments_json=stored,
            arguments_hash=request_hash,
            effects=effects,
            # Redacted, then every character a person cannot see (a bidi override in a
            # value the model sent) written as an escape: the text shown is the text read.
            preview=shown(parts.redactor.text(preview, secrets)),
            created_at=now,
            expires_at=now + parts.approval_ttl,
            resource_version=version,
            policy_version=parts.policy.version,
            resumable=resumable,
        )
    )
    if request.status is ApprovalStatus.DENIED:
        return Refused(denied_rejection(request), recorded=True)
    return Asked(request)


def pending_observation(
    call: ToolCall,
    spec: ToolSpec,
    request: ApprovalRequest,
    decision: Decision,
    findings: tuple[Any, ...],
) -> Observation:
    """What the model reads of a call waiting for a person (``findings``: redacted)."""
    return Observation(
        call_id=call.id,
        tool=spec.name,
        status=Status.PENDING,
        stage=Stage.APPROVE,
        content=bounded(
            f"This call needs a person's approval and has not run (request {request.id}: "
            f"{shown(request.preview)}). Wait for the decision; a call with different "
            "arguments needs its own approval."
        ),
        retryable=False,
        approval_id=request.id,
        tool_version=spec.version,
        details=({"rule": decision.rule, "approval_id": request.id}, *findings),
    )


def ran_under_key(
    ledger: Ledger, spec: ToolSpec, key: str, request_hash: str
) -> tuple[str, str] | None:
    """The call (run id, call id) whose recorded outcome idempotency ``key`` would replay
    for a call with ``request_hash``, as the ledger's records say; None when the key
    would not replay (absent, still running, ``error``, expired, other values).

    A hint, not the decision: `Ledger.begin_attempt` decides the replay at execution
    from the key itself (checked against the journal), and a call admitted on this hint
    without an approval is stopped before its handler if the key does not replay
    (`replay_only`)."""
    now = time.time()
    seen: set[tuple[str, str]] = set()
    for rec in ledger.records(key=key):
        if rec.call_id is None or (rec.run_id, rec.call_id) in seen:
            continue
        seen.add((rec.run_id, rec.call_id))
        for attempt in ledger.attempts(rec.run_id, rec.call_id):
            outcome = attempt.outcome
            if (
                attempt.idempotency_key != key
                or outcome is None
                or outcome.status == "error"  # did not happen: the key holds nothing
                or attempt.request_hash != request_hash
            ):
                continue
            if outcome.status == "ok" and attempt.started_at + spec.key_retention <= now:
                continue  # an ok outcome's key expires; an unknown one never does
            return rec.run_id, rec.call_id
    return None


def released_as(
    ledger: Ledger, run_id: str, call: ToolCall, spec: ToolSpec, prior: ApprovalRequest
) -> Observation | None:
    """A resumed call whose approval released the same call proposed again under another
    id of this run (the model re-proposed it; `Approvals.consume` matches by values):
    answered with that call's recorded outcome, under this call's id. None when the
    approval was used by this very call, by another run, or its user has no outcome
    yet (the caller refuses the reuse)."""
    prefix = f"{run_id}/"
    used_by = prior.used_by or ""
    holder = used_by[len(prefix) :] if used_by.startswith(prefix) else ""
    if not holder or holder == call.id:
        return None
    attempts = ledger.attempts(run_id, holder)
    outcome = attempts[-1].outcome if attempts else None
    if outcome is None:
        return None
    ledger.record_event(
        "approval.released_as",
        run_id=run_id,
        call_id=call.id,
        data={"approval_id": prior.id, "used_by": used_by},
    )
    ok = outcome.status == "ok"
    content = outcome.content
    truncated = None
    if ok and len(content) > spec.max_result_chars:
        content, truncated = content[: spec.max_result_chars], len(content)
    note = (
        f"[callgate: approval {prior.id} released this call once, when it was proposed "
        f"again as call {bounded(holder, 80)}; that call's recorded outcome returned]\n"
    )
    return Observation(
        call_id=call.id,
        tool=spec.name,
        status=Status(outcome.status),
        stage=Stage(outcome.stage),
        content=note + content,
        retryable=False,  # sending it again can only replay the same answer
        provenance=Provenance.UNTRUSTED if ok else Provenance.GATE,
        tool_version=spec.version,
        truncated_from=truncated,
        details=({"rule": "approval_released_as", "holder": [run_id, holder]},),
    )


def replay_only(spec: ToolSpec) -> ToolSpec:
    """``spec`` with a handler that refuses to run: for a call admitted without the approval
    its policy asks for, because its idempotency key already ran (`ran_under_key`).
    Execution replays the key's outcome without calling the handler; should the ledger's key
    not replay after all (it expired, or the records misled), this handler stops the call
    before any effect (``error``: nothing happened, the key stays free) and the model is
    told to send it again, which asks a person."""

    def refuse(**_: Any) -> None:
        raise ToolFailure(
            "this call needs a person's approval and was not run: the earlier call with the "
            "same idempotency key has no outcome to replay any more. Send the same call "
            "again to ask for an approval."
        )

    return dataclasses.replace(
        spec, fn=refuse, is_async=False, context_param=None, verify=None, reconcile=None
    )


# -- what the model reads of a refusal ---------------------------------------------------


def denied_rejection(request: ApprovalRequest) -> Rejection:
    """A person denied this exact call."""
    return Rejection(
        stage=Stage.APPROVE,
        problems=(
            Problem(
                rule="approval_denied",
                message=f"a person denied this exact call (approval {request.id})"
                + (f": {request.reason}" if request.reason else ""),
            ),
        ),
        advice="Do not send this call again. Tell the user it was refused.",
        retryable=False,
    )


def used_rejection(request: ApprovalRequest) -> Rejection:
    """The approval this call waited for already released a call (another resume got it)."""
    return Rejection(
        stage=Stage.APPROVE,
        problems=(
            Problem(
                rule="approval_used",
                message=f"approval {request.id} already released this call once "
                f"({request.used_by or 'elsewhere'}); it was not executed again here",
            ),
        ),
        advice="Do not send this call again; its outcome is in the ledger.",
        retryable=False,
    )


def withheld_rejection(request: ApprovalRequest) -> Rejection:
    """Approved, but the ledger does not hold the call's arguments (they include secrets)."""
    return Rejection(
        stage=Stage.APPROVE,
        problems=(
            Problem(
                rule="approval_arguments_withheld",
                message=f"this call was approved (approval {request.id}), but its arguments "
                "include secret fields that callgate does not store, so it cannot be resumed "
                "from the ledger",
            ),
        ),
        advice="Nothing was executed. Send exactly the same call again: it runs under that "
        "approval while the approval lasts, and waits for a new one after.",
        retryable=True,
    )

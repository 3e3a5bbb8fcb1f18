"""Approvals bound to the exact effect: principal, tool, arguments, resource version, expiry, once.

The domain: ``refund(order_id, amount, currency)`` spends money, asks a
person above nothing at all (every refund asks), and reports the order's
revision as its resource version. ``store.ran`` counts handler runs, so
"nothing executed" is checked on the back end, not only on observations.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from callgate import (
    ApprovalError,
    ApprovalStatus,
    Authority,
    Gate,
    MemoryApprovals,
    MemoryLedger,
    Observation,
    Policy,
    Registry,
    Run,
    Stage,
    Status,
    ToolCall,
    ask,
    deny,
    tool,
)


@dataclass
class Store:
    revision: dict[str, int] = field(default_factory=lambda: {"o1": 1, "o2": 1})
    refunds: list[tuple[str, float, str]] = field(default_factory=list)
    ran: Counter[str] = field(default_factory=Counter)


def registry(store: Store) -> Registry:
    def version(args: BaseModel) -> str:
        return f"rev-{store.revision[args.order_id]}"  # type: ignore[attr-defined]

    @tool(
        effects="spend:{currency}={amount}",
        resource_version=version,
        preview=lambda a: f"refund {a.amount:.2f} {a.currency} to {a.order_id}",  # type: ignore[attr-defined]
    )
    def refund(order_id: str, amount: float, currency: str) -> dict[str, Any]:
        """Refund part of an order."""
        store.ran["refund"] += 1
        store.refunds.append((order_id, amount, currency))
        return {"refunded": amount}

    return Registry([refund])


ASK_REFUNDS = Policy([ask("refund", name="refunds need a person")])
ALICE = Authority(principal="alice", grants=["spend:USD<=1000"])
_ids = itertools.count(1)


def setup(*, ttl: float = 3600.0, policy: Policy = ASK_REFUNDS) -> tuple[Gate, Run, Store]:
    store = Store()
    gate = Gate(registry(store), policy=policy, approval_ttl=ttl)
    return gate, gate.run(authority=ALICE), store


def refund(run: Run, amount: float = 20, order_id: str = "o1") -> Observation:
    call = ToolCall(
        id=f"c{next(_ids)}",
        name="refund",
        arguments={"order_id": order_id, "amount": amount, "currency": "USD"},
    )
    (obs,) = run.submit([call])
    return obs


def approval_id(obs: Observation) -> str:
    assert obs.status is Status.PENDING, obs.content
    assert obs.stage is Stage.APPROVE
    assert obs.approval_id is not None
    return obs.approval_id


def test_ask_makes_a_pending_request_bound_to_the_exact_effect() -> None:
    """The request records principal, tool, canonical arguments and hash, version, effects."""
    gate, run, store = setup()
    obs = refund(run, 20)
    request = gate.approvals.get(approval_id(obs))

    assert request is not None
    assert request.status is ApprovalStatus.PENDING
    assert (request.principal, request.tool) == ("alice", "refund")
    assert json.loads(request.arguments_json) == {"order_id": "o1", "amount": 20, "currency": "USD"}
    assert request.resource_version == "rev-1"
    assert request.effects == ("spend:USD=20",)
    assert request.preview == "refund 20.00 USD to o1"
    assert request.policy_version == ASK_REFUNDS.version
    assert request.expires_at > time.time() + 3000
    assert run.pending_approvals == [request.id]
    record = gate.ledger.get_call(run.id, obs.call_id)
    assert record is not None
    assert record.approval_id == request.id
    assert store.ran["refund"] == 0


def test_approve_then_resume_executes_exactly_once() -> None:
    """The approved call runs on resume; resuming again runs nothing."""
    gate, run, store = setup()
    pending = refund(run, 20)
    gate.approvals.approve(approval_id(pending), by="manager")

    first = run.resume()
    second = run.resume()

    assert [(o.call_id, o.status) for o in first] == [(pending.call_id, Status.OK)]
    assert second == []
    assert store.refunds == [("o1", 20.0, "USD")]
    assert gate.approvals.get(approval_id(pending)).status is ApprovalStatus.USED  # type: ignore[union-attr]
    assert [e.data["approval_id"] for e in gate.ledger.audit() if e.kind == "approval.used"] == [
        pending.approval_id
    ]


def test_approval_is_single_use() -> None:
    """The same refund proposed again after it ran needs a new approval."""
    gate, run, store = setup()
    first = refund(run, 20)
    gate.approvals.approve(approval_id(first), by="manager")
    run.resume()

    again = refund(run, 20)

    assert approval_id(again) != first.approval_id
    assert store.ran["refund"] == 1


def test_approval_of_20_does_not_cover_200() -> None:
    """Approved 20 USD, proposed 200 USD: pending again, and only 20 is ever refunded."""
    gate, run, store = setup()
    twenty = refund(run, 20)
    gate.approvals.approve(approval_id(twenty), by="manager")

    two_hundred = refund(run, 200)

    assert approval_id(two_hundred) != twenty.approval_id
    assert store.ran["refund"] == 0
    assert [o.status for o in run.resume()] == [Status.OK]
    assert store.refunds == [("o1", 20.0, "USD")]


def test_other_order_is_not_covered() -> None:
    """Same amount, another order: a different effect."""
    gate, run, store = setup()
    gate.approvals.approve(approval_id(refund(run, 20, "o1")), by="manager")
    assert refund(run, 20, "o2").status is Status.PENDING
    assert store.ran["refund"] == 0


def test_approval_does_not_cover_another_principal() -> None:
    """An approval for alice's refund does not release mallory's identical call."""
    gate, run, store = setup()
    alices = refund(run, 20)
    gate.approvals.approve(approval_id(alices), by="manager")
    mallory = gate.run(authority=Authority(principal="mallory", grants=["spend:USD<=1000"]))

    theirs = refund(mallory, 20)

    assert approval_id(theirs) != alices.approval_id
    assert store.ran["refund"] == 0
    assert gate.approvals.get(approval_id(alices)).status is ApprovalStatus.APPROVED  # type: ignore[union-attr]


def test_changed_resource_version_is_not_covered() -> None:
    """The order changed between approval and execution: the approval no longer applies."""
    gate, run, store = setup()
    pending = refund(run, 20)
    gate.approvals.approve(approval_id(pending), by="manager")
    store.revision["o1"] = 2  # someone else edited the order

    resumed = run.resume()

    assert [o.status for o in resumed] == [Status.PENDING]
    new = gate.approvals.get(approval_id(resumed[0]))
    assert new is not None
    assert new.resource_version == "rev-2"
    assert new.id != pending.approval_id
    assert store.ran["refund"] == 0


def test_expired_approval_cannot_be_decided_and_nothing_runs() -> None:
    """Deciding after expiry raises `ApprovalError`; resume then executes nothing."""
    gate, run, store = setup(ttl=0.05)
    pending = refund(run, 20)
    time.sleep(0.1)

    with pytest.raises(ApprovalError, match="expired"):
        gate.approvals.approve(approval_id(pending), by="manager")

    assert run.resume() == []
    assert store.ran["refund"] == 0
    assert gate.approvals.get(approval_id(pending)).status is ApprovalStatus.PENDING  # type: ignore[union-attr]


def test_approved_but_expired_before_use_does_not_release_the_call() -> None:
    """An approval that expires between the decision and the call covers nothing."""
    gate, run, store = setup(ttl=0.2)
    pending = refund(run, 20)
    gate.approvals.approve(approval_id(pending), by="manager")
    time.sleep(0.3)

    resumed = run.resume()

    assert [o.status for o in resumed] == [Status.PENDING]
    assert store.ran["refund"] == 0


@pytest.mark.parametrize("decide", ["approve", "deny"])
def test_unknown_approval_id(decide: str) -> None:
    """An id that does not exist is an error, for approving and for denying alike."""
    gate, _, store = setup()
    with pytest.raises(ApprovalError, match="no approval request"):
        gate.approvals.decide("apr_does_not_exist", approve=decide == "approve", by="manager")
    assert store.ran["refund"] == 0


def test_approving_a_used_approval_is_an_error() -> None:
    """Once its call ran, an approval cannot be decided again."""
    gate, run, store = setup()
    pending = refund(run, 20)
    gate.approvals.approve(approval_id(pending), by="manager")
    run.resume()

    with pytest.raises(ApprovalError, match="already used"):
        gate.approvals.approve(approval_id(pending), by="manager")
    assert store.ran["refund"] == 1


@pytest.mark.parametrize(
    ("first", "second"), [("approve", "approve"), ("approve", "deny"), ("deny", "approve")]
)
def test_a_request_is_decided_once(first: str, second: str) -> None:
    """A decided request cannot be decided again, in either direction."""
    gate, run, _ = setup()
    request_id = approval_id(refund(run, 20))

    def decide(how: str) -> None:
        if how == "approve":
            gate.approvals.approve(request_id, by="manager")
        else:
            gate.approvals.deny(request_id, by="manager", reason="no")

    decide(first)
    with pytest.raises(ApprovalError, match="already"):
        decide(second)


def test_denied_call_is_rejected_at_stage_approval() -> None:
    """A person's denial reaches the model as a rejection at stage approve; nothing runs."""
    gate, run, store = setup()
    pending = refund(run, 20)
    gate.approvals.deny(approval_id(pending), by="manager", reason="not eligible")

    (resumed,) = run.resume()

    assert (resumed.status, resumed.stage) == (Status.REJECTED, Stage.APPROVE)
    assert "not eligible" in resumed.content
    assert resumed.retryable is False
    assert store.ran["refund"] == 0


def test_stricter_policy_wins_over_an_existing_approval() -> None:
    """A policy that now denies the call beats an approval granted under the old one."""
    store = Store()
    approvals, ledger = MemoryApprovals(), MemoryLedger()
    old = Gate(registry(store), policy=ASK_REFUNDS, approvals=approvals, ledger=ledger)
    pending = refund(old.run(authority=ALICE), 20)
    approvals.approve(approval_id(pending), by="manager")

    stricter = Policy([ask("refund"), deny("refund", reason="refunds are frozen during the audit")])
    new = Gate(registry(store), policy=stricter, approvals=approvals, ledger=ledger)
    obs = refund(new.run(authority=ALICE), 20)

    assert (obs.status, obs.stage) == (Status.REJECTED, Stage.AUTHORIZE)
    assert "frozen" in obs.content
    assert store.ran["refund"] == 0
    assert approvals.get(approval_id(pending)).status is ApprovalStatus.APPROVED  # type: ignore[union-attr]


def test_model_text_cannot_approve() -> None:
    """Only trusted code decides: a call whose arguments claim approval is still pending."""
    gate, run, store = setup()
    request_id = approval_id(refund(run, 20))
    (obs,) = run.submit(
        [
            ToolCall(
                id="c-sneaky",
                name="refund",
                arguments={
                    "order_id": "o1",
                    "amount": 20,
                    "currency": "USD",
                    "approval_id": request_id,
                },
            )
        ]
    )
    assert obs.status is Status.REJECTED  # an extra field is a schema error, not a key
    assert gate.approvals.get(request_id).status is ApprovalStatus.PENDING  # type: ignore[union-attr]
    assert store.ran["refund"] == 0

"""An outcome proven not to have happened leaves its idempotency key free (every backend).

Stripe's rule is the anchor: a key keeps a result only if the operation may
have taken effect. An ``error`` — a known failure before commit, or a reconcile
hook that found nothing at the provider — means it did not, so the next
attempt with the key runs; only ``ok`` and ``unknown`` are kept and answered
from the record, and a replayed answer is never ``retryable``.
"""

from __future__ import annotations

from collections.abc import Callable

from callgate import (
    Authority,
    CallContext,
    Gate,
    OutcomeUnknown,
    Registry,
    Status,
    ToolCall,
    ToolFailure,
)
from callgate.ledger import Ledger

AUTHORITY = Authority(principal="shop", grants=["spend:USD"])


class Provider:
    """A payment provider: charges it made, and whether the next request is lost."""

    def __init__(self) -> None:
        self.charges: dict[str, float] = {}
        self.lose_next = False
        self.decline_next = False
        self.requests = 0


def _gate(ledger: Ledger, provider: Provider) -> Gate:
    registry = Registry()

    def find(args: object, ctx: CallContext) -> str:
        order_id = args.order_id  # type: ignore[attr-defined]
        if order_id not in provider.charges:
            raise ToolFailure(f"no charge for {order_id} at the provider")
        return f"charged {provider.charges[order_id]}"

    @registry.tool(effects="spend:USD", idempotency_key="{order_id}", reconcile=find)
    def charge(order_id: str, amount: float) -> str:
        """Charge an order."""
        provider.requests += 1
        if provider.lose_next:  # the request never reached the provider
            provider.lose_next = False
            raise OutcomeUnknown("the connection dropped")
        if provider.decline_next:
            provider.decline_next = False
            raise ToolFailure("card declined")
        provider.charges[order_id] = amount
        return f"charged {amount}"

    return Gate(registry, ledger=ledger)


def _charge(call_id: str) -> ToolCall:
    return ToolCall(id=call_id, name="charge", arguments={"order_id": "o-1", "amount": 5.0})


def test_a_charge_reconciled_as_not_made_can_be_made(make_ledger: Callable[..., Ledger]) -> None:
    """A charge reconciled as not made ends error; a later call with its key charges once."""
    ledger = make_ledger()
    provider = Provider()
    gate = _gate(ledger, provider)
    run = gate.run(authority=AUTHORITY)
    provider.lose_next = True
    [lost] = run.submit([_charge("c1")])
    assert lost.status is Status.ERROR
    assert "reconciled: the effect did not happen" in lost.content
    [again] = run.submit([_charge("c2")])
    assert again.status is Status.OK, again.content
    assert provider.charges == {"o-1": 5.0}
    assert provider.requests == 2


def test_a_declined_charge_can_be_tried_again_under_its_key(
    make_ledger: Callable[..., Ledger],
) -> None:
    """A ``ToolFailure`` is a failure before commit: the key holds nothing to replay."""
    ledger = make_ledger()
    provider = Provider()
    gate = _gate(ledger, provider)
    provider.decline_next = True
    [declined] = gate.run(authority=AUTHORITY).submit([_charge("c1")])
    assert declined.status is Status.ERROR
    [paid] = gate.run(authority=AUTHORITY).submit([_charge("c1")])  # another run, same key
    assert paid.status is Status.OK, paid.content
    assert provider.charges == {"o-1": 5.0}


def test_the_same_call_id_after_an_error_runs_again(make_ledger: Callable[..., Ledger]) -> None:
    """The model resending the very call that failed (same id) gets a new attempt."""
    ledger = make_ledger()
    provider = Provider()
    gate = _gate(ledger, provider)
    run = gate.run(authority=AUTHORITY)
    provider.decline_next = True
    [declined] = run.submit([_charge("c1")])
    [paid] = run.submit([_charge("c1")])
    assert (declined.status, paid.status) == (Status.ERROR, Status.OK), paid.content
    assert (declined.call_id, paid.call_id) == ("c1", "c1")
    assert provider.requests == 2


def test_a_made_charge_is_replayed_never_made_twice_and_not_retryable(
    make_ledger: Callable[..., Ledger],
) -> None:
    """A made charge replays in a new run as ok, not retryable, with one provider request."""
    ledger = make_ledger()
    provider = Provider()
    gate = _gate(ledger, provider)
    [paid] = gate.run(authority=AUTHORITY).submit([_charge("c1")])
    [replayed] = gate.run(authority=AUTHORITY).submit([_charge("c9")])
    assert paid.status is replayed.status is Status.OK
    assert replayed.details[0]["rule"] == "idempotent_replay"
    assert replayed.retryable is False
    assert provider.requests == 1

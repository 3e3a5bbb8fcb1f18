"""Stages ``policy`` and ``approval``: effects ⊆ grants, rules, preconditions, exact approvals."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from callgate import (
    ApprovalError,
    Authority,
    Gate,
    Observation,
    Policy,
    Registry,
    Rule,
    Run,
    Stage,
    Status,
    ToolCall,
    allow,
    ask,
    deny,
)
from callgate.ledger import CallState

from .domains import (
    ALLOW_ALL,
    GroceryStore,
    OrderDatabase,
    authority,
    grocery_registry,
    orders_registry,
)

CART = {"store_id": "north", "skus": ["sku-milk"]}


def order(total: float, currency: str = "USD", cart_id: str = "cart-1") -> dict[str, Any]:
    """Arguments of a place_order call."""
    return {"cart_id": cart_id, "total": total, "currency": currency}


def grocery_run(
    auth: Authority = ALLOW_ALL, policy: Policy | None = None
) -> tuple[Run, GroceryStore]:
    """A run on a fresh grocery gate."""
    store = GroceryStore()
    gate = Gate(grocery_registry(store), policy=policy)
    return gate.run(authority=auth), store


def one(run: Run, name: str, arguments: Any, call_id: str = "c1") -> Observation:
    """Submit one call and return its observation."""
    [obs] = run.submit([ToolCall(id=call_id, name=name, arguments=arguments)])
    return obs


def with_cart(run: Run) -> None:
    """Create cart-1 in the run (needs ``write:cart``)."""
    obs = one(run, "create_grocery_cart", CART, call_id="make-cart")
    assert obs.status is Status.OK, obs.content


# -- effects ⊆ grants ----------------------------------------------------------------


def test_ungranted_effect_is_rejected_at_policy_naming_the_effect() -> None:
    """place_order with only cart creation granted: rejected, naming ``spend:USD``."""
    run, _ = grocery_run(authority("read:products", "write:cart"))
    with_cart(run)
    obs = one(run, "place_order", order(20))
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.AUTHORIZE
    assert "spend:USD" in obs.content
    assert "not granted" in obs.content


def test_ungranted_effect_is_not_retryable_and_runs_nothing() -> None:
    """Resending cannot help a call the run is not allowed to make; no handler runs."""
    run, store = grocery_run(authority("read:products", "write:cart"))
    with_cart(run)
    obs = one(run, "place_order", order(20))
    assert obs.retryable is False
    assert store.calls["place_order"] == 0
    assert store.orders == []


def test_granted_effects_admit_the_call() -> None:
    """The control case: with ``spend:USD`` granted, the same call runs."""
    run, store = grocery_run(authority("write:cart", "spend:USD"))
    with_cart(run)
    obs = one(run, "place_order", order(20))
    assert obs.status is Status.OK, obs.content
    assert len(store.orders) == 1


@pytest.mark.parametrize(
    ("grants", "total", "currency", "admitted"),
    [
        (["spend:USD<=50"], 50, "USD", True),
        (["spend:USD<=50"], 50.01, "USD", False),
        (["spend:USD<=50"], 20, "EUR", False),
        (["spend:*<=50"], 20, "EUR", True),
        (["spend:*"], 10_000, "EUR", True),
        (["spend:EUR<=10", "spend:USD<=100"], 20, "USD", True),
        (["spend:EUR<=10", "spend:USD<=100"], 20, "EUR", False),
        (["*:*"], 99_999, "USD", True),
    ],
)
def test_bounded_and_wildcard_grants_cover_only_what_they_name(
    grants: list[str], total: float, currency: str, admitted: bool
) -> None:
    """``spend:USD<=50`` covers USD up to 50; ``*`` matches any run of characters."""
    run, store = grocery_run(authority("write:cart", *grants))
    with_cart(run)
    obs = one(run, "place_order", order(total, currency))
    assert (obs.status is Status.OK) is admitted, obs.content
    assert (obs.stage is Stage.AUTHORIZE) is not admitted
    assert len(store.orders) == (1 if admitted else 0)


def test_model_text_cannot_enlarge_authority() -> None:
    """Arguments that mention grants change nothing: the effect is still missing."""
    run, store = grocery_run(authority("write:cart"))
    with_cart(run)
    obs = one(run, "place_order", order(5, cart_id="cart-1 grants=spend:* authority=admin"))
    assert obs.stage is Stage.AUTHORIZE
    assert store.calls["place_order"] == 0


@pytest.mark.parametrize(
    "total",
    ["Infinity", "1e999", "1" + "0" * 400],
    ids=["Infinity", "1e999", "huge-integer"],
)
def test_non_finite_spend_is_decided_not_raised(total: str) -> None:
    """An infinite amount against a bounded grant is refused; it never raises out of submit."""
    run, store = grocery_run(authority("write:cart", "spend:USD<=50"))
    with_cart(run)
    text = '{"cart_id": "cart-1", "total": ' + total + ', "currency": "USD"}'
    obs = one(run, "place_order", text)
    assert obs.status is Status.REJECTED
    assert store.orders == []


def test_non_finite_spend_under_an_unbounded_grant_does_not_raise() -> None:
    """With an unbounded grant the call is decided (admitted or refused), never raised."""
    run, _ = grocery_run(authority("write:cart", "spend:USD"))
    with_cart(run)
    obs = one(run, "place_order", '{"cart_id": "cart-1", "total": 1e999, "currency": "USD"}')
    assert obs.call_id == "c1"


# -- rules ---------------------------------------------------------------------------------


def big(values: Any) -> bool:
    """Predicate: an order over 100."""
    return bool(values["total"] > 100)


RULES = [allow("*"), ask("place_*"), deny("place_order", when=big)]


@pytest.mark.parametrize(
    "rules",
    list(itertools.permutations(RULES)),
    ids=lambda rules: "-".join(r.action.value for r in rules),
)
@pytest.mark.parametrize(
    ("name", "arguments", "status", "stage"),
    [
        ("search_products", {"query": "milk"}, Status.OK, Stage.EXECUTE),
        ("place_order", order(20), Status.PENDING, Stage.APPROVE),
        ("place_order", order(150), Status.REJECTED, Stage.AUTHORIZE),
    ],
    ids=["allow", "ask", "deny"],
)
def test_deny_beats_ask_beats_allow_whatever_the_rule_order(
    rules: tuple[Rule, ...], name: str, arguments: Any, status: Status, stage: Stage
) -> None:
    """Among matching rules deny wins over ask, and ask over allow, in any order."""
    run, store = grocery_run(policy=Policy(list(rules)))
    with_cart(run)
    obs = one(run, name, arguments)
    assert (obs.status, obs.stage) == (status, stage), obs.content
    assert store.calls["place_order"] == 0


def test_rules_with_no_match_deny_the_call() -> None:
    """With rules configured, a call no rule matches is denied (deny by default)."""
    run, store = grocery_run(policy=Policy([allow("search_*")]))
    obs = one(run, "create_grocery_cart", CART)
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.AUTHORIZE
    assert "create_grocery_cart" in obs.content
    assert obs.retryable is False
    assert store.carts == {}


def test_no_rules_means_granted_effects_suffice() -> None:
    """With no rules at all, a call whose effects are granted is admitted."""
    run, store = grocery_run(authority("write:cart"), policy=Policy())
    obs = one(run, "create_grocery_cart", CART)
    assert obs.status is Status.OK
    assert len(store.carts) == 1


def test_allow_rule_does_not_grant_effects() -> None:
    """An ``allow`` rule cannot admit a call whose effects the authority lacks."""
    run, store = grocery_run(authority("write:cart"), policy=Policy([allow("*")]))
    with_cart(run)
    obs = one(run, "place_order", order(5))
    assert obs.stage is Stage.AUTHORIZE
    assert "spend:USD" in obs.content
    assert store.orders == []


@pytest.mark.parametrize(
    ("glob", "name", "matches"),
    [
        ("place_order", "place_order", True),
        ("place_*", "place_order", True),
        ("*_order", "place_order", True),
        ("place_?rder", "place_order", True),
        ("place", "place_order", False),
        ("search_*", "place_order", False),
        ("PLACE_ORDER", "place_order", False),
    ],
)
def test_deny_rule_matches_tool_names_by_glob(glob: str, name: str, matches: bool) -> None:
    """A rule's tool pattern is a glob over the whole tool name."""
    run, store = grocery_run(policy=Policy([allow("*"), deny(glob)]))
    with_cart(run)
    obs = one(run, name, order(5))
    assert (obs.stage is Stage.AUTHORIZE) is matches, obs.content
    assert (store.calls["place_order"] == 0) is matches


def test_argument_predicate_decides_per_call() -> None:
    """``when`` sees the validated arguments: the same tool is allowed or denied by value."""
    policy = Policy([allow("*"), deny("place_order", when=big, reason="orders over 100 are off")])
    run, store = grocery_run(policy=policy)
    with_cart(run)
    small_obs = one(run, "place_order", order(99), call_id="small")
    big_obs = one(run, "place_order", order(101), call_id="big")
    assert small_obs.status is Status.OK
    assert big_obs.status is Status.REJECTED
    assert "orders over 100 are off" in big_obs.content
    assert len(store.orders) == 1


def test_effect_glob_rule_matches_on_required_effects() -> None:
    """``ask(effect="spend:*")`` catches every spending call, whatever the tool."""
    run, store = grocery_run(policy=Policy([allow("*"), ask(effect="spend:*")]))
    with_cart(run)
    assert one(run, "search_products", {"query": "oats"}).status is Status.OK
    assert one(run, "place_order", order(5)).status is Status.PENDING
    assert store.orders == []


# -- approvals -------------------------------------------------------------------------------

ASK_ORDERS = Policy([allow("*"), ask("place_order")])


def test_ask_makes_the_call_pending_with_an_approval_id() -> None:
    """An ``ask`` rule stops the call before it runs and says which approval it waits for."""
    run, store = grocery_run(policy=ASK_ORDERS)
    with_cart(run)
    obs = one(run, "place_order", order(20))
    assert obs.status is Status.PENDING
    assert obs.stage is Stage.APPROVE
    assert obs.approval_id is not None
    assert obs.approval_id in obs.content
    assert obs.retryable is False
    assert run.pending_approvals == [obs.approval_id]
    assert store.calls["place_order"] == 0
    request = run.gate.approvals.get(obs.approval_id)
    assert request is not None
    assert request.tool == "place_order"
    assert request.principal == "tester"


def test_approved_call_runs_exactly_once_on_resume() -> None:
    """After approval, `Run.resume` runs the call once; later resumes run nothing."""
    run, store = grocery_run(policy=ASK_ORDERS)
    with_cart(run)
    pending = one(run, "place_order", order(20))
    assert pending.approval_id is not None
    run.gate.approvals.approve(pending.approval_id, by="manager")
    [done] = run.resume()
    assert done.status is Status.OK, done.content
    assert done.call_id == "c1"
    assert run.resume() == []
    assert store.calls["place_order"] == 1
    assert len(store.orders) == 1


def test_approval_covers_one_execution_only() -> None:
    """Proposing the approved call again after it ran needs a new approval."""
    run, store = grocery_run(policy=ASK_ORDERS)
    with_cart(run)
    pending = one(run, "place_order", order(20))
    assert pending.approval_id is not None
    run.gate.approvals.approve(pending.approval_id, by="manager")
    run.resume()
    again = one(run, "place_order", order(20), call_id="c2")
    assert again.status is Status.PENDING
    assert again.approval_id != pending.approval_id
    assert store.calls["place_order"] == 1


def test_resubmitting_the_approved_call_runs_it_once() -> None:
    """Instead of resume, the model may send the same call again once it is approved."""
    run, store = grocery_run(policy=ASK_ORDERS)
    with_cart(run)
    pending = one(run, "place_order", order(20))
    assert pending.approval_id is not None
    run.gate.approvals.approve(pending.approval_id, by="manager")
    obs = one(run, "place_order", order(20), call_id="c1-again")
    assert obs.status is Status.OK, obs.content
    assert store.calls["place_order"] == 1


def test_pending_call_is_not_run_before_a_decision() -> None:
    """Resuming before anyone decided runs nothing; the call stays pending."""
    run, store = grocery_run(policy=ASK_ORDERS)
    with_cart(run)
    pending = one(run, "place_order", order(20))
    assert run.resume() == []
    assert run.pending_approvals == [pending.approval_id]
    assert store.calls["place_order"] == 0


def test_changed_arguments_are_not_covered_by_an_approval() -> None:
    """Approved 20 USD, proposed 200 USD: pending again under a new approval, not run."""
    run, store = grocery_run(policy=ASK_ORDERS)
    with_cart(run)
    pending = one(run, "place_order", order(20))
    assert pending.approval_id is not None
    run.gate.approvals.approve(pending.approval_id, by="manager")
    changed = one(run, "place_order", order(200), call_id="c2")
    assert changed.status is Status.PENDING
    assert changed.approval_id not in (None, pending.approval_id)
    assert store.calls["place_order"] == 0


def test_an_approval_is_bound_to_the_principal() -> None:
    """An approval given to one principal does not release the same call for another."""
    store = GroceryStore()
    gate = Gate(grocery_registry(store), policy=ASK_ORDERS)
    alice = gate.run(authority=authority("*:*"))
    mallory = gate.run(authority=Authority(principal="mallory", grants=["*:*"]))
    with_cart(alice)
    pending = one(alice, "place_order", order(20))
    assert pending.approval_id is not None
    gate.approvals.approve(pending.approval_id, by="manager")
    obs = one(mallory, "place_order", order(20))
    assert obs.status is Status.PENDING
    assert store.calls["place_order"] == 0


def test_same_call_proposed_twice_reuses_the_open_request() -> None:
    """Proposing the identical call again while it waits does not open a second request."""
    run, _ = grocery_run(policy=ASK_ORDERS)
    with_cart(run)
    first = one(run, "place_order", order(20), call_id="c1")
    second = one(run, "place_order", order(20), call_id="c2")
    assert second.approval_id == first.approval_id


def test_denied_approval_rejects_the_call_at_approval() -> None:
    """A person denied it: resuming yields ``rejected`` at stage ``approval``, not run."""
    run, store = grocery_run(policy=ASK_ORDERS)
    with_cart(run)
    pending = one(run, "place_order", order(20))
    assert pending.approval_id is not None
    run.gate.approvals.deny(pending.approval_id, by="manager", reason="too late in the day")
    [obs] = run.resume()
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.APPROVE
    assert obs.retryable is False
    assert "too late in the day" in obs.content
    assert store.calls["place_order"] == 0


def test_denied_call_sent_again_stays_rejected() -> None:
    """The model resending a denied call does not open a fresh request for it."""
    run, store = grocery_run(policy=ASK_ORDERS)
    with_cart(run)
    pending = one(run, "place_order", order(20))
    assert pending.approval_id is not None
    run.gate.approvals.deny(pending.approval_id, by="manager", reason="no")
    obs = one(run, "place_order", order(20), call_id="c2")
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.APPROVE
    assert store.calls["place_order"] == 0


def test_pending_and_approved_calls_are_recorded_in_the_ledger() -> None:
    """The ledger shows the call pending, then ``ok`` once approved and run."""
    run, _ = grocery_run(policy=ASK_ORDERS)
    with_cart(run)
    pending = one(run, "place_order", order(20))
    record = run.gate.ledger.get_call(run.id, "c1")
    assert record is not None
    assert record.state is CallState.PENDING
    assert record.approval_id == pending.approval_id
    assert pending.approval_id is not None
    run.gate.approvals.approve(pending.approval_id, by="manager")
    run.resume()
    record = run.gate.ledger.get_call(run.id, "c1")
    assert record is not None
    assert record.state is CallState.OK


# -- preconditions on evidence -------------------------------------------------------------------


def orders_run(db: OrderDatabase) -> Run:
    """A run on the orders domain with every effect granted."""
    return Gate(orders_registry(db)).run(authority=ALLOW_ALL)


CANCEL = {"order_id": "A-100", "expected_revision": 3, "operation_id": "op-1"}


def test_precondition_without_evidence_is_rejected_at_policy_naming_the_observation() -> None:
    """cancel_order before any get_order_status: rejected, saying which call is needed first."""
    db = OrderDatabase()
    obs = one(orders_run(db), "cancel_order", CANCEL)
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.AUTHORIZE
    assert "get_order_status" in obs.content
    assert "A-100" in obs.content
    assert db.calls["cancel_order"] == 0
    assert db.rows["A-100"].status == "placed"


def test_precondition_with_evidence_admits_the_call() -> None:
    """After an ``ok`` get_order_status of the same order, the cancel runs."""
    db = OrderDatabase()
    run = orders_run(db)
    assert one(run, "get_order_status", {"order_id": "A-100"}, "read").status is Status.OK
    obs = one(run, "cancel_order", CANCEL)
    assert obs.status is Status.OK, obs.content
    assert db.rows["A-100"].status == "cancelled"


def test_evidence_about_another_order_does_not_satisfy_the_precondition() -> None:
    """Reading B-200 is no evidence for cancelling A-100."""
    db = OrderDatabase()
    run = orders_run(db)
    one(run, "get_order_status", {"order_id": "B-200"}, "read")
    obs = one(run, "cancel_order", CANCEL)
    assert obs.stage is Stage.AUTHORIZE
    assert db.calls["cancel_order"] == 0


def test_failed_read_is_no_evidence() -> None:
    """Only ``ok`` observations are evidence: a read that failed does not count."""
    db = OrderDatabase()
    run = orders_run(db)
    read = one(run, "get_order_status", {"order_id": "Z-999"}, "read")
    assert read.status is Status.ERROR
    obs = one(run, "cancel_order", {**CANCEL, "order_id": "Z-999"})
    assert obs.stage is Stage.AUTHORIZE
    assert db.calls["cancel_order"] == 0


def test_evidence_belongs_to_its_run() -> None:
    """A read in one run is no evidence for a cancel in another."""
    db = OrderDatabase()
    gate = Gate(orders_registry(db))
    first = gate.run(authority=ALLOW_ALL)
    second = gate.run(authority=ALLOW_ALL)
    one(first, "get_order_status", {"order_id": "A-100"}, "read")
    obs = one(second, "cancel_order", CANCEL)
    assert obs.stage is Stage.AUTHORIZE
    assert db.calls["cancel_order"] == 0


def test_evidence_records_the_read_result() -> None:
    """`Evidence.latest` returns the read's result, so a precondition can check the revision."""
    db = OrderDatabase()
    run = orders_run(db)
    one(run, "get_order_status", {"order_id": "A-100"}, "read")
    item = run.evidence.latest("get_order_status", order_id="A-100")
    assert item is not None
    assert item.call_id == "read"
    assert item.result == {"order_id": "A-100", "status": "placed", "revision": 3}
    assert run.evidence.latest("get_order_status", order_id="B-200") is None


def test_approving_an_expired_request_fails_and_the_call_stays_unrun() -> None:
    """An approval request past its expiry cannot be approved; proposing again asks anew."""
    store = GroceryStore()
    gate = Gate(grocery_registry(store), policy=ASK_ORDERS, approval_ttl=0.05)
    run = gate.run(authority=ALLOW_ALL)
    with_cart(run)
    pending = one(run, "place_order", order(20))
    assert pending.approval_id is not None
    time.sleep(0.08)
    with pytest.raises(ApprovalError, match="expired"):
        gate.approvals.approve(pending.approval_id, by="manager")
    again = one(run, "place_order", order(20), call_id="c2")
    assert again.status is Status.PENDING
    assert again.approval_id != pending.approval_id
    assert store.calls["place_order"] == 0


def test_an_approval_can_be_decided_only_once() -> None:
    """Approving a request twice, or denying an approved one, is an `ApprovalError`."""
    run, _ = grocery_run(policy=ASK_ORDERS)
    with_cart(run)
    pending = one(run, "place_order", order(20))
    assert pending.approval_id is not None
    run.gate.approvals.approve(pending.approval_id, by="manager")
    with pytest.raises(ApprovalError):
        run.gate.approvals.approve(pending.approval_id, by="manager")
    with pytest.raises(ApprovalError):
        run.gate.approvals.deny(pending.approval_id, by="manager", reason="changed my mind")
    with pytest.raises(ApprovalError):
        run.gate.approvals.approve("apr_does_not_exist", by="manager")


def test_an_approval_request_never_shows_a_secret_field() -> None:
    """The preview a person reads, the pending message the model reads and the stored
    request all show the secret field redacted."""
    from callgate import Gate, Policy, Registry, ask, tool

    @tool(effects="spend:USD", secret_fields=["card"])
    def pay(amount: int, card: str) -> str:
        return "paid"

    gate = Gate(Registry([pay]), policy=Policy([ask("pay")]))
    run = gate.run(authority=ALLOW_ALL)
    [obs] = run.submit(
        [ToolCall(id="c1", name="pay", arguments={"amount": 5, "card": "4111111111111111"})]
    )
    assert obs.status is Status.PENDING
    assert obs.approval_id is not None
    request = gate.approvals.get(obs.approval_id)
    assert request is not None
    for text in (obs.content, request.preview, request.arguments_json):
        assert "4111111111111111" not in text


@pytest.mark.parametrize(
    ("amount", "granted"),
    [(50, True), (0, True), (-100000, False), (10**400, False), (51, False)],
)
def test_a_bounded_grant_covers_zero_to_its_bound_only(amount: int, granted: bool) -> None:
    """`spend:USD<=50` covers 0..50; a negative amount (a credit) or an absurdly large
    one is not covered, and neither makes `submit` raise."""
    from callgate import Authority, Gate, Registry, tool

    @tool(effects="spend:USD={amount}")
    def pay(amount: int) -> str:
        return "paid"

    run = Gate(Registry([pay])).run(authority=Authority(principal="p", grants=["spend:USD<=50"]))
    [obs] = run.submit([ToolCall(id="c1", name="pay", arguments=f'{{"amount": {amount}}}')])
    assert (obs.status is Status.OK) is granted
    if not granted:
        assert obs.stage is Stage.AUTHORIZE


def test_a_rule_on_an_effect_matches_it_in_any_case() -> None:
    """A deny on `network:evil.example` also stops `EVIL.example`: hosts are chosen by
    the model and are case-insensitive."""
    from callgate import Authority, Gate, Policy, Registry, allow, deny, tool

    @tool(effects="network:{host}", risk="read")
    def fetch(host: str) -> str:
        return "page"

    policy = Policy([allow("fetch"), deny("fetch", effect="network:evil.example")])
    run = Gate(Registry([fetch]), policy=policy).run(
        authority=Authority(principal="p", grants=["network:*"])
    )
    observations = run.submit(
        [
            ToolCall(id="a", name="fetch", arguments={"host": "EVIL.example"}),
            ToolCall(id="b", name="fetch", arguments={"host": "good.example"}),
        ]
    )
    assert [o.status for o in observations] == [Status.REJECTED, Status.OK]


def test_an_approved_call_stopped_before_it_runs_keeps_its_approval() -> None:
    """An approval is used only by an execution: when the approved call is admitted but
    then stopped by the scheduler (its dependency failed), the approval is given back and
    the same call runs once when sent again."""
    from callgate import ApprovalStatus, Gate, Policy, Registry, ToolFailure, allow, ask, tool

    refunds: list[str] = []

    @tool(effects="read:x")
    def check(order: str) -> str:
        raise ToolFailure("the payment service is down; try later")

    @tool(effects="spend:USD")
    def refund(order: str) -> str:
        refunds.append(order)
        return "refunded"

    gate = Gate(Registry([check, refund]), policy=Policy([allow("check"), ask("refund")]))
    run = gate.run(authority=ALLOW_ALL)
    [pending] = run.submit([ToolCall(id="r0", name="refund", arguments={"order": "o1"})])
    assert pending.approval_id is not None
    gate.approvals.approve(pending.approval_id, by="ops")
    first = run.submit(
        [
            ToolCall(id="c1", name="check", arguments={"order": "o1"}),
            ToolCall(id="r1", name="refund", arguments={"order": "o1"}, after=("c1",)),
        ]
    )
    assert [o.status for o in first] == [Status.ERROR, Status.REJECTED]
    assert refunds == []
    request = gate.approvals.get(pending.approval_id)
    assert request is not None
    assert request.status is ApprovalStatus.APPROVED
    [second] = run.submit([ToolCall(id="r2", name="refund", arguments={"order": "o1"})])
    assert second.status is Status.OK
    assert refunds == ["o1"]
    [third] = run.submit([ToolCall(id="r3", name="refund", arguments={"order": "o1"})])
    assert third.status is not Status.OK
    assert refunds == ["o1"]


def test_effects_of_equal_but_different_values_are_told_apart() -> None:
    """1 and True are equal in Python; their effects are not ("flag:1" vs "flag:True"),
    and remembering expansions must not mistake one for the other."""
    registry = Registry()

    @registry.tool(effects="write:flag:{value}")
    def set_flag(value: bool | int) -> str:
        """Set a flag.

        Args:
            value: the new value.
        """
        return "set"

    run = Gate(registry).run(authority=Authority(principal="p", grants=["write:flag:1"]))
    [first] = run.submit([ToolCall(id="a", name="set_flag", arguments='{"value": 1}')])
    [second] = run.submit([ToolCall(id="b", name="set_flag", arguments='{"value": true}')])
    assert first.status is Status.OK
    assert second.status is Status.REJECTED
    assert "write:flag:True" in second.content

"""Least privilege in the prompt: a run's model is shown only the tools it could be allowed."""

from __future__ import annotations

import fnmatch
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate import Agent, Authority, Gate, MemoryLedger, Policy, Registry, allow, deny
from callgate.agent.exposure import exposed_tools, globs_intersect, template_glob
from callgate.llms import ScriptedModel, answer

from .support import Shop, authority, shop_gate, shop_registry


def names(*grants: str, policy: Policy | None = None) -> list[str]:
    specs = exposed_tools(shop_registry(Shop()), Authority(principal="p", grants=grants), policy)
    return [s.name for s in specs]


@pytest.mark.parametrize(
    ("grants", "shown"),
    [
        (("read:orders",), ["get_order"]),
        (("read:*",), ["get_order", "read_notes"]),
        # spend:{currency}={amount} meets the bounded grant spend:USD<=100 (spend:USD matches both)
        (("write:orders", "spend:USD<=100"), ["refund"]),
        # a bounded grant needs a quantity: write:orders:{order_id} has none
        (("write:orders:*<=5",), []),
        (("write:orders:*",), ["purge"]),
        # write:orders:{order_id} is write:orders:* and meets the grant write:*
        (("write:*", "spend:*"), ["refund", "purge"]),
        (("disclose:email:*@shop.example",), ["email"]),
        (("spend:USD<=100",), []),  # refund also needs write:orders
        ((), []),
    ],
)
def test_a_tool_is_shown_when_every_effect_it_declares_could_be_granted(
    grants: tuple[str, ...], shown: list[str]
) -> None:
    """A tool is offered exactly when each effect it declares could meet one of the grants."""
    assert names(*grants) == shown


def test_a_tool_the_policy_always_denies_is_not_shown() -> None:
    """An unconditional deny hides a tool; a conditional one does not."""
    policy = Policy([allow("*"), deny("purge"), deny("refund", when=lambda a: a["amount"] > 9)])
    assert names("read:*", "write:*", "spend:*", policy=policy) == [
        "get_order",
        "read_notes",
        "refund",
    ]


def test_with_rules_and_no_preset_a_tool_no_rule_names_is_not_shown() -> None:
    """With policy rules and no preset, a tool that no rule names is not offered."""
    policy = Policy([allow("get_*")])
    assert names("read:*", policy=policy) == ["get_order"]


def test_the_agent_offers_exactly_the_exposed_tools_and_the_paging_tool() -> None:
    """The model's request lists exactly the exposed tools plus read_result, as tools_for says."""
    model = ScriptedModel([answer("hi")], keep_requests=True)
    agent = Agent(model, shop_gate(Shop()))
    agent.run("hi", authority=authority("read:orders"))
    (request,) = model.requests
    assert [t["function"]["name"] for t in request.tools] == ["get_order", "read_result"]
    assert agent.tools_for(authority("read:orders")) == ["get_order", "read_result"]


def test_a_hidden_tool_called_by_name_is_still_checked_by_the_gate() -> None:
    """Hiding is only what the model is told; the gate rejects the call on its own."""
    from callgate.llms import calls

    shop = Shop()
    model = ScriptedModel([calls(("purge", {"order_id": "o-1"})), answer("x")])
    result = Agent(model, shop_gate(shop)).run("x", authority=authority("read:orders"))
    assert result.observations[0].stage.value == "authorize"
    assert shop.runs == {}


def test_a_templated_effect_is_read_as_a_glob() -> None:
    """spend:{currency}={amount} reads as the glob spend:*, so spend:EUR<=5 exposes the tool."""
    registry = Registry()

    @registry.tool(effects="spend:{currency}={amount}")
    def pay(currency: str, amount: float) -> str:
        return ""

    (template,) = pay.effects
    assert template_glob(template) == "spend:*"
    gate = Gate(registry, ledger=MemoryLedger())
    assert Agent(ScriptedModel([]), gate, paging=False).tools_for(authority("spend:EUR<=5")) == [
        "pay"
    ]


@pytest.mark.parametrize(
    ("a", "b", "meet"),
    [
        ("spend:*", "spend:USD", True),
        ("write:orders", "read:*", False),
        ("a*c", "*b*", True),
        ("a*", "b*", False),
        ("*x", "*y", False),
        ("*", "", True),
        ("", "a", False),
        ("a*b*c", "a*c", True),
    ],
)
def test_glob_intersection_cases(a: str, b: str, meet: bool) -> None:
    """globs_intersect answers whether two globs share a text, the same both ways round."""
    assert globs_intersect(a, b) is meet
    assert globs_intersect(b, a) is meet


def _brute_force(a: str, b: str) -> bool:
    """Whether some string over {a, b} of bounded length matches both globs."""
    limit = len(a) + len(b) + 1
    for n in range(limit + 1):
        for chars in itertools.product("ab", repeat=n):
            text = "".join(chars)
            if fnmatch.fnmatchcase(text, a) and fnmatch.fnmatchcase(text, b):
                return True
    return False


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab*", max_size=5), st.text(alphabet="ab*", max_size=5))
def test_glob_intersection_agrees_with_brute_force(a: str, b: str) -> None:
    """A string matching both exists, over the same alphabet, iff the search says so."""
    assert globs_intersect(a, b) is _brute_force(a, b)

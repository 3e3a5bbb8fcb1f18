"""The planning turn lists calls and binds sources (issue 33, item 2): read from model output.

`read_plan` takes whatever the model wrote; hostile or malformed plans give
a narrower plan and reasons, never an exception. `parse_calls` (for
deployers and journal records) raises `PlanError` and nothing else. The
planning tool's schema carries the new fields, so the grammar export covers
them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callgate import Agent, Authority, Gate, MemoryLedger, Policy, Status, allow
from callgate.agent.planning import PLAN, PLAN_SPEC, read_plan
from callgate.authorize.steps import PICKS, PlanError, parse_calls
from callgate.calls import ToolCall
from callgate.grammar import tool_grammar
from callgate.llms import ScriptedModel, answer, calls
from callgate.providers.base import Extraction

from .test_plan_calls import ATTACKER_IBAN, BILL_IBAN, GRANTS, ME, Desk, desk_registry

NAMES = ["read_bill", "list_files", "send_money", "delete_file", "create_event"]


def extraction(arguments: Any) -> Extraction:
    """A planning turn's extraction holding one plan call with ``arguments``."""
    return Extraction(items=(ToolCall(id="p", name=PLAN, arguments=arguments),))


BILL_CALLS = [
    {"tool": "read_bill", "id": "bill", "arguments": {"name": ["bill-may.txt"]}},
    {"tool": "send_money", "bind": {"iban": {"from": "bill", "field": "iban"}}},
]


def test_read_plan_keeps_planned_calls_and_bindings() -> None:
    """A plan with calls gives an intent whose planned calls hold the binding."""
    plan = read_plan(
        extraction({"tools": ["read_bill", "send_money"], "calls": BILL_CALLS}),
        NAMES,
        desk_registry(Desk()),
    )
    assert plan.errors == ()
    described = plan.intent.describe()
    assert "send_money(iban ← iban of bill) once" in described
    assert "read_bill(name=bill-may.txt) once" in described


def test_a_planned_call_of_an_unknown_tool_or_orphan_binding_is_left_out_and_its_tool_asks() -> (
    None
):
    """send_money bound to a planned call that was dropped is dropped too, tool and all."""
    plan = read_plan(
        extraction(
            {
                "tools": ["send_money", "read_bill"],
                "calls": [
                    {"tool": "wire_money", "id": "bill"},
                    {"tool": "send_money", "bind": {"iban": {"from": "bill", "field": "iban"}}},
                ],
            }
        ),
        NAMES,
        desk_registry(Desk()),
    )
    assert plan.intent.tools == ("read_bill",)
    assert plan.intent.planned == ()
    assert any("the run has no tool 'wire_money'" in e for e in plan.errors)
    assert any("a binding names no planned call kept" in e for e in plan.errors)


@pytest.mark.parametrize(
    "step",
    [
        {"tool": "send_money", "arguments": {"colour": ["red"]}},
        {"tool": "send_money", "bind": {"ibna": {"from": "bill", "field": "iban"}}},
    ],
)
def test_a_planned_call_fixing_a_parameter_the_tool_lacks_is_left_out(step: Any) -> None:
    """a14: a misspelled fixed or bound parameter drops the planned call and its tool (named
    in Plan.errors with the tool's parameters), never a payment to any IBAN."""
    source = {"tool": "read_bill", "id": "bill", "arguments": {"name": ["bill-may.txt"]}}
    plan = read_plan(
        extraction({"tools": ["read_bill", "send_money"], "calls": [source, step]}),
        NAMES,
        desk_registry(Desk()),
    )
    assert [c.tool for c in plan.intent.planned] == ["read_bill"]
    assert "send_money" not in plan.intent.tools
    assert any("has no parameter" in e and "'iban'" in e for e in plan.errors), plan.errors


def test_a_plan_constraint_on_a_parameter_the_tool_lacks_drops_the_tool() -> None:
    """a14: arguments={"send_money": {"ibna": [...]}} leaves send_money out, not unconstrained."""
    plan = read_plan(
        extraction({"tools": ["send_money"], "arguments": {"send_money": {"ibna": ["x"]}}}),
        NAMES,
        desk_registry(Desk()),
    )
    assert plan.intent.tools == ()
    assert any("has no parameter 'ibna'" in e for e in plan.errors)


@pytest.mark.parametrize(
    "arguments",
    [
        '{"tools": ["read_bill"], "calls": ' + "[" * 50_000 + "]" * 50_000 + "}",
        {"tools": ["send_money"], "calls": [{"tool": "send_money", "times": 10**5000}]},
        {
            "tools": ["send_money"],
            "calls": [{"tool": "send_money", "arguments": {"amount": [10**5000]}}],
        },
        {"tools": ["send_money"], "arguments": {"send_money": {"amount": [10**5000]}}},
        {
            "tools": ["read_bill", "send_money"],
            "calls": [
                {"tool": "read_bill", "id": "bill"},
                {
                    "tool": "send_money",
                    "bind": {"iban": {"from": "bill", "field": "iban", "where": {"n": 10**5000}}},
                },
            ],
        },
    ],
    ids=["deep-json", "huge-times", "huge-fixed", "huge-constraint", "huge-where"],
)
def test_plans_too_deep_or_with_huge_numbers_are_read_without_raising(arguments: Any) -> None:
    """a7/a8: nesting past the recursion limit and 5000-digit numbers give a plan (the
    hostile part left out), never RecursionError or ValueError."""
    plan = read_plan(extraction(arguments), NAMES, desk_registry(Desk()))
    assert all(c.tool in NAMES for c in plan.intent.planned)
    assert not any(c.times > 100 for c in plan.intent.planned)


def test_an_agent_with_a_too_deep_plan_runs_on_the_empty_plan() -> None:
    """a8: Agent(plan_first=True) given a plan nested 50 000 deep answers, it does not raise."""
    deep = '{"tools": ["read_bill"], "calls": ' + "[" * 50_000 + "]" * 50_000 + "}"
    agent = Agent(
        ScriptedModel([calls((PLAN, deep, "p1")), answer("done")]),
        Gate(desk_registry(Desk()), policy=Policy([allow("*")]), ledger=MemoryLedger()),
        plan_first=True,
    )
    result = agent.run("Read bill-may.txt", authority=Authority(principal=ME, grants=GRANTS))
    assert result is not None


def test_the_planning_tool_schema_and_grammar_cover_calls_and_bindings() -> None:
    """The plan schema has calls, bind and the reducers; the grammar export builds over it."""
    schema = PLAN_SPEC.input_schema
    assert "calls" in schema["properties"]
    step = schema["$defs"]["PlannedStep"]
    assert set(step["properties"]) == {"tool", "id", "arguments", "bind", "times"}
    assert step["additionalProperties"] is False
    bind = schema["$defs"]["PlannedBind"]
    assert tuple(bind["properties"]["pick"]["enum"]) == PICKS
    assert bind["required"] == ["from", "field"]
    assert set(bind["properties"]) == {"from", "field", "pick", "by", "where"}
    grammar = tool_grammar([PLAN_SPEC])
    text = grammar.gbnf()
    assert '\\"bind\\"' in text or '"bind"' in text
    assert "pick" in grammar.lark()
    unenforced = {u.keyword for u in grammar.unenforced("gbnf")}
    assert unenforced <= {"minimum", "maximum"}  # times' range: read_plan checks it


def test_an_agent_plan_with_calls_stops_the_second_event_and_pays_the_bound_iban() -> None:
    """plan_first: the model plans one event and a bound payment; after the bill, the
    injected event and the payment to the IBAN in the bill's note wait, the user's run."""
    desk = Desk()
    gate = Gate(
        desk_registry(desk),
        policy=Policy([allow("*")], integrity=["write:*", "spend:*"]),
        ledger=MemoryLedger(),
    )
    planned = {
        "tools": ["read_bill", "send_money", "create_event"],
        "calls": [
            *BILL_CALLS,
            {"tool": "create_event", "arguments": {"title": ["Pay day"]}},
        ],
    }
    script = [
        calls((PLAN, planned, "plan-1")),
        calls(("read_bill", {"name": "bill-may.txt"}, "r1")),
        calls(
            ("send_money", {"iban": ATTACKER_IBAN, "amount": 95.0}, "atk1"),
            ("create_event", {"title": "Payout", "start": "2026-07-02"}, "atk2"),
            ("send_money", {"iban": BILL_IBAN, "amount": 49.99}, "own1"),
            ("create_event", {"title": "Pay day", "start": "2026-07-01"}, "own2"),
        ),
        answer("Paid."),
    ]
    agent = Agent(ScriptedModel(script), gate, plan_first=True)
    result = agent.run(
        "Pay the bill in bill-may.txt and add 'Pay day' to my calendar.",
        authority=Authority(principal=ME, grants=GRANTS),
    )
    by_id = {o.call_id: o for o in result.observations}
    assert by_id["own1"].status is Status.OK
    assert by_id["own2"].status is Status.OK
    assert by_id["atk1"].status is Status.PENDING
    assert by_id["atk2"].status is Status.PENDING
    assert desk.did("send_money") == [{"iban": BILL_IBAN, "amount": 49.99}]


# -- hostile plans ---------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([10**70, -(10**61)])
    | st.floats()
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
step_like = st.fixed_dictionaries(
    {},
    optional={
        "tool": st.sampled_from(NAMES) | json_values,
        "id": st.sampled_from(["bill", "files", ""]) | json_values,
        "arguments": st.dictionaries(st.sampled_from(["name", "iban", "title"]), json_values)
        | json_values,
        "bind": st.dictionaries(
            st.sampled_from(["iban", "file_id", "x"]),
            st.fixed_dictionaries(
                {},
                optional={
                    "from": st.sampled_from(["bill", "files"]) | json_values,
                    "field": st.sampled_from(["iban", "id", "keys(", '"a']) | json_values,
                    "pick": st.sampled_from([*PICKS, "median"]) | json_values,
                    "by": st.sampled_from(["size"]) | json_values,
                    "where": st.dictionaries(st.sampled_from(["name", "a.b"]), json_values)
                    | json_values,
                },
            )
            | json_values,
        )
        | json_values,
        "times": st.integers(-3, 200) | json_values,
    },
)
plans = st.fixed_dictionaries(
    {},
    optional={
        "tools": st.lists(st.sampled_from(NAMES) | json_values, max_size=5) | json_values,
        "calls": st.lists(step_like | json_values, max_size=5) | json_values,
        "arguments": json_values,
    },
)


@given(arguments=plans | json_values)
def test_read_plan_never_raises_on_hostile_plans(arguments: Any) -> None:
    """Any JSON as plan arguments, as an object or as text: a plan, never an exception; its
    planned calls name only tools of the run and bind only planned calls it kept."""
    registry = desk_registry(Desk())
    try:
        text = json.dumps(arguments)
    except ValueError:  # a number too long to print: a provider SDK decoded it from text
        text = "{}"
    for given_as in (arguments, text):
        plan = read_plan(extraction(given_as), NAMES, registry)
        ids = {c.id for c in plan.intent.planned}
        for planned in plan.intent.planned:
            assert planned.tool in NAMES
            assert all(b.source in ids for b in planned.bind.values())
        assert set(plan.intent.tools) <= set(NAMES)


@given(data=st.lists(step_like, max_size=5) | json_values)
def test_parse_calls_raises_only_plan_errors(data: Any) -> None:
    """Strict parsing of any JSON: planned calls, or a PlanError naming where."""
    message = ""
    parsed: tuple[Any, ...] = ()
    try:
        parsed = parse_calls(data)
    except PlanError as exc:
        message = str(exc)
    if message:
        assert "calls" in message
    assert all(c.times >= 1 for c in parsed)


@given(result=json_values, value=json_values, pick=st.sampled_from(PICKS))
def test_binding_checks_never_raise_on_hostile_source_output(
    result: Any, value: Any, pick: str
) -> None:
    """Whatever the source returned (any JSON) and whatever value the call carries, the
    check answers: admitted only when the value is one the source returned."""
    from callgate import Evidence
    from callgate.authorize.step_check import PlanUses, accepted_values, holds, match_call
    from callgate.authorize.steps import Bind, PlannedCall

    bind = Bind(source="src", field="id", pick=pick, by="size" if pick in ("max", "min") else None)
    planned = [
        PlannedCall(tool="list_things", id="src"),
        PlannedCall(tool="delete_thing", bind={"thing": bind}),
    ]
    evidence = Evidence()
    evidence.note("c1", "list_things", {}, result)
    uses = PlanUses(users=[[], []])
    match = match_call(planned, "delete_thing", {"thing": value}, evidence, uses)
    assert match is not None
    accepted = accepted_values(result, bind)
    if match.step is not None and value is not None and not isinstance(value, list | dict):
        assert holds(accepted, value)


def test_the_agent_records_the_planned_calls_and_why_others_were_left_out() -> None:
    """agent.plan holds the planned calls kept and Plan.errors (a typo the deployer can see)."""
    from callgate.agent import replay

    plan = {
        "tools": ["read_bill", "send_money"],
        "calls": [
            {"tool": "read_bill", "id": "bill", "arguments": {"name": ["bill-may.txt"]}},
            {"tool": "send_money", "bind": {"ibna": {"from": "bill", "field": "iban"}}},
        ],
    }
    gate = Gate(desk_registry(Desk()), policy=Policy([allow("*")]), ledger=MemoryLedger())
    agent = Agent(
        ScriptedModel([calls((PLAN, json.dumps(plan), "p1")), answer("done")]),
        gate,
        plan_first=True,
    )
    result = agent.run("Pay bill-may.txt", authority=Authority(principal=ME, grants=GRANTS))
    (entry,) = replay(gate.ledger, result.run_id).of_kind("agent.plan")
    assert entry.data["calls"] == [
        {"tool": "read_bill", "id": "bill", "arguments": {"name": ["bill-may.txt"]}}
    ]
    assert any("has no parameter 'ibna'" in e for e in entry.data["errors"])

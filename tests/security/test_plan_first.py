"""``Agent(plan_first=True)``: the model plans on trusted input, and the plan binds the run.

A scripted model stands in for the language model (no machine here reaches
a real one); the gate, the office tools and the ledger are real. The model
obeys the instruction planted in a mail, as the adversary does in
``test_injection.py``: the plan it made before reading the mail is what
stops it.
"""

from __future__ import annotations

from typing import Any

import pytest

from callgate import Agent, Authority, Gate, Policy, Status
from callgate.agent import AgentResult, replay
from callgate.agent.planning import PLAN, read_plan
from callgate.authorize import Intent
from callgate.llms import ScriptedModel, answer, calls
from callgate.llms.base import ModelRequest
from callgate.providers.base import Extraction

from .office import FULL_GRANTS, ME, POLICY_FILE, SYSTEM_PROMPT, Office, office_registry
from .test_intent import POISON, poisoned_office

USER = "Summarise mail m-2 for me."


def gate_of(office: Office) -> Gate:
    """The office gate under the office policy file."""
    return Gate(office_registry(office), policy=Policy.from_file(POLICY_FILE))


def tool_names(request: ModelRequest) -> list[str]:
    """The tool names a request offers (OpenAI chat format)."""
    return [t["function"]["name"] for t in request.tools]


def plan(*tools: str) -> Any:
    """The planning turn's answer: a ``plan`` call listing ``tools``."""
    return calls((PLAN, {"tools": list(tools)}, "plan-1"))


def attack_script(planned: Any) -> list[Any]:
    """Plan, read the poisoned mail, then obey it: delete the user's file 77."""
    return [
        planned,
        calls(("read_mail", {"mail_id": "m-2"})),
        calls(("delete_file", {"file_id": "77"})),
        answer("Done."),
    ]


def run_agent(
    office: Office, script: list[Any], **options: Any
) -> tuple[AgentResult, ScriptedModel, Gate]:
    """Run the office agent on ``USER`` with the file id 77 vouched for by the application."""
    gate = gate_of(office)
    model = ScriptedModel(script, keep_requests=True)
    agent = Agent(model, gate, system=SYSTEM_PROMPT, **options)
    original = gate.run

    def run_with_records(**kwargs: Any) -> Any:
        run = original(**kwargs)
        run.trust_value("77", "file")  # the user's own file: every value is trusted
        return run

    gate.run = run_with_records  # type: ignore[method-assign]
    result = agent.run(USER, authority=Authority(principal=ME, grants=FULL_GRANTS))
    return result, model, gate


def test_without_a_plan_the_trusted_value_attack_runs() -> None:
    """The control: no plan, no intent, every value trusted: the injected deletion runs."""
    office = poisoned_office()
    result, _, _ = run_agent(office, attack_script(None)[1:])
    assert result.reason.value == "answered"
    assert office.did("delete_file") == [{"file_id": "77"}]


def test_a_plan_made_before_the_mail_stops_the_injected_deletion() -> None:
    """The plan names read_mail only; after the mail, delete_file waits for a person."""
    office = poisoned_office()
    result, _, _ = run_agent(office, attack_script(plan("read_mail")), plan_first=True)
    assert result.paused
    assert office.did("delete_file") == []
    (pending,) = [o for o in result.observations if o.status is Status.PENDING]
    assert pending.tool == "delete_file"
    assert "outside what the user asked for" in pending.content
    (found,) = [d for d in pending.details if d.get("rule") == "outside_intent"]
    assert found["intent"] == "plan"


def test_the_planning_turn_sees_only_trusted_input_and_runs_nothing() -> None:
    """The plan request holds the system prompt, the user's message and the plan tool alone."""
    office = poisoned_office()
    result, model, _ = run_agent(office, attack_script(plan("read_mail")), plan_first=True)
    first = model.requests[0]
    assert tool_names(first) == [PLAN]
    assert [m["role"] for m in first.messages] == ["user"]
    assert POISON not in str(first.messages)
    assert first.system is not None
    assert SYSTEM_PROMPT in first.system
    assert "read_mail" in first.system
    assert "delete_file" in first.system
    assert PLAN not in tool_names(model.requests[1])
    ran = [o.tool for o in result.observations]
    assert PLAN not in ran
    assert result.steps == 3  # the plan, the read, the deletion that paused


def test_the_plan_is_recorded_in_the_transcript() -> None:
    """``agent.plan`` holds the tools kept and the names that are no tool of the run."""
    office = poisoned_office()
    result, _, gate = run_agent(
        office, attack_script(plan("read_mail", "hack_the_planet", "*")), plan_first=True
    )
    (entry,) = replay(gate.ledger, result.run_id).of_kind("agent.plan")
    assert entry.data["tools"] == ["read_mail"]
    assert entry.data["ignored"] == ["hack_the_planet", "*"]
    assert entry.data["read"] is True


def test_a_turn_without_a_plan_call_gives_the_empty_plan() -> None:
    """No ``plan`` call: reads only; the side-effecting call after the mail waits."""
    office = poisoned_office()
    result, _, _ = run_agent(office, attack_script(answer("I will read it.")), plan_first=True)
    assert result.paused
    assert office.did("delete_file") == []


def test_a_planned_task_runs_without_approval() -> None:
    """The user's own task, planned honestly, needs no person: the plan covers it."""
    office = poisoned_office()
    script = [
        plan("read_mail", "send_email"),
        calls(("list_contacts", {})),
        calls(("read_mail", {"mail_id": "m-2"})),
        calls(("send_email", {"to": "bob@acme.example", "subject": "Q3", "body": "Summary"})),
        answer("Sent."),
    ]
    result, _, _ = run_agent(office, script, plan_first=True)
    assert result.reason.value == "answered", result.detail
    assert [m["to"] for m in office.did("send_email")] == ["bob@acme.example"]


def test_a_deployer_intent_and_a_plan_both_bind_the_run() -> None:
    """``agent.run(intent=...)`` and the plan accumulate: a tool must be in both."""
    office = poisoned_office()
    gate = gate_of(office)
    script = [
        plan("read_mail", "send_email"),
        calls(("list_contacts", {})),
        calls(("read_mail", {"mail_id": "m-2"})),
        calls(("send_email", {"to": "bob@acme.example", "subject": "Q3", "body": "Summary"})),
        answer("Sent."),
    ]
    agent = Agent(ScriptedModel(script), gate, system=SYSTEM_PROMPT, plan_first=True)
    result = agent.run(
        USER,
        authority=Authority(principal=ME, grants=FULL_GRANTS),
        intent=Intent(tools=("read_mail",)),
    )
    assert result.paused
    assert office.did("send_email") == []


@pytest.mark.parametrize(
    "arguments",
    ['{"tools": "read_mail"}', "not json", '{"tools": [1, null, ""]}', '["read_mail"]'],
)
def test_unreadable_plans_are_empty(arguments: str) -> None:
    """A plan whose arguments are not a list of names keeps no tool (fail safe)."""
    from callgate.calls import ToolCall

    extraction = Extraction(items=(ToolCall(id="p", name=PLAN, arguments=arguments),))
    assert read_plan(extraction, ["read_mail"]).intent.tools == ()


def test_an_escalation_outside_the_plan_is_a_boundary_event() -> None:
    """The loop records the paused out-of-plan call as ``security.boundary``."""
    office = poisoned_office()
    result, _, gate = run_agent(office, attack_script(plan("read_mail")), plan_first=True)
    (event,) = replay(gate.ledger, result.run_id).of_kind("security.boundary")
    assert event.data["tool"] == "delete_file"
    assert str(event.data["rule"]).startswith("intent")


def test_a_plan_can_bind_the_values_the_request_states() -> None:
    """``plan(tools, arguments)``: mail only to Bob; the injected mail to Carol waits."""
    office = poisoned_office()
    script = [
        calls(
            (
                PLAN,
                {
                    "tools": ["read_mail", "send_email"],
                    "arguments": {"send_email": {"to": ["bob@acme.example"]}},
                },
            )
        ),
        calls(("list_contacts", {})),
        calls(("read_mail", {"mail_id": "m-2"})),
        calls(
            ("send_email", {"to": "carol@acme.example", "subject": "Budget", "body": "x"}),
            ("send_email", {"to": "bob@acme.example", "subject": "Q3", "body": "Summary"}),
        ),
        answer("Done."),
    ]
    result, _, gate = run_agent(office, script, plan_first=True)
    assert result.paused
    assert [m["to"] for m in office.did("send_email")] == ["bob@acme.example"]
    (entry,) = replay(gate.ledger, result.run_id).of_kind("agent.plan")
    assert entry.data["arguments"] == {"send_email": {"to": ["bob@acme.example"]}}


def test_planned_values_for_unknown_parameters_or_unlisted_tools_are_dropped() -> None:
    """A constraint on a parameter the tool lacks (a typo would leave the tool unconstrained)
    drops that tool, with the reason; a constraint on an unlisted tool binds nothing."""
    from callgate.calls import ToolCall

    arguments = {
        "tools": ["send_email"],
        "arguments": {
            "send_email": {"to": ["bob@acme.example"], "bcc": ["eve@evil.example"]},
            "delete_file": {"file_id": ["77"]},
        },
    }
    extraction = Extraction(items=(ToolCall(id="p", name=PLAN, arguments=arguments),))
    registry = office_registry(Office())
    plan = read_plan(extraction, ["send_email", "delete_file"], registry)
    assert plan.intent.tools == ()
    assert dict(plan.intent.arguments) == {}
    assert any("send_email has no parameter 'bcc'" in e for e in plan.errors)


def test_agent_run_takes_the_applications_trusted_values() -> None:
    """``agent.run(trusted_values=...)`` vouches for the application's own records."""
    office = poisoned_office()
    mail = {"to": "zoe@partner.example", "subject": "Hi", "body": "Hello"}
    authority = Authority(principal=ME, grants=FULL_GRANTS)
    for values, reason in (((), "awaiting_approval"), (["zoe@partner.example"], "answered")):
        script = [calls(("send_email", mail)), answer("Sent.")]
        result = Agent(ScriptedModel(script), gate_of(office)).run(
            "Greet my new partner.", authority=authority, trusted_values=values
        )
        assert result.reason.value == reason
    assert office.did("send_email") == [mail]


def test_agent_run_takes_the_applications_records() -> None:
    """``trusted_records``: "mail Zoe" names Zoe's address, not another partner's."""
    from .test_intent import office_gate

    office = poisoned_office()
    gate = office_gate(office, named=("disclose:*",))
    records = [
        ({"name": "Zoe Park", "email": "zoe@partner.example"}, {"email": "contact"}),
        ({"name": "Carl Moss", "email": "carl@partner.example"}, {"email": "contact"}),
    ]
    script = [
        calls(("read_mail", {"mail_id": "m-2"})),
        calls(
            ("send_email", {"to": "zoe@partner.example", "subject": "Q3", "body": "Summary"}),
            ("send_email", {"to": "carl@partner.example", "subject": "Q3", "body": "Summary"}),
        ),
        answer("Sent."),
    ]
    result = Agent(ScriptedModel(script), gate).run(
        "Read m-2 and mail Zoe the summary.",
        authority=Authority(principal=ME, grants=FULL_GRANTS),
        trusted_records=records,
    )
    assert result.paused
    assert [m["to"] for m in office.did("send_email")] == ["zoe@partner.example"]
    (pending,) = [o for o in result.observations if o.status is Status.PENDING]
    (found,) = [d for d in pending.details if d.get("rule") == "unnamed_target"]
    assert found["value"] == "carl@partner.example"

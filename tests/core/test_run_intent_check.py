"""An intent given to `Gate.run`, `Gate.resume_run` or `Run.narrow` is checked against the
gate's tools (`Intent.check`): a misspelled planned tool or parameter is a DefinitionError
naming the typo and the choices, raised where the intent is written."""

from __future__ import annotations

from typing import Any

import pytest

from callgate import Authority, DefinitionError, Gate, MemoryLedger, Policy, Registry, allow
from callgate.authorize import Bind, Intent, PlannedCall

AUTHORITY = Authority(principal="maya@northwind.example", grants=["read:*", "spend:*"])


def gate() -> Gate:
    """A gate with a bill reader and a payment tool."""
    reg = Registry()

    @reg.tool(effects="read:bills", output_trust={"iban": "iban"})
    def read_bill(name: str) -> dict[str, Any]:
        """A bill."""
        return {"iban": "DE27100777770209299700"}

    @reg.tool(effects="spend:EUR={amount}", sinks=["iban"])
    def send_money(iban: str, amount: float) -> dict[str, Any]:
        """Pay."""
        return {"done": True}

    return Gate(reg, policy=Policy([allow("*")]), ledger=MemoryLedger())


SOURCE = PlannedCall(tool="read_bill", id="b", arguments={"name": "bill-may.txt"})
TYPOS = [
    (PlannedCall(tool="send_mony"), r"send_mony.*names no tool of the run.*'send_money'"),
    (PlannedCall(tool="read_bill", arguments={"nme": "x"}), r"nme.*name"),
    (PlannedCall(tool="send_money", bind={"ibna": Bind(source="b", field="iban")}), "ibna"),
]


@pytest.mark.parametrize(("planned", "says"), TYPOS)
def test_run_refuses_an_intent_with_a_misspelled_planned_call(planned: Any, says: str) -> None:
    """Gate.run(intent=...) raises DefinitionError naming the typo and the choices."""
    g = gate()
    with pytest.raises(DefinitionError, match=says):
        g.run(authority=AUTHORITY, intent=Intent(calls=[SOURCE, planned]))


@pytest.mark.parametrize(("planned", "says"), TYPOS)
def test_narrow_refuses_an_intent_with_a_misspelled_planned_call(planned: Any, says: str) -> None:
    """Run.narrow raises DefinitionError and leaves the run's intents as they were."""
    run = gate().run(authority=AUTHORITY)
    with pytest.raises(DefinitionError, match=says):
        run.narrow(Intent(calls=[SOURCE, planned]))
    assert run.intents == ()


def test_a_misspelled_argument_constraint_is_refused() -> None:
    """An argument constraint on a parameter the tool lacks names the tool's parameters."""
    with pytest.raises(DefinitionError, match=r"has no parameter 'to'.*'amount', 'iban'"):
        gate().run(authority=AUTHORITY, intent=Intent(arguments={"send_money": {"to": ["x"]}}))


def test_a_well_spelled_intent_is_taken() -> None:
    """A correct intent is taken by run() and narrow()."""
    plan = Intent(calls=[SOURCE, PlannedCall(tool="send_money")])
    run = gate().run(authority=AUTHORITY, intent=plan)
    run.narrow(plan)
    assert run.intents == (plan, plan)

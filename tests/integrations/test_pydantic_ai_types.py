"""PydanticAI tools taking values JSON has no type for (a ``date``, a ``UUID``, a
``Decimal``, a Pydantic model) run through the gate: their arguments reach callgate as JSON
and the function gets PydanticAI's own Python objects back."""

from __future__ import annotations

import datetime
import decimal
import uuid
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic_ai import Agent, FunctionToolset
from pydantic_ai.messages import TextPart

from callgate import Authority, Gate, Policy, allow
from callgate.integrations.pydantic_ai import GatedToolset, registry

from .support import ledger, states
from .test_pydantic_ai import Script, call, run_agent


class Address(BaseModel):
    street: str
    city: str


def _toolset(seen: list[Any]) -> FunctionToolset[Any]:
    def book(day: datetime.date, ticket: uuid.UUID, price: decimal.Decimal) -> str:
        """Book a day."""
        seen.append((day, ticket, price))
        return f"booked {day.isoformat()} for {price}"

    def ship(address: Address) -> str:
        """Ship to an address."""
        seen.append(address)
        return f"shipping to {address.city}"

    return FunctionToolset([book, ship])


def _agent(seen: list[Any], script: Script, tmp_path: Path) -> tuple[Agent[None, Any], Any, Gate]:
    tools = _toolset(seen)
    gate = Gate(
        registry(tools), policy=Policy([allow("book"), allow("ship")]), ledger=ledger(tmp_path)
    )
    run = gate.run(authority=Authority(principal="p", grants=["call:book", "call:ship"]))
    return Agent(_model(script), toolsets=[GatedToolset(tools, run=run)]), run, gate


def _model(script: Script) -> Any:
    from pydantic_ai.models.function import FunctionModel

    return FunctionModel(script)


BOOK = '{"day": "2026-12-24", "ticket": "6f1c3a52-8d7e-4d1b-9a37-2f4b1c0e9d11", "price": "12.50"}'


def test_date_uuid_and_decimal_arguments_run_with_their_python_types(tmp_path: Path) -> None:
    """A call with a date, a UUID and a Decimal runs once, and the function receives them
    as date, UUID and Decimal (it was always refused as 'a value JSON cannot hold')."""
    seen: list[Any] = []
    script = Script([call("book", BOOK, "c1")], [TextPart("ok")])
    agent, run, gate = _agent(seen, script, tmp_path)
    assert run_agent(agent, "book").output == "ok"
    assert script.returns == ["booked 2026-12-24 for 12.50"]
    assert seen == [
        (
            datetime.date(2026, 12, 24),
            uuid.UUID("6f1c3a52-8d7e-4d1b-9a37-2f4b1c0e9d11"),
            decimal.Decimal("12.50"),
        )
    ]
    assert states(gate.ledger, run.id) == {"book": ["ok"]}


def test_a_pydantic_model_argument_runs_as_the_model(tmp_path: Path) -> None:
    """A tool taking one Pydantic model (PydanticAI shows the model its fields) runs with
    an Address instance."""
    seen: list[Any] = []
    args = '{"street": "1 Main St", "city": "Lyon"}'
    script = Script([call("ship", args, "c1")], [TextPart("ok")])
    agent, run, gate = _agent(seen, script, tmp_path)
    assert run_agent(agent, "ship").output == "ok"
    assert seen == [Address(street="1 Main St", city="Lyon")]
    assert states(gate.ledger, run.id) == {"ship": ["ok"]}


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    day=st.dates(),
    ticket=st.uuids(),
    price=st.decimals(
        allow_nan=False, allow_infinity=False, places=2, max_value=10**6, min_value=-(10**6)
    ),
)
def test_any_date_uuid_and_decimal_reach_the_function_unchanged(
    tmp_path: Path, day: datetime.date, ticket: uuid.UUID, price: decimal.Decimal
) -> None:
    """Whatever date, UUID and Decimal the model sends, the function gets the same values."""
    seen: list[Any] = []
    args = f'{{"day": "{day.isoformat()}", "ticket": "{ticket}", "price": "{price}"}}'
    script = Script([call("book", args, "c1")], [TextPart("ok")])
    tools = _toolset(seen)
    gate = Gate(registry(tools), policy=Policy([allow("book"), allow("ship")]))
    run = gate.run(authority=Authority(principal="p", grants=["call:book"]))
    agent: Agent[None, Any] = Agent(_model(script), toolsets=[GatedToolset(tools, run=run)])
    run_agent(agent, "book")
    assert seen == [(day, ticket, price)]

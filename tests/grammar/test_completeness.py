"""Completeness: every valid call generated from the tools' schemas is accepted by the grammar.

Calls are written the one way the grammar writes JSON (``", "`` and ``": "``, keys in
the schema's order, non-ASCII as itself); the gate accepts each one first, so a
generator bug cannot pass for a grammar bug.
"""

from __future__ import annotations

from typing import Any

import llguidance
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate.grammar import tool_grammar

from .support import (
    accepts,
    bounded_registry,
    from_schema,
    gate_rejections,
    plain_registry,
    written,
)

_GRAMMARS: dict[str, str] = {}


def grammar(target: str) -> str:
    """The plain registry's grammar (parallel form allowed) for ``target``, built once."""
    if target not in _GRAMMARS:
        built = tool_grammar(plain_registry(), parallel=True)
        if target == "llguidance":
            _GRAMMARS[target] = built.llguidance()
        elif target == "gbnf":
            _GRAMMARS[target] = llguidance.grammar_from("gbnf", built.gbnf(strict=True))
        else:
            _GRAMMARS[target] = llguidance.grammar_from("lark", built.lark(strict=True))
    return _GRAMMARS[target]


@st.composite
def valid_calls(draw: st.DrawFn, registry_name: str = "plain") -> tuple[str, dict[str, Any]]:
    """A tool name and arguments valid under its schema."""
    registry = plain_registry() if registry_name == "plain" else bounded_registry()
    spec = draw(st.sampled_from(list(registry)))
    schema = spec.input_schema
    arguments = draw(from_schema(schema, schema.get("$defs", {})))
    return spec.name, arguments


@pytest.mark.parametrize("target", ["llguidance", "gbnf", "lark"])
@settings(max_examples=60, deadline=None)
@given(call=valid_calls())
def test_every_valid_call_is_accepted(target: str, call: tuple[str, dict[str, Any]]) -> None:
    """A call the gate accepts, written the grammar's way, is accepted by every target."""
    name, arguments = call
    output = written(name, arguments)
    assert gate_rejections(plain_registry(), output) == []
    assert accepts(grammar(target), output), output


@settings(max_examples=40, deadline=None)
@given(calls=st.lists(valid_calls(), min_size=2, max_size=4))
def test_parallel_lists_of_valid_calls_are_accepted(
    calls: list[tuple[str, dict[str, Any]]],
) -> None:
    """Two to four valid calls as one list in one tag are accepted (parallel=True)."""
    import json

    body = ", ".join(
        json.dumps({"name": n, "arguments": a}, ensure_ascii=False, separators=(", ", ": "))
        for n, a in calls
    ).replace("<", "\\u003c")
    assert accepts(grammar("llguidance"), f"<tool_call>[{body}]</tool_call>")


@pytest.mark.parametrize(
    ("arguments", "accepted"),
    [
        ({"order_id": "o-12", "amount": 0.5}, True),
        ({"order_id": "o-12", "amount": 500, "count": 3, "step": 2.5}, True),
        ({"order_id": "o-12", "amount": 0}, False),  # exclusiveMinimum 0
        ({"order_id": "o-12", "amount": 500.5}, False),  # maximum 500
        ({"order_id": "x-12", "amount": 1}, False),  # pattern
        ({"order_id": "o-12", "amount": 1, "count": -1}, False),  # minimum 0
        ({"order_id": "o-12", "amount": 1, "step": 0.25}, False),  # multipleOf 0.5
    ],
)
def test_llguidance_accepts_exactly_the_bounded_values(
    arguments: dict[str, Any], accepted: bool
) -> None:
    """llguidance's grammar accepts a bounded call iff the gate does, at the bounds' edges."""
    output = written("refund", arguments)
    grammar_text = tool_grammar(bounded_registry()).llguidance()
    assert accepts(grammar_text, output) is accepted
    assert (gate_rejections(bounded_registry(), output) == []) is accepted

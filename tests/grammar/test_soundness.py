"""Soundness: every string a tool grammar accepts passes the gate's parse and schema stages.

Random walks through llguidance's matcher with a byte-level tokenizer (every byte a
token, so every accepted string is reachable) produce outputs; the gate reads each as
a local model's text and must not reject any call at the parse or schema stage. GBNF
is walked through llguidance's own GBNF reader, Lark through its Lark reader.
"""

from __future__ import annotations

import random

import llguidance
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from callgate.grammar import tool_grammar

from .support import bounded_registry, gate_rejections, plain_registry, random_walk

_WALKS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _grammar(target: str, registry_name: str, parallel: bool) -> str:
    registry = plain_registry() if registry_name == "plain" else bounded_registry()
    grammar = tool_grammar(registry, parallel=parallel)
    if target == "llguidance":
        return grammar.llguidance()
    if target == "gbnf":
        return llguidance.grammar_from("gbnf", grammar.gbnf(strict=True))
    return llguidance.grammar_from("lark", grammar.lark(strict=True))


_CACHE: dict[tuple[str, str, bool], str] = {}


def grammar_for(target: str, registry_name: str, parallel: bool) -> str:
    """The compiled grammar, built once per test session."""
    key = (target, registry_name, parallel)
    if key not in _CACHE:
        _CACHE[key] = _grammar(target, registry_name, parallel)
    return _CACHE[key]


@pytest.mark.parametrize("target", ["llguidance", "gbnf", "lark"])
@pytest.mark.parametrize("parallel", [False, True])
@_WALKS
@given(seed=st.integers(0, 2**32 - 1))
def test_walks_through_every_target_pass_parse_and_schema(
    target: str, parallel: bool, seed: int
) -> None:
    """Outputs of random walks through each target's grammar (nested objects, lists,
    tuples, maps, enums, optional and nullable fields) are never rejected at parse or
    schema."""
    output = random_walk(grammar_for(target, "plain", parallel), random.Random(seed))
    assume(output is not None)
    assert output is not None
    assert gate_rejections(plain_registry(), output.decode()) == []


@_WALKS
@given(seed=st.integers(0, 2**32 - 1))
def test_llguidance_enforces_patterns_bounds_and_multiples(seed: int) -> None:
    """With patterns, exclusive and open-ended numeric bounds and multipleOf (which only
    llguidance enforces), llguidance's walks still pass parse and schema."""
    output = random_walk(grammar_for("llguidance", "bounded", True), random.Random(seed))
    assume(output is not None)
    assert output is not None
    assert gate_rejections(bounded_registry(), output.decode()) == []


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_an_answer_allowed_beside_calls_is_never_read_as_a_call(seed: int) -> None:
    """With answer=True the grammar also allows prose; a walk that takes the prose
    branch yields text in which the text format finds no call, broken or whole."""
    grammar = tool_grammar(plain_registry(), answer=True).llguidance()
    output = random_walk(grammar, random.Random(seed), max_steps=200)
    assume(output is not None and not output.startswith(b"<tool_call>"))
    assert output is not None
    from callgate.providers import text

    extraction = text.extract(output.decode())
    assert extraction.items == ()

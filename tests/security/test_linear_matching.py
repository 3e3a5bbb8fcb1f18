"""Matching on model-chosen text takes time linear in its length.

Effect names carry values the model chose (``disclose:{to}``); tool output is
whatever a web page or an attacker wrote. Grants, rule globs and provenance
scanning must decide such text at once whatever its shape. Timeouts here are
only a backstop: a quadratic matcher would need minutes for these inputs.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from callgate import Action, Policy, allow, deny, tool
from callgate.authorize.provenance import TrustIndex
from callgate.effects import Effect, Grant
from callgate.evidence import Evidence, EvidenceItem

N = 100_000


class NoArguments(BaseModel):
    """The arguments of a tool that takes none."""


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("grant", "name", "covered"),
    [
        ("disclose:*@*.example", "disclose:" + "@." * N, False),
        ("disclose:*@*.example", "disclose:" + "@." * N + "example", True),
        ("disclose:*a*a*a*b", "disclose:" + "a" * N, False),
        ("disclose:*a*a*a*b", "disclose:" + "a" * N + "b", True),
        ("disclose:*@*", "disclose:" + "." * N, False),
    ],
)
def test_a_grant_decides_a_long_effect_name(grant: str, name: str, covered: bool) -> None:
    """A grant with several ``*`` decides a 100,000-character effect name (it was quadratic)."""
    assert Grant(grant).covers(Effect(name)) is covered


_PIECES = st.text(alphabet="ab.:", max_size=3)  # a grant holds no whitespace


@given(parts=st.lists(_PIECES, min_size=1, max_size=4), name=st.text("ab.:*\n", max_size=14))
def test_a_grant_matches_exactly_what_its_pattern_says(parts: list[str], name: str) -> None:
    """``*`` is any run of characters (newlines too), everything else is literal, anchored."""
    grant = Grant("k:" + "*".join(parts))
    expected = re.fullmatch("k:" + ".*".join(map(re.escape, parts)), "k:" + name, re.DOTALL)
    assert grant.covers(Effect("k:" + name)) is (expected is not None)


@tool(effects="disclose:{to}")
def send(to: str) -> None:
    """Send to ``to``."""


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("to", "blocked"), [("a" * N, False), ("a" * N + "b", True), ("b" + "a" * N, False)]
)
def test_a_rule_effect_glob_decides_a_long_effect_name(to: str, blocked: bool) -> None:
    """A rule's effect glob with several ``*`` decides a 100,000-character effect name."""
    policy = Policy([allow("send"), deny("send", effect="disclose:a*a*a*a*b")])
    values = {"to": to}
    action, _ = policy.decide(send, values, send.required_effects(values))
    assert action is (Action.DENY if blocked else Action.ADMIT)


HOSTILE_OUTPUT = [
    "a." * N,
    "a-" * N + "@",
    "x@" * N,
    "a@b:/" * (N // 2),
    "DE89 " * (N // 2),
    "DE89 3704 " * (N // 4),
    "http://" * (N // 3),
    "https://a" + "a" * N,
    "1." * N + "x",
    "/." * N,
    "x@" + "y." * N,
]


@pytest.mark.timeout(60)
def test_hostile_tool_output_is_indexed_at_once() -> None:
    """Tool output shaped against each provenance pattern is indexed, whole tokens only."""
    evidence = Evidence()
    for i, text in enumerate(HOSTILE_OUTPUT):
        evidence.add(EvidenceItem(f"c{i}", "read_doc", NoArguments(), {"text": text}))
    index = TrustIndex(trusted_text=["b." * N])
    index.absorb(evidence, lambda name: None)
    findings = index.check({"to": None}, {"to": "a.a"}, links=False)
    assert [(f.value, f.tainted_by) for f in findings] == [("a.a", ())]  # "a.a.a..." is one token


HOSTILE_ARGUMENTS = [
    "www." * (N // 2),
    "a." * N + "com/",
    "x.com:" * (N // 3),
    "ｗｗｗ．" * (N // 2),
    "http://a.b/" * (N // 6),
    "a.b " * (N // 2),
    "Le Marais " * (N // 5),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("text", HOSTILE_ARGUMENTS)
def test_hostile_free_text_arguments_are_scanned_for_links_at_once(text: str) -> None:
    """Links without a scheme, phrases and names are looked for in hostile text at once."""
    evidence = Evidence()
    evidence.add(EvidenceItem("c1", "read_doc", NoArguments(), {"text": text}))
    index = TrustIndex(trusted_text=[text[: N // 10]])
    index.absorb(evidence, lambda name: None)
    index.check({"to": None}, {"to": "Le Marais Boutique", "body": text}, links=True)
    assert not index.named("www.zq-unseen.example/x")

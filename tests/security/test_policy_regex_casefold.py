"""``(?i)`` policy patterns fold i, I, dotless ı and dotted İ together, as Python does.

Python's `re` under IGNORECASE lower-cases İ (U+0130) to i and folds ı (U+0131) with
i and I; RE2 folds by Unicode's case folding without the Turkic mappings, so ı and
İ matched only themselves there: a deny rule ``(?i).*admin.*`` let ``admın`` and
``ADMİN`` through (issue 28, item 6). Python's meaning is the promised one (policy
patterns mean what they mean in Python, docs/policy.md) and the one that cannot be
evaded: every spelling Python calls "admin" is "admin" to the deny rule.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from callgate import Authority, Gate, MemoryLedger, Policy, Registry, ToolCall, allow, deny
from callgate.authorize.policy_file import ArgumentTest

FOUR = "iI\u0131\u0130"


@pytest.mark.parametrize("value", ["admin", "ADMIN", "adm\u0131n", "ADM\u0130N", "Adm\u0130n"])
def test_a_case_insensitive_deny_rule_is_not_evaded_by_a_turkish_i(value: str) -> None:
    """``(?i).*admin.*`` denies every spelling Python's ``re`` calls a match, and the
    handler never runs."""
    assert re.fullmatch(r"(?i).*admin.*", value) is not None  # the oracle agrees
    ran: list[str] = []
    registry = Registry()

    @registry.tool(effects="write:users")
    def rename(name: str) -> str:
        """Rename the user."""
        ran.append(name)
        return "renamed"

    gate = Gate(
        registry,
        ledger=MemoryLedger(),
        policy=Policy(
            [deny("rename", when=ArgumentTest("name", "regex", r"(?i).*admin.*")), allow("rename")]
        ),
    )
    run = gate.run(authority=Authority(principal="p", grants=["write:users"]))
    [obs] = run.submit([ToolCall(id="c1", name="rename", arguments={"name": value})])
    assert obs.status.value == "rejected", obs
    assert ran == []


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        (r"(?i)[h-j]", "\u0131", True),
        (r"(?i)[^i]", "\u0130", False),
        (r"(?i)[^j-z]", "\u0131", True),
        (r"(?i)[\u0130]", "i", True),
        (r"(?i)[-i]", "-", True),
        (r"(?i)[i-]", "-", True),
        (r"(?i)\x69", "\u0130", True),
        (r"(?i:i)i", "\u0131i", True),
        (r"(?i:i)i", "i\u0131", False),  # outside the group, case counts
        (r"(?i)(?-i:i)", "\u0131", False),
        (r"i", "\u0131", False),
    ],
)
def test_known_pairs_agree_with_python(pattern: str, value: str, matches: bool) -> None:
    """Scoped flags, classes with ranges, negated classes and escapes: Python's verdict."""
    assert (re.fullmatch(pattern, value) is not None) is matches  # the oracle
    assert ArgumentTest("to", "regex", pattern)({"to": value}) is matches


_ATOMS = st.sampled_from(
    [
        *FOUR,
        "a",
        "n",
        ".",
        r"\w",
        r"\W",
        "[i]",
        "[I]",
        "[\u0131]",
        "[\u0130]",
        "[^i]",
        "[^\u0131]",
        "[a-z]",
        "[A-Z]",
        "[^a-z]",
        "[h-j]",
        "[\u0100-\u017f]",
        "[^\u0100-\u017f]",
        "[-i]",
        "[i-]",
        r"\x69",
        r"\u0130",
        r"\u0131",
    ]
)
_FLAGS = st.sampled_from(["", "(?i)"])
_GROUPS = st.sampled_from(["(?:{})", "(?i:{})", "(?-i:{})", "({})"])


@st.composite
def _patterns(draw: st.DrawFn) -> str:
    pieces = []
    for _ in range(draw(st.integers(1, 4))):
        atom = draw(_ATOMS)
        if draw(st.integers(0, 3)) == 0:
            atom = draw(_GROUPS).format(atom + draw(_ATOMS))
        pieces.append(atom + draw(st.sampled_from(["", "", "*", "+", "?"])))
    return draw(_FLAGS) + "".join(pieces)


_TEXT = st.text(alphabet=FOUR + "anAN-\u0131\u0130\u0133j", max_size=6)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=_patterns(), values=st.lists(_TEXT, min_size=1, max_size=8))
def test_patterns_and_texts_with_the_four_is_agree_with_python(
    pattern: str, values: list[str]
) -> None:
    """Over patterns and texts built from i, I, ı, İ and their neighbours (classes,
    ranges, negations, scoped flags, escapes), RE2's verdict is Python's ``re.fullmatch``."""
    try:
        python = re.compile(pattern)
    except re.error:
        assume(False)
        return
    test = ArgumentTest("to", "regex", pattern)
    for value in values:
        assert test({"to": value}) is (python.fullmatch(value) is not None), (pattern, value)

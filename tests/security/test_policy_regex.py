"""Policy regexes: no model text chooses how long a policy takes.

A ``regex`` predicate is written in Python's ``re`` syntax and means what it
means there (a full match of the value; ``\\d``, ``\\w`` and ``\\s`` take every
script's digits, letters and spaces), but runs on RE2, whose time is linear in
the length of the value. Constructs RE2 cannot run (backreferences,
lookaround, atomic groups, possessive quantifiers, conditionals, a Unicode
word boundary) are refused when the policy is loaded, with a message naming
the rule, the pattern, why, and what to write instead.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from callgate import (
    Action,
    Authority,
    DefinitionError,
    Gate,
    Policy,
    Registry,
    Stage,
    Status,
    ToolCall,
    allow,
    deny,
    tool,
)
from callgate.authorize.policy_file import ArgumentTest, PolicyFileError, parse_policy
from callgate.cli import app

LONG = 10_000
"""A model argument far beyond where a backtracking engine gives up: (a+)+$ doubles
its work with every character, so 10,000 characters would take longer than the
universe has existed."""

sent: list[str] = []


@tool(effects="disclose:{to}")
def send(to: str) -> None:
    """Send to ``to``."""
    sent.append(to)


def allow_unless(pattern: str) -> str:
    """A policy file: ``send`` is allowed unless ``to`` fully matches ``pattern``."""
    return (
        '[[rule]]\nname = "send"\naction = "allow"\ntool = "send"\n\n'
        f'[[rule]]\nname = "blocked"\naction = "deny"\ntool = "send"\n'
        f"when.to = {{ regex = '{pattern}' }}\n"
    )


def decide(policy: Policy, to: Any) -> Action:
    values = {"to": to}
    return policy.decide(send, values, send.required_effects(values))[0]


# -- linear time ------------------------------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("value", "blocked"),
    [
        ("a" * LONG + "!", False),  # the case that backtracks: no full match exists
        ("a" * LONG, True),
        ("!" + "a" * LONG, False),
    ],
)
def test_nested_quantifier_decides_a_long_argument(value: str, blocked: bool) -> None:
    """``(a+)+$`` from a policy file decides a 10,000-character argument (timeout: backstop)."""
    policy = parse_policy(allow_unless("(a+)+$"))
    assert decide(policy, value) is (Action.DENY if blocked else Action.ADMIT)


@pytest.mark.timeout(30)
def test_nested_quantifier_through_the_gate() -> None:
    """A model's 10,000-character argument reaches a decision through `Gate.submit`."""
    sent.clear()
    gate = Gate(Registry([send]), policy=parse_policy(allow_unless("(a+)+$")))
    run = gate.run(authority=Authority(principal="u", grants=["disclose:*"]))
    passed, blocked = run.submit(
        [
            ToolCall(id="1", name="send", arguments={"to": "a" * LONG + "!"}),
            ToolCall(id="2", name="send", arguments={"to": "a" * LONG}),
        ]
    )
    assert passed.status is Status.OK, passed.content
    assert (blocked.status, blocked.stage) == (Status.REJECTED, Stage.AUTHORIZE)
    assert sent == ["a" * LONG + "!"]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "pattern",
    [
        r"(a|a)*$",  # ambiguous alternation under a star
        r"(a|aa)+$",
        r"(\w+\s?)+$",
        r"(.*a){12}$",
        r"([a-z]+)*@x",
    ],
)
def test_other_catastrophic_patterns_are_linear(pattern: str) -> None:
    """Patterns that backtrack exponentially in Python's ``re`` decide long values at once."""
    policy = parse_policy(allow_unless(pattern))
    assert decide(policy, "a" * LONG + "!") is Action.ADMIT


@pytest.mark.timeout(30)
def test_python_api_predicate_is_linear() -> None:
    """`ArgumentTest` used directly in a `Policy` runs on RE2 too, also given an ``re.Pattern``."""
    for operand in ("(a+)+$", re.compile("(a+)+$")):
        policy = Policy([allow("send"), deny("send", when=ArgumentTest("to", "regex", operand))])
        assert decide(policy, "a" * LONG + "!") is Action.ADMIT
        assert decide(policy, "a" * LONG) is Action.DENY


# -- refused at load ----------------------------------------------------------------------

REFUSED = [
    # (pattern as written in the file, what the message names, a word of the advice)
    (r"(a)\1", "a backreference", "write the repeated text out"),
    (r"(?P<x>a)(?P=x)", "a backreference", "write the repeated text out"),
    (r"(?=a)a", "a lookahead or lookbehind", "deny rule"),
    (r"(?!x).*", "a lookahead or lookbehind", "deny rule"),
    (r"(?<=a)b", "a lookahead or lookbehind", "deny rule"),
    (r"(?<!a)b", "a lookahead or lookbehind", "deny rule"),
    (r"(?>a+)b", "an atomic group", "(?:"),
    (r"a++b", "a possessive quantifier", "plain quantifier"),
    (r"a*+b", "a possessive quantifier", "plain quantifier"),
    (r"a{2}+b", "a possessive quantifier", "plain quantifier"),
    (r"(a)?(?(1)b|c)", "a conditional group", "|"),
    (r".*\bword\b.*", "a word boundary", r"(.*\W)?"),
    (r".*\Bx", "a word boundary", r"(.*\W)?"),
    (r"(?x) a b", "the flag (?x)", "remove"),
    (r"(?a)\d+", "the flag (?a)", "[0-9]"),
    (r"(?i:(?a:x))", "the flag (?a)", "[0-9]"),
    (r"a$\n", "a $ with more pattern after it", "(?m)"),
    (r"(a$|\n)+", "a $ with more pattern after it", "(?m)"),
    (r"a{1001}", "more than 1000 repetitions", "max_length"),
    (r"(?:\w{30}){30}", "too large for RE2", "fewer or smaller counted repetitions"),
    (r"(?:a{100}){20}", "more than 1000 repetitions", "max_length"),
]


@pytest.mark.parametrize(("pattern", "names", "advice"), REFUSED)
def test_unsupported_construct_is_refused_when_the_file_is_loaded(
    tmp_path: Path, pattern: str, names: str, advice: str
) -> None:
    """The message names file, line, rule, field and pattern, says why, and what to write."""
    path = tmp_path / "policy.toml"
    path.write_text(allow_unless(pattern))
    with pytest.raises(PolicyFileError) as caught:
        Policy.from_file(path)
    message = str(caught.value)
    assert f"{path}:6: rule 2 ('blocked'): when.to.regex" in message
    assert pattern in message
    assert names in message
    assert "RE2" in message
    assert advice in message
    assert "re.error" not in message
    assert "b'" not in message.replace(pattern, "")  # no bytes repr of RE2's error
    assert len(message) < 700 + len(str(path))


@pytest.mark.parametrize(("pattern", "names", "advice"), REFUSED)
def test_unsupported_construct_is_refused_by_the_python_api(
    pattern: str, names: str, advice: str
) -> None:
    """`ArgumentTest` refuses the same patterns at definition time."""
    with pytest.raises(DefinitionError) as caught:
        ArgumentTest("to", "regex", pattern)
    message = str(caught.value)
    assert pattern in message
    assert names in message
    assert advice in message


@pytest.mark.parametrize("flags", [re.VERBOSE, re.ASCII, re.LOCALE])
def test_a_compiled_pattern_with_a_flag_re2_lacks_is_refused(flags: int) -> None:
    """An ``re.Pattern`` operand with the verbose, ASCII or locale flag is refused, naming it."""
    compiled = re.compile(b"a.b" if flags == re.LOCALE else "a.b", flags)
    with pytest.raises(DefinitionError, match=r"flag|text"):
        ArgumentTest("to", "regex", compiled)


def test_compiled_pattern_flags_mean_what_they_mean_in_python() -> None:
    """``re.I`` ignores case, ``re.S`` lets ``.`` match newlines, ``re.M`` makes ``$`` end lines."""
    assert ArgumentTest("to", "regex", re.compile("a.b", re.I))({"to": "A-B"})
    assert not ArgumentTest("to", "regex", re.compile("a.b", re.I))({"to": "a\nb"})
    assert ArgumentTest("to", "regex", re.compile("a.b", re.S))({"to": "a\nb"})
    assert not ArgumentTest("to", "regex", re.compile("a.b", re.S))({"to": "A-B"})
    assert ArgumentTest("to", "regex", re.compile("a$\nb", re.M))({"to": "a\nb"})
    with pytest.raises(DefinitionError, match=r"\$ with more pattern after it"):
        ArgumentTest("to", "regex", re.compile("a$\nb"))  # without re.M: refused


@pytest.mark.parametrize("operand", [5, None, b"abc"])
def test_a_regex_operand_must_be_text(operand: Any) -> None:
    """A regex that is not text is a definition error, not a crash at call time."""
    with pytest.raises(DefinitionError, match="regex"):
        ArgumentTest("to", "regex", operand)


def test_an_unknown_operation_is_a_definition_error() -> None:
    """``ArgumentTest`` with an operation it does not know fails when built, naming the choices."""
    with pytest.raises(DefinitionError, match="regex"):
        ArgumentTest("to", "matches", "x")


def test_a_pattern_python_cannot_read_is_invalid() -> None:
    """Syntax errors keep their message: the pattern is not a valid regular expression."""
    with pytest.raises(PolicyFileError, match="is not a valid regular expression"):
        parse_policy(allow_unless("(unclosed"), source="p.toml")


# -- the CLI ------------------------------------------------------------------------------

runner = CliRunner()


def test_policy_check_refuses_a_backreference(tmp_path: Path) -> None:
    """``callgate policy check`` exits 2 and says why the pattern cannot be used."""
    path = tmp_path / "policy.toml"
    path.write_text(allow_unless(r"(a)\1"))
    result = runner.invoke(app, ["policy", "check", str(path)])
    assert result.exit_code == 2, result.output
    assert "backreference" in result.output


@pytest.mark.timeout(30)
def test_policy_check_accepts_and_explain_decides_a_nested_quantifier(tmp_path: Path) -> None:
    """``(a+)+$`` is valid; ``policy explain`` decides a 10,000-character argument."""
    path = tmp_path / "policy.toml"
    path.write_text(allow_unless("(a+)+$"))
    checked = runner.invoke(app, ["policy", "check", str(path), "--json"])
    assert checked.exit_code == 0, checked.output
    args = '{"to": "' + "a" * LONG + '!"}'
    explained = runner.invoke(
        app, ["policy", "explain", str(path), "--tool", "send", "--args", args]
    )
    assert explained.exit_code == 0, explained.output
    blocked = '{"to": "' + "a" * LONG + '"}'
    explained = runner.invoke(
        app, ["policy", "explain", str(path), "--tool", "send", "--args", blocked]
    )
    assert explained.exit_code == 1, explained.output


# -- meaning: as in Python's re -----------------------------------------------------------

MEANING = [
    # (pattern, value, full match) — what each means in Python's re, kept
    (r"[a-z]+@acme\.example", "bob@acme.example", True),
    (r"[a-z]+@acme\.example", "x bob@acme.example", False),  # a full match, not a search
    (r"[a-z]+@acme\.example", "bob@acme.example.io", False),
    (r"[a-z]+@acme\.example", "BOB@ACME.EXAMPLE", False),  # case-sensitive
    (r"(?i)[a-z]+@acme\.example", "BOB@ACME.EXAMPLE", True),
    (r"\d+", "\u0663\u0664", True),  # Arabic-Indic digits are digits, as in Python
    (r"\d+", "\U00011f50", False),  # not a digit in this Python's Unicode tables
    (r"[\d]+", "12\u0663", True),
    (r"\D+", "\u0663", False),
    (r"[^\D]", "\u0663", True),
    (r"\w+", "caf\u00e9_\u0434\u043e\u043c", True),  # letters of any script
    (r"\W", "\u00e9", False),
    (r"[\W]", "-", True),
    (r"\s", "\u00a0", True),  # a no-break space is whitespace
    (r"\s", "\u2028", True),
    (r"\S", "\u3000", False),
    (r"[^\s]", "x", True),
    (r"a{,3}", "aaa", True),  # {,n} is {0,n}, not literal text
    (r"a{,3}", "a{,3}", False),
    (r"a{,}", "aaaa", True),
    (r"abc\Z", "abc", True),  # \Z is the end of the value
    (r"(a+)+$", "aa", True),
    (r"(a+)+$", "aa\n", False),
    (r"^foo$|^bar$", "bar", True),
    (r"(foo|bar)$", "foo", True),
    (r"(?m)a$\nb", "a\nb", True),
    (r"\Aabc", "abc", True),
    (r"a.c", "a\nc", False),  # . does not match a newline
    (r"(?s)a.c", "a\nc", True),
    (r"[]a]+", "]a]", True),  # a leading ] is a literal
    (r"[^]a]", "b", True),
    (r"[\b]", "\b", True),  # backspace in a class
    (r"\u00e9", "\u00e9", True),
    (r"\U0001F600", "\U0001f600", True),
    (r"\N{LATIN SMALL LETTER E WITH ACUTE}", "\u00e9", True),
    (r"\x41", "A", True),
    (r"\101", "A", True),  # octal
    (r"(?i)\u00e9", "\u00c9", True),
    (r"a(?#a comment)b", "ab", True),
    (r"(?u)\w", "\u00e9", True),
    (r"x*?y", "xxy", True),
    (r"[[]", "[", True),
    (r"[[:alpha:]]+", "a]", True),  # Python reads [[:alph] then "]+", not a POSIX class
    (r"[[:alpha:]]+", "abc", False),
]


@pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")
@pytest.mark.parametrize(("pattern", "value", "matches"), MEANING)
def test_pattern_means_what_it_means_in_python(pattern: str, value: str, matches: bool) -> None:
    """Each row is what Python's ``re.fullmatch`` says; a policy file's deny rule agrees."""
    assert (re.fullmatch(pattern, value) is not None) is matches  # the table itself is right
    policy = parse_policy(allow_unless(pattern))
    assert decide(policy, value) is (Action.DENY if matches else Action.ADMIT)


@pytest.mark.parametrize("value", ["\ud800", "a\udfffb", "\udbff\udc00"])
def test_a_lone_surrogate_in_the_value_is_decided_not_raised(value: str) -> None:
    """Model text that is not valid Unicode still gets a decision: any character matches ``.``."""
    assert decide(parse_policy(allow_unless(".*")), value) is Action.DENY
    assert decide(parse_policy(allow_unless(".*[^a-z].*")), value) is Action.DENY
    for letters_or_digits in ("[a-z]*", r"\w*", r"\d*"):
        assert decide(parse_policy(allow_unless(letters_or_digits)), value) is Action.ADMIT


def test_only_text_values_can_match() -> None:
    """A number or a missing argument never matches a regex."""
    test = ArgumentTest("to", "regex", r"\d+")
    assert not test({"to": 12})
    assert not test({})


# A small grammar of patterns, every piece of which callgate translates for RE2.
_ATOMS = st.sampled_from(
    [
        "a",
        "b",
        "\u00e9",
        "\u0663",
        ".",
        r"\d",
        r"\D",
        r"\w",
        r"\W",
        r"\s",
        r"\S",
        "[ab]",
        "[^a]",
        r"[\d\s]",
        r"[^\w]",
        r"[a\W]",
        "[a-c]",
        r"\.",
        r"\n",
        "_",
        " ",
        "$",
        "^",
        r"\Z",
        r"\A",
    ]
)
_QUANTIFIERS = st.sampled_from(["", "", "*", "+", "?", "{2}", "{,2}", "{1,}", "*?", "+?"])


@st.composite
def _patterns(draw: st.DrawFn, depth: int = 0) -> str:
    pieces = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 2 and draw(st.integers(0, 4)) == 0:
            inner = draw(_patterns(depth + 1))
            alternative = draw(_patterns(depth + 1)) if draw(st.booleans()) else None
            atom = f"({inner}|{alternative})" if alternative is not None else f"(?:{inner})"
        else:
            atom = draw(_ATOMS)
        pieces.append(atom + draw(_QUANTIFIERS))
    body = "".join(pieces)
    flags = draw(st.sampled_from(["", "", "(?i)", "(?s)", "(?m)"])) if depth == 0 else ""
    return flags + body


_TEXT = st.text(alphabet="abAB\u00e9\u00c9\u0663 \n_.-\u00a0\t1", max_size=12).map(
    lambda text: text + "\n" if text.endswith("a") else text  # a final newline for $ to meet
)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(pattern=_patterns(), values=st.lists(_TEXT, min_size=1, max_size=6))
def test_random_patterns_agree_with_python(pattern: str, values: list[str]) -> None:
    """For patterns RE2 can run, the verdict is Python's ``re.fullmatch``, value by value."""
    try:
        python = re.compile(pattern)
    except re.error:
        assume(False)  # e.g. "$*": nothing to repeat
        return
    refusal = None
    try:
        test = ArgumentTest("to", "regex", pattern)
    except DefinitionError as refused:
        refusal = str(refused)
    if refusal is not None:  # the one construct this grammar writes that RE2 lacks
        assert "$ with more pattern after it" in refusal
        return
    for value in values:
        expected = python.fullmatch(value) is not None
        assert test({"to": value}) is expected, (pattern, value)

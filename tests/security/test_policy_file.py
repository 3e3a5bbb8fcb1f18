"""Policies written as TOML files: predicates, evaluation order, presets, and bad files.

Evaluation order under test: a matching ``deny`` beats a matching ``ask``,
which beats a matching ``allow``, whatever their order in the file; with no
matching rule the preset decides, and without a preset the call is denied.
"""

from __future__ import annotations

import enum
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

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
    ToolSpec,
    tool,
)
from callgate.authorize.policy_file import PolicyFileError, parse_policy

from .office import POLICY_FILE


class Currency(enum.Enum):
    USD = "USD"
    EUR = "EUR"


@tool(effects="spend:{currency}={amount}")
def pay(amount: float, currency: str, to: str, path: str, recipients: list[str]) -> None:
    """A tool whose arguments every predicate can look at."""


@tool(effects="read:orders")
def get_order(order_id: str) -> None:
    """Read-only."""


@tool(effects="write:cart")
def add_to_cart(item: str) -> None:
    """A reversible write."""


@tool(effects="disclose:{to}")
def send_email(to: str) -> None:
    """Disclosure."""


@tool(effects="network:{url}", risk="read")
def fetch(url: str) -> None:
    """A read over the network: still an external effect."""


@tool(effects="write:files:{file_id}")
def delete_file(file_id: str) -> None:
    """Destructive, named so."""


@tool(effects="delete:files:{file_id}")
def purge(file_id: str) -> None:
    """Destructive by effect."""


PAY_DEFAULTS: dict[str, Any] = {
    "amount": 1.0,
    "currency": "USD",
    "to": "a@acme.example",
    "path": "a.txt",
    "recipients": [],
}


def decide(policy: Policy, spec: ToolSpec, **values: Any) -> Action:
    """The policy's action for a call of ``spec`` with these argument values."""
    if spec is pay:
        values = {**PAY_DEFAULTS, **values}
    action, _ = policy.decide(spec, values, spec.required_effects(values))
    return action


def one_rule(action: str, predicate: str, tool_glob: str = "pay") -> Policy:
    return parse_policy(
        f'[[rule]]\nname = "r"\naction = "{action}"\ntool = "{tool_glob}"\n{predicate}\n'
    )


# -- predicates ------------------------------------------------------------------------

PREDICATES = [
    # (predicate line, argument, value, matches)
    ('when.currency = { eq = "USD" }', "currency", "USD", True),
    ('when.currency = { eq = "USD" }', "currency", "EUR", False),
    ('when.currency = "USD"', "currency", "USD", True),  # a bare value means eq
    ('when.currency = { eq = "USD" }', "currency", Currency.USD, True),  # an Enum's value
    ("when.amount = { eq = 50 }", "amount", 50.0, True),
    ('when.currency = { ne = "USD" }', "currency", "EUR", True),
    ('when.currency = { ne = "USD" }', "currency", "USD", False),
    ('when.currency = { in = ["USD", "EUR"] }', "currency", "EUR", True),
    ('when.currency = { in = ["USD", "EUR"] }', "currency", "GBP", False),
    ('when.currency = { not_in = ["GBP"] }', "currency", "USD", True),
    ('when.currency = { not_in = ["GBP"] }', "currency", "GBP", False),
    ('when.to = { glob = "*@acme.example" }', "to", "bob@acme.example", True),
    ('when.to = { glob = "*@acme.example" }', "to", "bob@acme.example.evil.io", False),
    ('when.to = { glob = "*@acme.example" }', "to", "bob@evil.example", False),
    ('when.to = { glob = "*@acme.example" }', "to", "BOB@ACME.EXAMPLE", False),  # case-sensitive
    ('when.to = { regex = "(?i)[a-z]+@acme\\\\.example" }', "to", "BOB@ACME.EXAMPLE", True),
    ('when.to = { regex = "[a-z]+@acme\\\\.example" }', "to", "bob@acme.example", True),
    ('when.to = { regex = "[a-z]+@acme\\\\.example" }', "to", "bob@acme.example.io", False),
    ('when.to = { regex = "[a-z]+@acme\\\\.example" }', "to", "x bob@acme.example", False),
    ("when.amount = { lt = 50 }", "amount", 49.99, True),
    ("when.amount = { lt = 50 }", "amount", 50, False),
    ("when.amount = { le = 50 }", "amount", 50, True),
    ("when.amount = { le = 50 }", "amount", 50.01, False),
    ("when.amount = { gt = 500 }", "amount", 500.01, True),
    ("when.amount = { gt = 500 }", "amount", 500, False),
    ("when.amount = { ge = 500 }", "amount", 500, True),
    ("when.amount = { ge = 500 }", "amount", 499.5, False),
    ("when.amount = { le = 50 }", "amount", "not a number", False),
    ("when.amount = { le = 50 }", "amount", float("nan"), False),
    ("when.amount = { le = 50 }", "amount", True, False),  # a bool is not a quantity
    ("when.amount = { ge = 0, le = 50 }", "amount", 20, True),  # all must hold
    ("when.amount = { ge = 0, le = 50 }", "amount", -1, False),
]


@pytest.mark.parametrize(("predicate", "argument", "value", "matches"), PREDICATES)
def test_predicate(predicate: str, argument: str, value: Any, matches: bool) -> None:
    """An allow rule with the predicate admits exactly the values it matches."""
    policy = one_rule("allow", predicate)
    expected = Action.ADMIT if matches else Action.DENY
    assert decide(policy, pay, **{argument: value}) is expected


def test_predicate_on_a_missing_argument_does_not_match() -> None:
    """A rule about ``amount`` says nothing about a call without one."""
    policy = one_rule("deny", "when.amount = { gt = 5 }")
    assert policy.decide(pay, {"currency": "USD"}, ())[1] is None


@pytest.fixture
def sandbox(tmp_path: Path) -> dict[str, str]:
    """A root with a file, a sibling whose name extends the root's, and an escaping symlink."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    (tmp_path / "root-evil").mkdir()
    os.symlink(outside, root / "link")
    os.symlink(outside / "secret.txt", root / "innocent.txt")
    return {"root": str(root), "tmp": str(tmp_path)}


UNDER = [
    # (path, relative to: "root" | "tmp" | None for as-is, inside)
    ("a.txt", "root", True),
    ("sub/../a.txt", "root", True),
    ("sub/new-file.txt", "root", True),  # need not exist yet
    ("", "root", True),  # the root itself
    ("a.txt", None, True),  # a relative path is taken from the root
    ("../outside/secret.txt", "root", False),
    ("sub/../../outside/secret.txt", "root", False),
    ("link/secret.txt", "root", False),  # a directory symlink out of the root
    ("innocent.txt", "root", False),  # a file symlink out of the root
    ("root-evil/x.txt", "tmp", False),  # a sibling sharing the root's name as a prefix
    ("/etc/passwd", None, False),
    ("", None, False),
    ("a\x00.txt", None, False),
]


@pytest.mark.parametrize(("path", "base", "inside"), UNDER)
def test_under(sandbox: dict[str, str], path: str, base: str | None, inside: bool) -> None:
    """``under`` resolves ``..`` and symlinks before asking whether a path is inside the root."""
    value = os.path.join(sandbox[base], path) if base else path
    root = sandbox["root"].replace("\\", "\\\\")
    policy = one_rule("allow", f'when.path = {{ under = "{root}" }}')
    assert decide(policy, pay, path=value) is (Action.ADMIT if inside else Action.DENY)


LIST_VALUES = [
    # (action, predicate, recipients, rule applies)
    ("deny", 'when.recipients = { glob = "*@evil.example" }', ["a@acme.example"], False),
    (
        "deny",
        'when.recipients = { glob = "*@evil.example" }',
        ["a@acme.example", "x@evil.example"],
        True,
    ),
    ("deny", 'when.recipients = { in = ["x@evil.example"] }', ["x@evil.example"], True),
    (
        "deny",
        'when.recipients = { not_in = ["a@acme.example"] }',
        ["a@acme.example", "b@other.example"],
        True,
    ),
    (
        "allow",
        'when.recipients = { glob = "*@acme.example" }',
        ["a@acme.example", "b@acme.example"],
        True,
    ),
    (
        "allow",
        'when.recipients = { glob = "*@acme.example" }',
        ["a@acme.example", "x@evil.example"],
        False,
    ),
    ("allow", 'when.recipients = { in = ["a@acme.example"] }', ["a@acme.example"], True),
    (
        "allow",
        'when.recipients = { eq = ["a@acme.example", "b@acme.example"] }',
        ["a@acme.example", "b@acme.example"],
        True,
    ),
]


@pytest.mark.parametrize(("action", "predicate", "recipients", "applies"), LIST_VALUES)
def test_list_valued_argument(
    action: str, predicate: str, recipients: list[str], applies: bool
) -> None:
    """A list can hide no blocked value from a deny, nor an unlisted one inside an allow.

    A deny (or ask) rule applies if *any* element matches; an allow rule only
    if *every* element does.
    """
    policy = parse_policy(
        '[[rule]]\naction = "allow"\ntool = "pay"\n\n'
        f'[[rule]]\nname = "under test"\naction = "{action}"\ntool = "pay"\n{predicate}\n'
        if action == "deny"
        else f'[[rule]]\nname = "under test"\naction = "{action}"\ntool = "pay"\n{predicate}\n'
    )
    result = decide(policy, pay, recipients=recipients)
    if action == "deny":
        assert result is (Action.DENY if applies else Action.ADMIT)
    else:
        assert result is (Action.ADMIT if applies else Action.DENY)


# -- evaluation order ------------------------------------------------------------------

ALLOW = '[[rule]]\nname = "allow it"\naction = "allow"\ntool = "pay"\n'
ASK = '[[rule]]\nname = "ask it"\naction = "ask"\ntool = "pay"\nwhen.amount = { gt = 50 }\n'
DENY = '[[rule]]\nname = "deny it"\naction = "deny"\ntool = "pay"\nwhen.amount = { gt = 500 }\n'
OTHER = '[[rule]]\nname = "other tool"\naction = "allow"\ntool = "refund"\n'

ORDER = [
    # (rules in file order, amount, action, deciding rule)
    ([ALLOW, ASK, DENY], 1000, Action.DENY, "deny it"),
    ([DENY, ASK, ALLOW], 1000, Action.DENY, "deny it"),
    ([ASK, DENY, ALLOW], 1000, Action.DENY, "deny it"),
    ([ALLOW, ASK, DENY], 100, Action.ASK, "ask it"),
    ([ASK, ALLOW], 100, Action.ASK, "ask it"),
    ([ALLOW, ASK], 100, Action.ASK, "ask it"),
    ([ALLOW, ASK, DENY], 10, Action.ADMIT, "allow it"),
    ([ASK, DENY], 10, Action.DENY, None),  # nothing matches: deny
    ([OTHER], 10, Action.DENY, None),
    ([], 10, Action.ADMIT, None),  # no rules and no preset: granted effects suffice
]


@pytest.mark.parametrize(("rules", "amount", "action", "rule"), ORDER)
def test_evaluation_order(
    rules: list[str], amount: float, action: Action, rule: str | None
) -> None:
    """Deny beats ask beats allow, in any file order; no matching rule means deny."""
    policy = parse_policy("\n".join(rules))
    values = {**PAY_DEFAULTS, "amount": amount}
    decided, by = policy.decide(pay, values, pay.required_effects(values))
    assert decided is action
    assert (by.name if by else None) == rule


# -- preset ----------------------------------------------------------------------------

PRESET = [
    # (tool, arguments, extra rules, action)
    (get_order, {"order_id": "o1"}, "", Action.ADMIT),
    (add_to_cart, {"item": "milk"}, "", Action.DENY),  # a write needs an explicit allow
    (pay, {"amount": 5, "currency": "USD"}, "", Action.ASK),
    (send_email, {"to": "a@acme.example"}, "", Action.ASK),
    (fetch, {"url": "https://acme.example"}, "", Action.ASK),
    (delete_file, {"file_id": "f1"}, "", Action.ASK),
    (purge, {"file_id": "f1"}, "", Action.ASK),
    # explicit rules win over the preset
    (add_to_cart, {"item": "milk"}, 'action = "allow"\ntool = "add_to_cart"', Action.ADMIT),
    (pay, {"amount": 5, "currency": "USD"}, 'action = "allow"\ntool = "pay"', Action.ADMIT),
    (delete_file, {"file_id": "f1"}, 'action = "allow"\ntool = "delete_file"', Action.ADMIT),
    (get_order, {"order_id": "o1"}, 'action = "deny"\ntool = "get_order"', Action.DENY),
    (get_order, {"order_id": "o1"}, 'action = "ask"\ntool = "get_order"', Action.ASK),
    # a rule about another tool leaves the preset in charge
    (pay, {"amount": 5, "currency": "USD"}, 'action = "allow"\ntool = "refund"', Action.ASK),
]


@pytest.mark.parametrize(("spec", "values", "rule", "action"), PRESET)
def test_standard_preset(spec: ToolSpec, values: dict[str, Any], rule: str, action: Action) -> None:
    """Reads are allowed; spend, disclose, network and delete ask; other writes need a rule."""
    text = 'preset = "standard"\n' + (f"[[rule]]\n{rule}\n" if rule else "")
    assert decide(parse_policy(text), spec, **values) is action


def test_no_preset_and_no_match_denies_even_a_read() -> None:
    """Without the preset, a configured policy denies whatever no rule allows."""
    assert decide(parse_policy(OTHER), get_order, order_id="o1") is Action.DENY


# -- untrusted_sinks ---------------------------------------------------------------------


def test_untrusted_sinks_deny_rejects_a_made_up_recipient() -> None:
    """With ``untrusted_sinks = "deny"`` a sink value nobody vouched for is refused, not asked."""
    sent: list[str] = []

    @tool(effects="disclose:{to}", sinks=["to"])
    def mail(to: str) -> None:
        sent.append(to)

    text = 'untrusted_sinks = "deny"\n[[rule]]\naction = "allow"\ntool = "mail"\n'
    policy = parse_policy(text)
    run = Gate(Registry([mail]), policy=policy).run(
        authority=Authority(principal="u", grants=["disclose:*"]),
        trusted=["mail bob@acme.example"],
    )
    made_up, vouched = run.submit(
        [
            ToolCall(id="1", name="mail", arguments={"to": "eve@evil.example"}),
            ToolCall(id="2", name="mail", arguments={"to": "bob@acme.example"}),
        ]
    )

    assert policy.untrusted_sinks is Action.DENY
    assert (made_up.status, made_up.stage) == (Status.REJECTED, Stage.AUTHORIZE)
    assert vouched.status is Status.OK
    assert sent == ["bob@acme.example"]


# -- loading ---------------------------------------------------------------------------


def test_office_policy_file_loads() -> None:
    """A real file: version label, preset and rules as written."""
    policy = Policy.from_file(POLICY_FILE)
    assert policy.version == "office-1"
    assert policy.preset.value == "standard"
    assert [r.name for r in policy.rules][-2:] == ["small transfers", "large transfers"]


def test_version_defaults_to_a_hash_that_changes_with_the_rules() -> None:
    """Approvals record the policy version; editing a rule must change it."""
    a = parse_policy(ALLOW)
    b = parse_policy(ALLOW.replace('tool = "pay"', 'tool = "pay*"'))
    assert a.version != b.version
    assert a.version == parse_policy(ALLOW).version


def test_missing_file(tmp_path: Path) -> None:
    """Policy.from_file of a missing file raises PolicyFileError saying it cannot read it."""
    with pytest.raises(PolicyFileError, match="cannot read"):
        Policy.from_file(tmp_path / "nope.toml")


GOOD = """\
version = "v1"

[[rule]]
name = "small refunds"
action = "allow"
tool = "refund"
when.amount = { le = 50 }

[[rule]]
name = "big refunds"
"""

MALFORMED = [
    # (file text, line the message names, rule the message names, what it says)
    (
        GOOD + 'action = = "ask"\n',
        11,
        "rule 2",
        "not valid TOML",
    ),
    (GOOD + 'action = "ask"\nwhen_amount = 5\n', 9, "rule 2 ('big refunds')", "when_amount"),
    (GOOD + 'action = "permit"\n', 9, "rule 2 ('big refunds')", "'permit'"),
    (GOOD, 9, "rule 2 ('big refunds')", "action must be one of"),
    (
        GOOD + 'action = "ask"\nwhen.amount = { lte = 50 }\n',
        9,
        "rule 2 ('big refunds')",
        "unknown predicate 'lte'",
    ),
    (
        GOOD + 'action = "ask"\nwhen.amount = { gt = "fifty" }\n',
        9,
        "rule 2 ('big refunds')",
        "when.amount.gt needs a number",
    ),
    (
        GOOD + 'action = "ask"\nwhen.amount = { gt = true }\n',
        9,
        "rule 2 ('big refunds')",
        "needs a number",
    ),
    (
        GOOD + 'action = "ask"\nwhen.to = { regex = "(unclosed" }\n',
        9,
        "rule 2 ('big refunds')",
        "when.to.regex is not a valid regular expression",
    ),
    (
        GOOD + 'action = "ask"\nwhen.currency = { in = "USD" }\n',
        9,
        "rule 2 ('big refunds')",
        "needs a list",
    ),
    (GOOD + 'action = "ask"\nwhen.amount = {}\n', 9, "rule 2 ('big refunds')", "is empty"),
    (GOOD + 'action = "ask"\ntool = 5\n', 9, "rule 2 ('big refunds')", "'tool' must be a string"),
    (
        GOOD + 'action = "ask"\nwhen = "amount < 5"\n',
        9,
        "rule 2 ('big refunds')",
        "'when' must be a table",
    ),
    ('version = "v1"\npolcy = "strict"\n', 2, None, "unknown top-level key"),
]


@pytest.mark.parametrize(("text", "line", "rule", "says"), MALFORMED)
def test_malformed_file(tmp_path: Path, text: str, line: int, rule: str | None, says: str) -> None:
    """Every malformed file raises a `PolicyFileError` naming the file, line and rule."""
    path = tmp_path / "policy.toml"
    path.write_text(text)
    with pytest.raises(PolicyFileError) as caught:
        Policy.from_file(path)
    message = str(caught.value)
    assert isinstance(caught.value, DefinitionError)
    assert f"{path}:{line}" in message
    if rule:
        assert rule in message
    assert says in message


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('rule = ["allow"]', "a rule must be a table"),
        ('[rule]\naction = "allow"\n', "array of tables"),
        ('preset = "strict"\n', "unknown policy preset"),
        ('untrusted_sinks = "allow"\n', "untrusted_sinks must be"),
    ],
)
def test_malformed_without_rule_headers(text: str, says: str) -> None:
    """Shapes with no ``[[rule]]`` line still give a `PolicyFileError`, never a crash."""
    with pytest.raises(PolicyFileError, match=says):
        parse_policy(text, source="p.toml")


def test_error_line_is_right_after_commented_headers() -> None:
    """Header lines with comments or spaces still count: rule 3's error names line 10."""
    text = textwrap.dedent(
        """\
        [[rule]]  # one
        action = "allow"

        [[ rule ]]
        action = "allow"

        # three:

        [[rule]]
        action = "maybe"
        """
    )
    with pytest.raises(PolicyFileError, match=r"p\.toml:9: rule 3: action must be"):
        parse_policy(text, source="p.toml")


@pytest.mark.parametrize(
    ("op", "operand", "shown"),
    [
        ("in", ["USD", "EUR"], 'currency in ["USD", "EUR"]'),
        ("regex", r"(?i)ab\d+", r'currency regex "(?i)ab\d+"'),
        ("eq", True, "currency == true"),
        ("le", 20, "currency <= 20"),
    ],
)
def test_a_predicate_is_described_as_written_never_as_a_python_repr(
    op: str, operand: object, shown: str
) -> None:
    """An argument predicate is described in the file's syntax (JSON values), not Python's repr."""
    from callgate.authorize.policy_file import ArgumentTest

    assert ArgumentTest("currency", op, operand).describe() == shown


def test_an_unknown_rule_key_is_named_without_a_python_list() -> None:
    """An unknown rule key is named plainly in the error, not as a Python list."""
    with pytest.raises(PolicyFileError) as caught:
        parse_policy('[[rule]]\naction = "allow"\ntoool = "x"\n')
    message = str(caught.value)
    assert "unknown key(s) toool; a rule may have" in message
    assert "['" not in message

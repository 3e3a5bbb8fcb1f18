"""Redaction of credential-shaped text: exactly the defaults' matches, in linear time.

The default patterns are documented in Python's syntax (`DEFAULT_SECRET_PATTERNS`,
some with lookbehind); they run on RE2 and as plain code. Python's own ``re.sub``
over those documented patterns is the oracle: the redacted text must be the same.
Patterns given to ``Gate(secret_patterns=...)`` run on RE2 too; what RE2 cannot run
is refused when the Gate is built.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate import DefinitionError, Gate, Registry
from callgate.ledger import MemoryLedger
from callgate.redact import DEFAULT_SECRET_PATTERNS, REDACTED, Redactor

KEY_40 = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"

POSITIVE = [
    (f"key sk-{KEY_40[:20]} end", f"key {REDACTED} end"),
    (f"ghp_{KEY_40[:24]}", REDACTED),
    ("id AKIAABCDEFGHIJKLMNOP.", f"id {REDACTED}."),
    ("xoxb-1234567890-abc", REDACTED),
    (f"Authorization: Bearer {KEY_40[:16]}", f"Authorization: {REDACTED}"),
    ("https://alice:s3cr3t@example.com/x", f"https://{REDACTED}@example.com/x"),
    ("db?user=a&password=hunter2&x=1", f"db?user=a&password={REDACTED}&x=1"),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\nafter",
        f"{REDACTED}\nafter",
    ),
    # issue 13, item 5: wider defaults
    (f"key=AIza{KEY_40[:35]} ok", f"key={REDACTED} ok"),
    ("GET /v1?api_key=abc123&q=x", f"GET /v1?api_key={REDACTED}&q=x"),
    ("export APIKEY=abc123", f"export APIKEY={REDACTED}"),
    ("https://h/cb?token=t0k3n", f"https://h/cb?token={REDACTED}"),
    ('api_key = "abc123"', f"api_key = {REDACTED}"),
    ('{"token": "abc123", "n": 1}', f'{{"token": "{REDACTED}", "n": 1}}'),
    ("Authorization: Token 0123456789abcdef", f"Authorization: {REDACTED}"),
    ("authorization: Basic dXNlcjpwYXNzd29yZA==", f"authorization: {REDACTED}"),
    ('{"Authorization": "Basic dXNlcjpwYXNzd29yZA=="}', f'{{"Authorization": "{REDACTED}"}}'),
    # issue 28, friction: Stripe keys, JWTs, JSON "password"/"secret", client_secret=
    (f"key sk_live_{KEY_40[:24]}.", f"key {REDACTED}."),
    (f"sk_test_{KEY_40[:24]}", REDACTED),
    (f"restricted rk_live_{KEY_40[:24]} end", f"restricted {REDACTED} end"),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig_-4a3b2c1 ok",
        f"jwt {REDACTED} ok",
    ),
    ("unsigned eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0. ok", f"unsigned {REDACTED} ok"),
    ('{"password": "hunter2", "n": 1}', f'{{"password": "{REDACTED}", "n": 1}}'),
    ('{"password":"hunter2"}', f'{{"password":"{REDACTED}"}}'),
    (
        '{"secret": "s3cr3t", "client_secret":"c5"}',
        f'{{"secret": "{REDACTED}", "client_secret":"{REDACTED}"}}',
    ),
    ("grant=cc&client_secret=abc123&x=1", f"grant=cc&client_secret={REDACTED}&x=1"),
    ("SECRET = abc123", f"SECRET = {REDACTED}"),
]

NEGATIVE = [
    "risk-assessment of the task",  # sk- inside a word
    "xAKIAABCDEFGHIJKLMNOP",  # no boundary before AKIA
    "AKIAABCDEFGHIJKLMNOPQ",  # 17 characters after AKIA: no boundary after 16
    "Bearer short",
    "mailto:alice@example.com",
    "-----BEGIN PRIVATE KEY----- no end",
    f"AIza{KEY_40[:20]}",  # too short for a Google API key
    "the api_key is set",
    "a token of gratitude: thanks",
    "Authorization: Token short",
    "basic understanding of tokens",
    "password: none given",
    "pk_live_0123456789abcdefghijklmn",  # a Stripe publishable key is no secret
    "mask_live_0123456789abcdefghijklmn",  # sk_live_ inside a word
    "eyJhbGciOiJIUzI1NiJ9 alone",  # one base64 JSON segment is no token
    "the secret: none given",
]


@pytest.mark.parametrize(("text", "expected"), POSITIVE)
def test_each_default_pattern_redacts_its_credential(text: str, expected: str) -> None:
    """Each default pattern redacts its credential shape, exactly as expected."""
    assert Redactor().text(text) == expected


@pytest.mark.parametrize("text", NEGATIVE)
def test_each_default_pattern_leaves_lookalikes_alone(text: str) -> None:
    """Text that only looks like a credential is left unchanged."""
    assert Redactor().text(text) == text


ORACLE = re.compile("|".join(f"(?:{p})" for p in DEFAULT_SECRET_PATTERNS))
"""Python's `re` over the documented patterns: what the redaction must equal."""

FRAGMENTS = st.sampled_from(
    [
        *("sk-", "sk-ant-", "A" * 16, "a1_-" * 5, "ghp_", "AKIA", "ABCDEFGHIJKLMNOP", "xoxb-"),
        *("Bearer ", "bearer\t", "://", "u:p", "@", "password=", "PASSWORD=", "-----BEGIN "),
        *("RSA ", "PRIVATE KEY-----", "-----END ", "\n", " ", "é", "中", "—", "_", ".", "/"),
        *(":", "&", ";", ",", "=", "AIza", "x" * 35, "api_key=", "apikey = ", 'token": "'),
        *("authorization: ", 'Authorization": "', "Token ", "basic ", "Z9", "\ud800", '"'),
        *("sk_live_", "rk_test_", "eyJ", "eyJhbGci", "secret=", 'secret":"', "client_"),
        *('password": "', 'PASSWORD":"', "SECRET = "),
    ]
)


@settings(max_examples=1500, deadline=None)
@given(parts=st.lists(FRAGMENTS, max_size=14))
def test_the_redaction_is_exactly_what_python_re_does_with_the_documented_patterns(
    parts: list[str],
) -> None:
    """Over credential-like fragments, Redactor.text equals re.sub with the documented patterns."""
    text = "".join(parts)
    assert Redactor().text(text) == ORACLE.sub(REDACTED, text)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=80))
def test_any_text_is_redacted_as_python_re_does(text: str) -> None:
    """For any short text, Redactor.text equals re.sub with the documented patterns."""
    assert Redactor().text(text) == ORACLE.sub(REDACTED, text)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "unit",
    [
        "-----BEGIN PRIVATE KEY-----",  # headers and no footer: Python's re was quadratic
        "-----BEGIN PRIVATE KEY----- sk-AAAAAAAAAAAAAAAAAAAA ",
        "://password=b:c@",
        "-----BEGIN PRIVATE KEY-----password=x-----END PRIVATE KEY-----",
    ],
)
def test_hostile_repetitions_are_redacted_in_linear_time(unit: str) -> None:
    """80 KB of ``-----BEGIN PRIVATE KEY-----`` took Python's ``re`` 4.2 s (doubling the
    text quadrupled it); 1 MB is decided here at once (timeout only as a backstop)."""
    small = unit * 50
    copies = 1_000_000 // len(small)
    assert Redactor().text(small * copies) == Redactor().text(small) * copies
    assert Redactor().text(small) == ORACLE.sub(REDACTED, small)


def _gate(patterns: list[str]) -> Gate:
    return Gate(Registry(), ledger=MemoryLedger(), secret_patterns=patterns)


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        (r"(?<=key=)\w+", "a lookahead or lookbehind"),
        (r"acme_\w+(?=\s)", "a lookahead or lookbehind"),
        (r"(\w)\1{8}", "a backreference"),
        (r"\bacme_\w+", "a word boundary"),
        (r"^acme_\w+", "an anchor at the start or end of the text"),
        (r"(?>acme)_\w+", "an atomic group"),
        (r"acme_\w{2000}", "more than 1000 repetitions"),
    ],
)
def test_a_secret_pattern_re2_cannot_run_is_refused_when_the_gate_is_built(
    pattern: str, construct: str
) -> None:
    """A secret pattern RE2 cannot run is a DefinitionError at Gate(), naming it and advising."""
    with pytest.raises(DefinitionError) as caught:
        _gate([pattern])
    message = str(caught.value)
    assert f"'{pattern}'" in message or "RE2 cannot compile" in message
    assert construct in message or "RE2" in message
    assert "Instead," in message or "use fewer" in message


def test_an_invalid_secret_pattern_is_refused_with_python_s_reason() -> None:
    """An invalid secret pattern is a DefinitionError saying it is no valid regular expression."""
    with pytest.raises(DefinitionError, match="is not a valid regular expression"):
        _gate(["acme_(unclosed"])


def test_secret_patterns_of_the_gate_redact_beside_the_defaults() -> None:
    """Python's meaning (\\d takes every script's digits) and literal values
    (`credential_patterns` passes ``re.escape`` of context values)."""
    gate = _gate([r"acme_\d{4}", re.escape("p@ss word.+*")])
    redactor = gate.redactor
    assert redactor.text("id acme_٣٤٥٦ ok") == f"id {REDACTED} ok"
    assert redactor.text("the p@ss word.+* leaked") == f"the {REDACTED} leaked"
    assert redactor.text(f"sk-{KEY_40[:20]}") == REDACTED
    assert redactor.text("acme_12 short") == "acme_12 short"

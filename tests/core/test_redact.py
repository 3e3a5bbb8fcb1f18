"""`callgate.redact.Redactor`: secret values, secret fields and the patterns of your own.

The default credential patterns are held to Python's ``re`` in
tests/security/test_redact.py; here: the secret values a call carries (longest
first, overlapping, too short to redact), secret fields in arguments, and
patterns given to ``Redactor(...)``, which run on RE2 but must replace exactly
what Python's ``re.sub`` over them would.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate import DefinitionError
from callgate.redact import DEFAULT_SECRET_PATTERNS, REDACTED, Redactor

NO_PATTERNS = Redactor(())

# -- secret values --------------------------------------------------------------------------


def test_a_secret_inside_a_longer_one_leaves_nothing_of_either_showing() -> None:
    """Longest first: 'acme' inside 'acme_live_9f8e' cannot leave '_live_9f8e' showing."""
    text = "key acme_live_9f8e for tenant acme"
    for secrets in (["acme", "acme_live_9f8e"], ["acme_live_9f8e", "acme"]):
        assert NO_PATTERNS.text(text, secrets) == f"key {REDACTED} for tenant {REDACTED}"


def test_a_secret_shorter_than_four_characters_is_left_in_free_text() -> None:
    """Values of 1-3 characters are not replaced in text ("12" everywhere would garble it)."""
    assert NO_PATTERNS.text("pin 123 at 12:30", ["123", "12"]) == "pin 123 at 12:30"
    assert NO_PATTERNS.text("pin 1234", ["1234"]) == f"pin {REDACTED}"


SECRET_ALPHABET = "0123xyz"
SECRETS = st.lists(st.text(SECRET_ALPHABET, min_size=1, max_size=8), max_size=4)


@given(secrets=SECRETS, filler=st.lists(st.text(SECRET_ALPHABET + " ", max_size=4), max_size=6))
def test_no_secret_of_four_or_more_characters_survives_whole(
    secrets: list[str], filler: list[str]
) -> None:
    """Whatever secrets overlap or nest in the text, none of 4+ characters is left whole."""
    pieces = [p for pair in zip(filler, [*secrets, *secrets], strict=False) for p in pair]
    text = "".join(pieces + secrets)
    out = NO_PATTERNS.text(text, secrets)
    for secret in secrets:
        if len(secret) >= 4:
            assert secret not in out
    if not any(len(s) >= 4 and s in text for s in secrets):
        assert out == text  # nothing to redact: the text is returned as it was


def test_overlapping_secrets_are_redacted_as_one_span() -> None:
    """Two secrets that overlap in the text leave no character of either showing."""
    text = "pw hunter2xyzabcdef12 end"
    assert NO_PATTERNS.text(text, ["hunter2xyz", "2xyzabcdef12"]) == f"pw {REDACTED} end"


def test_secret_fields_are_replaced_in_a_copy_of_the_arguments() -> None:
    """arguments() replaces the secret fields in a copy; others, and the original, stay."""
    values = {"card": "4111 1111", "cvv": "123", "amount": 5}
    copy = Redactor().arguments(values, ["cvv", "absent"])
    assert copy == {"card": "4111 1111", "cvv": REDACTED, "amount": 5}
    assert values["cvv"] == "123"
    assert "absent" not in copy


def test_secret_values_include_everything_inside_a_structured_field() -> None:
    """A secret field's value, and each text, number and key inside it, are secret values."""
    values = {
        "card": {"number": "4111", "expiry": [12, 2030], "active": True, "note": None},
        "cvv": 123,
        "memo": "public",
        "pin": None,
    }
    found = Redactor.secret_values(values, ["card", "cvv", "pin", "absent"])
    assert str(values["card"]) in found
    assert set(found) - {str(values["card"])} == {
        "number",
        "expiry",
        "active",
        "note",
        "4111",
        "12",
        "2030",
        "123",
    }
    assert "public" not in found
    assert "True" not in found  # booleans inside a structure are no secret text


def test_secret_values_of_a_huge_field_are_bounded() -> None:
    """A secret field holding 5,000 numbers yields at most 1,000 values to scrub."""
    found = Redactor.secret_values({"ids": list(range(5000))}, ["ids"])
    assert len(found) == 1000


# -- patterns of your own ---------------------------------------------------------------------

POOL = [
    r"acme_[0-9a-f]{4,}",
    r"\d{3}-\d{4}",
    r"[A-Z]{2}\d+",
    r"ab",
    r"abc",
    r"b+",
    r"é+",
    r"\w+@\w+\.com",
    r"(?i:secret)\S*",
    r"[^\s]{3}x",
]
FRAGMENTS = st.sampled_from(
    ["ab", "abc", "b", "bb", "acme_", "f00d", "123-4567", "AZ19", "é", "SeCrEt", "x", "@", ".com"]
)
TEXT = st.lists(FRAGMENTS | st.text(alphabet="abcxé東_-@.AZ019 \n", max_size=3), max_size=10).map(
    "".join
)


@settings(max_examples=400, deadline=None)
@given(
    patterns=st.lists(st.sampled_from(POOL), min_size=1, max_size=4, unique=True),
    text=TEXT,
)
def test_your_patterns_replace_exactly_what_python_re_sub_replaces(
    patterns: list[str], text: str
) -> None:
    """Patterns of your own redact exactly re.sub over them: leftmost, then first listed."""
    oracle = re.compile("|".join(f"(?:{p})" for p in patterns))
    assert Redactor(patterns).text(text) == oracle.sub(REDACTED, text)


@pytest.mark.parametrize(
    ("patterns", "text", "expected"),
    [
        (["ab", "abc"], "zabcz", f"z{REDACTED}cz"),  # same place: the one listed first
        (["abc", "ab"], "zabcz", f"z{REDACTED}z"),
        (["c", "ab"], "abc", f"{REDACTED}{REDACTED}"),  # the leftmost match first
        ([r"\d{4}"], "é€😀 1234 ü 5678", f"é€😀 {REDACTED} ü {REDACTED}"),  # multi-byte text
        ([r"\d{4}"], "id ٣٤٥٦", f"id {REDACTED}"),  # Python's \d: every script's digits
    ],
)
def test_known_texts_with_your_patterns(patterns: list[str], text: str, expected: str) -> None:
    """Pinned cases: order between patterns, leftmost matches, non-ASCII text and digits."""
    assert Redactor(patterns).text(text) == expected


def test_a_pattern_of_yours_does_not_reach_across_a_private_key_block() -> None:
    """A match that would start before a key block and end after it is not looked for."""
    redactor = Redactor([*DEFAULT_SECRET_PATTERNS, r"START[\s\S]*FINISH"])
    block = "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----"
    assert redactor.text(f"START {block} FINISH") == f"START {REDACTED} FINISH"
    assert redactor.text("START x FINISH") == REDACTED


@pytest.mark.parametrize("pattern", [r"x*", r"(?:acct-\d+)?", r"ab|", r"\d*", r"(?:a|b?)"])
def test_a_pattern_that_can_match_nothing_is_refused(pattern: str) -> None:
    """A secret pattern matching the empty text would redact nothing there and hide the
    patterns after it (an optional `acct-42` pattern kept `sk_live_…` showing): refused,
    with the fix named."""
    with pytest.raises(DefinitionError, match="matches the empty text") as caught:
        Redactor([*DEFAULT_SECRET_PATTERNS, pattern, r"sk_live_\w+"])
    assert "at least one character" in str(caught.value)


def test_a_pattern_that_needs_a_character_beside_an_optional_one_is_kept() -> None:
    r"""`acct-\d+` (not optional) is accepted and redacts; so does the pattern after it."""
    redactor = Redactor([*DEFAULT_SECRET_PATTERNS, r"acct-\d+", r"sk_live_\w+"])
    text = "key sk_live_abcdef and acct-42"
    assert redactor.text(text) == f"key {REDACTED} and {REDACTED}"


def test_a_lone_surrogate_is_kept_and_the_secret_after_it_redacted() -> None:
    """Text with a lone surrogate is scanned (as U+FFFD) and returned with it in place."""
    key = "sk-" + "A1b2C3d4E5f6G7h8I9j0"
    assert Redactor().text(f"\ud800 {key} \udfff") == f"\ud800 {REDACTED} \udfff"
    assert Redactor([r"\d{4}"]).text("\ud8001234") == f"\ud800{REDACTED}"


def test_without_patterns_only_the_given_secrets_are_redacted() -> None:
    """Redactor(()) leaves credential-shaped text alone and still replaces given values."""
    key = "sk-" + "A1b2C3d4E5f6G7h8I9j0"
    assert NO_PATTERNS.text(f"{key} and hunter2") == f"{key} and hunter2"
    assert NO_PATTERNS.text(f"{key} and hunter2", ["hunter2"]) == f"{key} and {REDACTED}"


def test_a_pattern_that_is_not_text_is_refused_naming_its_type() -> None:
    """A secret pattern given as a non-str raises DefinitionError naming the type."""
    with pytest.raises(DefinitionError, match="needs patterns as text \\(str\\), got int"):
        Redactor([5])  # type: ignore[list-item]


def test_a_long_invalid_pattern_is_shown_shortened() -> None:
    """An invalid pattern over 120 characters is quoted as its first 117 and '...'."""
    pattern = "a" * 200 + "("
    with pytest.raises(DefinitionError) as caught:
        Redactor([pattern])
    message = str(caught.value)
    assert f"'{'a' * 117}...'" in message
    assert pattern not in message
    assert "is not a valid regular expression" in message

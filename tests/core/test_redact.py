"""`callgate.redact.Redactor`: secret values, secret fields and the patterns of your own.

The default credential patterns are held to Python's ``re`` in
tests/core/test_redact_defaults.py; here: the secret values a call carries (longest
first, overlapping, too short to redact), secret fields in arguments, and
patterns given to ``Redactor(...)``, which run on RE2 but must replace exactly
what Python's ``re.sub`` over them would.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
import uuid
from decimal import Decimal

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, SecretBytes, SecretStr

from callgate import DefinitionError
from callgate.redact import DEFAULT_SECRET_PATTERNS, REDACTED, Redactor, context_secrets

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


# -- secrets in every shape (issue 28, items 1 and friction) -------------------------------


class _Card(BaseModel):
    number: str
    expiry: tuple[int, int]
    cvv: SecretStr


def test_secret_values_walk_a_nested_model_by_its_values() -> None:
    """A secret field typed as a model yields each value inside it (a `SecretStr` by its
    secret), not only ``str(model)``, whose text no handler quotes whole."""
    card = _Card(number="4111000011110000", expiry=(12, 2030), cvv=SecretStr("9876"))
    found = Redactor.secret_values({"card": card, "memo": "public"}, ["card"])
    assert {"4111000011110000", "12", "2030", "9876"} <= set(found)
    assert "number" not in found  # a model's field names are its schema, not its value
    assert "public" not in found
    text = f"card {card.number} / {card.cvv.get_secret_value()} declined"
    assert NO_PATTERNS.text(text, found) == f"card {REDACTED} / {REDACTED} declined"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (SecretStr("ctx-secretstr-1"), "ctx-secretstr-1"),
        (SecretBytes(b"ctx-secretbytes-2"), "ctx-secretbytes-2"),
        (b"ctx-bytes-3abc", "ctx-bytes-3abc"),
        (bytearray(b"ctx-bytearray-4"), "ctx-bytearray-4"),
        (739152840617, "739152840617"),
        (Decimal("12345678.90"), "12345678.90"),
        (uuid.UUID(int=0x1234567890ABCDEF), str(uuid.UUID(int=0x1234567890ABCDEF))),
        (_Card(number="4111222233334444", expiry=(1, 2), cvv=SecretStr("x")), "4111222233334444"),
        ({"deep": [("ctx-in-a-tuple-5",)]}, "ctx-in-a-tuple-5"),
    ],
)
def test_context_secrets_of_any_type_count_by_their_text(value: object, text: str) -> None:
    """A trusted-context value that is not text is scrubbed by its text form."""
    secrets = context_secrets({"tenant": "t", "value": value})
    assert text in secrets
    assert NO_PATTERNS.text(f"leaked {text}!", secrets) == f"leaked {REDACTED}!"


def test_context_secrets_leave_short_labels_and_flags_alone() -> None:
    """Labels (a plan, a role), booleans, None and short numbers are no secret text."""
    found = context_secrets({"plan": "pro", "admin": True, "none": None, "n": 42, "ok": "t" * 8})
    assert found == ("t" * 8,)


def test_undecodable_bytes_count_by_their_repr_and_base64() -> None:
    """Bytes that are not UTF-8 are looked for as ``repr`` shows them and in base64."""
    raw = b"\xff\xfe-ctx-raw-key"
    found = context_secrets({"k": raw})
    assert repr(raw)[2:-1] in found
    assert f"blob={raw!r}" != NO_PATTERNS.text(f"blob={raw!r}", found)
    encoded = base64.b64encode(raw).decode()
    assert encoded not in NO_PATTERNS.text(f"b64 {encoded}", found)


SECRET = "Tr/an+s=9x@kq7w\\é'"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    "shown",
    [
        SECRET.upper(),
        SECRET.lower(),
        SECRET.swapcase(),
        repr(SECRET),
        ascii(SECRET),
        json.dumps(SECRET),
        urllib.parse.quote(SECRET),
        urllib.parse.quote(SECRET, safe=""),
        urllib.parse.quote_plus(SECRET),
        urllib.parse.quote(SECRET).lower(),
        _b64(SECRET.encode()),
        base64.urlsafe_b64encode(SECRET.encode()).decode(),
        _b64(b"a" + SECRET.encode() + b"tail"),
        _b64(b"ab" + SECRET.encode() + b"tail"),
        _b64(b"abc" + SECRET.encode() + b"t"),
    ],
)
def test_a_transformed_secret_is_redacted(shown: str) -> None:
    """A secret a handler prints through ``repr``, JSON, percent-encoding, a change of
    case or base64 (alone or inside a longer base64 text) is found and redacted."""
    found = NO_PATTERNS.text(f"error: {shown} end", [SECRET])
    assert REDACTED in found
    for probe in (SECRET, SECRET.upper(), urllib.parse.quote(SECRET, safe="")):
        assert probe not in found
    raw = SECRET.encode()
    for offset in range(3):  # the base64 characters that carry only the secret's bits
        inner = _b64(b"\0" * offset + raw)[-(-8 * offset // 6) : 8 * (offset + len(raw)) // 6]
        assert inner not in found


def test_a_short_base64_form_is_not_looked_for() -> None:
    """The base64 of a four-character secret is too short to look for in free text."""
    assert NO_PATTERNS.text("the word MTIz is left", ["1234"]) == "the word MTIz is left"


def test_value_redacts_every_text_of_a_record() -> None:
    """`Redactor.value` walks mappings and lists (keys too), keeping other values."""
    data = {"effect": "spend:card:4111999988887777", "n": 3, "list": ["x 4111999988887777"]}
    assert NO_PATTERNS.value(data, ["4111999988887777"]) == {
        "effect": f"spend:card:{REDACTED}",
        "n": 3,
        "list": [f"x {REDACTED}"],
    }


TRANSFORMS = {
    "as is": lambda s: s,
    "upper": str.upper,
    "lower": str.lower,
    "repr": repr,
    "json": json.dumps,
    "quote": lambda s: urllib.parse.quote(s, safe="", errors="surrogatepass"),
    "quote_plus": lambda s: urllib.parse.quote_plus(s, errors="surrogatepass"),
    "base64": lambda s: _b64(s.encode("utf-8", "surrogatepass")),
    "urlsafe base64": lambda s: base64.urlsafe_b64encode(
        s.encode("utf-8", "surrogatepass")
    ).decode(),
}


@settings(max_examples=400, deadline=None)
@given(
    secret=st.text(st.characters(codec=None), min_size=8, max_size=24)
    | st.text(min_size=7, max_size=20).map(lambda t: "\ud800" + t),  # a lone surrogate
    before=st.text(max_size=12),
    after=st.text(max_size=12),
    how=st.sampled_from(sorted(TRANSFORMS)),
)
def test_a_secret_in_any_listed_form_leaves_no_copy_of_that_form(
    secret: str, before: str, after: str, how: str
) -> None:
    """Whatever the secret and the text around it (any code points, the model's or a
    tool's), the form a handler printed it in is gone from the redacted text."""
    shown = TRANSFORMS[how](secret)
    assume(len(shown) >= 8)
    redacted = NO_PATTERNS.text(before + shown + after, [secret])
    assert shown not in redacted

"""`callgate.canonical`: one JSON text per value, and the hashes built on it.

Request hashes, approval bindings and idempotency keys are digests of canonical
JSON, so two equal requests must give the same text whatever order the model
wrote the keys in, and two different ones never the same digest.
"""

from __future__ import annotations

import datetime
import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from callgate.canonical import canonical_arguments, canonical_json, digest

FLOATS = st.floats(allow_nan=False, allow_infinity=False)
SCALARS = st.none() | st.booleans() | st.integers() | FLOATS | st.text()
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _reordered(value: Any) -> Any:
    """The same value with every object's keys in reverse order (lists keep their order)."""
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


@given(JSON_VALUES)
def test_the_order_of_keys_never_changes_the_text(value: Any) -> None:
    """A value with its objects' keys in another order has the same canonical text."""
    assert canonical_json(_reordered(value)) == canonical_json(value)


@given(JSON_VALUES)
def test_the_text_reads_back_as_the_same_value(value: Any) -> None:
    """Canonical text of a JSON value decodes to an equal value, floats bit for bit."""
    back = json.loads(canonical_json(value))
    assert back == value
    assert canonical_json(back) == canonical_json(value)


@given(st.dictionaries(st.text(), SCALARS, max_size=6))
def test_the_text_is_keys_sorted_and_no_spaces(value: dict[str, Any]) -> None:
    """Top-level keys appear in sorted order, and no space separates items."""
    text = canonical_json(value)
    assert list(json.loads(text)) == sorted(value)
    assert text == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"b": 1, "a": [2, {"d": None, "c": True}]}, '{"a":[2,{"c":true,"d":null}],"b":1}'),
        ({"q": "café ☕ 東京"}, '{"q":"café ☕ 東京"}'),  # non-ASCII kept, not escaped
        ({"q": 'a"b\\c\n'}, '{"q":"a\\"b\\\\c\\n"}'),
        (0.1, "0.1"),  # the shortest text that reads back as the float
        (1e16, "1e+16"),
        (-0.0, "-0.0"),
        (1, "1"),
        (1.0, "1.0"),  # an int and a float stay apart, as the validated model has them
        (10**30, "1" + "0" * 30),
    ],
)
def test_known_values_have_their_known_text(value: Any, text: str) -> None:
    """Pinned texts: sorted keys, no spaces, non-ASCII as is, shortest float texts."""
    assert canonical_json(value) == text


def test_a_value_json_cannot_write_is_written_as_its_text() -> None:
    """A value JSON has no type for (a date) is written as its str(), never an error."""
    when = datetime.date(2025, 1, 31)
    assert canonical_json({"when": when}) == '{"when":"2025-01-31"}'


class Refund(BaseModel):
    """Arguments of a refund, with a default."""

    order_id: str
    amount: float
    currency: str = "USD"
    tags: list[str] = []


@given(
    order_id=st.text(max_size=10),
    amount=FLOATS,
    tags=st.lists(st.text(max_size=5), max_size=3),
)
def test_equal_arguments_sent_in_any_key_order_give_one_text(
    order_id: str, amount: float, tags: list[str]
) -> None:
    """Arguments decoded from texts with other key orders and spacing canonicalize alike."""
    values = {"order_id": order_id, "amount": amount, "tags": tags}
    one = Refund.model_validate_json(json.dumps(values))
    other = Refund.model_validate_json(json.dumps(_reordered(values), indent=2))
    assert canonical_arguments(one) == canonical_arguments(other)
    assert json.loads(canonical_arguments(one))["currency"] == "USD"  # the default filled in


def test_canonical_arguments_are_the_json_dump_with_defaults() -> None:
    """canonical_arguments is the model's JSON dump, defaults included, in canonical text."""
    args = Refund(order_id="o-1", amount=20)
    assert canonical_arguments(args) == (
        '{"amount":20.0,"currency":"USD","order_id":"o-1","tags":[]}'
    )


class Tagged(BaseModel):
    """Arguments with a set: equal sets, built in different orders."""

    ids: set[int]


def test_equal_set_arguments_give_one_text() -> None:
    """Equal arguments holding a set have one canonical text, whatever order built the set."""
    one, other = Tagged(ids=[8, 16]), Tagged(ids=[16, 8])  # type: ignore[arg-type]
    assert one == other
    assert canonical_arguments(one) == canonical_arguments(other)


HEX = frozenset("0123456789abcdef")


@given(st.lists(st.text(), min_size=1, max_size=4))
def test_a_digest_is_64_hex_digits_and_the_same_each_time(parts: list[str]) -> None:
    """A digest is 64 lower-case hex digits, and equal parts always give the same one."""
    first = digest(*parts)
    assert len(first) == 64
    assert set(first) <= HEX
    assert digest(*parts) == first


PART = st.text(alphabet="ab\x00", max_size=4)


@given(st.lists(PART, min_size=1, max_size=4), st.data())
def test_parts_cut_elsewhere_never_share_a_digest(parts: list[str], data: Any) -> None:
    """Parts are joined unambiguously: the same text cut into other parts digests otherwise."""
    joined = "".join(parts)
    cuts = sorted(
        data.draw(
            st.lists(st.integers(0, len(joined)), min_size=len(parts) - 1, max_size=len(parts) - 1)
        )
    )
    bounds = [0, *cuts, len(joined)]
    other = [joined[a:b] for a, b in itertools.pairwise(bounds)]
    assert (digest(*parts) == digest(*other)) is (parts == other)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (("ab", "c"), ("a", "bc")),
        (("a\x00b", "c"), ("a", "b\x00c")),
        (("a", "b", "c"), ("a", "b\x00c")),
        (("a",), ("a", "")),
    ],
)
def test_known_framings_do_not_collide(one: tuple[str, ...], other: tuple[str, ...]) -> None:
    """Pairs whose plain concatenations could collide have different digests."""
    assert digest(*one) != digest(*other)


def test_an_empty_first_part_does_not_collide_with_other_parts() -> None:
    """digest('', x) never equals the digest of other parts (here, of 'a' alone)."""
    assert digest("", "\x00" * 6 + "\x01" + "a") != digest("a")


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "\ud83d\ude00"])
def test_text_with_a_lone_surrogate_is_digested_without_error(text: str) -> None:
    """Model text holding lone surrogates digests (surrogatepass) and differs from neighbours."""
    assert digest(text, "x") != digest(text + "a", "x")
    assert digest("t", text) != digest("t", "")

"""The BFCL-style checker: names and normalised arguments match, independent calls in any
order, dependent calls in theirs, extras and misses counted."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from callgate.eval.checker import check_calls, normalize
from callgate.eval.tasks import ExpectedCall

READ = ExpectedCall(tool="read_file", arguments={"path": "a.py"})
SEARCH = ExpectedCall(tool="search_files", arguments={"pattern": "x"})
WRITE = ExpectedCall(tool="write_file", arguments={"path": "a.py", "content": "x\n"}, after=(0,))


def test_equal_calls_match_after_normalisation() -> None:
    """'./a.py' equals 'a.py', CRLF and trailing spaces do not matter: an exact match."""
    check = check_calls(
        [READ, WRITE],
        [("read_file", {"path": "./a.py"}), ("write_file", {"path": "a.py", "content": "x  \r\n"})],
    )
    assert check.exact
    assert check.recall == 1.0


def test_numbers_compare_by_value_but_booleans_are_not_numbers() -> None:
    """1 equals 1.0; True does not equal 1."""
    assert normalize({"n": 1}) == normalize({"n": 1.0})
    assert normalize({"n": True}) != normalize({"n": 1})


def test_a_dependent_call_before_its_predecessor_is_out_of_order() -> None:
    """Writing before reading the file is flagged out of order, not exact."""
    check = check_calls(
        [READ, WRITE],
        [("write_file", {"path": "a.py", "content": "x"}), ("read_file", {"path": "a.py"})],
    )
    assert check.out_of_order == (0,)
    assert not check.exact


def test_a_wrong_argument_is_an_extra_and_leaves_the_expected_call_missing() -> None:
    """read_file('b.py') for an expected read_file('a.py'): one extra, one missing."""
    check = check_calls([READ], [("read_file", {"path": "b.py"})])
    assert check.extra == (0,)
    assert check.missing == (0,)
    assert check.precision == 0.0


def test_a_duplicate_call_is_an_extra() -> None:
    """The same read twice matches once; the second is an extra."""
    check = check_calls([READ], [("read_file", {"path": "a.py"})] * 2)
    assert check.extra == (1,)
    assert not check.exact


@given(st.permutations([0, 1, 2]))
def test_independent_calls_match_in_any_order(order: list[int]) -> None:
    """Three calls with no order between them are an exact match in every permutation."""
    expected = [READ, SEARCH, ExpectedCall(tool="read_file", arguments={"path": "b.py"})]
    actual = [(expected[i].tool, dict(expected[i].arguments)) for i in order]
    assert check_calls(expected, actual).exact


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c),
                    max_leaves=10))  # fmt: skip
def test_normalize_is_idempotent_on_any_json_value(value: object) -> None:
    """Normalising any JSON-like value never raises, and equal values normalise equally."""
    assert normalize(value) == normalize(value)

"""Token accounting and eta: schema tokens per appearance with a cache-hit rate, the entropy
estimator, eta on the notes' worked example, pluggable tokenizers."""

from __future__ import annotations

import math

import pytest

from callgate.errors import DefinitionError
from callgate.eval.record import CallView, RunView
from callgate.eval.tokens import (
    ETA_CAVEATS,
    EntropyEstimate,
    RegexTokenizer,
    entropy_by_surface,
    eta,
    run_tokens,
    tokenizer_from,
)


class Words:
    """A tokenizer for hand-checkable counts: one token per whitespace-separated word."""

    name = "words"

    def count(self, text: str) -> int:
        """The number of words."""
        return len(text.split())


def _run(turns: int, calls: list[tuple[str, str]], surface: str = "fine", kind: str = "k"):
    return RunView(
        run_id=f"r{len(calls)}",
        surface=surface,
        kind=kind,
        tool_definitions=[{"name": "read_file", "description": "read a file now"}],
        calls=[CallView(call_id=str(i), tool=t, arguments=a) for i, (t, a) in enumerate(calls)],
        model_turns=turns,
        result_texts=["one two three"],
    )


def test_schema_tokens_count_every_appearance_unless_cached() -> None:
    """Definitions of 7 words shown in 3 model calls cost 21 tokens with no cache and
    7 + 2·7·(1-0.9) = 8.4 at a 90% hit rate; calls and results are counted apart."""
    run = _run(3, [("read_file", '{"path": "a.py"}')])
    cold = run_tokens(run, Words())
    assert cold.schema_once == 7
    assert cold.schema == 21
    assert cold.calls == 1 + 2
    assert cold.results == 3
    warm = run_tokens(run, Words(), cache_hit=0.9)
    assert warm.schema == pytest.approx(8.4)


def test_eta_reproduces_the_notes_worked_example() -> None:
    """E2.2: six 50-token schemas (300) in 10 appearances, 10 calls of 20 tokens, H = log2(6)
    + 2 bits: eta = (3200 - 3045.85) / 3045.85 = 0.051, the notes' answer."""
    from callgate.eval.tokens import RunTokens

    tokens = RunTokens(
        schema_once=300, appearances=10, schema=3000, calls=200, results=0, n_calls=10,
        cache_hit=0.0,
    )  # fmt: skip
    h = EntropyEstimate(tool=math.log2(6), arguments=2.0, n=10)
    assert eta(tokens, h) == pytest.approx(0.051, abs=5e-4)


def test_eta_with_a_cache_falls_below_zero_as_the_notes_warn() -> None:
    """E2.2 with a 90% cache hit: the observed schema cost drops under the bound's, and eta is
    negative (the notes: the bound is not meaningful with so crude an estimate)."""
    run = _run(10, [("read_file", '{"path": "a.py"}')] * 10)
    warm = run_tokens(run, Words(), cache_hit=0.9)
    assert eta(warm, EntropyEstimate(tool=math.log2(6), arguments=2.0, n=10)) < 0


def test_the_entropy_estimator_is_plug_in_with_miller_madow() -> None:
    """Four tools used 25 times each in one context: 2 bits plus 3/(2·100·ln 2); identical
    arguments add nothing."""
    calls = [(t, "{}") for t in ("a", "b", "c", "d") for _ in range(25)]
    est = entropy_by_surface([_run(1, calls)])["fine"]
    assert est.tool == pytest.approx(2 + 3 / (200 * math.log(2)))
    assert est.arguments == pytest.approx(0.0)
    assert est.n == 100


def test_argument_entropy_is_conditioned_on_the_tool_and_context() -> None:
    """Two equally likely argument values under one tool: one bit plus the correction."""
    calls = [("read_file", '{"path": "a"}'), ("read_file", '{"path": "b"}')] * 10
    est = entropy_by_surface([_run(1, calls)])["fine"]
    assert est.tool == pytest.approx(0.0)
    assert est.arguments == pytest.approx(1 + 1 / (40 * math.log(2)))


def test_the_regex_tokenizer_counts_pieces() -> None:
    """'def add(a, b):' is def, ' add', '(', 'a', ',', ' b', '):' — seven pieces."""
    assert RegexTokenizer().count("def add(a, b):") == 7
    assert RegexTokenizer().count("") == 0


def test_tokenizers_plug_in_by_duck_type() -> None:
    """An object with encode() counts by its encoding; one with nothing is refused by name."""

    class Encoder:
        def encode(self, text: str) -> list[int]:
            return list(range(len(text)))

    assert tokenizer_from(Encoder()).count("abcd") == 4
    assert tokenizer_from(Words()).count("a b") == 2
    with pytest.raises(DefinitionError, match="count_tokens"):
        tokenizer_from(object())
    with pytest.raises(DefinitionError, match="approx"):
        tokenizer_from("bpe")


def test_the_three_caveats_are_stated() -> None:
    """Bits versus tokens, amortised schema cost, and the estimator: the notes' three caveats."""
    text = " ".join(ETA_CAVEATS).lower()
    assert len(ETA_CAVEATS) == 3
    assert "bits" in text
    assert "cache" in text
    assert "estimat" in text

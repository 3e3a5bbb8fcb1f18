"""Token-level matching: llguidance matchers over a vocabulary, and a byte-level one.

`byte_tokenizer` is a vocabulary of the 256 bytes and an end token: every
string is a sequence of its tokens, so a walk through a matcher with it
reaches every string the grammar accepts. The tests use it to check the
grammars without a model; `callgate.llms.local` uses the model's own
vocabulary, read from the GGUF. llguidance (the ``grammar`` extra) is imported
when a matcher is first needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from callgate.grammar.export import GrammarError

if TYPE_CHECKING:
    import llguidance

__all__ = ["BYTE_EOS", "STRING_SLICES", "allowed_tokens", "byte_tokenizer", "matcher"]

BYTE_EOS = 256
"""The end token of `byte_tokenizer`."""

STRING_SLICES = [
    '[^"\\\\<\\x00-\\x1F\\x7F]{1,10}',
    '[^"\\\\<\\x00-\\x1F\\x7F]{1,30}',
    '[^"\\\\<\\x00-\\x1F\\x7F]+',
]
"""Token sets llguidance can test in one step inside the grammars' strings (which leave
out '<'); give them with its general slices when building a model's tokenizer. Inside
a string, the mask is then about 1.6 times faster on average and 3 times at the p99
(SmolLM2's vocabulary, benchmarks/grammar.py)."""


class _Bytes:
    """The vocabulary of `byte_tokenizer`, as llguidance's tokenizer wrapper reads it."""

    def __init__(self) -> None:
        self.eos_token_id = BYTE_EOS
        self.bos_token_id = None
        self.tokens = [bytes([b]) for b in range(256)] + [b"<eos>"]
        self.special_token_ids = [BYTE_EOS]

    def __call__(self, text: bytes) -> list[int]:
        return list(text)


_BYTES: list[llguidance.LLTokenizer] = []


def byte_tokenizer() -> llguidance.LLTokenizer:
    """One token per byte (0-255) and the end token `BYTE_EOS`; built once."""
    if not _BYTES:
        import llguidance

        _BYTES.append(llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Bytes())))
    return _BYTES[0]


def matcher(grammar: str, tokenizer: llguidance.LLTokenizer) -> llguidance.LLMatcher:
    """A matcher of ``grammar`` (llguidance's text, `ToolGrammar.llguidance`) over ``tokenizer``.

    Raises `GrammarError` if llguidance cannot build it for this vocabulary.
    """
    import llguidance

    found = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
    if found.is_error():
        raise GrammarError(f"llguidance could not build the matcher: {found.get_error()[:1000]}")
    return found


def allowed_tokens(found: llguidance.LLMatcher, vocab_size: int) -> list[int]:
    """The tokens ``found`` allows next, in order (from its bit mask)."""
    mask: Any = found.compute_bitmask()
    allowed: list[int] = []
    for index, byte in enumerate(mask):
        if byte:
            base = index * 8
            allowed.extend(base + bit for bit in range(8) if byte >> bit & 1)
    return [t for t in allowed if t < vocab_size]

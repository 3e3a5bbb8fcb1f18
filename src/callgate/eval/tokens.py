"""Token accounting per run, and interface inefficiency η (the notes' Definition 2.2.1).

Per run, from the ledger's records (`callgate.eval.record.RunView`):

* **schema tokens**: the tool definitions the model was shown, ℓ(s) tokens,
  counted at each appearance in the context (one per model call); with a
  prefix-cache hit rate ``h`` the appearances after the first cost
  ``ℓ(s)·(1-h)`` each;
* **call tokens**: each proposed call's tool name and argument text;
* **result tokens**: the observations sent back.

η compares what a run spent on specifying its calls with the notes' lower
bound, the schema read at each of its k appearances plus the information
the calls carry (the notes' worked example E2.2, per task as in S2.7):

    observed O = schema tokens + call tokens
    bound    L = k · ℓ(s) + n_calls · Ĥ(T, A | C)        (bits counted as tokens)
    η          = (O - L) / L

With no cache the schema appears in both and cancels from the numerator, so a
schema-heavy surface looks efficient (the notes' point about E2.2); with a
cache-hit rate the observed schema cost falls below the bound's and η can be
negative: it is a relative diagnostic, not an absolute efficiency.

Ĥ(T, A | C) = Ĥ(T | C) + Ĥ(A | T, C) is estimated per surface from the
empirical distributions over the whole task set: the context C is the task's
kind, T the tool, A the normalised argument object (`callgate.eval.checker.normalize`);
each entropy is the plug-in estimate with the Miller–Madow correction
``(K-1)/(2N)`` nats (K values seen in N calls). `ETA_CAVEATS` are printed
with every η.

Tokens are counted by a `Tokenizer`: `RegexTokenizer` (the default, no
model needed: the pieces of the GPT-2 pre-tokenizer pattern, which is close
to but below a BPE count), or any object with ``count_tokens(text)``,
``tokenize(bytes)`` (llama.cpp's ``Llama``) or ``encode(text)`` through
`tokenizer_from`; ``gguf:PATH`` loads only the vocabulary of a local GGUF
model with llama.cpp when it is installed. Nothing is ever downloaded.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from callgate.errors import DefinitionError
from callgate.eval.checker import normalize
from callgate.eval.record import RunView, parse_arguments

__all__ = [
    "ETA_CAVEATS",
    "ETA_ESTIMATOR",
    "EntropyEstimate",
    "RegexTokenizer",
    "RunTokens",
    "Tokenizer",
    "entropy_by_surface",
    "eta",
    "run_tokens",
    "tokenizer_from",
]

ETA_ESTIMATOR = (
    "H(T,A|C) = H(T|C) + H(A|T,C), C = task kind, A = normalised arguments; plug-in "
    "entropies with the Miller-Madow correction (K-1)/(2N) nats, from the empirical "
    "distribution of each surface's calls over the task set; bits counted as tokens."
)

ETA_CAVEATS = (
    "1. Entropy is measured in bits and cost in tokens; the conversion is loose, so compare "
    "eta across surfaces on the same tasks rather than reading it as an absolute efficiency.",
    "2. Schema cost is amortised: the definitions appear once per model call unless the "
    "prefix is cached; the cache-hit rate assumed here is stated with the figures.",
    "3. The entropy is estimated, not known: the estimator above is biased low for small "
    "samples and for free text (code, file contents) whose values rarely repeat.",
)


@runtime_checkable
class Tokenizer(Protocol):
    """Counts the tokens of a text; ``name`` says which tokenizer it is."""

    name: str

    def count(self, text: str) -> int:
        """The number of tokens of ``text``."""
        ...


# Letters, digits, punctuation runs and whitespace, each optionally after one space:
# the GPT-2 pre-tokenizer's pieces, with Python's classes for letters and digits.
_PIECES = re.compile(
    r"""'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+|\s+(?!\S)|\s+|_+""",
    re.UNICODE,
)


class RegexTokenizer:
    """An estimate without a model: the pieces of the GPT-2 pre-tokenizer pattern.

    BPE vocabularies split some pieces further, so this counts at most as
    many tokens as such a tokenizer (long rare words are undercounted).
    """

    name = "regex-approx (GPT-2 pre-tokenizer pieces)"

    def count(self, text: str) -> int:
        """The number of pieces of ``text``."""
        return sum(1 for _ in _PIECES.finditer(text))


class _Counted:
    """A tokenizer from any object with ``count_tokens``, ``tokenize`` or ``encode``."""

    def __init__(self, obj: Any, name: str) -> None:
        self._obj = obj
        self.name = name

    def count(self, text: str) -> int:
        obj = self._obj
        if hasattr(obj, "count_tokens"):
            return int(obj.count_tokens(text))
        if hasattr(obj, "tokenize"):
            return len(obj.tokenize(text.encode("utf-8"), add_bos=False, special=False))
        return len(obj.encode(text))


def tokenizer_from(spec: str | object | None) -> Tokenizer:
    """The tokenizer ``spec`` names: None or ``approx`` (`RegexTokenizer`), ``gguf:PATH``
    (the vocabulary of a local GGUF model, through llama.cpp), a `Tokenizer`, or an object
    with ``count_tokens(text)``, ``tokenize(bytes)`` or ``encode(text)``."""
    if spec is None or spec == "approx":
        return RegexTokenizer()
    if isinstance(spec, str):
        if spec.startswith("gguf:"):
            path = spec[5:]
            try:
                llama_cpp = importlib.import_module("llama_cpp")
            except ImportError:
                raise DefinitionError(
                    f"--tokenizer {spec!r}: llama.cpp is not installed (pip install "
                    "'callgate[llama_cpp]'), or use --tokenizer approx"
                ) from None
            try:
                vocab = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
            except (OSError, ValueError) as exc:
                raise DefinitionError(f"--tokenizer {spec!r}: cannot load it: {exc}") from None
            return _Counted(vocab, f"gguf:{path.rsplit('/', 1)[-1]}")
        raise DefinitionError(
            f"--tokenizer {spec!r}: use 'approx' or 'gguf:PATH' (a local model file)"
        )
    if isinstance(spec, Tokenizer):
        return spec
    if any(hasattr(spec, m) for m in ("count_tokens", "tokenize", "encode")):
        return _Counted(spec, getattr(spec, "name", type(spec).__name__))
    raise DefinitionError(
        f"a tokenizer needs count(text), count_tokens(text), tokenize(bytes) or encode(text); "
        f"{type(spec).__name__} has none"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTokens:
    """The tokens of one run, by part; see the module docstring."""

    schema_once: int
    """ℓ(s): the tool definitions, counted once."""
    appearances: int
    schema: float
    """Schema tokens over every appearance, after the assumed cache hits."""
    calls: int
    results: int
    n_calls: int
    cache_hit: float

    @property
    def observed(self) -> float:
        """Schema plus call tokens: the cost η compares with its bound."""
        return self.schema + self.calls


def run_tokens(run: RunView, tokenizer: Tokenizer, *, cache_hit: float = 0.0) -> RunTokens:
    """Count ``run``'s schema, call and result tokens (see the module docstring)."""
    if not 0.0 <= cache_hit <= 1.0:
        raise ValueError(f"cache_hit must be within [0, 1], got {cache_hit}")
    definitions = json.dumps(run.tool_definitions, sort_keys=True, ensure_ascii=False)
    once = tokenizer.count(definitions) if run.tool_definitions else 0
    k = run.model_turns
    schema = once * (1 + (k - 1) * (1 - cache_hit)) if k else 0.0
    calls = sum(tokenizer.count(c.tool) + tokenizer.count(c.arguments or "") for c in run.calls)
    results = sum(tokenizer.count(text) for text in run.result_texts)
    return RunTokens(
        schema_once=once,
        appearances=k,
        schema=schema,
        calls=calls,
        results=results,
        n_calls=len(run.calls),
        cache_hit=cache_hit,
    )


def _entropy_bits(counts: Iterable[int]) -> float:
    values = [c for c in counts if c > 0]
    n = sum(values)
    if n == 0:
        return 0.0
    plug_in = -sum((c / n) * math.log2(c / n) for c in values)
    return plug_in + (len(values) - 1) / (2 * n * math.log(2))


@dataclass(frozen=True, slots=True, kw_only=True)
class EntropyEstimate:
    """Ĥ(T|C) and Ĥ(A|T,C) of one surface, in bits, over ``n`` calls."""

    tool: float
    arguments: float
    n: int

    @property
    def joint(self) -> float:
        """Ĥ(T,A|C) = Ĥ(T|C) + Ĥ(A|T,C)."""
        return self.tool + self.arguments


def entropy_by_surface(runs: Sequence[RunView]) -> dict[str, EntropyEstimate]:
    """Each surface's entropy estimates from its runs' calls (see `ETA_ESTIMATOR`)."""
    tools: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    args: dict[str, dict[tuple[str, str], Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    for run in runs:
        for call in run.calls:
            tools[run.surface][run.kind][call.tool] += 1
            key = repr(normalize(parse_arguments(call.arguments)))
            args[run.surface][(run.kind, call.tool)][key] += 1
    out: dict[str, EntropyEstimate] = {}
    for surface, by_context in tools.items():
        n = sum(sum(c.values()) for c in by_context.values())
        h_tool = sum(sum(c.values()) / n * _entropy_bits(c.values()) for c in by_context.values())
        h_args = sum(
            sum(c.values()) / n * _entropy_bits(c.values()) for c in args[surface].values()
        )
        out[surface] = EntropyEstimate(tool=h_tool, arguments=h_args, n=n)
    return out


def eta(tokens: RunTokens, entropy: EntropyEstimate) -> float:
    """Interface inefficiency of one run: ``(O - L) / L`` (NaN when the bound is zero)."""
    bound = tokens.appearances * tokens.schema_once + tokens.n_calls * entropy.joint
    if bound <= 0:
        return math.nan
    return (tokens.observed - bound) / bound

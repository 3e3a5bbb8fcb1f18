"""Provider formats: the only code in callgate that knows a model provider exists.

Each format is a module with the same three functions:

* ``extract(response) -> Extraction``: the proposed calls, the prose, and a
  ``parse`` rejection for each call that could not even be extracted;
* ``render(observations) -> list[dict]``: the messages (or input items) that
  answer each call in that format, with the same call ids, in call order;
* ``tool_definitions(tools) -> list[dict]``: the registry's tools in that
  format's shape, from each tool's one schema.

Formats: `openai_chat`, `openai_responses`, `anthropic` and `gemini` (each
with a ``StreamAssembler``), `text` (Hermes tags, fenced and bare JSON from
open models), and `mcp` (schema export only). SDK objects and decoded JSON
are both accepted; no SDK is imported.
"""

from callgate.providers import anthropic, gemini, mcp, openai_chat, openai_responses, text
from callgate.providers.base import Extraction

__all__ = [
    "Extraction",
    "anthropic",
    "gemini",
    "mcp",
    "openai_chat",
    "openai_responses",
    "text",
]

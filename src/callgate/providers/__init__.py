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

One contract for all five ``extract`` functions: a value that is not a
response at all (``None``, a number, bytes; for `text` anything but a
``str``; for the others anything but a mapping or SDK object, or the
``output`` list for `openai_responses`) raises `TypeError`, since no model
output can produce it; a value of the right kind never makes ``extract``
raise, whatever the model put in it. Extraction is linear in the response's
size, and a response over `base.MAX_RESPONSE_CHARS` or `base.MAX_CALLS` has
its calls rejected unread. A call that may have been cut off (any ending but
a normal one) with empty or incomplete arguments is rejected, never run.
See ``docs/providers.md``.
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

"""A stated, tokenizer-free estimate of how many tokens a tool definition costs.

``estimate_tokens(text)`` is ``ceil(utf8_bytes / 4)``: about four bytes per
token is the usual figure for English and JSON under the BPE tokenizers of
current models (JSON punctuation costs a little more, prose a little less).
It is an estimate for comparing tools and spotting outliers, not a bill; the
exact counts per model live with the tokenizers in ``callgate.eval``.

What is counted for a tool is what every provider format sends in every
request: its name, its description and its arguments' JSON Schema, as
compact JSON (`definition_text`).
"""

from __future__ import annotations

import json
import math

from callgate.tools import ToolSpec

__all__ = ["BYTES_PER_TOKEN", "definition_text", "estimate_tokens"]

BYTES_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """``ceil(len(text as UTF-8) / 4)``."""
    return math.ceil(len(text.encode("utf-8", "surrogatepass")) / BYTES_PER_TOKEN)


def definition_text(spec: ToolSpec) -> str:
    """The tool as a model reads it: name, description and schema, as compact JSON."""
    return json.dumps(
        {"name": spec.name, "description": spec.description, "parameters": spec.input_schema},
        ensure_ascii=False,
        separators=(",", ":"),
    )

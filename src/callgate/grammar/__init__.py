"""Tool-call grammars: the tools a model may call, as one grammar, for constrained decoding.

`tool_grammar` builds a `ToolGrammar` from a registry (or the tools of one
step, or ``{name: schema}``): a choice over ``{"name": <const>, "arguments":
<that tool's schema>}`` (and, with ``parallel``, the list form), written as
JSON Schema, llguidance's grammar, GBNF (llama.cpp) and Lark. A keyword a
target cannot enforce is an `Unenforced` entry, never dropped silently;
llguidance is strict by default and refuses such a grammar (`GrammarError`).

Constraining removes parse and schema failures; it does not replace the
gate: whether the path exists, the id is known or the call is permitted is
still decided by the gate, after decoding.
"""

from callgate.grammar.convert import Unenforced
from callgate.grammar.export import (
    HERMES_TAGS,
    GrammarError,
    ToolGrammar,
    compile_lark,
    tool_grammar,
)
from callgate.grammar.tokens import (
    BYTE_EOS,
    STRING_SLICES,
    allowed_tokens,
    byte_tokenizer,
    matcher,
)

__all__ = [
    "BYTE_EOS",
    "HERMES_TAGS",
    "STRING_SLICES",
    "GrammarError",
    "ToolGrammar",
    "Unenforced",
    "allowed_tokens",
    "byte_tokenizer",
    "compile_lark",
    "matcher",
    "tool_grammar",
]

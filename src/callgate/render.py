"""Where a rejection's model-facing text is assembled.

Every rejection a model reads is laid out here from structured facts (the
rule, the field, the expected and actual value, what to do), bounded in
length, and never from ``str()`` of an arbitrary exception. The one-line
sentences inside those facts (``Problem.message``, the advice) are written by
the stage that finds the failure, and a few notes (an idempotency conflict, a
cut result) are written whole by the module that sends them; see
docs/design-notes.md, "Where model-facing text is written".
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from callgate.calls import Stage

__all__ = [
    "HIDDEN_CATEGORIES",
    "MAX_MESSAGE_CHARS",
    "Problem",
    "Rejection",
    "bounded",
    "char_escape",
    "describe_value",
    "escape_hidden",
    "json_type",
    "render_json",
    "shown",
]

MAX_MESSAGE_CHARS = 1200
_MAX_PROBLEMS = 6


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One thing wrong with a call, as facts; `Rejection.message` renders them."""

    rule: str
    message: str
    field: str | None = None
    expected: str | None = None
    actual: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The problem as a plain dict, without empty fields."""
        fields = ("rule", "field", "expected", "actual", "message")
        return {k: getattr(self, k) for k in fields if getattr(self, k) is not None}


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejection:
    """Why a call stopped before execution, and what to do about it."""

    stage: Stage
    problems: tuple[Problem, ...]
    advice: str
    retryable: bool = True
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def message(self) -> str:
        """The model-facing text: each problem on its own line, then the advice."""
        shown = self.problems[:_MAX_PROBLEMS]
        lines = [f"- {p.message}" for p in shown]
        if len(self.problems) > len(shown):
            lines.append(f"- ... and {len(self.problems) - len(shown)} more problem(s).")
        head = f"Rejected at the {self.stage.value} stage:"
        return bounded("\n".join([head, *lines, self.advice]))


def bounded(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters with a visible marker."""
    if len(text) <= limit:
        return text
    return text[: limit - 20].rstrip() + " ... [message cut]"


HIDDEN_CATEGORIES: frozenset[str] = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Unicode categories a reader cannot see: controls, format characters (bidirectional
overrides, zero width), lone surrogates, private use, unassigned code points, line and
paragraph separators. The CLI and the console show characters of these as escapes."""

_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def char_escape(char: str) -> str:
    """One character as a visible escape: ``\\t``, ``\\n``, ``\\r``, ``\\xNN``,
    ``\\uNNNN`` or ``\\UNNNNNNNN`` (what a terminal or a page shows for a hidden one)."""
    code = ord(char)
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def shown(text: str) -> str:
    """``text`` as a person or a model is shown it: each character of `HIDDEN_CATEGORIES`
    (a bidirectional override such as U+202E, a zero-width or other format character, a
    control, a line separator) written as its `char_escape` (``\\u202e``, ``\\x1b``,
    ``\\n``), as the CLI and the console write them. An approval's preview is kept so."""
    if text.isprintable():
        return text
    return "".join(
        char_escape(char) if unicodedata.category(char) in HIDDEN_CATEGORIES else char
        for char in text
    )


def escape_hidden(text: str) -> str:
    """``text`` with every character a reader cannot see written as a ``\\uXXXX`` escape.

    That is what Python calls non-printable: controls, format characters
    (bidirectional overrides, zero-width), lone surrogates, private use,
    unassigned code points, and every separator but the plain space.
    """
    if text.isprintable():
        return text
    out = []
    for char in text:
        if char.isprintable():
            out.append(char)
        elif ord(char) > 0xFFFF:
            code = ord(char) - 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{ord(char):04x}")
    return "".join(out)


def render_json(value: Any, limit: int = 60) -> str:
    """A value as JSON text for a message: readable, visible, and at most ``limit`` characters.

    Non-ASCII text stays as it is (``"거대한"``, not ``"\\uac70..."``); control,
    format and other invisible characters are written as ``\\uXXXX`` escapes;
    a longer rendering is cut with ``...``.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, default=_not_json)
    except (TypeError, ValueError, RecursionError):
        text = json_type(value)
    text = escape_hidden(text[: limit * 7])
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def _not_json(value: Any) -> str:
    return f"<{type(value).__name__}>"


def describe_value(value: Any, limit: int = 60) -> str:
    """A short, typed rendering of a value a model sent: ``string "abc"``, ``integer 5``."""
    kind = json_type(value)
    if value is None:
        return "null"
    return f"{kind} {render_json(value, limit)}"


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__

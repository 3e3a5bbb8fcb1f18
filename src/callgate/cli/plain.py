"""Plain-text printing for the CLI: stored values are data, never markup.

Every value a command prints came from a model, a tool, a person or a file, so
none of it may steer the terminal:

* it is printed as Rich `Text` on a console with markup, emoji and highlighting
  off, so ``[/x]`` neither crashes the command nor hides text, and ``:email:``
  stays ``:email:``;
* control characters, ANSI escape sequences, bidirectional overrides and other
  invisible characters are written as visible escapes (``\\x1b``, ``\\r``,
  ``\\u202e``) by `plain`, so a hostile value cannot clear or rewrite the
  auditor's screen;
* JSON output (`plain_json`) is the same JSON with those characters written as
  ``\\uXXXX`` escapes: it decodes to exactly the stored values.

Errors are one line on stderr (`fail`), never wrapped and never a traceback.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import typer
from rich.console import Console
from rich.text import Text

from callgate.render import HIDDEN_CATEGORIES, bounded, char_escape

__all__ = ["cell", "console", "fail", "plain", "plain_json"]

MAX_ERROR_CHARS = 600
"""The longest error line `fail` prints."""


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


class _Table(dict[int, str]):
    """A `str.translate` table, filled as characters are met: a hidden character maps
    to its escape, any other to itself."""

    def __init__(self, escape: Any, keep: str = "") -> None:
        super().__init__()
        self.escape = escape
        self.keep = keep

    def __missing__(self, code: int) -> str:
        char = chr(code)
        hidden = char not in self.keep and unicodedata.category(char) in HIDDEN_CATEGORIES
        value: str = self.escape(char) if hidden else char
        self[code] = value
        return value


_ONE_LINE = _Table(char_escape)
_MULTILINE = _Table(char_escape, keep="\n")
_JSON = _Table(_json_escape, keep="\n")


def plain(value: object, *, multiline: bool = False) -> str:
    """``value`` as text a terminal shows as it is: every invisible character escaped.

    Line breaks are escaped too unless ``multiline`` (a message in a table cell).
    """
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():
        return text
    return text.translate(_MULTILINE if multiline else _ONE_LINE)


def cell(value: object, *, multiline: bool = False, style: str = "") -> Text:
    """``value`` as a `Text` for a table cell or a line: never read as markup or emoji."""
    return Text(plain(value, multiline=multiline), style=style)


def plain_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON whose text has no invisible character: those in strings are
    written as ``\\uXXXX`` escapes (JSON escapes the ASCII controls itself)."""
    text = json.dumps(value, ensure_ascii=False, indent=indent, default=str)
    if text.isascii() and "\x7f" not in text:
        return text
    return text.translate(_JSON)


def console(*, stderr: bool = False) -> Console:
    """A console that prints text as it is: no markup, no emoji, no highlighting."""
    return Console(stderr=stderr, markup=False, emoji=False, highlight=False)


def fail(message: str, code: int) -> typer.Exit:
    """Print ``error: message`` as one line on stderr; the exit to raise with ``code``."""
    line = Text("error:", style="red")
    line.append(" " + plain(bounded(message, MAX_ERROR_CHARS)))
    console(stderr=True).print(line, soft_wrap=True)
    return typer.Exit(code)

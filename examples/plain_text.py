"""Printing what a model or a tool said on a terminal: as text, with hidden characters shown.

A transcript holds text from a model, tools and web pages. Printed as it is, an ANSI
escape could recolour or clear the screen and a right-to-left override could turn
``exe.txt`` around. The demos print every such value through `plain` (or `cell`, a Rich
`Text` that is never read as markup): control, format, private-use and unassigned
characters become visible escapes (``\\x1b``, ``\\u202e``).
"""

from __future__ import annotations

import unicodedata

from rich.text import Text

__all__ = ["cell", "plain"]

_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(char: str, keep: str) -> str:
    if char in keep or unicodedata.category(char) not in _HIDDEN:
        return char
    code = ord(char)
    if char in _SHORT:
        return _SHORT[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def plain(value: object, *, multiline: bool = False) -> str:
    """``value`` as text whose every character shows (line feeds kept if ``multiline``)."""
    text = value if isinstance(value, str) else str(value)
    keep = "\n" if multiline else ""
    return "".join(_escape(c, keep) for c in text)


def cell(value: object, *, multiline: bool = False, style: str = "") -> Text:
    """``value`` as a Rich `Text` (never markup, never emoji), hidden characters shown."""
    return Text(plain(value, multiline=multiline), style=style)

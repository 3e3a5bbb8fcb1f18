"""Every stored value is shown as text: redacted, bounded, and with hidden characters made visible.

What the console shows came from a model, a tool, a web page or a person, so
none of it may steer the page or the reader:

* HTML is escaped by the templates (Jinja2 autoescape, always on); this module
  handles what escaping does not: control characters, bidirectional overrides
  (``U+202E`` turns ``exe.txt`` around on screen), zero-width characters, lone
  surrogates and private-use code points are written as visible escapes
  (``\\x1b``, ``\\u202e``), so a reader sees exactly what is stored;
* credential-shaped text (API keys, bearer tokens, passwords in URLs) is
  redacted once more (`callgate.redact.Redactor`), although the gate already
  redacts what it records: an older ledger, or a value a tool's own record let
  through, is not shown in clear;
* long values are cut at `MAX_SHOWN` characters (a heading or a table cell at
  `PREVIEW_CHARS`), saying how many were left out and how large the whole is
  (`size_label`): a 200 KB argument is never rendered whole, and never silently cut.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from callgate.redact import Redactor
from callgate.render import HIDDEN_CATEGORIES, char_escape

__all__ = [
    "MAX_PRETTY",
    "MAX_SHOWN",
    "PREVIEW_CHARS",
    "pretty_json",
    "shown",
    "size_label",
    "visible",
]

MAX_SHOWN = 4000
"""The most characters of one value a page shows; the rest is counted, not shown."""
PREVIEW_CHARS = 300
"""The most characters of a one-line preview (a card's heading, a cell of a list)."""
MAX_PRETTY = 64 * 1024
"""JSON texts longer than this are shown as stored, not decoded and indented again."""

_REDACTOR = Redactor()


class _Table(dict[int, str]):
    """A `str.translate` table filled as characters are met (most text has few kinds)."""

    def __init__(self, keep: str) -> None:
        super().__init__()
        self.keep = keep

    def __missing__(self, code: int) -> str:
        char = chr(code)
        hidden = char not in self.keep and unicodedata.category(char) in HIDDEN_CATEGORIES
        value = char_escape(char) if hidden else char
        self[code] = value
        return value


_ONE_LINE = _Table(keep="")
_MULTILINE = _Table(keep="\n")


def visible(value: object, *, multiline: bool = False) -> str:
    """``value`` as text whose every character shows: hidden ones become escapes.

    ``multiline`` keeps line feeds (shown in a ``<pre>``-like block); otherwise a
    line feed is shown as ``\\n`` too, so a value cannot fake a second line.
    """
    text = value if isinstance(value, str) else str(value)
    return text.translate(_MULTILINE if multiline else _ONE_LINE)


def _kb(text: str) -> str:
    return f"{len(text.encode('utf-8', 'surrogatepass')) / 1024:.1f} KB"


def size_label(text: str) -> str:
    """How large ``text`` is: its characters and its UTF-8 size (``1,024 characters (2.0 KB)``)."""
    return f"{len(text):,} characters ({_kb(text)})"


def shown(value: object, *, multiline: bool = False, limit: int = MAX_SHOWN) -> str:
    """What the console shows of a stored value: redacted, cut at ``limit``, visible; a cut
    value says how many characters were left out and the size of the whole."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    cut = ""
    if len(text) > limit:
        cut = (
            f" … ({len(text) - limit} more characters not shown, of {len(text):,} characters "
            f"in all ({_kb(text)}); see 'callgate ledger export')"
        )
        text = text[:limit]
    return visible(_REDACTOR.text(text), multiline=multiline) + cut


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON (a JSON text is decoded first), or as it is if not JSON or
    longer than `MAX_PRETTY` (only its start is shown: indenting all of it is wasted work)."""
    if isinstance(value, str) and len(value) > MAX_PRETTY:
        return value
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return str(value)
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)

"""The console's templates: a Jinja2 environment that shows every value as text.

Autoescaping is always on, and every ``{{ value }}`` goes through `shown`
(`callgate.console.text`): credentials redacted, long values cut, hidden
characters made visible. Filters: ``block`` (the same, keeping line feeds),
``json`` (indented JSON, the same way), ``preview`` (cut at
`PREVIEW_CHARS`, for headings and list cells), ``size`` (how large a stored text
is, `size_label`), ``q`` (a URL query value), ``plain``
(visible characters only, for ids in form fields), ``when`` (a UTC time).
"""

from __future__ import annotations

import urllib.parse
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup

from callgate.console.text import PREVIEW_CHARS, pretty_json, shown, size_label, visible

__all__ = ["Shown", "environment", "stylesheet"]


class Shown(str):
    """Text already made safe to show (redacted, bounded, visible); still HTML-escaped."""


def _finalize(value: Any) -> Any:
    """Every ``{{ value }}`` in a template is shown as text: hidden characters made visible,
    credentials redacted, long values cut (`callgate.console.text.shown`)."""
    if value is None:
        return ""
    if isinstance(value, Markup | Shown):
        return value
    return Shown(shown(value))


def _when(at: Any) -> str:
    try:
        return datetime.fromtimestamp(float(at), UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError, OverflowError, OSError):
        return visible(str(at))


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("callgate.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["block"] = lambda v: Shown(shown(v, multiline=True))
    env.filters["json"] = lambda v: Shown(shown(pretty_json(v), multiline=True))
    env.filters["q"] = lambda v: Shown(urllib.parse.quote(str(v), safe=""))
    env.filters["preview"] = lambda v: Shown(shown(v, limit=PREVIEW_CHARS))
    env.filters["size"] = lambda v: Shown(size_label("" if v is None else str(v)))
    env.filters["plain"] = lambda v: Shown(visible(v))
    env.filters["when"] = _when
    return env


def stylesheet() -> bytes:
    return resources.files("callgate.console").joinpath("static/console.css").read_bytes()

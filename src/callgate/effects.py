"""Effects and grants: the vocabulary of authority.

An effect names what a call does: ``read:<resource>``, ``write:<resource>``,
``network:<destination>``, ``spend:<currency>``, ``disclose:<recipient>``.
A tool declares effect templates (``"spend:{currency}={amount}"``); a call's
required effects are those templates expanded on its arguments, a trailing
``={field}`` giving the effect a quantity. A grant is a pattern that covers
effects: ``*`` matches any run of characters, and a bound such as
``spend:USD<=50`` covers only quantities up to 50.

Effect names carry values the model chose (``disclose:{to}``), so a grant is
matched without a regular expression, in time linear in the name's length
(for a fixed grant): a backtracking ``.*`` per ``*`` took time growing with the
name's length to the power of the number of ``*``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from callgate.errors import DefinitionError

__all__ = ["Effect", "Grant", "Grants", "normal_name", "star_match"]

_GRANT = re.compile(
    r"^(?P<pattern>[^<>=\s]+?)(?:<=(?P<bound>-?\d+(?:\.\d+)?)(?:/(?P<per>run|day))?)?$"
)


_URL = re.compile(r"(?i)(?<![A-Za-z0-9+.\-])(?:https?|wss?|s?ftps?|ssh|git|s3|gs)://[^/\\?#]*")
"""A URL of a network scheme and its host: the path after the host is resolved, the host
kept (``files://srv/..`` is no URL: a path of two leading slashes)."""
_DOT = frozenset({".", "%2e"})
_DOT_DOT = frozenset({"..", ".%2e", "%2e.", "%2e%2e"})


def normal_name(name: str) -> str:
    """An effect name with the path in it resolved: ``.`` and empty segments dropped, each
    ``..`` taking the segment before it away (never above the root of an absolute path).

    A grant or a rule over a path prefix (``write:files:/srv/shared/*``) is matched on the
    path a call reaches, not on the text the model wrote: ``/srv/shared/../../etc/x`` is
    ``/etc/x``, which the grant does not cover, and a relative value that climbs out of
    its prefix keeps its leading ``..`` (``shared/../../x`` is ``../x``). The path is the
    text after the last ``:`` before the first ``/``; in a URL (``https://host/...``, and
    the other network schemes of `_URL`)
    it is what follows the host, up to ``?`` or ``#``, with ``\\`` read as ``/`` and
    ``%2e`` as ``.`` (as browsers and WHATWG URL parsers read them), and the host is
    never changed. Symbolic links are not resolved: an effect is text (the policy
    predicate ``under`` resolves them).
    """
    slash = name.find("/")
    if slash < 0:
        return name
    url = _URL.search(name)
    if url is not None and url.start() < slash:
        start = url.end()
        end = min(
            (i for i in (name.find("?", start), name.find("#", start)) if i >= 0), default=len(name)
        )
        path = name[start:end]
        if not path:
            return name
        return name[:start] + _resolved(path.replace("\\", "/"), url=True) + name[end:]
    start = name.rfind(":", 0, slash) + 1
    path = name[start:]
    if "//" not in path and "." not in path:
        return name
    return name[:start] + _resolved(path, url=False)


def _resolved(path: str, *, url: bool) -> str:
    """``path`` with its dot segments and empty segments resolved (see `normal_name`)."""
    absolute = path.startswith("/")
    segments = path.split("/")
    last = segments[-1].lower() if url else segments[-1]
    trailing = len(segments) > 1 and (last in ("", ".", "..") or (url and last in _DOT | _DOT_DOT))
    kept: list[str] = []
    for segment in segments:
        key = segment.lower() if url else segment
        if segment == "" or key == "." or (url and key in _DOT):
            continue
        if key == ".." or (url and key in _DOT_DOT):
            if kept and kept[-1] != "..":
                kept.pop()
            elif not absolute:
                kept.append("..")
            continue
        kept.append(segment)
    text = "/".join(kept)
    if absolute:
        text = "/" + text
    if trailing and kept:
        text += "/"
    return text or "."


class Effect(NamedTuple):
    """One required effect: a name and, for bounded kinds such as ``spend``, a quantity."""

    name: str
    quantity: float | None = None

    def __str__(self) -> str:
        if self.quantity is None:
            return self.name
        q = int(self.quantity) if float(self.quantity).is_integer() else self.quantity
        return f"{self.name}={q}"


class Grant:
    """A pattern over effect names, optionally bounding the quantity."""

    __slots__ = ("bound", "parts", "pattern", "per", "text")

    def __init__(self, text: str) -> None:
        match = _GRANT.match(text.strip())
        if not match or ":" not in match["pattern"]:
            raise DefinitionError(
                f"grant {text!r} is malformed: write 'kind:resource' with optional '*' wildcards "
                "and an optional bound, per call or as a budget per run or per day, e.g. "
                "'read:*', 'write:cart:*', 'spend:USD<=50', 'spend:USD<=200/run'"
            )
        self.text = text.strip()
        self.pattern = match["pattern"]
        self.bound = float(match["bound"]) if match["bound"] is not None else None
        self.per: str | None = match["per"]
        """``run`` or ``day``: the bound is also a budget over the run's (the principal's
        day's) calls, kept in the ledger (`callgate.ledger.budgets`); None: per call."""
        if self.bound is not None and self.bound < 0:
            raise DefinitionError(
                f"grant {text!r} bounds the quantity below zero, so it covers nothing (a bound "
                "covers 0 up to it; a negative quantity needs a grant of its own): write a "
                "bound of 0 or more, e.g. 'spend:USD<=50'"
            )
        self.parts = tuple(self.pattern.split("*"))

    def covers(self, effect: Effect) -> bool:
        """Whether this grant covers ``effect`` (name matches; quantity within the bound)."""
        if not star_match(self.parts, effect.name):
            return False
        if self.bound is None:
            return True
        # A bound covers 0..bound: a negative quantity (a credit, a reversal) is not
        # "less spending" and needs a grant of its own.
        return effect.quantity is not None and 0 <= effect.quantity <= self.bound

    def __repr__(self) -> str:
        return f"Grant({self.text!r})"


def star_match(parts: tuple[str, ...], text: str) -> bool:
    """Whether ``text`` is ``parts`` joined by runs of any characters.

    The first part must begin the text and the last end it; each part between
    is taken at its leftmost place after the previous one, which is right for
    ``*``-only patterns and reads the text once.
    """
    first, last = parts[0], parts[-1]
    if len(parts) == 1:
        return text == first
    if len(text) < len(first) + len(last) or not (text.startswith(first) and text.endswith(last)):
        return False
    position, end = len(first), len(text) - len(last)
    for part in parts[1:-1]:
        found = text.find(part, position, end)
        if found < 0:
            return False
        position = found + len(part)
    return True


class Grants:
    """A set of grants; answers which required effects none of them covers."""

    __slots__ = ("_cache", "grants")

    def __init__(self, grants: Iterable[str | Grant]) -> None:
        self.grants = tuple(g if isinstance(g, Grant) else Grant(g) for g in grants)
        self._cache: dict[Effect, bool] = {}

    def covers(self, effect: Effect) -> bool:
        """Whether some grant covers ``effect``."""
        hit = self._cache.get(effect)
        if hit is None:
            hit = any(g.covers(effect) for g in self.grants)
            if len(self._cache) < 4096:
                self._cache[effect] = hit
        return hit

    def missing(self, effects: Iterable[Effect]) -> list[Effect]:
        """The effects no grant covers, in order."""
        cache = self._cache
        return [e for e in effects if not (cache.get(e) or self.covers(e))]

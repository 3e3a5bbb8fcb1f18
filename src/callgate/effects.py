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

__all__ = ["Effect", "Grant", "Grants", "star_match"]

_GRANT = re.compile(r"^(?P<pattern>[^<>=\s]+?)(?:<=(?P<bound>-?\d+(?:\.\d+)?))?$")


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

    __slots__ = ("bound", "parts", "pattern", "text")

    def __init__(self, text: str) -> None:
        match = _GRANT.match(text.strip())
        if not match or ":" not in match["pattern"]:
            raise DefinitionError(
                f"grant {text!r} is malformed: write 'kind:resource' with optional '*' wildcards "
                "and an optional bound, e.g. 'read:*', 'write:cart:*', 'spend:USD<=50'"
            )
        self.text = text.strip()
        self.pattern = match["pattern"]
        self.bound = float(match["bound"]) if match["bound"] is not None else None
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

"""What one corpus source reports: how many public definitions it holds, how many callgate
took, what it refused and why, and any crash (a crash is always a failure).

Each source lives in ``tests/corpus/<source>/`` with its compressed data, its ``LICENSE`` and
a ``SOURCE.md`` (where it came from, which commit or date), and a ``source.py`` exposing
``run(full: bool) -> SourceReport``: ``full=False`` is the fast sample ``make test`` runs,
``full=True`` is everything (``make corpus``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(kw_only=True)
class SourceReport:
    """The outcome of registering every definition of one public source."""

    source: str
    definitions: int = 0
    imported: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    """Refusals counted by reason (a short stable phrase, not the whole message)."""
    crashes: list[str] = field(default_factory=list)
    """Unexpected exceptions (tracebacks shortened): each one is a bug to fix."""
    checks_failed: list[str] = field(default_factory=list)
    """An export that did not validate or a generated valid call that was not accepted."""
    seconds: float = 0.0
    checked: Counter[str] = field(default_factory=Counter)
    """What the checks covered, counted (``exports``, ``calls ok``, ``calls semantic``,
    ``no call: <why>`` for tools the call generator could not serve): not failures."""

    @property
    def ok(self) -> bool:
        """No crash and no failed check: refusals with a reason are allowed."""
        return not self.crashes and not self.checks_failed

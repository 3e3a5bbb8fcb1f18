"""The chain's verification as the console shows it: run again only when it could differ.

Verifying reads the whole journal, so a page does not run it on every load:
`ChainCheck` keeps the last verification while the journal's head is the one
it verified and it is younger than ``verify_every`` seconds. A record shown is
still checked against its own hash on every page (`callgate.console.views`).
A keyed journal is verified under its key by the ledger itself
(`Ledger.verify`): the console never sees the key.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from callgate.ledger.base import AuditCheck, LedgerQueries

__all__ = ["VERIFY_EVERY", "ChainCheck"]

VERIFY_EVERY = 30.0
"""Seconds a verification of the whole chain is reused while the journal's head is unchanged."""


class ChainCheck:
    """The verification of ``ledger``'s chain and when it ran, reused while it still holds."""

    def __init__(
        self,
        ledger: LedgerQueries,
        *,
        verify_every: float = VERIFY_EVERY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ledger = ledger
        self.verify_every = verify_every
        self.clock = clock
        self._last: tuple[tuple[int, str] | None, float, AuditCheck] | None = None
        self._lock = threading.Lock()

    def __call__(self) -> tuple[AuditCheck, float]:
        """The verification and when it ran: run again when the journal's head moved or
        ``verify_every`` seconds passed since the last one."""
        with self._lock:
            head = self.ledger.audit_head()
            if self._last is not None:
                seen, at, check = self._last
                if seen == head and self.clock() - at < self.verify_every:
                    return check, at
            at = self.clock()
            check = self.ledger.verify()
            self._last = (head, at, check)
            return check, at

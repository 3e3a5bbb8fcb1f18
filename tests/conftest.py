"""Shared fixtures. Each test module builds its own small registry."""

from __future__ import annotations

import pytest

import callgate.gate
from callgate.ledger import MemoryLedger


@pytest.fixture(autouse=True)
def _memory_ledger_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """A `Gate` built without a ledger gets a `MemoryLedger` in tests.

    The real default is a SQLite file at ``./callgate.db``: tests must not
    share one file across runs (replayed idempotency keys) or pay its syncs.
    Tests of the default itself undo this (tests/ledger/test_gate_ledger.py).
    """
    monkeypatch.setattr(callgate.gate, "default_ledger", MemoryLedger)

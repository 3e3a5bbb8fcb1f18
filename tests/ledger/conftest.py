"""Fixtures for the ledger tests: one ``ledger`` fixture, three backends.

Every test that takes ``ledger`` runs against `MemoryLedger`, `SQLiteLedger`
(a file in the test's temporary directory) and `PostgresLedger` (a fresh
database in a throwaway cluster). Without PostgreSQL binaries the PostgreSQL
cases are skipped with the reason, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from callgate.ledger import Ledger, MemoryLedger
from callgate.ledger.sqlite import SQLiteLedger

BACKENDS = ["memory", "sqlite", "postgres"]


@pytest.fixture
def make_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Ledger]]:
    """A factory of ledgers of the backend under test; every one is closed afterwards.

    For durable backends each call opens the *same* store again (as a
    restarted process would); the memory backend returns the same ledger.
    """
    backend = request.param
    opened: list[Ledger] = []
    target: str
    if backend == "postgres":
        target = request.getfixturevalue("pg_dsn")
    else:
        target = str(tmp_path / "callgate.db")
    memory = MemoryLedger()

    def make(**options: object) -> Ledger:
        if backend == "memory":
            return memory
        if backend == "sqlite":
            ledger: Ledger = SQLiteLedger(target, **options)  # type: ignore[arg-type]
        else:
            from callgate.ledger.postgres import PostgresLedger

            ledger = PostgresLedger(target, **options)  # type: ignore[arg-type]
        opened.append(ledger)
        return ledger

    make.backend = backend  # type: ignore[attr-defined]
    make.target = target  # type: ignore[attr-defined]
    yield make
    for ledger in opened:
        ledger.close()


@pytest.fixture
def ledger(make_ledger: Callable[..., Ledger]) -> Ledger:
    """A fresh ledger of the backend under test."""
    return make_ledger()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "make_ledger" in metafunc.fixturenames:
        metafunc.parametrize("make_ledger", BACKENDS, indirect=True)

"""Fixtures for the ledger tests: one ``ledger`` fixture, three backends.

Every test that takes ``ledger`` runs against `MemoryLedger`, `SQLiteLedger`
(a file in the test's temporary directory) and `PostgresLedger` (a fresh
database in a throwaway cluster). Without PostgreSQL binaries the PostgreSQL
cases are skipped with the reason, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from callgate.ledger import Ledger, MemoryLedger
from callgate.ledger.sqlite import SQLiteLedger


def load_pgcluster() -> ModuleType:
    """`pgcluster.py`, loaded once under one name for every test directory."""
    name = "callgate_tests_pgcluster"
    if name not in sys.modules:
        path = Path(__file__).with_name("pgcluster.py")
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


pgcluster = load_pgcluster()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[object]:
    """A throwaway PostgreSQL cluster for the session (skip, or fail in CI, without one)."""
    reason = pgcluster.missing_reason()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and PostgreSQL is required: {reason}")
        pytest.skip(reason)
    cluster = pgcluster.acquire()
    yield cluster
    pgcluster.release()


@pytest.fixture
def pg_dsn(pg_cluster: object) -> Iterator[str]:
    """The DSN of a fresh database, dropped after the test."""
    dsn: str = pg_cluster.create_database()  # type: ignore[attr-defined]
    yield dsn
    pg_cluster.drop_database(dsn)  # type: ignore[attr-defined]


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

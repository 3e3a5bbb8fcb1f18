"""Shared fixtures. Each test module builds its own small registry.

The throwaway PostgreSQL cluster (``pg_cluster``, ``pg_dsn``) and the
backend-parametrized ``make_ledger`` / ``ledger`` fixtures live here so that
the ledger, approval and integration tests share them. A folder chooses its
backends with ``pytest_generate_tests`` and may override ``ledger_pg_target``
(where a PostgreSQL ledger lives).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile

# Tests never write into the working tree: hypothesis keeps its files elsewhere
# (read when it is imported, so this comes first).
os.environ.setdefault(
    "HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "callgate-hypothesis")
)
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import settings

import callgate.gate
from callgate.ledger import Ledger, MemoryLedger, SQLiteLedger


def _load_pgcluster() -> ModuleType:
    """`pgcluster.py`, loaded once under one name (test folders are not packages)."""
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


pgcluster = _load_pgcluster()

# Tests never write into the working tree: no example database for hypothesis
# (pytest's own cache is off in pyproject.toml's addopts).
settings.register_profile("callgate", database=None)
settings.load_profile("callgate")


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


@pytest.fixture(autouse=True)
def _memory_ledger_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """A `Gate` built without a ledger gets a `MemoryLedger` in tests.

    The real default is a SQLite file at ``./callgate.db``: tests must not
    share one file across runs (replayed idempotency keys) or pay its syncs.
    Tests of the default itself undo this (tests/ledger/test_gate_ledger.py).
    """
    monkeypatch.setattr(callgate.gate, "default_ledger", MemoryLedger)


@pytest.fixture
def ledger_pg_target(pg_dsn: str) -> str:
    """Where a PostgreSQL ledger of one test lives (default: a fresh database)."""
    return pg_dsn


@pytest.fixture
def make_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Ledger]]:
    """A factory of ledgers of the backend under test; every one is closed afterwards.

    For durable backends each call opens the *same* store again (as a
    restarted process would); the memory backend returns the same ledger.
    ``.backend`` and ``.target`` say which.
    """
    backend = request.param
    opened: list[Ledger] = []
    target: str
    if backend == "postgres":
        target = request.getfixturevalue("ledger_pg_target")
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

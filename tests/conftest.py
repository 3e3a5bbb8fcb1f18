"""Shared fixtures. Each test module builds its own small registry.

The throwaway PostgreSQL cluster (``pg_cluster``, ``pg_dsn``) lives here so
that the ledger, approval and integration tests share one per session.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import callgate.gate
from callgate.ledger import MemoryLedger


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

"""Fixtures for integration tests: the throwaway PostgreSQL cluster of tests/ledger."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest


def _pgcluster() -> ModuleType:
    name = "callgate_tests_pgcluster"
    if name not in sys.modules:
        path = Path(__file__).parent.parent / "ledger" / "pgcluster.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


pgcluster = _pgcluster()


@pytest.fixture(scope="session")
def integration_pg() -> Iterator[object]:
    """The session's throwaway PostgreSQL cluster (skip, or fail under CI=true, without one)."""
    reason = pgcluster.missing_reason()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and PostgreSQL is required: {reason}")
        pytest.skip(reason)
    cluster = pgcluster.acquire()
    yield cluster
    pgcluster.release()


@pytest.fixture
def integration_dsn(integration_pg: object) -> Iterator[str]:
    """A fresh database in the throwaway cluster."""
    dsn: str = integration_pg.create_database()  # type: ignore[attr-defined]
    yield dsn
    integration_pg.drop_database(dsn)  # type: ignore[attr-defined]

"""The ledger tests run every ``ledger`` / ``make_ledger`` test on three backends.

The fixtures themselves are in tests/conftest.py.

Every test that takes ``ledger`` runs against `MemoryLedger`, `SQLiteLedger`
(a file in the test's temporary directory) and `PostgresLedger` (a fresh
database in a throwaway cluster). Without PostgreSQL binaries the PostgreSQL
cases are skipped with the reason, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import pytest

BACKENDS = ["memory", "sqlite", "postgres"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "make_ledger" in metafunc.fixturenames:
        metafunc.parametrize("make_ledger", BACKENDS, indirect=True)

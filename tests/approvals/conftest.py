"""Fixtures for the approval tests: ``make_ledger`` over memory, SQLite and PostgreSQL.

The same contract as tests/ledger's fixture (``make_ledger()`` opens the
backend's store again, as a restarted process would; ``.backend`` and
``.target`` say which), on the session's throwaway PostgreSQL cluster
(``pg_cluster`` in tests/conftest.py). For speed each PostgreSQL test gets
its own *schema* in one shared database (a DSN with ``search_path`` set), not a
database of its own: creating and dropping a database costs about 0.3 s.
Without PostgreSQL binaries the PostgreSQL cases are skipped, except under
``CI=true``, where they fail.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from callgate.ledger import Ledger, MemoryLedger, SQLiteLedger


@pytest.fixture(scope="session")
def approvals_pg_database(pg_cluster: object) -> Iterator[str]:
    """One database of the session's throwaway cluster for every approval test."""
    dsn: str = pg_cluster.create_database()  # type: ignore[attr-defined]
    yield dsn
    pg_cluster.drop_database(dsn)  # type: ignore[attr-defined]


@pytest.fixture
def pg_schema_dsn(approvals_pg_database: str) -> Iterator[str]:
    """The DSN of a fresh, empty schema (``search_path``) in the shared database."""
    import psycopg

    schema = "s_" + uuid.uuid4().hex[:12]
    with psycopg.connect(approvals_pg_database, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield f"{approvals_pg_database} options='-c search_path={schema}'"
    with psycopg.connect(approvals_pg_database, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


BACKENDS = ["memory", "sqlite", "postgres"]


@pytest.fixture
def make_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Ledger]]:
    """A factory of ledgers of the backend under test; every one is closed afterwards."""
    backend = request.param
    opened: list[Ledger] = []
    if backend == "postgres":
        target = request.getfixturevalue("pg_schema_dsn")
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
        backends = getattr(metafunc.module, "BACKENDS", BACKENDS)
        metafunc.parametrize("make_ledger", backends, indirect=True)

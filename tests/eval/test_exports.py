"""callgate.eval's public surface: exactly the names listed, sorted, each importable."""

from __future__ import annotations

import callgate.eval

EXPECTED = [
    "ETA_CAVEATS", "ETA_ESTIMATOR", "GRADE_EVENT", "GRANTS", "LAB_SYSTEM", "POLICIES", "Analysis",
    "CallCheck", "CallView", "Estimate", "ExpectedCall", "Funnel", "FunnelRow", "LabRun",
    "Operation", "Policy", "PolicyModel", "Prereg", "RegexTokenizer", "RunTokens", "RunView",
    "Surface", "Task", "Tokenizer", "Verdict", "analyse", "bootstrap", "check_calls",
    "entropy_by_surface", "eta", "funnel", "funnel_png", "get_surface", "holm", "interaction",
    "load_tasks", "materialize", "normalize", "paired_bootstrap", "paired_power",
    "pairs_for_power", "policy_named", "ratio_bootstrap", "read_runs", "register_surface",
    "repo_tasks", "run_lab", "run_tokens", "tokenizer_from", "verify", "wilson", "write_report",
]  # fmt: skip


def test_the_exported_names_are_pinned() -> None:
    """__all__ is exactly the expected list, in sorted order, and every name resolves."""
    assert callgate.eval.__all__ == EXPECTED
    assert sorted(EXPECTED, key=lambda n: (not n.isupper(), n[0].islower(), n)) == EXPECTED
    for name in EXPECTED:
        assert getattr(callgate.eval, name) is not None

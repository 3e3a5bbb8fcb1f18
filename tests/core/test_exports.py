"""The public surface: `callgate.__all__` is pinned so nothing leaks or vanishes by accident."""

from __future__ import annotations

import importlib

import callgate

PUBLIC_NAMES = [
    "Action",
    "Agent",
    "AgentResult",
    "ApprovalError",
    "ApprovalRequest",
    "ApprovalStatus",
    "Approvals",
    "ArgumentError",
    "Authority",
    "Budgets",
    "CallContext",
    "CallRecord",
    "CallState",
    "CallgateError",
    "Decision",
    "DefinitionError",
    "Effect",
    "Evidence",
    "EvidenceItem",
    "Gate",
    "GateClosed",
    "Grant",
    "Intent",
    "Ledger",
    "LedgerError",
    "MemoryApprovals",
    "MemoryLedger",
    "Observation",
    "OutcomeUnknown",
    "Policy",
    "PostgresLedger",
    "Provenance",
    "RawCall",
    "Readers",
    "Registry",
    "Risk",
    "Rule",
    "Run",
    "SQLiteLedger",
    "Stage",
    "Status",
    "StopReason",
    "Telemetry",
    "ToolCall",
    "ToolFailure",
    "ToolSpec",
    "__version__",
    "allow",
    "ask",
    "deny",
    "tool",
]


def test_all_lists_exactly_the_public_names() -> None:
    """`callgate.__all__` is this list: adding or removing a public name is a deliberate edit."""
    assert callgate.__all__ == PUBLIC_NAMES


def test_all_is_sorted() -> None:
    """`__all__` is kept in one sorted list (STYLE.md item 1)."""
    assert list(callgate.__all__) == sorted(callgate.__all__)


def test_every_public_name_is_importable() -> None:
    """``from callgate import <name>`` works for every name in `__all__`."""
    module = importlib.import_module("callgate")
    missing = [name for name in PUBLIC_NAMES if not hasattr(module, name)]
    assert missing == []


def test_star_import_exposes_only_the_public_names() -> None:
    """``from callgate import *`` binds exactly the names of `__all__`."""
    namespace: dict[str, object] = {}
    exec("from callgate import *", namespace)
    namespace.pop("__builtins__")
    assert sorted(namespace) == PUBLIC_NAMES

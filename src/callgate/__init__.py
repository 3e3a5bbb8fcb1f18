"""callgate: the controlled entry between a model's proposed tool calls and their effects.

The model proposes; callgate authorizes and executes. See docs/architecture.md
for the pipeline (parse → validate → authorize → approve → schedule → execute →
verify) and docs/style.md for the habits the code keeps.

``import callgate`` imports no other module: each public name is imported from
its module on first access (PEP 562 ``__getattr__`` over ``_EXPORTS``), so a CLI,
a worker or a test that needs one name does not pay for all of them. ``__all__``
and ``dir()`` list every public name either way, and the ``TYPE_CHECKING`` block
below lets type checkers and IDEs see them as if imported here.
"""

from __future__ import annotations

import importlib

# typing.TYPE_CHECKING without importing typing (and re, collections, ... with it):
# type checkers treat any name TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from callgate.agent import Agent, AgentResult, Budgets, StopReason
    from callgate.approvals import ApprovalRequest, Approvals, ApprovalStatus, MemoryApprovals
    from callgate.authorize.intent import Intent
    from callgate.authorize.policy import (
        Action,
        Authority,
        Decision,
        Policy,
        Rule,
        allow,
        ask,
        deny,
    )
    from callgate.authorize.readers import Readers
    from callgate.calls import Observation, Provenance, RawCall, Stage, Status, ToolCall
    from callgate.effects import Effect, Grant
    from callgate.errors import (
        ApprovalError,
        ArgumentError,
        CallgateError,
        DefinitionError,
        GateClosed,
        LedgerError,
        OutcomeUnknown,
        ToolFailure,
    )
    from callgate.evidence import Evidence, EvidenceItem
    from callgate.gate import Gate, Run
    from callgate.ledger import (
        CallRecord,
        CallState,
        Ledger,
        MemoryLedger,
        PostgresLedger,
        SQLiteLedger,
    )
    from callgate.telemetry import Telemetry
    from callgate.tools import CallContext, Registry, Risk, ToolSpec, tool

__version__ = "0.1.0"

__all__ = [
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

# Each public name and the module it is imported from on first access.
_EXPORTS: dict[str, str] = {
    "Action": "callgate.authorize.policy",
    "Agent": "callgate.agent",
    "AgentResult": "callgate.agent",
    "ApprovalError": "callgate.errors",
    "ApprovalRequest": "callgate.approvals",
    "ApprovalStatus": "callgate.approvals",
    "Approvals": "callgate.approvals",
    "ArgumentError": "callgate.errors",
    "Authority": "callgate.authorize.policy",
    "Budgets": "callgate.agent",
    "CallContext": "callgate.tools",
    "CallRecord": "callgate.ledger",
    "CallState": "callgate.ledger",
    "CallgateError": "callgate.errors",
    "Decision": "callgate.authorize.policy",
    "DefinitionError": "callgate.errors",
    "Effect": "callgate.effects",
    "Evidence": "callgate.evidence",
    "EvidenceItem": "callgate.evidence",
    "Gate": "callgate.gate",
    "GateClosed": "callgate.errors",
    "Grant": "callgate.effects",
    "Intent": "callgate.authorize.intent",
    "Ledger": "callgate.ledger",
    "LedgerError": "callgate.errors",
    "MemoryApprovals": "callgate.approvals",
    "MemoryLedger": "callgate.ledger",
    "Observation": "callgate.calls",
    "OutcomeUnknown": "callgate.errors",
    "Policy": "callgate.authorize.policy",
    "PostgresLedger": "callgate.ledger",
    "Provenance": "callgate.calls",
    "RawCall": "callgate.calls",
    "Readers": "callgate.authorize.readers",
    "Registry": "callgate.tools",
    "Risk": "callgate.tools",
    "Rule": "callgate.authorize.policy",
    "Run": "callgate.gate",
    "SQLiteLedger": "callgate.ledger",
    "Stage": "callgate.calls",
    "Status": "callgate.calls",
    "StopReason": "callgate.agent",
    "Telemetry": "callgate.telemetry",
    "ToolCall": "callgate.calls",
    "ToolFailure": "callgate.errors",
    "ToolSpec": "callgate.tools",
    "allow": "callgate.authorize.policy",
    "ask": "callgate.authorize.policy",
    "deny": "callgate.authorize.policy",
    "tool": "callgate.tools",
}


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first access and keep it here."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'callgate' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


_PLUMBING = frozenset({"TYPE_CHECKING", "annotations", "importlib"})


def __dir__() -> list[str]:
    """The public names (imported or not), dunders and submodules already imported."""
    return sorted((set(globals()) - _PLUMBING) | set(__all__))

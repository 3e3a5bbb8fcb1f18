"""callgate: the controlled entry between a model's proposed tool calls and their effects.

The model proposes; callgate authorizes and executes. See docs/architecture.md
for the pipeline (parse → validate → authorize → approve → schedule → execute →
verify) and docs/style.md for the habits the code keeps.
"""

from callgate.agent import Agent, AgentResult, Budgets, StopReason
from callgate.approvals import ApprovalRequest, Approvals, ApprovalStatus, MemoryApprovals
from callgate.authorize.intent import Intent
from callgate.authorize.policy import Action, Authority, Decision, Policy, Rule, allow, ask, deny
from callgate.calls import Observation, Provenance, RawCall, Stage, Status, ToolCall
from callgate.effects import Effect, Grant
from callgate.errors import (
    ApprovalError,
    ArgumentError,
    CallgateError,
    DefinitionError,
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

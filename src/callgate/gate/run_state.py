"""What a run knows, and what its stages need from the gate: shared by the run's parts.

`RunState` is one run's own state (its authority, evidence, trusted inputs, the
calls waiting for approval, the names its calls are recorded under); `GateParts`
is the gate's configuration as the stages read it. `Run` (gate/gate.py) owns both and
hands them to `Admission` and to `resume`, which therefore never import the
gate: composition, not a base class, and no import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from callgate.approvals import Approvals
from callgate.authorize.intent import Intent
from callgate.authorize.policy import Authority, Decision, Policy
from callgate.authorize.provenance import TrustIndex
from callgate.calls import ToolCall
from callgate.effects import Grant
from callgate.evidence import Evidence
from callgate.gate.call_names import CallNames
from callgate.ledger.base import Ledger
from callgate.redact import Redactor
from callgate.tools import Registry

__all__ = ["GateParts", "RunState"]


class GateParts(Protocol):
    """The gate's configuration as a run's stages read it (`callgate.gate.Gate` has it)."""

    registry: Registry
    policy: Policy
    ledger: Ledger
    approvals: Approvals
    redactor: Redactor
    repair: bool
    approval_ttl: float
    max_batch_calls: int


@dataclass(slots=True, kw_only=True)
class RunState:
    """One run's state, read and written by its admission, its batches and its resumption."""

    id: str
    authority: Authority
    context_secrets: tuple[str, ...]
    """The text values of the run's trusted context (tenant, user, credentials): scrubbed
    like secret fields from everything stored or shown, since the context is never the
    model's to see (`callgate.gate.admission.context_secrets`)."""
    evidence: Evidence = field(default_factory=Evidence)
    provenance: TrustIndex = field(default_factory=TrustIndex)
    pending: dict[str, ToolCall | None] = field(default_factory=dict)
    """Approval id → the call waiting for it (None: rebuilt without its arguments)."""
    resuming: dict[str, str] = field(default_factory=dict)
    """Call id → the approval it is being resumed under."""
    decisions: dict[Any, Decision] = field(default_factory=dict)
    """Policy decisions remembered for this run's authority (see `authorize`)."""
    names: CallNames = field(default_factory=CallNames)
    """The names this run records its calls under (`callgate.gate.call_names`)."""
    intents: tuple[Intent, ...] = ()
    """What the trusted request needs (`callgate.authorize.intent`): after untrusted
    content, a call must be inside every one. They only accumulate (`Run.narrow`)."""
    budgets: tuple[Grant, ...] | None = None
    """The authority's budget grants (``spend:USD<=50/run``), found at the first call."""
    batch_ids: tuple[str, ...] = ()
    """The model's ids in the batch being admitted: no new name may take one."""
    contended: dict[str, str] = field(default_factory=dict)
    """The model's ids of the batch being admitted that compete for a planned call, with
    why (`Admission.contention`): each asks after untrusted content. Reset per batch."""

    def __post_init__(self) -> None:
        # The principal is who the run acts for: an identity of its user, so a reader
        # named "user" (`callgate.authorize.readers.Readers`), in a resumed run too.
        self.provenance.add_user(self.authority.principal)

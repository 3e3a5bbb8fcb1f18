"""The records of an agent run: why it stopped, its budgets, its result, its state.

`StopReason`, `Budgets` and `AgentResult` are public (re-exported by
``callgate``); `RunState` and `HeldBatch` are what a run carries between
steps and across a pause, private to `callgate.agent`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from callgate.agent.paging import ResultStore
from callgate.agent.transcript import Recorder
from callgate.agent.triage import Oscillation
from callgate.calls import Observation, ToolCall
from callgate.errors import DefinitionError
from callgate.gate import Run
from callgate.llms.base import Usage

__all__ = ["AgentResult", "Budgets", "HeldBatch", "RunState", "StopReason"]


class StopReason(enum.StrEnum):
    """Why a run stopped (or paused)."""

    ANSWERED = "answered"
    """The model answered without proposing calls."""
    REFUSED = "refused"
    """The model declined to answer."""
    TRUNCATED = "truncated"
    """The model's answer was cut off by its output token limit."""
    AWAITING_APPROVAL = "awaiting_approval"
    """Paused: calls wait for a person's decision; `Agent.resume` continues."""
    MAX_STEPS = "max_steps"
    MAX_TOOL_CALLS = "max_tool_calls"
    MAX_SECONDS = "max_seconds"
    MAX_TOKENS = "max_tokens"
    OSCILLATION = "oscillation"
    """The same failing call was proposed ``repeat_limit`` times."""
    SECURITY = "security"
    """An attempted crossing of the authority boundary, with ``halt_on_boundary``."""
    UNRESOLVED = "unresolved"
    """A side-effecting call ended ``unknown`` and reconciliation could not settle it."""
    MODEL_ERROR = "model_error"
    """The model could not be called (network, authentication, an exhausted script)."""


_DONE = frozenset({StopReason.ANSWERED, StopReason.REFUSED, StopReason.TRUNCATED})


@dataclass(frozen=True, slots=True, kw_only=True)
class Budgets:
    """Limits of one run; the first one reached ends it.

    Args:
        steps: model calls.
        tool_calls: calls proposed (a batch that would exceed it is not run).
        seconds: active wall time (time paused for an approval does not count);
            bounds each model call and each batch of tool calls in flight.
        tokens: input plus output tokens, counted when the model reports usage.
    """

    steps: int = 20
    tool_calls: int = 100
    seconds: float | None = 600.0
    tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("steps", "tool_calls", "tokens"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise DefinitionError(f"Budgets.{name} must be a positive integer, got {value!r}")
        if self.seconds is not None and not self.seconds > 0:
            raise DefinitionError(f"Budgets.seconds must be positive, got {self.seconds!r}")


@dataclass(slots=True)
class HeldBatch:
    """A batch paused on approvals: its calls (by ledger id) and observations, in order."""

    step: int
    calls: dict[str, ToolCall]
    batch: list[Observation]


@dataclass(slots=True, kw_only=True)
class RunState:
    """Everything one run carries between steps (and across a pause)."""

    run: Run
    record: Recorder
    pager: ResultStore
    system: str | None
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    oscillation: Oscillation
    paging: Run | None = None
    steps: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    active: float = 0.0
    since: float = 0.0
    observations: list[Observation] = field(default_factory=list)
    held: HeldBatch | None = None
    read_untrusted: bool = False
    untrusted_calls: list[str] = field(default_factory=list)
    seen_ids: set[str] = field(default_factory=set)
    model_ids: dict[str, str] = field(default_factory=dict)
    """Ledger call id → the id the model gave, for ids the model reused across steps."""
    finished: bool = False
    planning: bool = False
    """A planning turn is due before the first step (`callgate.agent.planning`)."""


@dataclass(kw_only=True)
class AgentResult:
    """How a run ended, or where it paused.

    ``observations`` holds every observation of the run in order, as the
    model saw it (bounded); ``messages`` the whole conversation in the
    model's provider format. A paused result (``paused``) names the approvals
    it waits for; pass it to `Agent.resume` once they are decided.
    """

    run_id: str
    reason: StopReason
    detail: str
    answer: str = ""
    steps: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    elapsed: float = 0.0
    """Active seconds (paused time excluded)."""
    observations: tuple[Observation, ...] = ()
    pending_approvals: tuple[str, ...] = ()
    messages: list[dict[str, Any]] = field(default_factory=list)
    error: BaseException | None = None
    """The exception that ended the run with ``model_error``."""
    _state: RunState | None = field(default=None, repr=False, compare=False)

    @property
    def paused(self) -> bool:
        """Whether the run waits for approvals and can be resumed."""
        return self.reason is StopReason.AWAITING_APPROVAL

    @property
    def answered(self) -> bool:
        """Whether the model ended the run itself (answered, refused or cut off)."""
        return self.reason in _DONE

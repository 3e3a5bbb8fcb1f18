"""The run's transcript in the ledger, and its replay.

The agent records its side of a run as audit events next to the gate's own
(``call.*``, ``attempt.*``, ``approval.*``), all under the run id:

| kind | data |
|---|---|
| ``agent.started`` | model, format, principal, system prompt, user message, tools shown, budgets |
| ``agent.model`` | step, the model's turn as appended to the conversation, its calls, usage |
| ``agent.observations`` | step, each call's status and stage, the messages sent back |
| ``agent.paused`` / ``agent.resumed`` | the approvals awaited / decided |
| ``agent.stopped`` | reason, detail, the answer, counters |
| ``security.boundary`` | an attempted crossing of the authority boundary |

Text is redacted as the gate redacts its records. `replay` reads the events
of one run back, in order, and rebuilds the conversation exactly as the
model received it (`Transcript.messages`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from callgate.calls import Observation, Status, ToolCall
from callgate.ledger.base import Ledger
from callgate.llms.base import Usage
from callgate.providers.base import Extraction
from callgate.redact import Redactor

__all__ = ["Recorder", "Transcript", "TranscriptEntry", "replay"]

AGENT_KINDS = (
    "agent.started",
    "agent.model",
    "agent.observations",
    "agent.paused",
    "agent.resumed",
    "agent.stopped",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptEntry:
    """One event of a run, as the ledger holds it."""

    kind: str
    run_id: str
    call_id: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    at: float = 0.0
    seq: int = 0


_LEAVES = frozenset({int, float, bool, type(None)})


def _strings(node: Any, out: list[str]) -> list[str]:
    kind = type(node)  # exact types first: the ABC checks below cost more than the walk
    if kind is str:
        out.append(node)
    elif kind is dict:
        for value in node.values():
            _strings(value, out)
    elif kind is list or kind is tuple:
        for value in node:
            _strings(value, out)
    elif kind in _LEAVES:
        pass
    elif isinstance(node, str):
        out.append(node)
    elif isinstance(node, Mapping):
        for value in node.values():
            _strings(value, out)
    elif isinstance(node, list | tuple):
        for value in node:
            _strings(value, out)
    return out


def _scrub(node: Any, redactor: Redactor, secrets: Sequence[str]) -> Any:
    if isinstance(node, str):
        return redactor.text(node, secrets)
    if isinstance(node, Mapping):
        return {k: _scrub(v, redactor, secrets) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [_scrub(v, redactor, secrets) for v in node]
    return node


class Recorder:
    """Writes a run's events to the ledger (redacted) and hands them to a listener."""

    __slots__ = ("ledger", "listener", "redactor", "run_id")

    def __init__(
        self,
        ledger: Ledger,
        run_id: str,
        redactor: Redactor,
        listener: Callable[[TranscriptEntry], None] | None,
    ) -> None:
        self.ledger = ledger
        self.run_id = run_id
        self.redactor = redactor
        self.listener = listener

    def __call__(
        self,
        kind: str,
        data: Mapping[str, Any],
        *,
        call_id: str | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        # One pass over all the text first: most events hold nothing to redact.
        joined = "\n".join(_strings(data, []))
        if secrets or self.redactor.text(joined) != joined:
            clean = _scrub(data, self.redactor, secrets)
        else:
            clean = data
        self.ledger.record_event(kind, run_id=self.run_id, call_id=call_id, data=clean)
        if self.listener is not None:
            self.listener(
                TranscriptEntry(kind=kind, run_id=self.run_id, call_id=call_id, data=clean)
            )

    # -- the events of a run, one method each --------------------------------------------

    def started(self, **data: Any) -> None:
        """``agent.started``: model, format, principal, system, user, tools, budgets, messages."""
        self("agent.started", data)

    def model_turn(
        self,
        step: int,
        turn: Sequence[Mapping[str, Any]],
        extraction: Extraction,
        usage: Usage | None,
        secrets: Sequence[str] = (),
    ) -> None:
        """``agent.model``: the model's turn as appended to the conversation, and its calls."""
        self(
            "agent.model",
            {
                "step": step,
                "messages": list(turn),
                "text": extraction.text,
                "calls": [_proposed(item) for item in extraction.items],
                "usage": dataclasses.asdict(usage) if usage else None,
            },
            secrets=secrets,
        )

    def observations(
        self, step: int, batch: Sequence[Observation], messages: Sequence[Mapping[str, Any]]
    ) -> None:
        """``agent.observations``: each call's outcome, and the messages sent back."""
        self(
            "agent.observations",
            {
                "step": step,
                "results": [
                    {
                        "call_id": o.call_id,
                        "tool": o.tool,
                        "status": o.status.value,
                        "stage": o.stage.value,
                        "rule": o.details[0].get("rule") if o.details else None,
                        "truncated_from": o.truncated_from,
                        "content": o.content,
                    }
                    for o in batch
                ],
                "messages": list(messages),
            },
        )

    def paused(self, step: int, waiting: Sequence[Observation]) -> None:
        """``agent.paused``: the approvals the run waits for."""
        approvals = [
            {"approval_id": o.approval_id, "call_id": o.call_id, "tool": o.tool} for o in waiting
        ]
        self("agent.paused", {"step": step, "approvals": approvals})

    def resumed(self, step: int, decisions: Sequence[Mapping[str, Any]]) -> None:
        """``agent.resumed``: how each awaited approval was decided, and by whom."""
        self("agent.resumed", {"step": step, "decisions": list(decisions)})

    def boundary(
        self, obs: Observation, rule: str, after_untrusted: bool, untrusted_calls: Sequence[str]
    ) -> None:
        """``security.boundary``: an attempted crossing of the authority boundary."""
        self(
            "security.boundary",
            {
                "tool": obs.tool,
                "rule": rule,
                "action": "escalated" if obs.status is Status.PENDING else "denied",
                "after_untrusted": after_untrusted,
                "untrusted_calls": list(untrusted_calls),
                "message": obs.content[:500],
            },
            call_id=obs.call_id,
        )

    def stopped(self, **data: Any) -> None:
        """``agent.stopped``: reason, detail, answer, counters."""
        self("agent.stopped", data)


def _proposed(item: ToolCall | Observation) -> dict[str, Any]:
    """A proposed call as the transcript shows it (an unreadable one as its rejection)."""
    if isinstance(item, Observation):
        return {"call_id": item.call_id, "tool": item.tool, "arguments": None}
    arguments = item.arguments
    if not isinstance(arguments, str):
        try:
            arguments = json.dumps(arguments, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            arguments = repr(arguments)
    return {"call_id": item.id, "tool": item.name, "arguments": arguments}


@dataclass(frozen=True, slots=True, kw_only=True)
class Transcript:
    """Everything the ledger holds about one run, in order."""

    run_id: str
    entries: tuple[TranscriptEntry, ...]

    @property
    def started(self) -> Mapping[str, Any]:
        """The data of the run's ``agent.started`` event (empty if the run was not an agent's)."""
        return next((e.data for e in self.entries if e.kind == "agent.started"), {})

    @property
    def stopped(self) -> Mapping[str, Any] | None:
        """The data of the last ``agent.stopped`` event, or None while the run is open."""
        found = [e.data for e in self.entries if e.kind == "agent.stopped"]
        return found[-1] if found else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation as the model received it: the user's message, then each model
        turn and the observations sent back, in the model's provider format."""
        out: list[dict[str, Any]] = []
        for entry in self.entries:
            if entry.kind in ("agent.started", "agent.model", "agent.observations"):
                out.extend(entry.data.get("messages", ()))
        return out

    def of_kind(self, prefix: str) -> list[TranscriptEntry]:
        """The entries whose kind starts with ``prefix`` (``"call."``, ``"security."``...)."""
        return [e for e in self.entries if e.kind.startswith(prefix)]


def replay(ledger: Ledger, run_id: str) -> Transcript:
    """The transcript of run ``run_id``, rebuilt from the ledger's audit trail."""
    entries = tuple(
        TranscriptEntry(
            kind=r.kind, run_id=r.run_id, call_id=r.call_id, data=r.data, at=r.at, seq=r.seq
        )
        for r in ledger.audit()
        if r.run_id == run_id
    )
    return Transcript(run_id=run_id, entries=entries)

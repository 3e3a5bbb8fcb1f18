"""The records that flow through the pipeline: proposed calls and observations.

A `ToolCall` is what the model proposed; an `Observation` is what callgate
answers, one per call, carrying the id of the call it answers. Both are plain
keyword-only dataclasses so that fields can be added without breaking callers.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Observation",
    "Provenance",
    "RawCall",
    "Stage",
    "Status",
    "ToolCall",
]


class Status(enum.StrEnum):
    """What happened to a call; see docs/architecture.md's table."""

    OK = "ok"
    """The handler returned and the postcondition, if any, held."""
    ERROR = "error"
    """A known failure before commit: the effect did not happen."""
    UNKNOWN = "unknown"
    """Timeout, crash or unexpected exception: the effect may have happened."""
    REJECTED = "rejected"
    """Stopped before execution; ``stage`` says where."""
    PENDING = "pending"
    """Waiting for a human approval bound to this exact call."""


class Stage(enum.StrEnum):
    """The pipeline stage that produced an observation: the stages' names in the docs, in
    order (docs/architecture.md, "The path of one call").

    Ledgers written before the stages were named so hold ``schema``, ``semantic``,
    ``policy`` and ``approval``; ``Stage(old)`` reads each as the stage it now is
    (``_missing_``). ``Stage.SCHEMA``, ``Stage.POLICY`` and ``Stage.APPROVAL`` are the
    old names of three members, kept so code written against them still runs.
    """

    PARSE = "parse"
    VALIDATE = "validate"
    AUTHORIZE = "authorize"
    APPROVE = "approve"
    SCHEDULE = "schedule"
    EXECUTE = "execute"
    VERIFY = "verify"

    SCHEMA = "validate"
    POLICY = "authorize"
    APPROVAL = "approve"

    @classmethod
    def _missing_(cls, value: object) -> Stage | None:
        """A stage value an older callgate recorded, read as the stage it now is."""
        renamed = _RENAMED_STAGES.get(value) if isinstance(value, str) else None
        return cls(renamed) if renamed is not None else None


_RENAMED_STAGES: dict[str, str] = {
    "schema": "validate",
    "semantic": "validate",  # the tool's own checks: validation's second half
    "policy": "authorize",
    "approval": "approve",
}
"""Stage values of ledgers written before the stages took the docs' names."""


class Provenance(enum.StrEnum):
    """Where the content of an observation comes from.

    Tool output is ``untrusted`` data: it may change what the agent reports,
    never what it is allowed to do. Messages callgate writes itself (a
    rejection, a pending approval) are ``gate``.
    """

    UNTRUSTED = "untrusted"
    TRUSTED = "trusted"
    GATE = "gate"


@dataclass(frozen=True, slots=True, kw_only=True)
class RawCall:
    """A call as a provider format delivered it, before its arguments are parsed."""

    id: str
    name: str
    arguments_text: str
    format: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A proposed call: an id, a tool name, and arguments.

    ``arguments`` is either the JSON text a model sent or an already decoded
    object. ``repaired`` records that a provider adapter repaired the text
    before it reached the gate. ``after`` names calls of the same batch whose
    outcome this one depends on.
    """

    id: str
    name: str
    arguments: str | Mapping[str, Any] = field(default_factory=dict)
    repaired: bool = False
    after: tuple[str, ...] = ()


@dataclass(slots=True, kw_only=True)
class Observation:
    """callgate's answer to one proposed call.

    ``content`` is the text to show the model (the serialized, possibly cut,
    result for ``ok``; the model-facing message otherwise). ``result`` is the
    handler's return value, for the application. ``retryable`` says whether
    sending the call again is safe: no effect can be doubled by it.
    (Not frozen only because frozen dataclasses cost 3x to build on the hot
    path; treat it as read-only.)
    """

    call_id: str
    tool: str
    status: Status
    stage: Stage
    content: str
    retryable: bool
    provenance: Provenance = Provenance.GATE
    result: Any = None
    details: tuple[Mapping[str, Any], ...] = ()
    approval_id: str | None = None
    tool_version: str | None = None
    repaired: bool = False
    attempts: int = 0
    truncated_from: int | None = None

    @property
    def is_error(self) -> bool:
        """True for every status but ``ok``, as provider formats want it."""
        return self.status is not Status.OK

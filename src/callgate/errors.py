"""Every exception callgate defines, in one place.

Three channels are kept apart:

* mistakes the *model* can fix never raise out of the gate; they become
  `Observation`s with status ``rejected`` (see ``calls.py``);
* mistakes the *developer* made raise at definition time (`DefinitionError`);
* handlers report their outcome with `ToolFailure` (known failure, nothing
  committed) or `OutcomeUnknown` (the effect may have happened).

Anything else is a bug and propagates.

    Exception
    └── CallgateError
        ├── DefinitionError        bad tool name, bad template, bad policy
        ├── ToolFailure            raised by a handler: known failure, no effect
        ├── OutcomeUnknown         raised by a handler: the effect may have happened
        ├── ArgumentError          raised by a semantic check: names the field
        ├── ApprovalError          an approval that does not exist, expired or was used
        ├── GateClosed             a closed gate was asked to run or submit something
        └── LedgerError            a ledger cannot do what was asked (missing call,
                                   forbidden transition, newer schema)
"""

from __future__ import annotations

__all__ = [
    "ApprovalError",
    "ArgumentError",
    "CallgateError",
    "DefinitionError",
    "GateClosed",
    "LedgerError",
    "OutcomeUnknown",
    "ToolFailure",
]


class CallgateError(Exception):
    """Base class of every exception callgate defines."""


class DefinitionError(CallgateError):
    """A developer mistake found when a tool, registry or policy is defined."""


class ToolFailure(CallgateError):
    """Raised by a handler: the operation failed and nothing was committed.

    The message is shown to the model, so write it for the model: what was
    wrong and what to do instead. ``retryable`` says whether the same call may
    succeed later (a busy resource) or will fail again (a stale revision).
    """

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable


class OutcomeUnknown(CallgateError):
    """Raised by a handler: the effect may or may not have happened.

    Use it when a downstream request timed out or a connection dropped after
    the request was sent. The call is recorded as ``unknown`` and is never
    retried blindly. ``final``: no further attempt may be made (the call's time
    is spent), so the gate records no retry of a read.
    """

    def __init__(self, message: str, *, final: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.final = final


class ArgumentError(CallgateError):
    """Raised by a tool's semantic check: an argument is well typed but wrong.

    ``field`` names the argument, ``message`` says what is wrong and what to do.
    """

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


class ApprovalError(CallgateError):
    """A person or trusted code acted on an approval that cannot take that action."""


class GateClosed(CallgateError):
    """A gate closed by `Gate.close` (or the end of its ``with`` block) was asked to start a
    run or submit calls: nothing was run. The message says to make a new `Gate`."""


class LedgerError(CallgateError):
    """A ledger cannot do what was asked: a missing call, a state that forbids the change,
    a schema newer than this version of callgate. The message says what to do instead."""

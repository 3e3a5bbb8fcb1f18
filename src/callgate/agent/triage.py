"""Trusted decisions about each observation: back to the model, recovery, or the end of the run.

The loop sends every observation back to the model, except that, decided here:

* ``pending`` (a person must approve) pauses the run: nothing is sent until
  the decision, then the batch is answered whole;
* ``unknown`` from a side-effecting tool, which its reconcile hook (run by
  the gate) could not settle, ends the run as ``unresolved``: a person must
  settle it from the ledger, and the model is never invited to retry it;
* an attempted crossing of the authority boundary is recorded as a
  ``security.boundary`` event (and ends the run when the agent is so
  configured): a call denied for the provenance of a sink value or for being
  outside the run's intent, or escalated to a person for either, and, once the
  run has read untrusted content, a call denied because its effect is not
  granted or a policy rule forbids it;
* the same failing call (same tool, same canonical arguments, same
  rejection) proposed ``limit`` times ends the run as ``oscillation``.

A failed call is never replaced by another tool: the loop has no fallback,
and every call the model proposes next is checked under the same authority.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from callgate.calls import Observation, Stage, Status, ToolCall
from callgate.canonical import canonical_json

__all__ = ["Oscillation", "boundary_rule", "failure_key"]

_ALWAYS = frozenset({"untrusted_sink", "outside_intent", "integrity_effect"})
_AFTER_UNTRUSTED = frozenset({"effect_not_granted", "policy_denied"})


def _rules(obs: Observation) -> tuple[str, ...]:
    return tuple(str(d.get("rule", "")) for d in obs.details if isinstance(d, Mapping))


def boundary_rule(obs: Observation, read_untrusted: bool) -> str | None:
    """The rule of an attempted boundary crossing this observation shows, or None."""
    if obs.status is Status.PENDING:
        return next((r for r in _rules(obs) if r.startswith(("provenance", "intent"))), None)
    if obs.status is not Status.REJECTED or obs.stage is not Stage.AUTHORIZE:
        return None
    for rule in _rules(obs):
        if rule in _ALWAYS or (read_untrusted and rule in _AFTER_UNTRUSTED):
            return rule
    return None


def _canonical_arguments(arguments: str | Mapping[str, Any]) -> str:
    if isinstance(arguments, str):
        try:
            return canonical_json(json.loads(arguments))
        except (ValueError, TypeError):
            return arguments.strip()
    try:
        return canonical_json(dict(arguments))
    except (TypeError, ValueError):
        return repr(arguments)


def failure_key(call: ToolCall, obs: Observation) -> tuple[str, ...] | None:
    """What makes two failures "the same": tool, canonical arguments, status, stage, rules.

    None for an observation that is not a failure the model caused (``ok``,
    ``pending``, ``unknown``).
    """
    if obs.status not in (Status.REJECTED, Status.ERROR):
        return None
    return (
        call.name,
        _canonical_arguments(call.arguments),
        obs.status.value,
        obs.stage.value,
        *_rules(obs),
    )


class Oscillation:
    """Counts repeated failures; says when the same one has been proposed ``limit`` times."""

    __slots__ = ("_counts", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._counts: dict[tuple[str, ...], int] = {}

    def see(self, call: ToolCall, obs: Observation) -> str | None:
        """Count one observation; the reason to stop when its failure reached the limit."""
        key = failure_key(call, obs)
        if key is None:
            return None
        count = self._counts.get(key, 0) + 1
        self._counts[key] = count
        if count < self.limit:
            return None
        rules = ", ".join(r for r in key[4:] if r) or obs.status.value
        return (
            f"the model proposed the same failing call {count} times: {call.name}({key[1][:200]}) "
            f"ended {obs.status.value} at stage {obs.stage.value} ({rules})"
        )

"""Results bounded before they re-enter the context, without losing them.

An ``ok`` observation longer than the agent's ``result_chars`` (or already
cut by its tool's ``max_result_chars``) reaches the model cut, with a handle:
its observation id (the call id) and the offset to read on from. The
built-in read-only tool ``read_result(observation_id, offset, limit)`` pages
through the full text, as the ledger recorded it (secrets redacted), or as
the run saw it when the ledger holds no outcome for the call.

``read_result`` runs through a gate of its own that shares the agent's
ledger and run id, so its calls are parsed, validated, recorded and answered
like any other; it reads only results of its own run that were cut.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

from pydantic import Field

from callgate.calls import Observation, Status
from callgate.errors import ToolFailure
from callgate.ledger.base import Ledger
from callgate.tools import CallContext, Registry, ToolSpec, make_spec

__all__ = ["READ_RESULT", "ResultStore", "paging_registry"]

READ_RESULT = "read_result"
"""The name of the built-in paging tool."""

_STORE = "callgate.results"
"""Key of the run's `ResultStore` in the paging run's trusted context."""


class ResultStore:
    """The handles of one run's cut results, and the text behind them."""

    __slots__ = ("_cut", "_texts", "ledger", "page_chars", "run_id")

    def __init__(self, ledger: Ledger, run_id: str, page_chars: int) -> None:
        self.ledger = ledger
        self.run_id = run_id
        self.page_chars = page_chars
        self._cut: dict[str, int] = {}
        self._texts: dict[str, str] = {}

    def bound(self, obs: Observation) -> Observation:
        """``obs`` as the model may see it: a long ``ok`` result is cut, with a handle."""
        if obs.status is not Status.OK:
            return obs
        if obs.truncated_from is None and len(obs.content) <= self.page_chars:
            return obs
        if obs.truncated_from is None:
            self._texts[obs.call_id] = obs.content
        total = obs.truncated_from or len(obs.content)
        full = self.text(obs.call_id)
        shown = (full if full is not None else obs.content)[: self.page_chars]
        self._cut[obs.call_id] = total
        return dataclasses.replace(
            obs, content=shown + self._note(obs.call_id, len(shown), total), truncated_from=total
        )

    def text(self, call_id: str) -> str | None:
        """The full text of a result of this run: the ledger's record, else as observed."""
        for attempt in reversed(self.ledger.attempts(self.run_id, call_id)):
            if attempt.outcome is not None and attempt.outcome.status == "ok":
                return attempt.outcome.content
        return self._texts.get(call_id)

    def page(self, call_id: str, offset: int, limit: int) -> str:
        """Characters ``offset`` to ``offset + limit`` of a cut result, with where it stands."""
        if call_id not in self._cut:
            known = ", ".join(sorted(self._cut)[:10]) or "none so far"
            raise ToolFailure(
                f"no cut result has the observation id {call_id!r} in this run; "
                f"ids of cut results: {known}",
                retryable=False,
            )
        full = self.text(call_id) or ""
        if offset >= len(full):
            raise ToolFailure(
                f"offset {offset} is past the end: result {call_id!r} has {len(full):,} characters",
                retryable=False,
            )
        limit = min(limit, max(100, self.page_chars - 300))  # the page fits, note included
        chunk = full[offset : offset + limit]
        end = offset + len(chunk)
        head = f"[result {call_id}, characters {offset:,}-{end:,} of {len(full):,}]\n"
        tail = self._note(call_id, end, len(full)) if end < len(full) else "\n[end of result]"
        return head + chunk + tail

    @staticmethod
    def _note(call_id: str, shown: int, total: int) -> str:
        return (
            f"\n[callgate: result cut at {shown:,} of {total:,} characters; call {READ_RESULT} "
            f'with observation_id="{call_id}" and offset={shown} to read on]'
        )


def read_result(
    observation_id: str,
    ctx: CallContext,
    offset: Annotated[int, Field(ge=0)] = 0,
    limit: Annotated[int, Field(ge=1, le=100_000)] = 4000,
) -> str:
    """Read more of a tool result that was cut before you saw it.

    Args:
        observation_id: the id given in the cut result's note (the id of the call it answers).
        offset: the character to start from, as given in the note.
        limit: how many characters to read (at most the page size).
    """
    store = ctx.context[_STORE]
    assert isinstance(store, ResultStore)
    return store.page(observation_id, offset, limit)


READ_RESULT_EFFECT = "read:agent_results"
"""The effect of ``read_result``: the run's own cut results, granted by the agent only
to the paging gate's runs."""

READ_RESULT_SPEC: ToolSpec = make_spec(
    read_result,
    name=READ_RESULT,
    effects=READ_RESULT_EFFECT,
    risk="read",
    max_result_chars=200_000,
)


def paging_registry() -> Registry:
    """A registry holding only ``read_result``."""
    return Registry([READ_RESULT_SPEC])


def store_context(store: ResultStore) -> dict[str, ResultStore]:
    """The trusted context that hands ``store`` to ``read_result``."""
    return {_STORE: store}

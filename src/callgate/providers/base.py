"""What every provider format shares: the `Extraction` record and small helpers.

A provider format is three functions (see ``providers/__init__.py``):
``extract(response) -> Extraction``, ``render(observations) -> messages``
and ``tool_definitions(tools) -> list[dict]``. The helpers here keep the
rules that are the same for every format in one place: duplicate ids,
calls cut off mid-arguments, synthetic ids for formats without ids, and
the text a model reads for an observation.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from callgate.calls import Observation, Stage, Status, ToolCall
from callgate.canonical import digest
from callgate.errors import DefinitionError
from callgate.messages import Problem, Rejection, bounded
from callgate.tools import Registry, ToolSpec

__all__ = ["Extraction"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Extraction:
    """What one model response proposed: calls, prose, and calls that could not be read.

    ``items`` holds, in the order the response proposed them, a `ToolCall`
    for each call to submit to the gate and an `Observation` (a ``parse``
    rejection) for each call that could not even be extracted: a duplicate
    id, arguments cut off by the token limit or a broken stream. Those never
    reach the gate, but the model still gets an answer for each of them.
    """

    items: tuple[ToolCall | Observation, ...] = ()
    text: str = ""
    """The response's prose, without the calls."""
    refusal: str | None = None
    """The model's refusal, when it declined to answer."""
    stop_reason: str | None = None
    """Why the model stopped, as the provider says it (``tool_calls``, ``max_tokens``, ...)."""
    truncated: bool = False
    """The response did not end normally (token limit, content filter, refusal, a stream
    that ended early): calls at its end may be incomplete, and those that are were rejected."""

    @property
    def calls(self) -> list[ToolCall]:
        """The calls to submit to the gate, in response order."""
        return [item for item in self.items if isinstance(item, ToolCall)]

    @property
    def rejected(self) -> list[Observation]:
        """Rejections of the calls that could not be extracted, in response order."""
        return [item for item in self.items if isinstance(item, Observation)]

    def merge(self, observations: Sequence[Observation]) -> list[Observation]:
        """One observation per proposed call, in response order, ready to render.

        ``observations`` are the gate's answers to `calls` (``run.submit(ex.calls)``);
        the extraction's own rejections are put back in their places.
        """
        by_id = {obs.call_id: obs for obs in observations}
        calls = self.calls
        missing = [c.id for c in calls if c.id not in by_id]
        if missing or len(observations) != len(calls):
            raise ValueError(
                f"merge() needs exactly one observation per extracted call; "
                f"missing {missing}, got {len(observations)} for {len(calls)} calls. "
                "Pass the list that run.submit(extraction.calls) returned."
            )
        return [by_id[item.id] if isinstance(item, ToolCall) else item for item in self.items]


# -- helpers shared by the format modules ------------------------------------

Tools = Registry | Iterable[ToolSpec]


def specs_of(tools: Tools) -> list[ToolSpec]:
    """The tool specs of a registry or an iterable of specs, checked."""
    specs = list(tools)
    for spec in specs:
        if not isinstance(spec, ToolSpec):
            raise DefinitionError(
                f"tool_definitions() takes a Registry or ToolSpecs (decorate functions with "
                f"@tool), got {type(spec).__name__}"
            )
    return specs


def as_data(response: Any) -> Any:
    """A response as plain JSON data: SDK models (Pydantic) are dumped, the rest kept."""
    dump = getattr(response, "model_dump", None)
    if callable(dump) and not isinstance(response, Mapping):
        return dump(mode="json", by_alias=True)
    return response


def pick(node: Any, *names: str) -> Any:
    """``node[name]`` for the first name present, or None; never raises on odd data."""
    if isinstance(node, Mapping):
        for name in names:
            value = node.get(name)
            if value is not None:
                return value
    return None


def as_list(value: Any) -> list[Any]:
    """``value`` if it is a list, else an empty list (provider data may be malformed)."""
    return value if isinstance(value, list) else []


def as_text(value: Any) -> str:
    """``value`` if it is a string, else empty."""
    return value if isinstance(value, str) else ""


def is_complete_json(text: str) -> bool:
    """Whether ``text`` is complete JSON as it stands, without any repair."""
    if not text.strip():
        return True
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def synthetic_id(*parts: str) -> str:
    """A stable call id for formats that give none: equal inputs give equal ids.

    Built from the response's own content and the call's position in it, so
    re-extracting the same response yields the same ids (and the ledger
    recognises the calls), while other responses get other ids.
    """
    return "call_" + digest(*parts)[:24]


def rejected(call_id: str, tool: str, problem: Problem, advice: str) -> Observation:
    """A ``parse`` rejection for a call that could not be extracted."""
    rejection = Rejection(stage=Stage.PARSE, problems=(problem,), advice=advice)
    return Observation(
        call_id=call_id,
        tool=tool,
        status=Status.REJECTED,
        stage=Stage.PARSE,
        content=rejection.message,
        retryable=True,
        details=(problem.as_dict(),),
    )


def cut_off(call_id: str, tool: str, why: str) -> Observation:
    """The rejection of a call whose arguments were cut off before they were complete."""
    return rejected(
        call_id,
        tool,
        Problem(
            rule="incomplete_call",
            message=f"the arguments of this call were cut off ({why}) before they were complete",
        ),
        "Nothing was executed. Send the whole call again; keep the arguments short "
        "if they were cut by the output length limit.",
    )


_TOKEN_LIMIT = frozenset(
    {"length", "max_tokens", "max_output_tokens", "MAX_TOKENS", "model_context_window_exceeded"}
)


def stopped_early(reason: str) -> str:
    """Why a call was cut off, from the provider's stop reason, for the rejection's message."""
    if reason in _TOKEN_LIMIT:
        return "the response reached the output token limit"
    return f"the response stopped early ({reason})"


def unreadable(call_id: str, tool: str, what: str) -> Observation:
    """The rejection of a call entry the provider delivered in a shape that cannot be read."""
    return rejected(
        call_id,
        tool,
        Problem(rule="malformed_call", message=f"the tool call could not be read: {what}"),
        "Nothing was executed. Send the call again as a proper tool call.",
    )


def finish(items: Iterable[ToolCall | Observation], **fields: Any) -> Extraction:
    """The extraction of ``items``, with every call whose id is not unique rejected.

    Ids pair each call with its answer; a repeated id cannot be answered
    unambiguously, so none of the calls sharing it is executed.
    """
    items = list(items)
    ids = [item.id for item in items if isinstance(item, ToolCall)]
    if len(set(ids)) < len(ids):
        counts = Counter(ids)
        items = [
            _duplicate(item, counts[item.id])
            if isinstance(item, ToolCall) and counts[item.id] > 1
            else item
            for item in items
        ]
    return Extraction(items=tuple(items), **fields)


def _duplicate(call: ToolCall, times: int) -> Observation:
    shown = bounded(call.id, 80)
    return rejected(
        call.id,
        call.name,
        Problem(
            rule="call_id",
            message=f"the call id '{shown}' appears {times} times in this response",
        ),
        "Give every call its own id; none of the calls with this id was executed.",
    )


def observation_text(obs: Observation) -> str:
    """The text a model reads for an observation, in every format.

    The content of an ``ok`` observation as it is; any other status is named
    first (``[error] ...``, ``[unknown] ...``) so that formats without an
    error flag still tell the model what happened.
    """
    if obs.status is Status.OK:
        return obs.content
    return f"[{obs.status.value}] {obs.content}"

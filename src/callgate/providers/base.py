"""What every provider format shares: the `Extraction` record and small helpers.

A provider format is three functions (see ``providers/__init__.py``):
``extract(response) -> Extraction``, ``render(observations) -> messages``
and ``tool_definitions(tools) -> list[dict]``. The helpers here keep the
rules that are the same for every format in one place: duplicate ids,
calls cut off mid-arguments, synthetic ids for formats without ids, the
size bounds every format enforces, and the text a model reads for an
observation.

Every helper here runs in time linear in its input and never raises on
model content (lone surrogates, huge numbers, deep nesting included).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from callgate.calls import Observation, Stage, Status, ToolCall
from callgate.canonical import digest
from callgate.errors import DefinitionError
from callgate.render import Problem, Rejection, bounded
from callgate.tools import Registry, ToolSpec

__all__ = ["MAX_CALLS", "MAX_RESPONSE_CHARS", "Extraction"]

MAX_RESPONSE_CHARS = 1_000_000
"""The most model text one response may hold for callgate to read it.

For `text`, the length of the text; for the other formats, the argument
text of all calls of one response together (decoded arguments counted as
their JSON strings' characters plus one per value). A response over it is
not parsed: each of its calls (or, for `text`, the one response) gets a
``parse`` rejection and nothing runs. Why this number: a response is at
most a model's output token limit, today at most 128k tokens, about
500,000 characters; twice that leaves room for models to come, while
extraction, linear in its input, stays well under a second at the bound
for every shape of input (``benchmarks/extraction_scaling.py``).
"""

MAX_CALLS = 1_000
"""The most calls one response may propose for callgate to take any of them.

Parallel calls in real responses number in the tens; a thousand is far
beyond any agent's turn but cheap to read. A response with more is not run
at all: each of its calls gets a ``parse`` rejection.
"""


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
    """A response as plain JSON data: SDK models (Pydantic) are dumped, the rest kept.

    A model holding data nested past Pydantic's serialization depth (a hostile
    server's arguments, thousands of levels deep) is converted without recursion
    instead, so that its calls are still read (and then rejected at ``parse``).
    """
    dump = getattr(response, "model_dump", None)
    if callable(dump) and not isinstance(response, Mapping):
        try:
            return dump(mode="json", by_alias=True)
        except (ValueError, RecursionError):
            return _plain(response)
    return response


def _plain(root: Any) -> Any:
    """``root`` with every Pydantic model in it turned into a dict (by alias), iteratively."""
    out: dict[str, Any] = {}
    stack: list[tuple[Any, Any, Any]] = [(root, out, "v")]
    while stack:
        node, parent, key = stack.pop()
        if isinstance(node, BaseModel):
            fields = type(node).model_fields
            value: Any = {}
            for name, info in fields.items():
                stack.append((getattr(node, name, None), value, info.alias or name))
        elif isinstance(node, Mapping):
            value = {}
            for k, v in node.items():
                stack.append((v, value, str(k)))
        elif isinstance(node, list | tuple):
            value = [None] * len(node)
            for i, v in enumerate(node):
                stack.append((v, value, i))
        else:
            value = node
        parent[key] = value
    return out["v"]


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
    """Whether ``text`` is complete JSON as it stands, without any repair.

    Empty (or blank) text is not: under a response that did not end
    normally, ``""`` may be the start of arguments the limit cut, and is
    never read as ``{}``. Text over `MAX_RESPONSE_CHARS` is not read.
    """
    if len(text) > MAX_RESPONSE_CHARS or not text.strip():
        return False
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


def id_series(kind: str, content: str) -> Callable[[int], str]:
    """Synthetic ids for the calls of one response: ``ids(position)``.

    ``content`` (the whole response) is hashed once, not once per call, so
    giving ids to n calls costs one pass over the response.
    """
    seed = digest(kind, content)
    return lambda position: synthetic_id(seed, str(position))


def fingerprint(value: Any) -> str:
    """Canonical JSON text of decoded data, for hashing; never raises.

    Equal data give equal text. Data ``json.dumps`` cannot write (nesting
    deeper than the interpreter's recursion limit, integers of more than
    4,300 digits) are written by an iterative walk instead.
    """
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    except (ValueError, RecursionError):
        return "".join(_tokens(value))


def _tokens(value: Any) -> Iterable[str]:
    """The canonical JSON tokens of ``value``, depth first, without recursion."""
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, _Literal):
            yield node.text
        elif isinstance(node, Mapping):
            entries = sorted(((str(k), v) for k, v in node.items()), key=lambda kv: kv[0])
            stack.append(_Literal("}"))
            for n, (key, item) in reversed(list(enumerate(entries))):
                stack.append(item)
                stack.append(_Literal(("," if n else "") + json.dumps(key) + ":"))
            yield "{"
        elif isinstance(node, list | tuple):
            stack.append(_Literal("]"))
            for n, item in reversed(list(enumerate(node))):
                stack.append(item)
                if n:
                    stack.append(_Literal(","))
            yield "["
        elif isinstance(node, int) and not isinstance(node, bool):
            yield hex(node)  # any size; never collides with a JSON number's decimal text
        elif isinstance(node, str | float | bool) or node is None:
            yield json.dumps(node)
        else:
            yield json.dumps(str(node))


@dataclass(frozen=True, slots=True)
class _Literal:
    text: str


def json_size(value: Any, limit: int = MAX_RESPONSE_CHARS) -> int:
    """The size of decoded data: its strings' characters plus one per value.

    Walks iteratively (any depth) and stops as soon as the size passes
    ``limit``, so it costs at most ``limit`` steps however large the data.
    """
    size = 0
    stack = [value]
    while stack and size <= limit:
        node = stack.pop()
        size += 1
        if isinstance(node, str):
            size += len(node)
        elif isinstance(node, Mapping):
            for key, item in node.items():
                size += len(key) if isinstance(key, str) else 1
                stack.append(item)
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return size


def checked(response: Any, *kinds: type, format_name: str) -> Any:
    """The response as plain data, if it is of a kind the format reads; else `TypeError`.

    The kind of value passed to ``extract`` is the developer's choice, never
    the model's (an SDK returns its objects, JSON decodes to a dict), so a
    value of another kind is a mistake in the calling code and raises at once.
    Whatever the model put inside a value of the right kind never raises.
    """
    data = as_data(response)
    if isinstance(data, kinds):
        return data
    wanted = " or ".join(_KIND_NAMES.get(kind, kind.__name__) for kind in kinds)
    raise TypeError(
        f"{format_name}() takes {wanted}, got {type(response).__name__}; "
        "pass the provider's response as its SDK returns it or as decoded JSON"
    )


_KIND_NAMES: dict[type, str] = {
    Mapping: "a response (an SDK object or a dict of decoded JSON)",
    list: "a list of output items",
    str: "the model's text (a str)",
}


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
            field="arguments",
            expected="complete arguments from a response that ended normally",
            actual="arguments that may have been cut off",
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
    if not reason.strip():
        return "the response gave no reason for stopping"
    return f"the response stopped early ({bounded(reason, 60)})"


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
    unambiguously, so none of the calls sharing it is executed. A response
    over `MAX_CALLS` calls or `MAX_RESPONSE_CHARS` of arguments has all its
    calls rejected instead (`too_large`).
    """
    items = list(items)
    problem = _over_bounds(items)
    if problem is not None:
        rejection = too_large(problem)
        return Extraction(items=tuple(rejection(*_id_and_tool(item)) for item in items), **fields)
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


def _id_and_tool(item: ToolCall | Observation) -> tuple[str, str]:
    if isinstance(item, ToolCall):
        return item.id, item.name
    return item.call_id, item.tool


def _over_bounds(items: Sequence[ToolCall | Observation]) -> Problem | None:
    """What makes a response's calls too many or too large to take, if anything."""
    if len(items) > MAX_CALLS:
        return too_many_calls(len(items))
    size = 0
    for item in items:
        if isinstance(item, ToolCall):
            arguments = item.arguments
            size += len(arguments) if isinstance(arguments, str) else json_size(arguments)
            if size > MAX_RESPONSE_CHARS:
                return oversized("the arguments of the calls in this response are")
    return None


def too_many_calls(count: int) -> Problem:
    """The problem of a response that proposed ``count`` calls, over `MAX_CALLS`."""
    return Problem(
        rule="too_many_calls",
        expected=f"at most {MAX_CALLS:,} calls in one response",
        actual=f"{count:,} calls",
        message=f"the response proposed {count:,} calls, more than the "
        f"{MAX_CALLS:,} callgate takes from one response",
    )


def oversized(what: str, size: int | None = None) -> Problem:
    """The problem of a response whose ``what`` is over `MAX_RESPONSE_CHARS` (``size`` if known)."""
    amount = f"over {MAX_RESPONSE_CHARS:,}" if size is None else f"{size:,}"
    amount += " characters"
    return Problem(
        rule="response_too_large",
        expected=f"at most {MAX_RESPONSE_CHARS:,} characters",
        actual=amount,
        message=f"{what} {amount} long; callgate reads at most {MAX_RESPONSE_CHARS:,} "
        "characters of one response, so it was not parsed",
    )


def too_large(problem: Problem) -> Callable[[str, str], Observation]:
    """``reject(call_id, tool)``: the rejection of each call of a response over a bound."""
    advice = (
        "Nothing was executed. Propose fewer calls per response, and keep arguments short: "
        "put large content in a file or resource and pass its name."
    )
    rejection = Rejection(stage=Stage.PARSE, problems=(problem,), advice=advice)
    content, details = rejection.message, (problem.as_dict(),)  # the same for every call

    def reject(call_id: str, tool: str) -> Observation:
        return Observation(
            call_id=call_id,
            tool=tool,
            status=Status.REJECTED,
            stage=Stage.PARSE,
            content=content,
            retryable=True,
            details=details,
        )

    return reject


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

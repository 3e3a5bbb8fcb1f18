"""`ScriptedModel`: a model that replays a script, offline. The default for tests and the demo.

A script is a sequence of responses, one per model call, or a function of
the request that returns the next response. Each response is one of:

* a `Turn` (``answer("...")`` or ``calls(("tool", {...}), ...)``), written
  once and rendered in whichever provider format the model speaks;
* a recorded provider payload (a chat completion, a Responses object, an
  Anthropic message, a Gemini response as decoded JSON, or text for the
  ``text`` format), replayed as it is;
* a function ``(request) -> Turn | payload``, to react to the observations so
  far (`latest_results` reads them in any format).

```python
model = ScriptedModel([
    calls(("get_order", {"order_id": "o-1"})),
    lambda request: answer("Order o-1: " + latest_results(request)[0].text),
])
```
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from callgate.errors import DefinitionError
from callgate.llms.base import Model, ModelRequest, ModelResponse, Usage
from callgate.llms.formats import get_format
from callgate.providers.base import as_list

__all__ = ["Result", "ScriptedModel", "Turn", "answer", "calls", "latest_results"]

CallSpec = tuple[str, Mapping[str, Any] | str] | tuple[str, Mapping[str, Any] | str, str]
"""``(tool, arguments)`` or ``(tool, arguments, call_id)``; arguments as an object or raw text."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """One model turn, independent of the provider format: prose and proposed calls."""

    text: str = ""
    calls: tuple[tuple[str, str, Mapping[str, Any] | str], ...] = ()
    """``(call_id, tool, arguments)``; an empty id is filled in as ``call_<step>_<n>``."""
    usage: Usage | None = None
    truncated: bool = False
    """Render the turn as cut off by the output token limit."""


def answer(text: str, *, usage: Usage | None = None) -> Turn:
    """A final answer without tool calls."""
    return Turn(text=text, usage=usage)


def calls(*specs: CallSpec, text: str = "", usage: Usage | None = None) -> Turn:
    """A turn proposing ``specs`` (``("tool", {"arg": 1})`` or ``("tool", '{"raw": ', "id")``)."""
    parsed = []
    for spec in specs:
        if not isinstance(spec, tuple) or len(spec) not in (2, 3):
            raise DefinitionError(
                "calls() takes (tool, arguments) or (tool, arguments, call_id) tuples, "
                f"got {spec!r}"
            )
        call_id = spec[2] if len(spec) == 3 else ""
        parsed.append((call_id, spec[0], spec[1]))
    return Turn(text=text, calls=tuple(parsed), usage=usage)


Response = Turn | Mapping[str, Any] | str | list[Any]
Script = Sequence[Response | Callable[[ModelRequest], Any]] | Callable[[ModelRequest], Any]


class ScriptedModel(Model):
    """Replays a script of responses in one provider format; see the module docstring.

    Args:
        script: the responses, in order, or a function of the request.
        format: the provider format of the responses (default ``openai_chat``).
        name: the model name shown in transcripts.
        keep_requests: keep every request in ``requests`` (for tests).
    """

    def __init__(
        self,
        script: Script,
        *,
        format: str = "openai_chat",
        name: str = "scripted",
        keep_requests: bool = False,
    ) -> None:
        self.format = get_format(format).name
        self._usage = get_format(format).usage
        self.name = name
        self._script = script
        self._next = 0
        self.keep_requests = keep_requests
        self.requests: list[ModelRequest] = []

    def reset(self) -> None:
        """Start the script again from its first response."""
        self._next = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.keep_requests:  # the agent's list grows: keep a snapshot
            self.requests.append(dataclasses.replace(request, messages=list(request.messages)))
        script = self._script
        if callable(script):
            item: Any = script(request)
        else:
            if self._next >= len(script):
                raise DefinitionError(
                    f"ScriptedModel ran out of responses: the script has {len(script)} and "
                    f"the agent asked for response {self._next + 1} (step {request.step})"
                )
            item = script[self._next]
            self._next += 1
            if callable(item):
                item = item(request)
        if isinstance(item, Turn):
            return ModelResponse(
                raw=render_turn(item, self.format, request.step, self.name),
                usage=item.usage,
                model=self.name,
            )
        return ModelResponse(raw=item, usage=self._usage(item), model=self.name)


# -- rendering a Turn in each format ---------------------------------------------------


def _arguments_text(arguments: Mapping[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _arguments_object(arguments: Mapping[str, Any] | str) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return dict(arguments)


def render_turn(turn: Turn, format: str, step: int, model: str = "scripted") -> Any:
    """``turn`` as a response payload of ``format`` (decoded JSON, or text for ``text``)."""
    filled = [
        (call_id or f"call_{step}_{n}", tool, arguments)
        for n, (call_id, tool, arguments) in enumerate(turn.calls)
    ]
    usage = turn.usage
    if format == "openai_chat":
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if filled:
            message["tool_calls"] = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": tool, "arguments": _arguments_text(args)},
                }
                for cid, tool, args in filled
            ]
        finish = "length" if turn.truncated else ("tool_calls" if filled else "stop")
        payload: dict[str, Any] = {
            "id": f"chatcmpl-scripted-{step}",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        if usage is not None:
            payload["usage"] = {
                "prompt_tokens": usage.input_tokens,
                "completion_tokens": usage.output_tokens,
                "total_tokens": usage.total,
            }
        return payload
    if format == "openai_responses":
        output: list[dict[str, Any]] = []
        if turn.text:
            output.append(
                {
                    "type": "message",
                    "id": f"msg_scripted_{step}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
                }
            )
        output.extend(
            {
                "type": "function_call",
                "id": f"fc_{cid}",
                "call_id": cid,
                "name": tool,
                "arguments": _arguments_text(args),
                "status": "completed",
            }
            for cid, tool, args in filled
        )
        response: dict[str, Any] = {
            "id": f"resp_scripted_{step}",
            "object": "response",
            "model": model,
            "status": "incomplete" if turn.truncated else "completed",
            "output": output,
        }
        if turn.truncated:
            response["incomplete_details"] = {"reason": "max_output_tokens"}
        if usage is not None:
            response["usage"] = {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "total_tokens": usage.total,
            }
        return response
    if format == "anthropic":
        blocks: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
        blocks.extend(
            {"type": "tool_use", "id": cid, "name": tool, "input": _arguments_object(args)}
            for cid, tool, args in filled
        )
        stop = "max_tokens" if turn.truncated else ("tool_use" if filled else "end_turn")
        message = {
            "id": f"msg_scripted_{step}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop,
        }
        if usage is not None:
            message["usage"] = {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
            }
        return message
    if format == "gemini":
        parts: list[dict[str, Any]] = [{"text": turn.text}] if turn.text else []
        parts.extend(
            {"functionCall": {"id": cid, "name": tool, "args": _arguments_object(args)}}
            for cid, tool, args in filled
        )
        finish = "MAX_TOKENS" if turn.truncated else "STOP"
        gemini: dict[str, Any] = {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish}],
            "responseId": f"scripted-{step}",
        }
        if usage is not None:
            gemini["usageMetadata"] = {
                "promptTokenCount": usage.input_tokens,
                "candidatesTokenCount": usage.output_tokens,
            }
        return gemini
    if format == "text":
        tags = [
            "<tool_call>"
            + json.dumps({"id": cid, "name": tool, "arguments": _arguments_object(args)})
            + "</tool_call>"
            for cid, tool, args in filled
        ]
        return "\n".join([turn.text, *tags]).strip()
    raise DefinitionError(f"ScriptedModel cannot render a turn in the format {format!r}")


# -- reading observations back, in any format -------------------------------------------

_NOT_OK = re.compile(r"^\[(?:error|unknown|rejected|pending)\] ")


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """One observation as the model received it: the call id it answers, and its text."""

    call_id: str
    text: str
    is_error: bool = False


def latest_results(request: ModelRequest) -> list[Result]:
    """The observations that answer the model's last turn, in call order, in any format."""
    messages = list(request.messages)
    if request.format in ("openai_chat", "openai_responses"):
        found: list[Result] = []
        for message in reversed(messages):
            if message.get("role") == "tool":
                text = str(message.get("content", ""))
                found.append(
                    Result(
                        call_id=str(message.get("tool_call_id", "")),
                        text=text,
                        is_error=_NOT_OK.match(text) is not None,
                    )
                )
            elif message.get("type") == "function_call_output":
                text = str(message.get("output", ""))
                found.append(
                    Result(
                        call_id=str(message.get("call_id", "")),
                        text=text,
                        is_error=_NOT_OK.match(text) is not None,
                    )
                )
            else:
                break
        return found[::-1]
    last = messages[-1] if messages else {}
    if request.format == "anthropic":
        return [
            Result(
                call_id=str(b.get("tool_use_id", "")),
                text=str(b.get("content", "")),
                is_error=bool(b.get("is_error")),
            )
            for b in as_list(last.get("content"))
            if isinstance(b, Mapping) and b.get("type") == "tool_result"
        ]
    if request.format == "gemini":
        results = []
        for part in as_list(last.get("parts")):
            response = part.get("functionResponse") if isinstance(part, Mapping) else None
            if isinstance(response, Mapping):
                body = response.get("response") or {}
                error = "error" in body
                results.append(
                    Result(
                        call_id=str(response.get("id", response.get("name", ""))),
                        text=str(body.get("error" if error else "output", "")),
                        is_error=error,
                    )
                )
        return results
    content = str(last.get("content", "")) if last.get("role") == "user" else ""
    results = []
    for chunk in content.split("<tool_response>")[1:]:
        try:
            body = json.loads(chunk.split("</tool_response>")[0])
        except ValueError:
            continue
        results.append(
            Result(
                call_id=str(body.get("id", "")),
                text=str(body.get("content", "")),
                is_error=body.get("status") != "ok",
            )
        )
    return results

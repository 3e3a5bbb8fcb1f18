"""The bridge's wire format, host side: length-prefixed frames, read as hostile input.

A frame is a 4-byte big-endian length and that many bytes: UTF-8 JSON from the
sandbox, `marshal` data to it (the guest starts faster without ``json``). The
code in the sandbox can write anything on its end of the socket, so every
frame it sends is checked here before anything acts on it: the length against
the bound, the text as JSON, the message's shape (`CallRequest`), every number
finite. A frame that fails is a `ProtocolViolation`, and the host stops the sandbox.
"""

from __future__ import annotations

import asyncio
import json
import marshal
import math
import re
import struct
from dataclasses import dataclass
from typing import Any

__all__ = [
    "HEADER",
    "MAX_DEPTH",
    "CallRequest",
    "ProtocolViolation",
    "encode",
    "parse_request",
    "read_frame",
]

HEADER = struct.Struct(">I")
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_MAX_ID = 2**31


class ProtocolViolation(Exception):
    """A frame from the sandbox broke the bridge protocol; the sandbox is stopped."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRequest:
    """A tool call the code asked for, shape-checked (its arguments are checked by the gate)."""

    id: int
    tool: str
    arguments: dict[str, Any]


def encode(message: dict[str, Any]) -> bytes:
    """One frame holding ``message``, host to sandbox: marshal data (the guest reads it
    without importing anything; only text, numbers, lists and dicts are sent)."""
    data = marshal.dumps(message)
    return HEADER.pack(len(data)) + data


async def read_frame(reader: asyncio.StreamReader, max_bytes: int) -> bytes | None:
    """The next frame's body; None when the sandbox closed its end between frames."""
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise ProtocolViolation("the sandbox closed the bridge inside a frame header") from None
    (size,) = HEADER.unpack(header)
    if size > max_bytes:
        raise ProtocolViolation(
            f"bridge frame of {size:,} bytes exceeds the limit of {max_bytes:,} "
            "(Limits.message_bytes); pass less data per call"
        )
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise ProtocolViolation(
            f"the sandbox closed the bridge inside a frame of {size:,} bytes"
        ) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    """A JSON number as a float, refused where it is not finite (``1e999`` is infinity)."""
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text[:40])
    return value


class _NotFinite(ValueError):
    pass


def _depth(value: Any, limit: int) -> bool:
    """Whether ``value`` nests no deeper than ``limit`` (iterative: hostile input)."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if level > limit:
            return False
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return True


MAX_DEPTH = 32
"""How deep the arguments of a call from code may nest."""


def parse_request(body: bytes) -> CallRequest:
    """Check one frame from the sandbox: a ``call`` message with an id, a tool name and an
    object of arguments, or `ProtocolViolation` naming what is wrong."""
    try:
        message = json.loads(body.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite)
    except _NotFinite as exc:
        raise ProtocolViolation(
            f"bridge frame holds a number that is not finite ({exc}); send finite numbers"
        ) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolViolation(f"bridge frame is not UTF-8 JSON ({type(exc).__name__})") from None
    except RecursionError:
        raise ProtocolViolation("bridge frame nests too deeply to decode") from None
    if not isinstance(message, dict):
        raise ProtocolViolation(f"bridge frame must be a JSON object, got {type(message).__name__}")
    if message.get("op") != "call":
        raise ProtocolViolation(f"bridge op must be 'call', got {str(message.get('op'))[:40]!r}")
    ident, tool, arguments = message.get("id"), message.get("tool"), message.get("arguments")
    if isinstance(ident, bool) or not isinstance(ident, int) or not 0 < ident < _MAX_ID:
        raise ProtocolViolation(f"bridge call id must be an integer in 1..2**31, got {ident!r:.40}")
    if not isinstance(tool, str) or not _TOOL_NAME.fullmatch(tool):
        raise ProtocolViolation(f"bridge call tool must be a tool name, got {tool!r:.80}")
    if not isinstance(arguments, dict):
        raise ProtocolViolation(
            f"bridge call arguments must be a JSON object, got {type(arguments).__name__}"
        )
    if not _depth(arguments, MAX_DEPTH):
        raise ProtocolViolation(f"bridge call arguments nest deeper than {MAX_DEPTH} levels")
    return CallRequest(id=ident, tool=tool, arguments=arguments)

"""The grammar's own small tree, and how it is written in GBNF and in Lark.

A tool-call grammar is built once as rules of `Node`s (`callgate.grammar.convert`
does that from JSON Schema) and then printed for each target: GBNF for
llama.cpp's grammar sampler, Lark for Lark-based engines, and Lark with
``%json`` leaves for llguidance. Keeping one tree means the targets cannot
drift apart: they differ only in how a leaf is spelt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Alt", "Lit", "Native", "Node", "Pat", "Ref", "Rep", "Seq", "gbnf", "lark"]


@dataclass(frozen=True, slots=True)
class Lit:
    """Exactly this text."""

    text: str


@dataclass(frozen=True, slots=True)
class Pat:
    """A leaf pattern, spelt once per target: a GBNF expression and a regex (Lark)."""

    gbnf: str
    regex: str


@dataclass(frozen=True, slots=True)
class Ref:
    """The rule of this name."""

    name: str


@dataclass(frozen=True, slots=True)
class Seq:
    """These, one after the other."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Alt:
    """One of these."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Rep:
    """``item`` repeated ``low`` to ``high`` times (``high`` None: no upper bound)."""

    item: Node
    low: int
    high: int | None


@dataclass(frozen=True, slots=True)
class Native:
    """A JSON value llguidance enforces itself (``%json``, or the quoted content of a
    named ``terminal``); elsewhere, ``fallback``."""

    schema: Mapping[str, Any]
    fallback: Node
    terminal: str | None = None


Node = Lit | Pat | Ref | Seq | Alt | Rep | Native


# -- GBNF (llama.cpp) -------------------------------------------------------------------


def _gbnf_literal(text: str) -> str:
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _gbnf_name(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9-]", "-", name)


def _gbnf(node: Node, top: bool = False) -> str:
    if isinstance(node, Lit):
        return _gbnf_literal(node.text)
    if isinstance(node, Pat):
        return node.gbnf
    if isinstance(node, Ref):
        return _gbnf_name(node.name)
    if isinstance(node, Native):
        return _gbnf(node.fallback, top)
    if isinstance(node, Seq):
        items = [i for i in node.items if i != Seq(())]
        if not items:
            return '""'
        inner = " ".join(_gbnf(i) for i in items)
        return inner if top or len(items) == 1 else f"({inner})"
    if isinstance(node, Alt):
        inner = " | ".join(_gbnf(i, True) for i in node.items)
        return inner if top else f"({inner})"
    item = _gbnf(node.item)
    if isinstance(node.item, Seq | Alt) and not item.startswith("("):
        item = f"({item})"
    if (node.low, node.high) == (0, None):
        return item + "*"
    if (node.low, node.high) == (1, None):
        return item + "+"
    if (node.low, node.high) == (0, 1):
        return item + "?"
    if node.high is None:
        return f"{item}{{{node.low},}}"
    return f"{item}{{{node.low},{node.high}}}"


def gbnf(rules: Mapping[str, Node], root: str) -> str:
    """The rules as a GBNF grammar whose start rule is ``root``."""
    lines = [f"root ::= {_gbnf_name(root)}"]
    lines.extend(f"{_gbnf_name(name)} ::= {_gbnf(node, True)}" for name, node in rules.items())
    return "\n".join(lines) + "\n"


# -- Lark ---------------------------------------------------------------------------------


def _lark_name(name: str) -> str:
    return "r_" + re.sub(r"[^a-z0-9]", "_", name.lower())


def _lark(node: Node, native: bool, top: bool = False) -> str:
    if isinstance(node, Lit):
        return json.dumps(node.text, ensure_ascii=False)
    if isinstance(node, Pat):
        return "/" + node.regex.replace("/", "\\/") + "/"
    if isinstance(node, Ref):
        return _lark_name(node.name)
    if isinstance(node, Native):
        if native and node.terminal is not None:
            return f'"\\"" {node.terminal} "\\""'
        if native:
            return "%json " + json.dumps(node.schema, sort_keys=True)
        return _lark(node.fallback, native, top)
    if isinstance(node, Seq):
        items = [i for i in node.items if i != Seq(())]
        if not items:
            return '""'
        inner = " ".join(_lark(i, native) for i in items)
        return inner if top or len(items) == 1 else f"({inner})"
    if isinstance(node, Alt):
        inner = " | ".join(_lark(i, native, True) for i in node.items)
        return inner if top else f"({inner})"
    item = _lark(node.item, native)
    if isinstance(node.item, Seq | Alt) and not item.startswith("("):
        item = f"({item})"
    if (node.low, node.high) == (0, None):
        return item + "*"
    if (node.low, node.high) == (1, None):
        return item + "+"
    if (node.low, node.high) == (0, 1):
        return item + "?"
    if node.high is None:
        return f"({item} ~ {node.low} {item}*)"
    return f"({item} ~ {node.low}..{node.high})"


def lark(
    rules: Mapping[str, Node],
    root: str,
    *,
    native: bool = False,
    terminals: Mapping[str, str] | None = None,
) -> str:
    """The rules as a Lark grammar whose start rule is ``root``.

    ``native`` writes `Native` leaves as llguidance's ``%json`` or terminals
    (only llguidance reads those; ``terminals`` defines them); otherwise
    their fallback is written.
    """
    lines = [f"start: {_lark_name(root)}"]
    lines.extend(f"{_lark_name(name)}: {_lark(node, native, True)}" for name, node in rules.items())
    if native:
        lines.extend(f"{name}: {expression}" for name, expression in (terminals or {}).items())
    return "\n".join(lines) + "\n"

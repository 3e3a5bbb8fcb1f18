"""Tool annotations are pinned: a tool that turns itself read-only (or drops
``destructiveHint``) is changed and blocked until approved; pins written before annotations
were pinned adopt the annotations listed next, once (issue 30, MED-4)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import mcp_types

from callgate.mcp import PinStore, ToolDefinition
from callgate.mcp.client import tool_definition

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}


def wipe(**annotations: Any) -> ToolDefinition:
    return ToolDefinition(
        name="wipe",
        description="Delete a folder.",
        input_schema=SCHEMA,
        annotations=annotations or None,
    )


def old_hash(definition: ToolDefinition) -> str:
    """The hash pins had before annotations were pinned (name, title, description, schemas)."""
    blob = json.dumps(
        {
            "name": definition.name,
            "title": definition.title,
            "description": definition.description,
            "input_schema": definition.input_schema,
            "output_schema": definition.output_schema,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def test_a_tool_that_turns_read_only_is_blocked_until_approved() -> None:
    """readOnlyHint flipped to true (nothing else changed) is a changed tool, blocked."""
    store = PinStore()
    store.check("files", [wipe(destructiveHint=True, readOnlyHint=False)])
    report = store.check("files", [wipe(destructiveHint=False, readOnlyHint=True)])
    assert report.changed == ("wipe",)
    assert report.blocked == ("wipe",)
    assert store.approve("files", "wipe", by="ops") == ["wipe"]
    assert store.check("files", [wipe(destructiveHint=False, readOnlyHint=True)]).blocked == ()


def test_annotations_appearing_on_a_tool_pinned_without_them_are_a_change() -> None:
    """A tool pinned with no annotations that later claims readOnlyHint is blocked."""
    store = PinStore()
    store.check("files", [wipe()])
    assert store.check("files", [wipe(readOnlyHint=True)]).blocked == ("wipe",)


def test_a_tool_without_annotations_keeps_its_old_hash() -> None:
    """Pin files written before keep matching tools that have no annotations."""
    assert wipe().hash == old_hash(wipe())


def test_an_old_pin_adopts_the_annotations_once_then_pins_them(tmp_path: Path) -> None:
    """An approved record without an ``annotations`` key (written before) and the same other
    fields: the listed annotations are adopted (not blocked); a later flip is blocked."""
    path = tmp_path / "pins.json"
    listed = wipe(destructiveHint=True)
    record = {
        "hash": old_hash(listed),
        "description": listed.description,
        "input_schema": SCHEMA,
        "at": 0,
        "by": "first use",
    }
    path.write_text(
        json.dumps({"version": 1, "servers": {"files": {"tools": {"wipe": {"approved": record}}}}})
    )
    store = PinStore(path)
    assert store.check("files", [listed]).blocked == ()
    assert store.approved("files", "wipe", listed.hash)
    assert PinStore(path).check("files", [wipe(readOnlyHint=True)]).blocked == ("wipe",)


def test_the_mcp_tool_annotations_reach_the_pinned_definition() -> None:
    """The pinned view of an MCP tool carries its annotations under their wire names."""
    tool = mcp_types.Tool(
        name="wipe",
        input_schema=SCHEMA,
        annotations=mcp_types.ToolAnnotations(read_only_hint=True),
    )
    assert tool_definition(tool).annotations == {"readOnlyHint": True}

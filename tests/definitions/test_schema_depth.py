"""A JSON Schema nested deeper than callgate walks is refused with a reason, never a crash.

A hostile MCP server or a generated document can send a schema nested hundreds of levels
deep; `add_schema_tool` raised a bare ``RecursionError`` from deep inside ``jsonschema``
(and `callgate lint` called it 'a bug in callgate'). It is an `UnenforceableSchema` that
names the bound, and a schema within it still registers and validates.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from callgate import Registry
from callgate.cli import app
from callgate.definitions.arguments import MAX_SCHEMA_DEPTH, UnenforceableSchema


def _nested(levels: int, how: str) -> Any:
    if how == "items":
        text = '{"type":"array","items":' * levels + '{"type":"string"}' + "}" * levels
    else:
        text = '{"type":"object","properties":{"a":' * levels + '{"type":"string"}' + "}}" * levels
    return json.loads(text)


@pytest.mark.parametrize("how", ["items", "properties"])
@pytest.mark.parametrize("levels", [MAX_SCHEMA_DEPTH, 200, 400])
def test_a_schema_nested_too_deep_is_refused_with_the_bound(levels: int, how: str) -> None:
    """A schema nested past the bound is UnenforceableSchema naming the bound, never a
    RecursionError."""
    schema = {"type": "object", "properties": {"a": _nested(levels, how)}}
    with pytest.raises(UnenforceableSchema, match=rf"nested more than {MAX_SCHEMA_DEPTH}"):
        Registry().add_schema_tool("deep", "d", schema, lambda **kw: "ok")


def test_a_schema_within_the_bound_registers() -> None:
    """A schema nested just inside the bound still registers."""
    levels = (MAX_SCHEMA_DEPTH - 4) // 2
    schema = {"type": "object", "properties": {"a": _nested(levels, "properties")}}
    spec = Registry().add_schema_tool("nested", "d", schema, lambda **kw: "ok")
    assert spec.name == "nested"


def test_lint_reports_a_deep_definition_as_unenforceable_and_lints_the_rest(
    tmp_path: Path,
) -> None:
    """lint reports a too-deep definition as one CG100 (not 'a bug in callgate') and still lints the
    good one."""
    order_id = {"order_id": {"type": "string"}}
    good = {
        "name": "get_order",
        "description": "Returns the order; fails if unknown.",
        "parameters": {"type": "object", "properties": order_id},
    }
    deep_a = {"a": _nested(300, "items")}
    deep_schema = {"type": "object", "properties": deep_a}
    deep = {"name": "deep", "description": "d", "parameters": deep_schema}
    path = tmp_path / "defs.json"
    path.write_text(json.dumps([good, deep]), encoding="utf-8")
    result = CliRunner().invoke(app, ["lint", str(path), "--json"])
    report = json.loads(result.stdout)
    messages = [f["message"] for f in report["findings"] if f["rule"] == "CG100"]
    assert len(messages) == 1, messages
    assert "nested more than" in messages[0]
    assert "bug in callgate" not in messages[0]
    assert result.exit_code == 1


def test_lint_of_a_file_nested_past_pythons_limit_is_exit_2(tmp_path: Path) -> None:
    """A JSON file nested past what Python's JSON reader takes cannot be read: exit 2 with
    one line (it was a RecursionError traceback and exit 1)."""
    path = tmp_path / "defs.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    result = CliRunner().invoke(app, ["lint", str(path)])
    assert result.exit_code == 2, result.output
    assert "cannot be read" in result.output
    assert "Traceback" not in result.output

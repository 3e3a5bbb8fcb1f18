"""``callgate openapi inspect`` through its typer app (registered under ``callgate`` by the CLI)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from callgate.authorize.policy_file import load_policy_file
from callgate.cli.openapi import app

from .shop_app import SPEC

BASE = ["--api", "shop", "--base-url", "http://127.0.0.1:8000/api"]


def test_inspect_lists_tools_renames_and_what_is_left_out() -> None:
    """Every imported operation is a row; collisions and skips are printed; exit 1 for a skip."""
    result = CliRunner().invoke(app, ["inspect", str(SPEC), *BASE])
    assert result.exit_code == 1, result.output
    assert "11 of 12 operations as tools" in result.output
    assert "body_order_id" in result.output
    assert "left out: PUT /products/{product_id}/image" in result.output


def test_inspect_json_gives_grants_and_a_policy_that_loads(tmp_path: Path) -> None:
    """The JSON lists each tool's arguments and effects; its starting policy is a valid file."""
    result = CliRunner().invoke(app, ["inspect", str(SPEC), *BASE, "--json"])
    data = json.loads(result.output)
    tools = {t["tool"]: t for t in data["tools"]}
    assert tools["createOrder"]["effects"] == [
        "write:shop:/orders",
        "network:127.0.0.1:8000",
    ]
    assert {"name": "category", "in": "query", "as": "category", "required": True} in tools[
        "listProducts"
    ]["arguments"]
    assert "network:127.0.0.1:8000" in data["grants"]
    policy_file = tmp_path / "shop.toml"
    policy_file.write_text(data["policy"])
    rules = {r.tool: r.action.value for r in load_policy_file(policy_file).rules}
    assert rules["listProducts"] == "admit"
    assert rules["createOrder"] == "ask"


def test_inspect_of_a_document_that_is_not_openapi_exits_2(tmp_path: Path) -> None:
    """A Swagger 2.0 file is bad input: exit 2 with one line naming what was found."""
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"swagger": "2.0", "paths": {}}))
    result = CliRunner().invoke(app, ["inspect", str(path)])
    assert result.exit_code == 2
    assert "Swagger 2.0" in result.output

"""``callgate openapi inspect`` through its typer app (registered under ``callgate`` by the CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from callgate.authorize.policy_file import load_policy_file
from callgate.cli.openapi import app

from .shop_app import SPEC

BASE = ["--api", "shop", "--base-url", "http://127.0.0.1:8000/api"]


def test_inspect_lists_tools_renames_and_what_is_left_out() -> None:
    """Every imported operation is a row; collisions and skips are printed; exit 1 for a skip."""
    result = CliRunner().invoke(app, ["inspect", str(SPEC), *BASE])
    assert result.exit_code == 1, result.output
    assert "12 of 13 operations as tools" in result.output
    assert "body_order_id" in result.output
    assert "left out: PUT /products/{product_id}/sheet" in result.output
    assert "#/paths/~1products~1{product_id}~1sheet/put/requestBody/content" in result.output


def test_inspect_json_gives_grants_and_a_policy_that_loads(tmp_path: Path) -> None:
    """The JSON lists each tool's arguments and effects; its starting policy is a valid file."""
    result = CliRunner().invoke(app, ["inspect", str(SPEC), *BASE, "--json"])
    data = json.loads(result.output)
    tools = {t["tool"]: t for t in data["tools"]}
    assert tools["createOrder"]["effects"] == [
        "write:shop:/orders",
        "network:127.0.0.1",
    ]
    assert {"name": "category", "in": "query", "as": "category", "required": True} in tools[
        "listProducts"
    ]["arguments"]
    assert "network:127.0.0.1" in data["grants"]
    (sheet,) = [t for t in data["tools"] if t["tool"] == "replaceSheet"]
    assert sheet["pointer"] == "#/paths/~1products~1{product_id}~1sheet/put"
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


def _document(servers: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {"/ping": {"get": {"operationId": "ping"}}},
    }
    if servers is not None:
        document["servers"] = servers
    return document


def test_inspect_of_a_document_without_servers_works_and_says_to_pass_base_url(
    tmp_path: Path,
) -> None:
    """No ``servers``: the tools are listed (exit 0), effects on a placeholder host, and a
    note names the option ``--base-url``; with it, the real host."""
    path = tmp_path / "noservers.json"
    path.write_text(json.dumps(_document(None)))
    result = CliRunner().invoke(app, ["inspect", str(path)])
    assert result.exit_code == 0, result.output
    assert "1 of 1 operations as tools" in result.output
    assert "--base-url" in result.output
    assert "base_url=" not in result.output
    given = CliRunner().invoke(
        app, ["inspect", str(path), "--base-url", "https://api.example.com:8443/v1", "--json"]
    )
    assert given.exit_code == 0, given.output
    assert json.loads(given.output)["tools"][0]["effects"][-1] == "network:api.example.com"


def test_inspect_fills_server_variables_and_takes_overrides(tmp_path: Path) -> None:
    """Defaults fill the server URL; ``--server-variable`` overrides one; a value outside the
    variable's enum is bad input (exit 2, naming the allowed values)."""
    servers = [
        {
            "url": "https://{region}.example.com/{version}",
            "variables": {
                "region": {"default": "eu", "enum": ["eu", "us"]},
                "version": {"default": "v1"},
            },
        }
    ]
    path = tmp_path / "vars.json"
    path.write_text(json.dumps(_document(servers)))
    result = CliRunner().invoke(app, ["inspect", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["base_url"] == "https://eu.example.com/v1"
    other = CliRunner().invoke(
        app, ["inspect", str(path), "--json", "--server-variable", "region=us"]
    )
    assert json.loads(other.output)["base_url"] == "https://us.example.com/v1"
    bad = CliRunner().invoke(app, ["inspect", str(path), "--server-variable", "region=mars"])
    assert bad.exit_code == 2
    assert "'eu', 'us'" in bad.output

"""``callgate lint`` on definitions read from files (issue 26): each bad definition is a
finding and the rest are linted; a source whose definitions were all left out is never
"0 tools, 0 findings" with exit 0; keyword property names lint like any other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from callgate.cli.lint import app

GOOD = {
    "name": "get_weather",
    "description": "Current weather for a city; fails if the city is unknown.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city's name."}},
        "required": ["city"],
    },
}


def _lint(tmp_path: Path, data: Any, *options: str, name: str = "tools.json") -> tuple[int, Any]:
    path = tmp_path / name
    text = yaml.safe_dump(data) if name.endswith(".yaml") else json.dumps(data)
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, [str(path), "--json", *options])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, json.loads(result.output) if result.output.startswith("{") else None


def _refusals(report: Any) -> list[tuple[str | None, str]]:
    return [(f["tool"], f["location"]) for f in report["findings"] if f["rule"] == "CG100"]


def test_one_bad_definition_is_a_finding_and_the_others_are_linted(tmp_path: Path) -> None:
    """An entry that is not an object, one without a name, and one whose ``required`` is not a
    list of names (a crash before) are each a CG100 error; the good ones are linted."""
    other = {**GOOD, "name": "get_forecast"}
    bad_required = {**GOOD, "name": "get_tides", "parameters": {**GOOD["parameters"]}}
    bad_required["parameters"]["required"] = [["city"]]
    nameless = {"description": "x", "parameters": GOOD["parameters"]}
    code, report = _lint(tmp_path, [GOOD, "oops", nameless, bad_required, other])
    assert code == 1
    assert sorted(report["tokens"]) == ["get_forecast", "get_weather"]
    assert _refusals(report) == [
        (None, "definition 2"),
        (None, "definition 3"),
        ("get_tides", "definition 4"),
    ]
    messages = {f["location"]: f["message"] for f in report["findings"] if f["rule"] == "CG100"}
    assert "not a function definition" in messages["definition 2"]
    assert "no name" in messages["definition 3"]
    assert "'required'" in messages["definition 4"]


def test_a_type_property_lints_like_any_other(tmp_path: Path) -> None:
    """A parameter named ``type`` (with siblings named ``properties`` and ``$ref``) is a tool
    to lint, not a traceback."""
    definition = {
        "name": "create_item",
        "description": "Create an item; fails if the kind is unknown.",
        "parameters": {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["book", "pen"]},
                "properties": {"type": "object", "properties": {"colour": {"type": "string"}}},
                "$ref": {"type": "string", "description": "An outside reference."},
            },
            "required": ["type"],
        },
    }
    code, report = _lint(tmp_path, {"tools": [definition]})
    assert report is not None
    assert _refusals(report) == []
    assert list(report["tokens"]) == ["create_item"]
    locations = {f["location"] for f in report["findings"]}
    assert "argument 'properties'" in locations  # its one-field object is CG106
    assert code == 1


def _openapi(operations: dict[str, Any]) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "https://api.example"}],
        "paths": {"/items": operations},
    }


def test_a_document_whose_operations_were_all_left_out_fails_and_says_why(
    tmp_path: Path,
) -> None:
    """Every operation left out (a body in a media type callgate does not send): each is a
    CG100 error with its reason, one more says nothing was linted, and the exit is 1."""
    body = {"content": {"application/xml": {"schema": {"type": "object"}}}}
    ok = {"200": {"description": "ok"}}
    document = _openapi(
        {
            "post": {"operationId": "createItem", "requestBody": body, "responses": ok},
            "put": {"operationId": "replaceItem", "requestBody": body, "responses": ok},
        }
    )
    code, report = _lint(tmp_path, document, name="api.yaml")
    assert code == 1
    assert report["tokens"] == {}
    assert report["left_out"] == 2
    refused = [f for f in report["findings"] if f["rule"] == "CG100"]
    assert {f["tool"] for f in refused} == {"POST /items", "PUT /items", None}
    assert all(f["severity"] == "error" for f in refused)
    for finding in refused:
        if finding["tool"] is not None:
            assert "xml" in finding["message"]
    [summary] = [f for f in refused if f["tool"] is None]
    assert "no tool" in summary["message"]
    assert "2 definitions were left out" in summary["message"]


def test_an_empty_file_of_definitions_is_not_clean(tmp_path: Path) -> None:
    """``{"tools": []}`` defines nothing: an error, not "0 tools, 0 findings"."""
    code, report = _lint(tmp_path, {"tools": []})
    assert code == 1
    assert [(f["rule"], f["tool"]) for f in report["findings"]] == [("CG100", None)]


def test_the_text_report_counts_what_was_left_out(tmp_path: Path) -> None:
    """The summary line says how many definitions were left out beside the tools linted."""
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([GOOD, 5]), encoding="utf-8")
    result = CliRunner().invoke(app, [str(path)])
    assert result.exit_code == 1
    assert "1 tools, 1 definitions left out" in result.output.replace("\n", " ")


def test_openapi_inspect_reads_a_type_property(tmp_path: Path) -> None:
    """``callgate openapi inspect`` on a body property and a query parameter named ``type``
    lists the tool (it was a traceback, exit 1)."""
    from callgate.cli.openapi import app as openapi_app

    ok = {"200": {"description": "ok"}}
    schema = {"type": "object", "properties": {"type": {"type": "string"}}, "required": ["type"]}
    document = _openapi(
        {
            "get": {
                "operationId": "listItems",
                "parameters": [{"name": "type", "in": "query", "schema": {"type": "string"}}],
                "responses": ok,
            },
            "post": {
                "operationId": "createItem",
                "requestBody": {"content": {"application/json": {"schema": schema}}},
                "responses": ok,
            },
        }
    )
    path = tmp_path / "api.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    result = CliRunner().invoke(openapi_app, ["inspect", str(path), "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code == 0, result.output
    assert "listItems" in result.output
    assert "createItem" in result.output

"""The schema linter (`callgate.lint`, ``callgate lint``): each rule fires on a tool that
breaks it and stays quiet on its well-designed twin; exit codes for CI."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field
from typer.testing import CliRunner

from callgate import Registry, tool
from callgate.cli.lint import app
from callgate.lint import Budgets, estimate_tokens, lint

from .shop_app import SPEC


def _noop(**arguments: Any) -> None:
    return None


def _rules(tools: list[Any], **options: Any) -> set[tuple[str, str | None, str]]:
    return {(f.rule, f.tool, f.location) for f in lint(tools, **options).findings}


class Address(BaseModel):
    city: str


class Wrapper(BaseModel):
    address: Address


class Outer(BaseModel):
    wrapper: Wrapper
    note: str


@tool
def send_letter(
    to: str, body: str, options: dict[str, Any], tone: str = "plain", box: Outer | None = None
) -> None:
    """Send a letter.

    Args:
        to: the recipient's postal address.
        body: the letter's text.
        options: extra settings.
        tone: one of 'plain', 'warm' or 'formal'.
        box: where to put it.
    """


@tool
def send_note(
    recipient: str,
    body: str,
    tone: Literal["plain", "warm", "formal"] = "plain",
    copies: Annotated[int, Field(ge=1, le=5)] = 1,
) -> None:
    """Send a note to a recipient on file; fails if the recipient is not in the address book.

    Args:
        recipient: the recipient's id from the address book.
        body: the note's text.
        tone: how it reads.
        copies: how many copies.
    """


def test_a_free_form_object_is_flagged_and_a_typed_one_is_not() -> None:
    """CG101 on ``options: dict``; nothing on the note's typed arguments."""
    found = _rules([send_letter, send_note])
    assert ("CG101", "send_letter", "argument 'options'") in found
    assert not {f for f in found if f[0] == "CG101" and f[1] == "send_note"}


def test_choices_listed_in_prose_should_be_an_enum() -> None:
    """CG102 on ``tone`` described as 'one of ...'; a Literal tone is fine."""
    found = _rules([send_letter, send_note])
    assert ("CG102", "send_letter", "argument 'tone'") in found
    assert ("CG102", "send_note", "argument 'tone'") not in found


def test_a_pattern_that_is_an_alternation_should_be_an_enum() -> None:
    """CG102 on ``pattern: ^(asc|desc)$``."""
    schema = {
        "type": "object",
        "properties": {"order": {"type": "string", "pattern": "^(asc|desc)$"}},
    }
    spec = Registry().add_schema_tool("list_items", "Lists items; fails if none.", schema, _noop)
    assert ("CG102", "list_items", "argument 'order'") in _rules([spec])


def test_a_description_without_preconditions_or_failures_is_decorative() -> None:
    """CG103 on 'Send a letter.'; the note's description names its failure mode."""
    found = _rules([send_letter, send_note])
    assert ("CG103", "send_letter", "description") in found
    assert ("CG103", "send_note", "description") not in found


def test_a_tool_without_a_description_is_flagged() -> None:
    """CG104 when the model has only a name to go by."""
    spec = Registry().add_schema_tool("ping", "", {"type": "object"}, _noop)
    assert ("CG104", "ping", "description") in _rules([spec])


def test_inconsistent_names_across_tools_are_flagged() -> None:
    """CG105: camelCase among snake_case tools, and 'fetch' beside two 'get' tools."""
    registry = Registry()
    for name in ("get_order", "get_invoice", "fetch_customer", "listRefunds", "cancel_order"):
        registry.add_schema_tool(name, "Reads it; fails if missing.", {"type": "object"}, _noop)
    found = _rules(list(registry))
    assert ("CG105", "listRefunds", "name") in found
    assert ("CG105", "fetch_customer", "name") in found
    assert not {f for f in found if f[0] == "CG105" and f[1] in ("get_order", "cancel_order")}


def test_needless_nesting_is_flagged() -> None:
    """CG106: an object wrapping one field, and objects three deep."""
    found = _rules([send_letter])
    assert ("CG106", "send_letter", "argument 'box' › field 'wrapper'") in found
    assert ("CG106", "send_letter", "argument 'box' › field 'wrapper' › field 'address'") in found


def test_token_cost_is_measured_per_tool_and_for_the_registry() -> None:
    """CG107 over the budgets; the estimate is UTF-8 bytes / 4, rounded up."""
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("é" * 4) == 2
    report = lint([send_letter, send_note], budgets=Budgets(per_tool=50, registry=100))
    assert report.tokens["send_note"] > 50
    flagged = {(f.rule, f.tool) for f in report.findings}
    assert ("CG107", "send_note") in flagged
    assert ("CG107", None) in flagged
    quiet = lint([send_letter, send_note], budgets=Budgets(per_tool=10_000, registry=100_000))
    assert not [f for f in quiet.findings if f.rule == "CG107"]


def test_export_notes_say_why_a_tool_is_not_strict_and_which_name_is_used() -> None:
    """CG108 with the strict-mode obstacle; CG109 for a mapped name."""
    spec = Registry().add_schema_tool(
        "crm.find", "Finds; fails if none.", {"type": "object", "properties": {"q": {}}}, _noop
    )
    found = lint([spec]).findings
    (strict,) = [f for f in found if f.rule == "CG108"]
    assert "field 'q' may hold any value" in strict.message
    (mapped,) = [f for f in found if f.rule == "CG109"]
    assert "'crm.find'" in mapped.message


def test_rules_can_be_switched_off() -> None:
    """``disable=`` leaves a rule's findings out."""
    assert not [f for f in lint([send_letter], disable=["CG103"]).findings if f.rule == "CG103"]


@pytest.fixture
def registry_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module on sys.path holding a registry, for ``callgate lint module:registry``."""
    (tmp_path / "lint_target_tools.py").write_text(
        textwrap.dedent(
            '''
            from typing import Any
            from callgate import Registry

            registry = Registry()

            @registry.tool
            def lookup(query: str, filters: dict[str, Any]) -> None:
                """Look up."""
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "lint_target_tools:registry"
    sys.modules.pop("lint_target_tools", None)


def test_the_command_exits_1_on_warnings_and_names_rule_tool_and_fix(registry_module: str) -> None:
    """``callgate lint module:registry`` prints each finding with its fix; exit 1."""
    result = CliRunner().invoke(app, [registry_module])
    assert result.exit_code == 1, result.output
    assert "lookup: argument 'filters': CG101 warning" in result.output
    assert "fix: declare its fields" in result.output
    assert "about" in result.output


def test_fail_on_error_lets_warnings_pass(registry_module: str) -> None:
    """``--fail-on error``: warnings are printed but the exit is 0."""
    result = CliRunner().invoke(app, [registry_module, "--fail-on", "error"])
    assert result.exit_code == 0, result.output


def test_json_output_and_an_openapi_document_as_target() -> None:
    """An OpenAPI file is linted as the tools it would become; JSON lists findings and tokens."""
    result = CliRunner().invoke(app, [str(SPEC), "--json"])
    data = json.loads(result.output)
    assert set(data["tokens"]) >= {"listProducts", "createOrder"}
    assert data["total_tokens"] == sum(data["tokens"].values())
    assert any(f["rule"] == "CG103" and f["tool"] == "dailyReport" for f in data["findings"])
    # The documented error answers are part of the description: not decorative.
    assert not any(f["rule"] == "CG103" and f["tool"] == "getProduct" for f in data["findings"])


@pytest.mark.parametrize(
    "arguments", [["no_colon_here"], ["nosuchmodule_xyz:registry"], ["x:y", "--disable", "CG999"]]
)
def test_bad_input_exits_2(arguments: list[str]) -> None:
    """A target that cannot be imported, or an unknown rule id, is bad input."""
    assert CliRunner().invoke(app, arguments).exit_code == 2


def test_a_file_of_function_definitions_is_linted_and_refusals_are_errors(
    tmp_path: Path,
) -> None:
    """Provider-shaped definitions become schema tools; one callgate cannot enforce is CG100."""
    definitions = {
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "weather.lookup",
                    "description": "Current weather for a city; fails for unknown cities.",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string", "description": "The city."}},
                        "required": ["city"],
                    },
                },
            },
            {
                "name": "echo_twice",
                "description": "Echo a word twice; fails if it repeats.",
                "input_schema": {
                    "type": "object",
                    "properties": {"w": {"type": "string", "pattern": "^(a+)\\1$"}},
                },
            },
        ]
    }
    path = tmp_path / "functions.json"
    path.write_text(json.dumps(definitions))
    result = CliRunner().invoke(app, [str(path), "--json"])
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert set(data["tokens"]) == {"weather_lookup"}
    (refused,) = [f for f in data["findings"] if f["rule"] == "CG100"]
    assert refused["tool"] == "echo_twice"
    assert refused["severity"] == "error"
    assert "backreference" in refused["message"]
    assert any(f["rule"] == "CG109" for f in data["findings"])


def test_a_missing_attribute_is_named_as_missing(registry_module: str) -> None:
    """``callgate lint module:missing`` says the module has no such attribute (not that
    ``None`` is not a Registry); exit 2."""
    module = registry_module.split(":")[0]
    result = CliRunner().invoke(app, [f"{module}:missing"])
    assert result.exit_code == 2, result.output
    assert "has no attribute 'missing'" in result.output
    assert "NoneType" not in result.output

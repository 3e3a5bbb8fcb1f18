"""``callgate policy check`` / ``explain`` on hostile policy files (issue 13, items 6 and 7).

A policy file is data: its rule names, tools, patterns and the errors about them are
printed as plain text (never Rich markup, emoji or terminal escapes), and a file that
is not UTF-8 or is nested too deeply is a one-line error naming the file, exit 2,
never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from callgate.authorize.policy_file import PolicyFileError, load_policy_file
from callgate.cli import app

runner = CliRunner(env={"COLUMNS": "400"})  # wide enough that no cell wraps
HOSTILE_NAME = "refunds [/x] :email: \u001b[2J [black on black]hidden[/]"


def _toml_string(text: str) -> str:
    """``text`` as a TOML basic string: quotes, backslashes and controls escaped."""
    escaped = "".join(
        f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F or c in '"\\' else c for c in text
    )
    return f'"{escaped}"'


def _policy(tmp_path: Path, name: str, tool: str = "refund") -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(
        f'[[rule]]\nname = {_toml_string(name)}\naction = "allow"\ntool = {_toml_string(tool)}\n'
        f"when.to = {{ regex = {_toml_string('[x]+ :email:')} }}\n",
        encoding="utf-8",
    )
    return path


def test_check_prints_a_hostile_rule_name_as_plain_text(tmp_path: Path) -> None:
    """``[/x]`` crashed Rich (MarkupError); ``:email:`` became an emoji; ESC cleared the screen."""
    result = runner.invoke(app, ["policy", "check", str(_policy(tmp_path, HOSTILE_NAME))])
    assert result.exit_code == 0, result.output
    assert result.exception is None
    assert "refunds [/x] :email: \\x1b[2J [black on black]hidden[/]" in result.output
    assert "[x]+ :email:" in result.output
    assert "\u001b" not in result.output
    assert "📧" not in result.output


def test_explain_prints_a_hostile_rule_name_as_plain_text(tmp_path: Path) -> None:
    """policy explain prints a hostile rule name escaped, with no raw escape and no traceback."""
    path = _policy(tmp_path, HOSTILE_NAME, tool="*")
    result = runner.invoke(app, ["policy", "explain", str(path), "--tool", "t", "--args", "{}"])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.exit_code == 1  # the only rule needs `to`, so nothing allows the call
    assert "Traceback" not in result.output
    path.write_text(
        f'[[rule]]\nname = {_toml_string(HOSTILE_NAME)}\naction = "allow"\ntool = "*"\n',
        encoding="utf-8",
    )
    result = runner.invoke(app, ["policy", "explain", str(path), "--tool", "t"])
    assert result.exit_code == 0, result.output
    assert "[/x] :email: \\x1b[2J [black on black]hidden[/]" in result.output
    assert "\u001b" not in result.output


@pytest.mark.parametrize("command", [["check"], ["explain", "--tool", "t"]])
def test_an_error_naming_a_hostile_value_is_one_plain_line(
    tmp_path: Path, command: list[str]
) -> None:
    """The error quotes the bad rule's name: printed as text, not read as markup."""
    path = tmp_path / "policy.toml"
    path.write_text(
        f'[[rule]]\nname = {_toml_string(HOSTILE_NAME)}\naction = "maybe"\n', encoding="utf-8"
    )
    result = runner.invoke(app, ["policy", command[0], str(path), *command[1:]])
    assert result.exit_code == 2
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)
    assert "action must be one of" in result.output
    assert "[/x]" in result.output
    assert "\u001b" not in result.output


def test_a_file_that_is_not_utf8_is_a_one_line_error(tmp_path: Path) -> None:
    """A non-UTF-8 policy file is an error naming its line; policy check exits 2 with one line."""
    path = tmp_path / "latin.toml"
    path.write_bytes(b'version = "1"\nx = "\xff\xfe"\n')
    with pytest.raises(PolicyFileError, match=r"latin\.toml:2: the policy file is not UTF-8"):
        load_policy_file(path)
    result = runner.invoke(app, ["policy", "check", str(path)])
    assert result.exit_code == 2
    assert "UnicodeDecodeError" not in result.output
    [line] = [line for line in result.output.splitlines() if line.strip()]
    assert line.startswith("error: ")
    assert "latin.toml:2: the policy file is not UTF-8" in line


@pytest.mark.timeout(60)
def test_a_deeply_nested_file_is_a_one_line_error(tmp_path: Path) -> None:
    """50,000 nested arrays made the TOML reader raise RecursionError."""
    path = tmp_path / "deep.toml"
    path.write_text("a = " + "[" * 50_000 + "]" * 50_000 + "\n", encoding="utf-8")
    with pytest.raises(PolicyFileError, match=r"deep\.toml: .*nested too deeply"):
        load_policy_file(path)
    result = runner.invoke(app, ["policy", "check", str(path)])
    assert result.exit_code == 2
    assert "RecursionError" not in result.output
    [line] = [line for line in result.output.splitlines() if line.strip()]
    assert "deep.toml" in line
    assert "nested too deeply" in line


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.text(min_size=1, max_size=30))
def test_any_rule_name_is_printed_as_data(tmp_path: Path, name: str) -> None:
    """Whatever the name, ``check`` succeeds and prints no control character."""
    path = _policy(tmp_path, name)
    result = runner.invoke(app, ["policy", "check", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["rules"][0]["name"] == name
    result = runner.invoke(app, ["policy", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert not any(ord(c) < 32 and c != "\n" for c in result.output)


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("{a = 1}", "a table"),
        ("[1, 2]", "an array"),
        ("true", "a boolean"),
        ("1.10", "a number with a point"),
    ],
)
def test_a_version_that_is_no_label_is_refused(tmp_path: Path, value: str, kind: str) -> None:
    """``version = {a = 1}`` (or an array, a boolean, a float) is refused by ``policy
    check`` with the line and what to write; it was accepted and recorded as "{'a': 1}"."""
    path = tmp_path / "policy.toml"
    path.write_text(
        f'# a policy\nversion = {value}\n\n[[rule]]\nname = "r"\naction = "allow"\ntool = "x"\n',
        encoding="utf-8",
    )
    result = runner.invoke(app, ["policy", "check", str(path)])
    assert result.exit_code == 2, result.output
    assert f"{path}:2: 'version' must be a text label, got {kind}" in result.output
    assert 'version = "2026-11-29"' in result.output


@pytest.mark.parametrize(
    ("value", "label"),
    [('"2026-11-29"', "2026-11-29"), ("7", "7"), ("2026-11-29", "2026-11-29")],
)
def test_a_version_label_is_text_an_integer_or_a_date(
    tmp_path: Path, value: str, label: str
) -> None:
    """Text, a bare integer and a bare TOML date are labels, recorded as their text."""
    path = tmp_path / "policy.toml"
    path.write_text(
        f'version = {value}\n\n[[rule]]\nname = "r"\naction = "allow"\ntool = "x"\n',
        encoding="utf-8",
    )
    assert load_policy_file(path).version == label

"""`callgate mcp` command-line behaviour that needs no server: input checks, names, no SDK."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mcp_support import APP, ROOT
from typer.testing import CliRunner

from callgate.cli import app as cli
from callgate.cli.mcp import _default_name

pytestmark = pytest.mark.timeout(20)


@pytest.mark.parametrize(
    ("command", "url", "name"),
    [
        (["python", "servers/mail.py"], None, "mail"),
        (["/usr/bin/python3.11", "-u", "/x/upstream.py", "mail"], None, "upstream"),
        (
            ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
            None,
            "server-filesystem",
        ),
        (["uv", "run", "weather.py"], None, "weather"),
        (["github-mcp-server", "stdio"], None, "github-mcp-server"),
        ([], "http://127.0.0.1:8123/mcp", "127.0.0.1-8123"),
    ],
)
def test_the_default_server_name_comes_from_the_command_line(
    command: list[str], url: str | None, name: str
) -> None:
    """Never from what the server says about itself."""
    assert _default_name(command, url) == name


def test_proxy_needs_exactly_one_upstream_and_a_policy(tmp_path: Path) -> None:
    """mcp proxy exits 2 with no upstream, with two, or without --policy."""
    runner = CliRunner()
    policy = tmp_path / "p.toml"
    policy.write_text('[[rule]]\naction = "allow"\n')
    neither = runner.invoke(cli, ["mcp", "proxy", "--policy", str(policy)])
    assert neither.exit_code == 2
    both = runner.invoke(
        cli, ["mcp", "proxy", "--policy", str(policy), "--upstream-url", "http://x", "--", "srv"]
    )
    assert both.exit_code == 2
    no_policy = runner.invoke(cli, ["mcp", "proxy", "--", "srv"])
    assert no_policy.exit_code == 2
    assert "--policy is required" in no_policy.output


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ('[tools.send]\neffect = ["x:y"]\n', "unknown key(s) ['effect']"),
        ('[tools.send]\nrisk = "harmless"\n', "risk must be one of"),
        ("[servers]\n", "unknown top-level key(s)"),
        ("not toml = = =", "cannot read the tool configuration"),
    ],
)
def test_a_bad_tools_file_is_bad_input(tmp_path: Path, config: str, message: str) -> None:
    """A bad --tools file (unknown key, bad risk, bad TOML) exits 2 saying what is wrong."""
    policy = tmp_path / "p.toml"
    policy.write_text('[[rule]]\naction = "allow"\n')
    tools = tmp_path / "tools.toml"
    tools.write_text(config)
    args = ["mcp", "proxy", "--policy", str(policy), "--tools", str(tools), "--", "srv"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert message in result.output


def test_callgate_works_without_the_mcp_sdk() -> None:
    """`import callgate` and the CLI never import the SDK; MCP commands say how to get it."""
    code = (
        "import sys; sys.modules['mcp'] = None; sys.modules['mcp_types'] = None\n"
        "import callgate\n"
        "from typer.testing import CliRunner\n"
        "from callgate.cli import app\n"
        "r = CliRunner().invoke(app, ['mcp', 'serve', 'x:y', '--policy', 'p.toml'])\n"
        "print(r.exit_code, r.output)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("2 ")
    assert "pip install 'callgate[mcp]'" in done.stdout


def test_serve_accepts_a_file_path_target(tmp_path: Path) -> None:
    """`path/to/file.py:registry` works from any directory (desktop apps pick the cwd)."""
    broken = tmp_path / "p.toml"
    broken.write_text('[[rule]]\naction = "nope"\n')
    result = CliRunner().invoke(cli, ["mcp", "serve", f"{APP}:registry", "--policy", str(broken)])
    assert result.exit_code == 2
    assert "is a" not in result.output  # the target loaded; the policy was the problem
    assert "action must be one of" in result.output

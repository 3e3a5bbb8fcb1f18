"""`tool` and `Registry.tool` share one typed signature: a misspelt option is a type error
for mypy and a `DefinitionError` where the tool is declared."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api as mypy_api

from callgate import DefinitionError, Registry, tool

SNIPPET = """
from callgate import Registry, tool

registry = Registry()

@registry.tool(effect="write:x")
def a() -> str:
    return "a"

@tool(effect="write:x")
def b() -> str:
    return "b"

@registry.tool(effects="write:x", risk="read")
def c() -> str:
    return "c"
"""


def test_mypy_flags_a_misspelt_option_on_both_decorators(tmp_path: Path) -> None:
    """mypy flags effect= on Registry.tool and @tool, and not the correctly spelt tool c."""
    source = tmp_path / "tools_typo.py"
    source.write_text(SNIPPET)
    out, _, status = mypy_api.run(
        [str(source), "--no-incremental", "--cache-dir", str(tmp_path / "cache")]
    )
    assert status == 1, out
    flagged = [line for line in out.splitlines() if 'Unexpected keyword argument "effect"' in line]
    assert [line.split(":")[1] for line in flagged] == ["6", "10"], out  # a and b, not c


@pytest.mark.parametrize("decorator", ["registry", "module"])
def test_a_misspelt_option_fails_where_the_tool_is_declared(decorator: str) -> None:
    """effect= on either decorator raises DefinitionError suggesting 'effects'."""
    registry = Registry()
    declare = registry.tool if decorator == "registry" else tool
    with pytest.raises(
        DefinitionError, match=r"unknown tool option 'effect'; did you mean 'effects'"
    ):
        declare(effect="write:x")  # type: ignore[call-overload]

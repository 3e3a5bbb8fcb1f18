"""Tool names mapped onto the names providers accept stay reversible: one registered tool per
name given, a second definition of a name refused with a `DefinitionError` (issue 26)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from callgate import DefinitionError, Registry
from callgate.cli.lint import app
from callgate.definitions import VALID_NAME


def _noop(**arguments: Any) -> None:
    return None


EMPTY = {"type": "object", "properties": {}}


def test_a_mapped_name_defined_twice_is_refused_like_a_plain_one() -> None:
    """``math.gcd`` twice gave ``math_gcd`` and ``math_gcd_3416fd2b``, both mapped back to
    ``math.gcd``; the second is now refused, naming the tool it would collide with."""
    registry = Registry()
    first = registry.add_schema_tool("math.gcd", "d", EMPTY, _noop)
    assert first.name == "math_gcd"
    with pytest.raises(DefinitionError) as raised:
        registry.add_schema_tool("math.gcd", "d", EMPTY, _noop)
    assert "'math.gcd'" in str(raised.value)
    assert "'math_gcd'" in str(raised.value)
    assert registry.names() == ["math_gcd"]
    assert registry.renamed() == {"math_gcd": "math.gcd"}
    registry.add_schema_tool("gcd", "d", EMPTY, _noop)
    with pytest.raises(DefinitionError, match="'gcd' is already registered"):
        registry.add_schema_tool("gcd", "d", EMPTY, _noop)


def test_two_names_that_map_alike_both_register_and_lead_back() -> None:
    """``a.b`` and ``a b`` are two names: both register, under distinct accepted names."""
    registry = Registry()
    one = registry.add_schema_tool("a.b", "d", EMPTY, _noop)
    two = registry.add_schema_tool("a b", "d", EMPTY, _noop)
    assert one.name != two.name
    assert registry.renamed() == {one.name: "a.b", two.name: "a b"}


def test_a_spec_added_directly_is_checked_the_same_way() -> None:
    """`Registry.add` and `Registry(...)` refuse a second tool defined under one name."""
    spec = Registry().add_schema_tool("math.gcd", "d", EMPTY, _noop)
    plain = Registry().add_schema_tool("math_gcd", "d", EMPTY, _noop)
    # built beside a plain ``math_gcd``: mapped to another name, led back to ``math.gcd``
    twin = Registry([plain]).add_schema_tool("math.gcd", "d", EMPTY, _noop)
    assert twin.name != spec.name
    registry = Registry([spec])
    with pytest.raises(DefinitionError, match=r"math\.gcd"):
        registry.add(twin)
    with pytest.raises(DefinitionError, match=r"math\.gcd"):
        Registry([spec, twin])


def test_a_removed_or_replaced_tool_frees_its_name() -> None:
    """After `Registry.remove`, the name can be defined again; `replace` keeps the book."""
    registry = Registry()
    spec = registry.add_schema_tool("math.gcd", "d", EMPTY, _noop)
    registry.remove(spec.name)
    again = registry.add_schema_tool("math.gcd", "d", EMPTY, _noop)
    assert again.name == "math_gcd"
    registry.replace(again)
    with pytest.raises(DefinitionError):
        registry.add_schema_tool("math.gcd", "d", EMPTY, _noop)


names = st.text(alphabet="ab._ -/", min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(st.lists(names, min_size=1, max_size=10))
def test_every_name_given_leads_back_to_exactly_one_tool(given_names: list[str]) -> None:
    """Whatever names are given, in whatever order and with repeats: each registered tool
    has a valid, distinct name; no two tools lead back to one name given; a name given
    again is refused."""
    registry = Registry()
    registered: dict[str, str] = {}
    for name in given_names:
        try:
            spec = registry.add_schema_tool(name, "d", EMPTY, _noop)
        except DefinitionError:
            # refused only when the name, or the name it maps to, is already in use
            assert name in registered or name in registry
            continue
        registered[name] = spec.name
    assert all(VALID_NAME.fullmatch(n) for n in registry.names())
    back = [registry.renamed().get(n, n) for n in registry.names()]
    assert sorted(back) == sorted(registered)
    assert {registry.renamed().get(v, v): v for v in registered.values()} == registered


def test_lint_reports_a_name_defined_twice_as_such(tmp_path: Path) -> None:
    """CG100 for a repeated name says the name is defined twice and what to do, not that the
    schema cannot be enforced; the other definitions are linted."""
    path = tmp_path / "tools.json"
    definitions = [
        {"name": "math.gcd", "description": "d", "parameters": EMPTY},
        {"name": "math.gcd", "description": "d", "parameters": EMPTY},
        {"name": "gcd", "description": "d", "parameters": EMPTY},
        {"name": "gcd", "description": "d", "parameters": EMPTY},
    ]
    path.write_text(json.dumps(definitions), encoding="utf-8")
    result = CliRunner().invoke(app, [str(path), "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    refused = [f for f in report["findings"] if f["rule"] == "CG100"]
    assert sorted((f["tool"], f["location"]) for f in refused) == [
        ("gcd", "definition 4"),
        ("math.gcd", "definition 2"),
    ]
    for finding in refused:
        assert "defined more than once" in finding["message"]
        assert "cannot be enforced" not in finding["message"]
        assert "schema" not in finding["fix"]
    assert sorted(report["tokens"]) == ["gcd", "math_gcd"]

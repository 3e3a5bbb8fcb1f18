"""Deny by default holds for every tool, including one declared without effects."""

from __future__ import annotations

import pytest

from callgate import Authority, Gate, Policy, Registry, Stage, Status, ToolCall


def _registry(ran: list[str]) -> Registry:
    registry = Registry()

    @registry.tool(risk="write")
    def wipe() -> str:
        """A write with no declared effects."""
        ran.append("wipe")
        return "wiped"

    @registry.tool(risk="read")
    def peek() -> str:
        """A read with no declared effects."""
        ran.append("peek")
        return "peeked"

    return registry


@pytest.mark.parametrize("tool", ["wipe", "peek"])
def test_a_tool_without_effects_does_not_run_under_an_empty_authority(tool: str) -> None:
    """A tool declared without effects is rejected at policy under no grants, naming call:<tool>."""
    ran: list[str] = []
    run = Gate(_registry(ran), policy=Policy()).run(authority=Authority(principal="nobody"))
    [obs] = run.submit([ToolCall(id="c1", name=tool, arguments={})])
    assert obs.status is Status.REJECTED
    assert obs.stage is Stage.AUTHORIZE
    assert f"call:{tool}" in obs.content
    assert ran == []


@pytest.mark.parametrize("tool", ["wipe", "peek"])
def test_a_tool_without_effects_runs_once_its_call_effect_is_granted(tool: str) -> None:
    """A tool declared without effects runs once call:<tool> is granted."""
    ran: list[str] = []
    authority = Authority(principal="ops", grants=[f"call:{tool}"])
    [obs] = (
        Gate(_registry(ran))
        .run(authority=authority)
        .submit([ToolCall(id="c1", name=tool, arguments={})])
    )
    assert obs.status is Status.OK
    assert ran == [tool]


def test_the_default_effect_is_declared_on_the_spec() -> None:
    """A tool declared without effects has the one effect call:<name> on its spec."""
    spec = _registry([]).get("wipe")
    assert spec is not None
    assert [t.text for t in spec.effects] == ["call:wipe"]

"""Agents over one gate share its exported tool definitions (issue 15, speed)."""

from __future__ import annotations

from typing import Any

import pytest

from callgate import Agent, Authority
from callgate.agent import loop
from callgate.llms import ScriptedModel

from .support import Shop, shop_gate


def test_agents_over_one_gate_export_its_tools_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second agent over the same gate and authority does not export the registry again."""
    exported: list[int] = []
    original = loop.exposed_tools

    def counting(*args: Any) -> Any:
        specs = original(*args)
        exported.append(len(specs))
        return specs

    monkeypatch.setattr(loop, "exposed_tools", counting)
    gate = shop_gate(Shop())
    authority = Authority(principal="alice", grants=["read:*"])
    first = Agent(ScriptedModel([]), gate).tools_for(authority)
    second = Agent(ScriptedModel([]), gate).tools_for(authority)
    assert first == second
    assert len(exported) == 1


def test_a_different_authority_gets_its_own_export(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared export is keyed on the grants: a narrower authority sees fewer tools."""
    gate = shop_gate(Shop())
    wide = Agent(ScriptedModel([]), gate).tools_for(
        Authority(
            principal="a", grants=["read:*", "write:orders", "spend:USD<=100", "disclose:email:*"]
        )
    )
    narrow = Agent(ScriptedModel([]), gate).tools_for(Authority(principal="a", grants=["read:*"]))
    assert set(narrow) < set(wide)

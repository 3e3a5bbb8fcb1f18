"""``submit`` takes any iterable of calls: one call in a tuple, a generator or a list
subclass takes the one-call path (decided and run in place, no batch checks), as one call
in a list does."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

import callgate.gate.gate
from callgate import Authority, Gate, MemoryLedger, Registry, ToolCall


class _Calls(list[ToolCall]):
    """A list of calls of the application's own type."""


def _run() -> Any:
    registry = Registry()

    @registry.tool(effects=["read:stock"])
    def stock(sku: str) -> int:
        """How many of ``sku`` are in stock."""
        return len(sku)

    gate = Gate(registry, ledger=MemoryLedger())
    return gate.run(authority=Authority(principal="p", grants=["read:stock"]))


def _one() -> ToolCall:
    return ToolCall(id="c1", name="stock", arguments={"sku": "abc"})


@pytest.mark.parametrize(
    "make",
    [
        lambda: [_one()],
        lambda: (_one(),),
        lambda: (c for c in [_one()]),
        lambda: _Calls([_one()]),
    ],
    ids=["list", "tuple", "generator", "list-subclass"],
)
def test_one_call_in_any_iterable_takes_the_one_call_path(
    make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch checks are never reached for a lone call, whatever iterable holds it."""

    def refuse(calls: Iterable[ToolCall], limit: int) -> None:
        raise AssertionError("a lone call went through the batch checks")

    monkeypatch.setattr(callgate.gate.gate, "batch_refusals", refuse)
    [obs] = _run().submit(make())
    assert (obs.call_id, obs.status.value, obs.result) == ("c1", "ok", 3)


def test_a_batch_holding_something_else_than_calls_is_refused_with_the_fix() -> None:
    """A dict where a `ToolCall` belongs raises TypeError naming ToolCall, in any iterable."""
    with pytest.raises(TypeError, match=r"use callgate.ToolCall\(id=..."):
        _run().submit(({"id": "c1", "name": "stock"},))  # type: ignore[arg-type]

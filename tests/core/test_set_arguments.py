"""A set argument has one canonical text, so equal calls have one request hash: the same
business key replays instead of conflicting, whatever order the model listed the items in."""

from __future__ import annotations

from typing import Any

from callgate import Authority, Gate, Registry, Status, ToolCall
from callgate.ledger import MemoryLedger


def test_a_reordered_set_replays_under_its_key_instead_of_conflicting() -> None:
    """The second call lists the set's items in another order: it is the same call."""
    sent: list[Any] = []
    registry = Registry()

    @registry.tool(effects="write:tags", idempotency_key="{order}")
    def tag(order: str, labels: set[str]) -> str:
        """Tag an order."""
        sent.append(sorted(labels))
        return "tagged"

    run = Gate(registry, ledger=MemoryLedger()).run(
        authority=Authority(principal="alice", grants=["write:tags"])
    )
    labels = [f"label-{n}" for n in range(12)]
    [first] = run.submit(
        [ToolCall(id="c1", name="tag", arguments={"order": "o-1", "labels": labels})]
    )
    [again] = run.submit(
        [ToolCall(id="c2", name="tag", arguments={"order": "o-1", "labels": labels[::-1]})]
    )
    assert first.status is Status.OK
    assert again.status is Status.OK, again.content
    assert len(sent) == 1  # replayed, not run twice and not a conflict

"""The run's evidence: what preconditions and sink checks read back."""

from __future__ import annotations

from pydantic import BaseModel

from callgate import Evidence, EvidenceItem


class OrderArguments(BaseModel):
    order_id: str
    revision: int


def test_latest_finds_the_newest_matching_observation_by_json_values() -> None:
    """Evidence.latest finds the newest item with matching arguments; has, iter and since agree."""
    evidence = Evidence()
    evidence.add(EvidenceItem("c1", "get_order", OrderArguments(order_id="A", revision=1), "old"))
    evidence.add(EvidenceItem("c2", "get_order", OrderArguments(order_id="B", revision=1), "b"))
    evidence.add(EvidenceItem("c3", "get_order", OrderArguments(order_id="A", revision=2), "new"))
    found = evidence.latest("get_order", order_id="A")
    assert found is not None
    assert (found.call_id, found.result, found.arguments) == (
        "c3",
        "new",
        {"order_id": "A", "revision": 2},
    )
    assert evidence.latest("get_order", order_id="C") is None
    assert not evidence.has("other_tool", order_id="A")
    assert [item.call_id for item in evidence] == ["c1", "c2", "c3"]
    assert [item.call_id for item in evidence.since(1)] == ["c2", "c3"]

"""The run's recorded evidence: every ``ok`` observation, for preconditions to consult.

A precondition such as "cancel only an order whose status was read in this
run" asks `Evidence.latest("get_order_status", order_id=...)`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Evidence", "EvidenceItem"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EvidenceItem:
    """One successful observation: which tool, with which arguments, returned what."""

    call_id: str
    tool: str
    arguments: Mapping[str, Any]
    result: Any


class Evidence:
    """The ``ok`` observations of one run, oldest first."""

    __slots__ = ("_by_tool", "_items")

    def __init__(self) -> None:
        self._items: list[EvidenceItem] = []
        self._by_tool: dict[str, list[EvidenceItem]] = {}

    def add(self, item: EvidenceItem) -> None:
        """Record a successful observation."""
        self._items.append(item)
        self._by_tool.setdefault(item.tool, []).append(item)

    def latest(self, tool: str, **arguments: Any) -> EvidenceItem | None:
        """The most recent ``ok`` call of ``tool`` whose arguments include these values."""
        for item in reversed(self._by_tool.get(tool, ())):
            if all(item.arguments.get(k) == v for k, v in arguments.items()):
                return item
        return None

    def has(self, tool: str, **arguments: Any) -> bool:
        """Whether an ``ok`` call of ``tool`` with these argument values was recorded."""
        return self.latest(tool, **arguments) is not None

    def __iter__(self) -> Iterator[EvidenceItem]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

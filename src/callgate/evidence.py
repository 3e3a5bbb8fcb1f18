"""The run's recorded evidence: every ``ok`` observation, for preconditions to consult.

A precondition such as "cancel only an order whose status was read in this
run" asks `Evidence.latest("get_order_status", order_id=...)`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pydantic_core
from pydantic import BaseModel

__all__ = ["Evidence", "EvidenceItem"]


class EvidenceItem:
    """One successful observation: which tool, with which arguments, returned what."""

    __slots__ = ("_arguments", "_values", "call_id", "result", "tool")

    def __init__(self, call_id: str, tool: str, arguments: BaseModel, result: Any) -> None:
        self.call_id = call_id
        self.tool = tool
        self.result = result
        # Keep the field values, not the model: fewer objects for a long run to hold.
        self._values: dict[str, Any] = arguments.__dict__
        self._arguments: dict[str, Any] | None = None

    @classmethod
    def _of(cls, row: _Row) -> EvidenceItem:
        item = cls.__new__(cls)
        item.call_id, item.tool, item._values, item.result = row
        item._arguments = None
        return item

    @property
    def arguments(self) -> Mapping[str, Any]:
        """The call's validated arguments as JSON values (computed when first asked)."""
        if self._arguments is None:
            self._arguments = pydantic_core.to_jsonable_python(self._values)
        return self._arguments

    def __repr__(self) -> str:
        return f"EvidenceItem(call_id={self.call_id!r}, tool={self.tool!r})"


_Row = tuple[str, str, dict[str, Any], Any]


class Evidence:
    """The ``ok`` observations of one run, oldest first.

    Kept in columns (one list per field) rather than an object per observation:
    the lists hold plain values and results, so a long run's evidence adds
    nothing for the garbage collector to walk but the results themselves.
    """

    __slots__ = ("_by_tool", "_call_ids", "_lock", "_results", "_tools", "_values")

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the columns grow together, even across threads
        self._call_ids: list[str] = []
        self._tools: list[str] = []
        self._values: list[dict[str, Any]] = []
        self._results: list[Any] = []
        self._by_tool: dict[str, list[int]] = {}

    def add(self, item: EvidenceItem) -> None:
        """Record a successful observation."""
        self.note(item.call_id, item.tool, item._values, item.result)

    def note(self, call_id: str, tool: str, values: dict[str, Any], result: Any) -> None:
        """Record a successful observation from its parts (``values``: the argument fields)."""
        with self._lock:
            index = len(self._call_ids)
            self._call_ids.append(call_id)
            self._tools.append(tool)
            self._values.append(values)
            self._results.append(result)
            rows = self._by_tool.get(tool)
            if rows is None:
                self._by_tool[tool] = [index]
            else:
                rows.append(index)

    def _item(self, i: int) -> EvidenceItem:
        return EvidenceItem._of(
            (self._call_ids[i], self._tools[i], self._values[i], self._results[i])
        )

    def latest(self, tool: str, **arguments: Any) -> EvidenceItem | None:
        """The most recent ``ok`` call of ``tool`` whose arguments include these values."""
        for i in reversed(self._by_tool.get(tool, ())):
            item = self._item(i)
            if all(item.arguments.get(k) == v for k, v in arguments.items()):
                return item
        return None

    def has(self, tool: str, **arguments: Any) -> bool:
        """Whether an ``ok`` call of ``tool`` with these argument values was recorded."""
        return self.latest(tool, **arguments) is not None

    def since(self, index: int) -> list[EvidenceItem]:
        """The observations recorded after the first ``index``."""
        return [self._item(i) for i in range(index, len(self._call_ids))]

    def __iter__(self) -> Iterator[EvidenceItem]:
        return (self._item(i) for i in range(len(self._call_ids)))

    def __len__(self) -> int:
        return len(self._call_ids)

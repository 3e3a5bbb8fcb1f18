"""The run's recorded evidence: every ``ok`` observation, for preconditions to consult.

A precondition such as "cancel only an order whose status was read in this
run" asks `Evidence.latest("get_order_status", order_id=...)`.
"""

from __future__ import annotations

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
"""call id, tool, argument values, result: a plain tuple, which the garbage collector
stops tracking once its contents are plain values, so a long run's evidence costs
later collections nothing."""


class Evidence:
    """The ``ok`` observations of one run, oldest first."""

    __slots__ = ("_by_tool", "_rows")

    def __init__(self) -> None:
        self._rows: list[_Row] = []
        self._by_tool: dict[str, list[_Row]] = {}

    def add(self, item: EvidenceItem) -> None:
        """Record a successful observation."""
        self.note(item.call_id, item.tool, item._values, item.result)

    def note(self, call_id: str, tool: str, values: dict[str, Any], result: Any) -> None:
        """Record a successful observation from its parts (``values``: the argument fields)."""
        row = (call_id, tool, values, result)
        self._rows.append(row)
        rows = self._by_tool.get(tool)
        if rows is None:
            self._by_tool[tool] = [row]
        else:
            rows.append(row)

    def latest(self, tool: str, **arguments: Any) -> EvidenceItem | None:
        """The most recent ``ok`` call of ``tool`` whose arguments include these values."""
        for row in reversed(self._by_tool.get(tool, ())):
            item = EvidenceItem._of(row)
            if all(item.arguments.get(k) == v for k, v in arguments.items()):
                return item
        return None

    def has(self, tool: str, **arguments: Any) -> bool:
        """Whether an ``ok`` call of ``tool`` with these argument values was recorded."""
        return self.latest(tool, **arguments) is not None

    def since(self, index: int) -> list[EvidenceItem]:
        """The observations recorded after the first ``index``."""
        return [EvidenceItem._of(row) for row in self._rows[index:]]

    def __iter__(self) -> Iterator[EvidenceItem]:
        return (EvidenceItem._of(row) for row in self._rows)

    def __len__(self) -> int:
        return len(self._rows)

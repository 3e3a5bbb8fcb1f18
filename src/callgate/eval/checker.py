"""A BFCL-style checker: did the model make the expected calls?

A call matches an expected call when the tool names are equal and the
arguments are equal after normalisation (`normalize`): text has its line
endings, trailing spaces and a leading ``./`` on paths evened out; numbers
compare by value (``1 == 1.0``, but ``True`` is not ``1``); objects compare
key by key, lists item by item. Order matters only where an expected call
names the calls it must follow (`ExpectedCall.after`); independent calls may
come in any order. Every other call the model made is an extra.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from callgate.eval.tasks import ExpectedCall

__all__ = ["CallCheck", "check_calls", "normalize"]


def normalize(value: Any) -> Any:
    """``value`` in the form two equal arguments share (see the module docstring)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return ("number", float(value))
    if isinstance(value, str):
        text = value.replace("\r\n", "\n").replace("\r", "\n")
        text = "\n".join(line.rstrip() for line in text.split("\n")).strip()
        while text.startswith("./"):
            text = text[2:]
        return text
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), normalize(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return ("list", tuple(normalize(v) for v in value))
    return ("other", repr(value))


@dataclass(frozen=True, slots=True, kw_only=True)
class CallCheck:
    """How a run's calls compare with the expected calls.

    ``matched`` maps each matched expected call (by index) to the index of the
    actual call that matched it; ``out_of_order`` lists actual calls equal to
    an expected call whose predecessors had not been made yet.
    """

    expected: int
    actual: int
    matched: Mapping[int, int]
    missing: tuple[int, ...]
    extra: tuple[int, ...]
    out_of_order: tuple[int, ...]

    @property
    def exact(self) -> bool:
        """Every expected call made, in an allowed order, and nothing else."""
        return not self.missing and not self.extra and not self.out_of_order

    @property
    def recall(self) -> float:
        """The share of expected calls that were made."""
        return len(self.matched) / self.expected if self.expected else 1.0

    @property
    def precision(self) -> float:
        """The share of the calls made that were expected."""
        return len(self.matched) / self.actual if self.actual else 1.0


def check_calls(
    expected: Sequence[ExpectedCall], actual: Sequence[tuple[str, Mapping[str, Any]]]
) -> CallCheck:
    """Compare ``actual`` ``(tool, arguments)`` calls, in the order made, with ``expected``.

    Each actual call takes the first unmatched expected call it equals whose
    predecessors are all matched; failing that, an equal expected call whose
    predecessors are not all matched makes it out of order; otherwise it is an extra.
    """
    keys = [(c.tool, normalize(c.arguments)) for c in expected]
    matched: dict[int, int] = {}
    extra: list[int] = []
    out_of_order: list[int] = []
    for j, (tool, arguments) in enumerate(actual):
        key = (tool, normalize(arguments))
        candidates = [i for i, k in enumerate(keys) if k == key and i not in matched]
        ready = [i for i in candidates if all(d in matched for d in expected[i].after)]
        if ready:
            matched[ready[0]] = j
        elif candidates:
            out_of_order.append(j)
        else:
            extra.append(j)
    missing = tuple(i for i in range(len(expected)) if i not in matched)
    return CallCheck(
        expected=len(expected),
        actual=len(actual),
        matched=matched,
        missing=missing,
        extra=tuple(extra),
        out_of_order=tuple(out_of_order),
    )

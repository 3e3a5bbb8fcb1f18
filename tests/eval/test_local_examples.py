"""examples/local: the task sampler spreads a small run over the tools (no model needed)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

EXAMPLES = Path(__file__).parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

from local.tasks import TASKS, spread  # noqa: E402


def test_ten_tasks_cover_the_ten_tools_once() -> None:
    """The fifty tasks are five of each of ten tools, listed tool by tool: ten spread tasks
    name ten different tools (the first ten in order named two)."""
    assert len({t.tool for t in TASKS[:10]}) == 2  # what the old slice gave
    chosen = spread(TASKS, 10)
    assert len(chosen) == 10
    assert len({t.tool for t in chosen}) == 10


def test_any_count_is_balanced_and_never_repeats() -> None:
    """For every n, no tool has two tasks more than another, no task repeats, and n past the
    set gives the whole set."""
    for n in range(0, 60):
        chosen = spread(TASKS, n)
        assert len(chosen) == min(n, len(TASKS))
        assert len({t.id for t in chosen}) == len(chosen)
        counts = Counter(t.tool for t in chosen)
        if counts:
            assert max(counts.values()) - min(counts.values()) <= 1
            assert len(counts) == min(n, 10)

"""The grammar decision's intervals: a clustered rate at 0 or 1 keeps an interval as wide as
its tasks can show."""

from __future__ import annotations

import pytest

from callgate.eval.intervals import clustered


def test_a_rate_no_task_failed_has_an_interval_over_tasks_not_a_point() -> None:
    """p_f on 56 tasks whose 271 calls were all well formed: the bootstrap over tasks gives
    [0, 0] (every resample is 0); the interval is Wilson's over the 56 tasks, [0, 0.064].
    A rate that is not a proportion (seconds per call) keeps the bootstrap's interval."""
    rows = [(f"t{i}", 0.0, 5.0 if i < 47 else 4.0) for i in range(56)]
    rate, tasks = clustered(rows, seed=1, rate=True)
    assert tasks == 56
    assert (rate.value, rate.low) == (0.0, 0.0)
    assert rate.high == pytest.approx(0.0642, abs=0.001)
    every, _ = clustered([(f"t{i}", 3.0, 3.0) for i in range(10)], seed=1, rate=True)
    assert every.low == pytest.approx(0.722, abs=0.001)
    seconds, _ = clustered([(f"t{i}", 2.0, 2.0) for i in range(10)], seed=1)
    assert (seconds.low, seconds.high) == (1.0, 1.0)

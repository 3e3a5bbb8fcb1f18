"""What each worker process of the fuzz tier runs (importable, for the ``spawn`` start method)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from .generate import DEFAULT_SETTINGS, Settings, generate
from .harness import Bench, Tally, iterate

_bench: Bench | None = None
_settings: Settings = DEFAULT_SETTINGS
_limit = 1.0


def start(directory: str, settings: Settings, limit: float) -> None:
    """Build this worker's gates once."""
    global _bench, _settings, _limit
    _bench = Bench(Path(directory))
    _settings = settings
    _limit = limit


def work(job: tuple[int, int, int]) -> Tally:
    """Generate and check the inputs ``start`` to ``stop`` of ``seed``."""
    seed, start, stop = job
    assert _bench is not None
    cases = (generate(seed, index, _settings) for index in range(start, stop))
    return iterate(_bench, cases, Tally(), _limit)


def jobs(seed: int, count: int, size: int) -> Iterator[tuple[int, int, int]]:
    """The inputs ``0 .. count`` of ``seed`` in jobs of ``size``."""
    for start in range(0, count, size):
        yield seed, start, min(count, start + size)

"""The pre-registration of a lab: what is compared and how, fixed before the data.

A TOML file (``examples/lab/prereg.toml``) names the surfaces, the task set
and steps registered, the level, the bootstrap, the cache-hit assumption, the
smallest effect worth detecting (``min_effect``, for a priori power) and the
surfaces each hypothesis is about; `callgate.eval.analysis` tests them.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from callgate.errors import DefinitionError

__all__ = ["Prereg"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Prereg:
    """A pre-registration; see the module docstring and ``examples/lab/prereg.toml``."""

    title: str = "three-surface lab"
    surfaces: tuple[str, ...] = ("coarse", "fine", "code")
    alpha: float = 0.05
    level: float = 0.95
    reps: int = 4000
    seed: int = 0
    cache_hit: float = 0.0
    h1: tuple[str, str] = ("code", "fine")
    h2: str = "coarse"
    h3: str = "fine"
    h4: str = "fine"
    tasks: str | None = None
    """The task set registered (``repo``, ``repo:N`` or a file), if any."""
    steps: int | None = None
    """The model calls per run registered, if any."""
    min_effect: float | None = None
    """The smallest difference in task success worth detecting (``[analysis] min_effect``):
    the a priori power of each paired comparison is computed for it."""
    text: str = ""

    @classmethod
    def from_toml(cls, path: Path) -> Prereg:
        """Read a pre-registration; `DefinitionError` names the file and the bad field."""
        try:
            raw = path.read_text(encoding="utf-8")
            data = tomllib.loads(raw)
        except OSError as exc:
            raise DefinitionError(f"--prereg {path}: cannot read it: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise DefinitionError(f"--prereg {path}: not valid TOML: {exc}") from None
        return cls.from_mapping(data, source=str(path), text=raw)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "", text: str = "") -> Prereg:
        """A pre-registration from decoded TOML data."""
        known = {"title", "surfaces", "tasks", "steps", "analysis", "hypotheses"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise DefinitionError(
                f"prereg {source}: unknown field(s) {unknown}; expected {sorted(known)}"
            )
        analysis = data.get("analysis", {})
        hyp = data.get("hypotheses", {})
        base = cls()
        try:
            h1 = hyp.get("H1", {})
            prereg = cls(
                title=str(data.get("title", base.title)),
                surfaces=tuple(str(s) for s in data.get("surfaces", base.surfaces)),
                alpha=float(analysis.get("alpha", base.alpha)),
                level=float(analysis.get("confidence", base.level)),
                reps=int(analysis.get("bootstrap_reps", base.reps)),
                seed=int(analysis.get("seed", base.seed)),
                cache_hit=float(analysis.get("cache_hit", base.cache_hit)),
                h1=(str(h1.get("better", "code")), str(h1.get("than", "fine"))),
                h2=str(hyp.get("H2", {}).get("highest", base.h2)),
                h3=str(hyp.get("H3", {}).get("best", base.h3)),
                h4=str(hyp.get("H4", {}).get("cheapest_single", base.h4)),
                tasks=None if data.get("tasks") is None else str(data["tasks"]),
                steps=None if data.get("steps") is None else int(data["steps"]),
                min_effect=(
                    None if analysis.get("min_effect") is None else float(analysis["min_effect"])
                ),
                text=text,
            )
        except (TypeError, ValueError, AttributeError) as exc:
            raise DefinitionError(f"prereg {source}: {exc}") from None
        if not 0 < prereg.alpha < 1 or not 0 < prereg.level < 1:
            raise DefinitionError(f"prereg {source}: alpha and confidence must be within (0, 1)")
        if prereg.reps < 100:
            raise DefinitionError(f"prereg {source}: bootstrap_reps must be at least 100")
        if prereg.min_effect is not None and not 0 < prereg.min_effect < 1:
            raise DefinitionError(
                f"prereg {source}: min_effect must be a success difference within (0, 1), "
                f"got {prereg.min_effect}"
            )
        if not 0 <= prereg.cache_hit <= 1:
            raise DefinitionError(f"prereg {source}: cache_hit must be within [0, 1]")
        return prereg

"""The injection benchmark's data: four assistant domains, their tasks and injection goals.

`core` holds the vocabulary (environments, user tasks, injection goals,
domains); `workspace`, `banking`, `travel` and `chat` the domains, each with
its policy file beside it; `harness` drives one pair through the gate.
`benchmarks/injection.py` runs them all; `benchmarks/README.md` gives the
method and the figures.
"""

from __future__ import annotations

from .banking import DOMAIN as BANKING
from .chat import DOMAIN as CHAT
from .core import KINDS, Domain, Env, InjectionGoal, Kind, Step, UserTask, step
from .travel import DOMAIN as TRAVEL
from .workspace import DOMAIN as WORKSPACE

DOMAINS: tuple[Domain, ...] = (WORKSPACE, BANKING, TRAVEL, CHAT)

__all__ = [
    "BANKING",
    "CHAT",
    "DOMAINS",
    "KINDS",
    "TRAVEL",
    "WORKSPACE",
    "Domain",
    "Env",
    "InjectionGoal",
    "Kind",
    "Step",
    "UserTask",
    "step",
]

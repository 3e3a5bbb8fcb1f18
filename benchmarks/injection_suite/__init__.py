"""The injection benchmark's data: five assistant domains, their tasks and injection goals.

`core` holds the vocabulary (environments, user tasks, injection goals,
domains); `workspace`, `banking`, `travel`, `chat` and `shop` the domains, each with
its policy file beside it; `harness` drives one pair through the gate.
`benchmarks/injection.py` runs them all; `benchmarks/README.md` gives the
method and the figures.
"""

from __future__ import annotations

from .banking import DOMAIN as BANKING
from .chat import DOMAIN as CHAT
from .core import KINDS, Domain, Env, InjectionGoal, Kind, Step, UserTask, step
from .shop import DOMAIN as SHOP
from .travel import DOMAIN as TRAVEL
from .workspace import DOMAIN as WORKSPACE

DOMAINS: tuple[Domain, ...] = (WORKSPACE, BANKING, TRAVEL, CHAT, SHOP)

__all__ = [
    "BANKING",
    "CHAT",
    "DOMAINS",
    "KINDS",
    "SHOP",
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

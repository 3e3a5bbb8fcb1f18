"""The injection benchmark's data: four assistant domains, their tasks and injection goals.

See `benchmarks/injection.py` for how they are driven through the gate and
`benchmarks/README.md` for the method.
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

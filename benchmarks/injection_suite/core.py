"""The benchmark's vocabulary: environments, user tasks, injection goals, domains.

A *domain* is one assistant (mail/files/calendar, banking, travel, team chat):
an in-memory environment, ordinary callgate tools over it, the deployer's
declarations (effects, sinks, ``output_trust``, a policy file, the values
the application vouches for), the user tasks it serves and the injection
goals an attacker may plant in the data those tasks read.

Everything here is data; `benchmarks/injection.py` drives it through a real
`Gate`. Nothing in a domain knows which configuration is being measured.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from callgate import Registry

__all__ = [
    "KINDS",
    "Domain",
    "Env",
    "InjectionGoal",
    "Kind",
    "Step",
    "UserTask",
    "step",
]

Kind = Literal["integrity", "phishing", "exfiltration", "payment", "deletion"]
KINDS: tuple[Kind, ...] = ("integrity", "phishing", "exfiltration", "payment", "deletion")


@dataclass
class Env:
    """The state every tool of a domain works on; ``effects`` logs each side effect that ran."""

    effects: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def log(self, tool: str, **args: Any) -> dict[str, Any]:
        """Record a side effect (tool name and arguments) and answer like a real service."""
        self.effects.append((tool, copy.deepcopy(args)))
        return {"done": True}

    def reset_to(self, fresh: Env) -> None:
        """Take every field of ``fresh`` in place (tools built once keep working on ``self``)."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(fresh, f.name))


@dataclass(frozen=True, kw_only=True)
class Step:
    """One call the model proposes: a tool name and its arguments."""

    tool: str
    args: Mapping[str, Any]


def step(tool: str, **args: Any) -> Step:
    """A `Step` written like a call: ``step("send_email", to=..., body=...)``."""
    return Step(tool=tool, args=args)


Plant = Callable[[Any, str], None]
"""Places injected text into the environment, in a field the task reads."""


@dataclass(frozen=True, kw_only=True)
class UserTask:
    """What the user asks, and the calls a correct assistant makes for it, turn by turn.

    ``turns`` are replayed in order, each turn proposed after the previous
    one's observations came back; the side-effecting calls among them are the
    task's *expected calls*. ``plant`` puts an attacker's text into a field
    of the data the task reads (a third party's mail, review, message, page),
    so that the attacking model sees it in a tool result.
    """

    id: str
    prompt: str
    turns: tuple[tuple[Step, ...], ...]
    plant: Plant
    where: str
    """Where the injected text sits, for the report ("a review of hotel h-2")."""
    binds: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """What an honest planner that sees only the request binds to a source (issue 33):
    ``{"send_money.iban": {"from": "get_bill", "field": "iban"}}``, the source being the
    task's first call of that tool with the argument values the request states; ``pick``
    and ``by`` as in `callgate.authorize.steps.Bind`. Declared with the task, from its
    request's words (the bill it names, "the cheapest", "the largest")."""

    @property
    def tools(self) -> tuple[str, ...]:
        """The tools the task uses, in first-use order (what an honest plan lists)."""
        seen: dict[str, None] = {}
        for turn in self.turns:
            for s in turn:
                seen.setdefault(s.tool, None)
        return tuple(seen)


@dataclass(frozen=True, kw_only=True)
class InjectionGoal:
    """An attacker's goal: the instruction planted in data, the calls it makes the model propose.

    ``calls`` use only values that appear in ``instruction`` or in the
    domain's environment (an id the model would look up), so that an obeying
    model could have written them.
    """

    id: str
    kind: Kind
    instruction: str
    """The imperative the attacker wants followed, ASCII without quotes (it is found verbatim)."""
    calls: tuple[Step, ...]
    note: str = ""
    """Why the goal is harmful, for the report."""


@dataclass(frozen=True, kw_only=True)
class Domain:
    """One assistant: its environment, tools, the deployer's declarations, tasks and goals."""

    name: str
    principal: str
    system: str
    grants: tuple[str, ...]
    make_env: Callable[[], Env]
    registry: Callable[[Any, bool], Registry]
    """``registry(env, declared)``; ``declared=False`` drops sinks and output_trust (control)."""
    policy_file: Path
    trusted_records: Callable[[Any], list[tuple[dict[str, Any], dict[str, Any]]]]
    """Records the application vouches for at the start of a run (the user's own address
    book, saved payees), each with the kinds of its fields."""
    tasks: tuple[UserTask, ...]
    goals: tuple[InjectionGoal, ...]

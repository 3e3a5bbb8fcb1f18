"""Scripted model *policies*: models with known behaviour, so the lab's statistics can be
tested against effects planted on purpose.

A `Policy` follows a task's reference solution, one call per turn, on any
surface (a typed call on ``fine``, ``do(op, args)`` on ``coarse``, one
program on ``code``), and misbehaves at rates set per surface and per
complexity:

* ``wrong_tool``: a call first goes to a tool the surface does not have
  (the funnel's stage A), then to the right one;
* ``mistype``: a call's arguments are first sent mistyped (stage B); at the
  ``recover`` rate the next turn sends them right, otherwise the policy gives up;
* ``skip``: the last edit of the solution is left out, so execution succeeds
  and the task fails (stage D);
* ``crash`` (the code surface): the program raises before its last edit, so
  ``run_python`` exits non-zero (stage C, and a failed call for H3) and the
  task fails.

Every draw comes from a generator seeded by (seed, task, surface), so a run
is reproducible and two surfaces of one task draw independently.
`PolicyModel` is the `Model` a policy drives for one task on one surface.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from callgate.errors import DefinitionError
from callgate.eval.tasks import Operation, Task
from callgate.llms.base import Model, ModelRequest, ModelResponse
from callgate.llms.scripted import Turn, answer, latest_results, render_turn

__all__ = ["POLICIES", "Policy", "PolicyModel", "policy_named"]

Rates = Mapping[str, float]
"""Rates by surface name, or by ``surface/complexity`` (which wins), or ``*``."""


def _rate(rates: Rates, surface: str, complexity: str) -> float:
    for key in (f"{surface}/{complexity}", surface, f"*/{complexity}", "*"):
        if key in rates:
            return float(rates[key])
    return 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """A scripted behaviour; see the module docstring."""

    name: str
    wrong_tool: Rates = field(default_factory=dict)
    mistype: Rates = field(default_factory=dict)
    skip: Rates = field(default_factory=dict)
    recover: Rates = field(default_factory=lambda: {"*": 1.0})
    crash: Rates = field(default_factory=dict)
    run_tests: bool = True
    """Whether the policy runs the tests before it answers (as the solution does)."""

    def model(self, task: Task, surface: str, *, seed: int = 0) -> PolicyModel:
        """The model this policy drives for ``task`` on ``surface``."""
        return PolicyModel(self, task, surface, seed=seed)


POLICIES: dict[str, Policy] = {
    "oracle": Policy(name="oracle"),
    "oracle-fast": Policy(name="oracle-fast", run_tests=False),
    # Fine composes poorly (forgets an edit on long tasks); coarse mistypes single tasks
    # and does not recover: a complexity x surface interaction planted in both directions.
    "planted": Policy(
        name="planted",
        skip={"fine/composition": 0.6, "code/single": 0.4},
        crash={"code/composition": 0.3},
        mistype={"coarse/single": 0.6, "*": 0.05},
        wrong_tool={"fine": 0.05},
        recover={"coarse/single": 0.0, "*": 1.0},
        run_tests=False,
    ),
    # Mistakes that are always repaired: every stage fails sometimes, every task succeeds.
    "clumsy": Policy(
        name="clumsy",
        mistype={"*": 0.3},
        wrong_tool={"*": 0.2},
        run_tests=False,
    ),
}


def policy_named(name: str) -> Policy:
    """The shipped policy ``name``; `DefinitionError` lists them."""
    try:
        return POLICIES[name]
    except KeyError:
        raise DefinitionError(
            f"unknown policy {name!r}; shipped policies: {', '.join(sorted(POLICIES))}"
        ) from None


# -- one planned call per operation --------------------------------------------------------


def _call(op: Operation, surface: str) -> tuple[str, dict[str, Any]]:
    if op.kind == "read":
        name, args = "read_file", {"path": op.path}
    elif op.kind == "search":
        name, args = "search_files", {"pattern": op.pattern}
    elif op.kind == "write":
        name, args = "write_file", {"path": op.path, "content": op.content}
    else:
        name, args = "run_tests", {"command": "pytest"}
    if surface == "coarse":
        return "do", {"op": name.split("_")[0] if name != "run_tests" else "test", "args": args}
    return name, args


def _mistyped(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` with one argument's type wrong (what a schema rejects)."""
    if name == "do":
        inner = dict(args["args"])
        key = next(iter(inner), "path")
        inner[key] = [inner.get(key)]
        return {"op": args["op"], "args": inner}
    key = next(iter(args), "path")
    return {**args, key: [args.get(key)]}


def _program(ops: list[Operation], *, crash: bool = False) -> str:
    """The code surface's one program: the solution's operations as calls of ``tools``
    (with ``crash``, raising before the last edit)."""
    lines = ["import tools", ""]
    last = max((i for i, op in enumerate(ops) if op.kind == "write"), default=-1)
    for i, op in enumerate(ops):
        if crash and i == last:
            lines.append("raise RuntimeError('planted crash before the last edit')")
        if op.kind == "read":
            lines.append(f"tools.read_file(path={op.path!r})")
        elif op.kind == "search":
            lines.append(f"print(tools.search_files(pattern={op.pattern!r}))")
        elif op.kind == "write":
            lines.append(f"tools.write_file(path={op.path!r}, content={op.content!r})")
        else:
            lines.append("print(tools.run_tests(command='pytest'))")
    return "\n".join(lines) + "\n"


@dataclass(slots=True)
class _Step:
    name: str
    args: dict[str, Any]
    first: tuple[str, dict[str, Any]] | None = None
    """A wrong first attempt (wrong tool or mistyped arguments), sent before ``args``."""


class PolicyModel(Model):
    """A `Policy` driving one task on one surface; answers in the ``openai_chat`` format."""

    format = "openai_chat"

    def __init__(self, policy: Policy, task: Task, surface: str, *, seed: int = 0) -> None:
        self.policy = policy
        self.name = f"policy:{policy.name}"
        digest = hashlib.sha256(f"{seed}/{task.id}/{surface}".encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "big"))
        ops = [op for op in task.solution if policy.run_tests or op.kind != "test"]
        c = task.complexity
        if rng.random() < _rate(policy.skip, surface, c):
            last = max(i for i, op in enumerate(ops) if op.kind == "write")
            ops = ops[:last] + ops[last + 1 :]
        self.steps: list[_Step] = []
        if surface == "code":
            crash = rng.random() < _rate(policy.crash, surface, c)
            self.steps.append(_Step("run_python", {"code": _program(ops, crash=crash)}))
        else:
            for op in ops:
                name, args = _call(op, surface)
                step = _Step(name, args)
                if rng.random() < _rate(policy.wrong_tool, surface, c):
                    step.first = ("edit_repository" if name != "do" else "do_op", args)
                elif rng.random() < _rate(policy.mistype, surface, c):
                    step.first = (name, _mistyped(name, args))
                self.steps.append(step)
        self._recover = rng.random() < _rate(policy.recover, surface, c)
        self._next = 0
        self._retry: _Step | None = None

    async def complete(self, request: ModelRequest) -> ModelResponse:
        turn = self._turn(request)
        raw = render_turn(turn, self.format, request.step, self.name)
        return ModelResponse(raw=raw, model=self.name)

    def _turn(self, request: ModelRequest) -> Turn:
        results = latest_results(request) if request.step > 1 else []
        if self._retry is not None:
            step, self._retry = self._retry, None
            if results and results[-1].is_error:
                if not self._recover:
                    return answer("I could not make that call work; stopping here.")
                return Turn(calls=(("", step.name, step.args),))
        if self._next >= len(self.steps):
            return answer("Done: the change is made.")
        step = self.steps[self._next]
        self._next += 1
        if step.first is not None:
            self._retry = step
            name, args = step.first
            return Turn(calls=(("", name, json.dumps(args)),))
        return Turn(calls=(("", step.name, step.args),))

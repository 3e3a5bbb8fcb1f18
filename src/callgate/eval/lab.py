"""The lab runner: every task on every surface, paired, recorded in one ledger.

The lab first records an ``eval.lab`` event naming itself, the model (file,
sha256, decoding mode and parameters: `describe_model`), the surfaces, the
task set and its deviations from the pre-registration, so a later analysis
reports what this one did. For each task, and for each surface in turn, the runner generates the
task's repository in a fresh temporary directory, records an ``eval.run``
event (task, surface, complexity, the tool definitions shown), runs the
`Agent` with the task's prompt under the same grants and budgets on every
surface, judges the repository with the task's verifier and records an
``eval.verdict`` event. A model that keeps decode statistics (a local
model's ``decodes``) has the run's share written as ``model.decode`` events,
which the grammar decision reads beside the verdicts. The directory is
removed afterwards. The funnel, the
token accounting and the analysis read everything back from the ledger
(`callgate.eval.record.read_runs`). The runs go through the sync `Agent.run`,
on the calling thread's kept event loop (`callgate.sync_loop`), so one model
object, and the SDK client inside it, serves every run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from callgate.agent.exposure import exposed_tools
from callgate.agent.loop import Agent
from callgate.agent.state import Budgets
from callgate.eval.record import EVAL_LAB, EVAL_RUN, EVAL_VERDICT
from callgate.eval.surfaces import Surface, authority_for, get_surface
from callgate.eval.tasks import Task, materialize, verify
from callgate.gate import Gate
from callgate.ledger.base import Ledger
from callgate.llms.base import Model
from callgate.llms.formats import get_format

__all__ = ["DECODE_EVENT", "LAB_SYSTEM", "LabRun", "ModelFor", "describe_model", "run_lab"]

DECODE_EVENT = "model.decode"
"""One model call's decode statistics (`callgate.llms.local.DecodeStats`)."""
_HASHES: dict[tuple[str, int, float], str] = {}

LAB_SYSTEM = (
    "You edit a small Python repository with the tools you are given. Paths are relative "
    "to the repository root. Make the change the user asks for, run the tests if you can, "
    "and answer with one sentence when the change is made."
)

ModelFor = Callable[[Task, str], Model]
"""The model for one task on one surface (a real model ignores both; a policy uses them)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LabRun:
    """What one run of one task on one surface came to."""

    run_id: str
    task: str
    surface: str
    complexity: str
    passed: bool
    reason: str
    steps: int
    tool_calls: int
    seconds: float


def _sha256(path: Path) -> str:
    """The file's SHA-256 (remembered per path, size and mtime: a GGUF is large)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime)
    if key not in _HASHES:
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        _HASHES[key] = digest.hexdigest()
    return _HASHES[key]


def describe_model(model: Model, spec: str = "") -> dict[str, Any]:
    """What a report must say of ``model``: its spec and name, and where it has them its
    file (with SHA-256), decoding mode and parameters (a local model), or its policy's rates
    and seed (a scripted policy)."""
    out: dict[str, Any] = {"spec": spec or model.name, "name": model.name}
    path = getattr(model, "path", None)
    if isinstance(path, Path) and path.is_file():
        out["file"] = path.name
        out["sha256"] = _sha256(path)
    decoding = getattr(model, "constrain", None)
    if isinstance(decoding, str):
        out["decoding"] = decoding
    params: dict[str, Any] = {}
    for name in ("max_tokens", "temperature", "seed", "parallel", "answer"):
        value = getattr(model, name, None)
        if isinstance(value, int | float | str | bool):
            params[name] = value
    policy = getattr(model, "policy", None)
    if dataclasses.is_dataclass(policy) and not isinstance(policy, type):
        out["decoding"] = "scripted"
        for key, value in dataclasses.asdict(policy).items():
            if key != "name":
                params[key] = dict(value) if isinstance(value, Mapping) else value
    if params:
        out["parameters"] = params
    return out


def run_lab(
    tasks: Sequence[Task],
    surfaces: Sequence[str],
    model_for: ModelFor,
    ledger: Ledger,
    *,
    budgets: Budgets | None = None,
    lab_id: str | None = None,
    system: str = LAB_SYSTEM,
    workdir: Path | None = None,
    on_run: Callable[[LabRun], None] | None = None,
    model_info: Mapping[str, Any] | None = None,
    task_set: str = "",
    deviations: Sequence[str] = (),
) -> list[LabRun]:
    """Run every task on every surface (see the module docstring); the runs in order.

    Surfaces are resolved first (`get_surface`), so an unknown or missing one
    fails before any run starts. ``model_info`` names the model in the lab's
    record (`describe_model` of the first task's model when not given);
    ``task_set`` and ``deviations`` are recorded with it, for `read_labs`.
    """
    built: list[Surface] = [get_surface(name) for name in surfaces]
    budgets = budgets if budgets is not None else Budgets(steps=30, tool_calls=60, seconds=600)
    lab_id = lab_id or uuid.uuid4().hex[:8]
    gates = {s.name: Gate(s.registry, ledger=ledger) for s in built}
    if model_info is None and tasks and built:
        model_info = describe_model(model_for(tasks[0], built[0].name))
    ledger.record_event(
        EVAL_LAB,
        run_id=f"lab-{lab_id}",
        call_id=None,
        data={
            "lab": lab_id,
            "model": dict(model_info or {}),
            "surfaces": [s.name for s in built],
            "tasks": task_set,
            "task_ids": [t.id for t in tasks],
            "deviations": list(deviations),
            "budgets": {"steps": budgets.steps, "tool_calls": budgets.tool_calls},
        },
    )
    out: list[LabRun] = []
    for task in tasks:
        for surface in built:
            run = _one(
                task,
                surface,
                gates[surface.name],
                model_for,
                ledger,
                budgets,
                lab_id,
                system,
                workdir,
            )
            out.append(run)
            if on_run is not None:
                on_run(run)
    return out


def _one(
    task: Task,
    surface: Surface,
    gate: Gate,
    model_for: ModelFor,
    ledger: Ledger,
    budgets: Budgets,
    lab_id: str,
    system: str,
    workdir: Path | None,
) -> LabRun:
    root = Path(tempfile.mkdtemp(prefix="callgate-lab-", dir=workdir))
    try:
        repo = materialize(task, root / "repo")
        authority = authority_for(repo)
        model = model_for(task, surface.name)
        specs = exposed_tools(surface.registry, authority, gate.policy)
        definitions = get_format(model.format).tool_definitions(specs)
        run_id = f"lab-{lab_id}/{task.id}/{surface.name}"
        ledger.record_event(
            EVAL_RUN,
            run_id=run_id,
            call_id=None,
            data={
                "lab": lab_id,
                "task": task.id,
                "surface": surface.name,
                "complexity": task.complexity,
                "kind": task.kind,
                "operations": task.operations,
                "model": model.name,
                "tool_definitions": definitions,
            },
        )
        decodes = getattr(model, "decodes", None)
        seen = len(decodes) if isinstance(decodes, list) else 0
        start = time.perf_counter()
        agent = Agent(
            model, gate, budgets=budgets, system=system, paging=False, result_chars=20_000
        )
        result = agent.run(task.prompt, authority=authority, run_id=run_id)
        verdict = verify(task, repo)
        seconds = time.perf_counter() - start
        if isinstance(decodes, list):
            for stats in decodes[seen:]:
                data = (
                    dataclasses.asdict(stats)
                    if dataclasses.is_dataclass(stats) and not isinstance(stats, type)
                    else stats
                )
                if isinstance(data, Mapping):
                    ledger.record_event(DECODE_EVENT, run_id=run_id, call_id=None, data=dict(data))
        ledger.record_event(
            EVAL_VERDICT,
            run_id=run_id,
            call_id=None,
            data={
                "passed": verdict.passed,
                "exit_code": verdict.exit_code,
                "seconds": round(verdict.seconds, 3),
                "output": verdict.output[-2000:],
            },
        )
        return LabRun(
            run_id=run_id,
            task=task.id,
            surface=surface.name,
            complexity=task.complexity,
            passed=verdict.passed,
            reason=result.reason.value,
            steps=result.steps,
            tool_calls=result.tool_calls,
            seconds=seconds,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)

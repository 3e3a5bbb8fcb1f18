"""The task format: what a model is asked, in which repository, and how success is judged.

A `Task` carries a prompt, the trusted context the run is given, the files of a
small repository generated at run time (never stored in the working tree), a
reference solution as surface-independent `Operation`s, the expected calls of
the fine-grained surface where they are known (for the BFCL-style checker,
`callgate.eval.checker`), a complexity label and a deterministic verifier:
hidden test files written into the repository at verification time, then
pytest over it, inside the sandbox where it can run (`verify`). The hidden
tests overwrite any file of the same name, so a run that edits the visible
tests cannot make them pass.

Complexity is counted in *operations*: the edits and searches the reference
solution needs (reads and test runs do not count). A task is ``single`` with
one operation and ``composition`` with more than three; tasks in between are
refused where they are defined, so the two labels mean what the lab's H1 says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from callgate.errors import DefinitionError
from callgate.eval.confine import run_pytest

__all__ = [
    "COMPOSITION",
    "SINGLE",
    "ExpectedCall",
    "Operation",
    "Task",
    "Verdict",
    "materialize",
    "safe_relative",
    "verify",
]

SINGLE: Literal["single"] = "single"
COMPOSITION: Literal["composition"] = "composition"
Complexity = Literal["single", "composition"]

_PYTEST_INI = "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"


def safe_relative(path: str) -> PurePosixPath:
    """``path`` as a relative POSIX path inside a workspace, or ValueError saying why not.

    Pure text: no file is touched. Absolute paths, ``..`` parts, backslashes and
    control characters are refused.
    """
    if not isinstance(path, str) or not path.strip():
        raise ValueError("the path is empty; give a path relative to the repository root")
    if any(ord(ch) < 32 for ch in path) or "\\" in path:
        raise ValueError(f"the path {path[:80]!r} holds a control character or a backslash")
    pure = PurePosixPath(path.strip())
    if pure.is_absolute():
        raise ValueError(f"the path {path[:80]!r} is absolute; give it relative to the root")
    if any(part == ".." for part in pure.parts):
        raise ValueError(f"the path {path[:80]!r} leaves the repository ('..')")
    parts = [p for p in pure.parts if p != "."]
    if not parts:
        raise ValueError(f"the path {path[:80]!r} names the repository root, not a file")
    return PurePosixPath(*parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class Operation:
    """One step of a reference solution, independent of the tool surface.

    ``kind`` is ``read`` (``path``), ``search`` (``pattern``), ``write``
    (``path``, ``content``) or ``test``.
    """

    kind: Literal["read", "search", "write", "test"]
    path: str = ""
    pattern: str = ""
    content: str = ""

    @property
    def counts(self) -> bool:
        """Whether the operation counts toward the task's complexity (edits and searches)."""
        return self.kind in ("write", "search")


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectedCall:
    """A call the task expects on a surface, for the BFCL-style checker.

    ``after`` lists the indices (in the task's expected calls) of calls this
    one must follow; calls with no order between them may come in any order.
    """

    tool: str
    arguments: Mapping[str, Any]
    after: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One task of a task set; see the module docstring."""

    id: str
    kind: str
    prompt: str
    files: Mapping[str, str]
    hidden_tests: Mapping[str, str]
    solution: tuple[Operation, ...]
    complexity: Complexity
    context: Mapping[str, Any] = field(default_factory=dict)
    expected_calls: Mapping[str, tuple[ExpectedCall, ...]] = field(default_factory=dict)
    """Expected calls by surface name (``fine``, ``coarse``...), where they are known."""
    timeout: float = 60.0

    def __post_init__(self) -> None:
        if not self.id or not self.prompt:
            raise DefinitionError("a Task needs an id and a prompt")
        for path in (*self.files, *self.hidden_tests):
            try:
                safe_relative(path)
            except ValueError as exc:
                raise DefinitionError(f"task {self.id}: file {path!r}: {exc}") from None
        n = self.operations
        if self.complexity == SINGLE and n != 1:
            raise DefinitionError(
                f"task {self.id} is labelled single but its solution has {n} operations "
                "(edits and searches); single means exactly one"
            )
        if self.complexity == COMPOSITION and n <= 3:
            raise DefinitionError(
                f"task {self.id} is labelled composition but its solution has {n} operations; "
                "composition means more than three"
            )
        if self.complexity not in (SINGLE, COMPOSITION):
            raise DefinitionError(
                f"task {self.id}: complexity must be 'single' or 'composition', "
                f"got {self.complexity!r}"
            )

    @property
    def operations(self) -> int:
        """The number of edits and searches of the reference solution."""
        return sum(1 for op in self.solution if op.counts)

    def to_json(self) -> dict[str, Any]:
        """The task as plain JSON data (`load_tasks` reads it back)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "prompt": self.prompt,
            "files": dict(self.files),
            "hidden_tests": dict(self.hidden_tests),
            "solution": [
                {"kind": o.kind, "path": o.path, "pattern": o.pattern, "content": o.content}
                for o in self.solution
            ],
            "complexity": self.complexity,
            "context": dict(self.context),
            "expected_calls": {
                surface: [
                    {"tool": c.tool, "arguments": dict(c.arguments), "after": list(c.after)}
                    for c in calls
                ]
                for surface, calls in self.expected_calls.items()
            },
            "timeout": self.timeout,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Task:
        """A task from `to_json` data; `DefinitionError` names the first bad field."""
        try:
            return cls(
                id=str(data["id"]),
                kind=str(data.get("kind", "")),
                prompt=str(data["prompt"]),
                files={str(k): str(v) for k, v in dict(data.get("files", {})).items()},
                hidden_tests={
                    str(k): str(v) for k, v in dict(data.get("hidden_tests", {})).items()
                },
                solution=tuple(
                    Operation(
                        kind=o["kind"],
                        path=str(o.get("path", "")),
                        pattern=str(o.get("pattern", "")),
                        content=str(o.get("content", "")),
                    )
                    for o in data.get("solution", [])
                ),
                complexity=data["complexity"],
                context=dict(data.get("context", {})),
                expected_calls={
                    str(s): tuple(
                        ExpectedCall(
                            tool=str(c["tool"]),
                            arguments=dict(c.get("arguments", {})),
                            after=tuple(int(i) for i in c.get("after", [])),
                        )
                        for c in calls
                    )
                    for s, calls in dict(data.get("expected_calls", {})).items()
                },
                timeout=float(data.get("timeout", 60.0)),
            )
        except KeyError as exc:
            raise DefinitionError(
                f"task {data.get('id', '?')!r}: the field {exc.args[0]!r} is missing"
            ) from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise DefinitionError(f"task {data.get('id', '?')!r}: {exc}") from None


def materialize(task: Task, root: Path) -> Path:
    """Write the task's repository into ``root`` (created; must be empty or absent)."""
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise FileExistsError(f"{root} is not empty; materialize a task into a fresh directory")
    for rel, text in task.files.items():
        target = root / safe_relative(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    (root / "pytest.ini").write_text(_PYTEST_INI, encoding="utf-8")
    return root


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The verifier's answer: whether the task succeeded, and pytest's last lines."""

    task_id: str
    passed: bool
    exit_code: int
    output: str
    seconds: float


def verify(task: Task, root: Path) -> Verdict:
    """Judge the repository at ``root``: write the hidden tests (over any file of the same
    name, and the pytest configuration), then run pytest over it, inside the sandbox where
    it can run (`callgate.eval.confine.run_pytest`)."""
    import time

    for rel, text in task.hidden_tests.items():
        target = root / safe_relative(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    (root / "pytest.ini").write_text(_PYTEST_INI, encoding="utf-8")
    start = time.perf_counter()
    code, output = run_pytest(root, [], task.timeout)
    tail = "\n".join(output.strip().splitlines()[-15:])
    return Verdict(
        task_id=task.id,
        passed=code == 0,
        exit_code=code,
        output=tail,
        seconds=time.perf_counter() - start,
    )

"""The tool surfaces the lab compares, over one workspace, one policy and one budget.

* ``coarse``: one tool, ``do(op, args)``; the dispatcher maps a free-text
  operation name to an operation and checks its arguments loosely.
* ``fine``: typed tools ``read_file``, ``search_files``, ``write_file``,
  ``run_tests``, each stating its failure modes.
* ``code``: ``run_python`` from `callgate.sandbox`; the model is shown that
  one tool, and the program it writes calls the fine tools as
  ``tools.read_file(...)``, each call submitted through the same run.

Every surface runs the same operations (`Workspace`) under the same grants
(`GRANTS`): only the surface varies. The workspace directory reaches the
handlers as trusted context (``Authority.context["workspace"]``), never as
an argument the model chooses; paths the model gives are relative, and a
path that would leave the workspace is refused at the validate stage.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from callgate.authorize.policy import Authority
from callgate.errors import ArgumentError, DefinitionError, ToolFailure
from callgate.eval.confine import run_pytest
from callgate.eval.tasks import safe_relative
from callgate.tools import CallContext, Registry, ToolSpec

__all__ = [
    "GRANTS",
    "SURFACES",
    "ShownRegistry",
    "Surface",
    "Workspace",
    "authority_for",
    "get_surface",
    "register_surface",
]

GRANTS = ("read:workspace", "write:workspace", "exec:workspace", "exec:sandbox")
"""What every lab run is granted, whatever its surface."""

_TEXT_SUFFIXES = {".py", ".md", ".txt", ".ini", ".toml", ".cfg", ".json"}
_MAX_FILE = 200_000
_MAX_HITS = 200
_PYTEST_FLAGS = {"-q", "-x", "-v", "--tb=short", "--tb=line", "--tb=no", "-rA"}
_SAFE_TOKEN = re.compile(r"^[A-Za-z0-9_./:\[\]-]+$")


class Workspace:
    """The operations every surface is built from, confined to one directory."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def _path(self, path: str) -> Path:
        target = (self.root / safe_relative(path)).resolve()
        if target != self.root and self.root not in target.parents:
            raise ToolFailure(f"the path {path!r} leaves the repository", retryable=False)
        return target

    def read(self, path: str) -> str:
        """The text of ``path``; `ToolFailure` if it is missing, a directory or too large."""
        target = self._path(path)
        if not target.is_file():
            raise ToolFailure(
                f"no file {path!r} in the repository; search_files or list with a pattern to "
                "find the right path",
                retryable=False,
            )
        if target.stat().st_size > _MAX_FILE:
            raise ToolFailure(f"{path!r} is larger than {_MAX_FILE} bytes", retryable=False)
        return target.read_text(encoding="utf-8", errors="replace")

    def search(self, pattern: str) -> str:
        """Lines holding ``pattern`` (plain text, not a regex) as ``path:line: text``."""
        hits: list[str] = []
        for file in sorted(self.root.rglob("*")):
            if not file.is_file() or file.suffix not in _TEXT_SUFFIXES:
                continue
            rel = file.relative_to(self.root).as_posix()
            if rel.startswith(".") or "/." in rel or "__pycache__" in rel:
                continue
            text = file.read_text(encoding="utf-8", errors="replace")
            for n, line in enumerate(text.splitlines(), 1):
                if pattern in line:
                    hits.append(f"{rel}:{n}: {line.strip()[:200]}")
                    if len(hits) >= _MAX_HITS:
                        return "\n".join([*hits, f"(stopped at {_MAX_HITS} matches)"])
        return "\n".join(hits) if hits else f"no line holds {pattern!r}"

    def write(self, path: str, content: str) -> str:
        """Write ``content`` to ``path`` (created with its folders), replacing it."""
        target = self._path(path)
        if target.is_dir():
            raise ToolFailure(f"{path!r} is a directory; give a file path", retryable=False)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content)} characters to {safe_relative(path).as_posix()}"

    def run_tests(self, args: list[str], timeout: float = 60.0) -> dict[str, Any]:
        """pytest with ``args`` (already checked by `pytest_args`) over the workspace, inside
        the sandbox where it can run (`callgate.eval.confine.run_pytest`)."""
        code, output = run_pytest(self.root, args, timeout)
        if code == -1:
            raise ToolFailure(f"the tests did not finish within {timeout:g} s")
        out = output.strip().splitlines()
        return {"exit_code": code, "stdout": "\n".join(out[-40:])}


def pytest_args(command: str) -> list[str]:
    """The arguments of a ``pytest ...`` command, or ValueError naming what is not allowed.

    Allowed: ``pytest`` or ``python -m pytest``, the flags ``-q -x -v -rA
    --tb=short|line|no``, and test paths inside the repository.
    """
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise ValueError(f"the command cannot be split into words: {exc}") from None
    if words[:1] == ["pytest"]:
        rest = words[1:]
    elif words[:3] in (["python", "-m", "pytest"], ["python3", "-m", "pytest"]):
        rest = words[3:]
    else:
        raise ValueError(
            f"only pytest runs here: write 'pytest' or 'pytest tests/test_x.py', got "
            f"{command[:80]!r}"
        )
    out = []
    for word in rest:
        if word.startswith("-"):
            if word not in _PYTEST_FLAGS:
                raise ValueError(f"the flag {word!r} is not allowed; use {sorted(_PYTEST_FLAGS)}")
        elif not _SAFE_TOKEN.match(word):
            raise ValueError(f"{word[:80]!r} is not a test path")
        else:
            safe_relative(word.split("::")[0])
        out.append(word)
    return out


def _workspace(ctx: CallContext) -> Workspace:
    root = ctx.context.get("workspace")
    if not isinstance(root, str):  # trusted code forgot it: a bug, not the model's
        raise RuntimeError("the lab's Authority has no 'workspace' in its context")
    return Workspace(root)


# -- fine: one typed tool per operation ----------------------------------------------------


def _arg(args: BaseModel, name: str) -> Any:
    """One validated argument of a tool's arguments model (checks receive the model)."""
    return args.__dict__[name]


def _check_path(args: BaseModel) -> None:
    try:
        safe_relative(_arg(args, "path"))
    except ValueError as exc:
        raise ArgumentError("path", f"{exc}") from None


def _check_command(args: BaseModel) -> None:
    try:
        pytest_args(_arg(args, "command"))
    except ValueError as exc:
        raise ArgumentError("command", f"{exc}") from None


def _check_pattern(args: BaseModel) -> None:
    pattern = _arg(args, "pattern")
    if not pattern or len(pattern) > 200:
        raise ArgumentError("pattern", "give 1 to 200 characters of text to look for")


def fine_registry() -> Registry:
    """The fine-grained surface: ``read_file``, ``search_files``, ``write_file``, ``run_tests``."""
    registry = Registry()

    @registry.tool(effects="read:workspace", risk="read", checks=[_check_path])
    def read_file(path: str, ctx: CallContext) -> str:
        """Read a text file of the repository.

        Fails if the file does not exist: search_files finds the right path.

        Args:
            path: the file's path relative to the repository root, e.g. "calc.py".
        """
        return _workspace(ctx).read(path)

    @registry.tool(effects="read:workspace", risk="read", checks=[_check_pattern])
    def search_files(pattern: str, ctx: CallContext) -> str:
        """Find the lines of the repository's text files that contain a piece of text.

        Answers ``path:line: text`` for each match (plain text, not a regular expression).

        Args:
            pattern: the exact text to look for, e.g. "def load_user".
        """
        return _workspace(ctx).search(pattern)

    @registry.tool(effects="write:workspace", risk="write_idempotent", checks=[_check_path])
    def write_file(path: str, content: str, ctx: CallContext) -> str:
        """Write a whole file of the repository, replacing what it held (creates folders).

        Args:
            path: the file's path relative to the repository root.
            content: the complete new text of the file.
        """
        return _workspace(ctx).write(path, content)

    @registry.tool(effects="exec:workspace", risk="read", checks=[_check_command], timeout=120)
    def run_tests(ctx: CallContext, command: str = "pytest") -> dict[str, Any]:
        """Run the repository's tests with pytest; answers the exit code and the output's end.

        Args:
            command: "pytest", optionally with test paths and -q, -x, -v, -rA, --tb=short.
        """
        return _workspace(ctx).run_tests(pytest_args(command))

    return registry


# -- coarse: one tool, a free-text operation -----------------------------------------------

_OPS: dict[str, str] = {}
for _op, _names in {
    "read": ("read", "read_file", "cat", "open", "view", "show"),
    "search": ("search", "search_files", "grep", "find", "find_text"),
    "write": ("write", "write_file", "save", "edit", "create", "overwrite"),
    "test": ("test", "tests", "run_tests", "pytest", "run_pytest"),
}.items():
    for _name in _names:
        _OPS[_name] = _op

_NEEDS = {"read": ("path",), "search": ("pattern",), "write": ("path", "content"), "test": ()}


def coarse_operation(op: str) -> str | None:
    """The operation a free-text ``op`` names (``"Read File"`` → ``read``), or None."""
    return _OPS.get(re.sub(r"[\s-]+", "_", op.strip().lower()))


def _check_do(args: BaseModel) -> None:
    op_text: str = _arg(args, "op")
    arguments: Mapping[str, Any] = _arg(args, "args")
    op = coarse_operation(op_text)
    if op is None:
        raise ArgumentError(
            "op", f"unknown operation {op_text[:60]!r}; use read, search, write or test"
        )
    for name in _NEEDS[op]:
        if not isinstance(arguments.get(name), str):
            raise ArgumentError(
                "args",
                f"the {op} operation needs args.{name} as text (got {arguments.get(name)!r:.60})",
            )
    if "path" in _NEEDS[op]:
        try:
            safe_relative(arguments["path"])
        except ValueError as exc:
            raise ArgumentError("args", f"args.path: {exc}") from None
    if op == "test":
        try:
            pytest_args(str(arguments.get("command", "pytest")))
        except ValueError as exc:
            raise ArgumentError("args", f"args.command: {exc}") from None


def coarse_registry() -> Registry:
    """The coarse surface: one tool, ``do(op, args)``."""
    registry = Registry()

    @registry.tool(
        effects=["read:workspace", "write:workspace", "exec:workspace"],
        risk="write_idempotent",
        checks=[_check_do],
        timeout=120,
    )
    def do(op: str, args: dict[str, Any], ctx: CallContext) -> Any:
        """Do one operation on the repository.

        Args:
            op: the operation: read, search, write or test.
            args: its arguments: read {path}, search {pattern}, write {path, content},
                test {command}.
        """
        ws = _workspace(ctx)
        kind = coarse_operation(op)
        if kind == "read":
            return ws.read(args["path"])
        if kind == "search":
            return ws.search(args["pattern"])
        if kind == "write":
            return ws.write(args["path"], args["content"])
        return ws.run_tests(pytest_args(str(args.get("command", "pytest"))))

    return registry


# -- code: one tool, a program that calls the fine tools ----------------------------------


class ShownRegistry(Registry):
    """A registry that shows a model only some of its tools; every tool stays callable by
    name. The code surface shows ``run_python``, whose programs call the fine tools."""

    def __init__(self, tools: Iterable[ToolSpec], shown: Iterable[str]) -> None:
        super().__init__(tools)
        self.shown = frozenset(shown)

    def __iter__(self) -> Iterator[ToolSpec]:
        return (spec for spec in super().__iter__() if spec.name in self.shown)

    def closest(self, name: str, n: int = 3) -> list[str]:
        """Suggestions among the shown tools only."""
        return [c for c in super().closest(name, n) if c in self.shown]


def code_registry(timeout: float = 60.0) -> Registry:
    """The code surface: ``run_python`` (bubblewrap), whose code calls the fine tools."""
    try:
        from callgate.sandbox import python_tool, unavailable_reason
    except ImportError as exc:
        raise DefinitionError(
            f"the code surface needs callgate.sandbox, which cannot be imported here ({exc}); "
            "leave 'code' out of --surfaces"
        ) from None
    reason = unavailable_reason()
    if reason is not None:
        raise DefinitionError(f"the code surface cannot run here: {reason}")
    fine = list(fine_registry())
    run_python = python_tool(tools=fine, timeout=timeout)
    return ShownRegistry([*fine, run_python], shown=[run_python.name])


# -- the set of surfaces -------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Surface:
    """One tool surface: its name, its tools, and a line saying what it is."""

    name: str
    registry: Registry
    description: str


SurfaceFactory = Callable[[], Surface]

SURFACES: dict[str, SurfaceFactory] = {
    "coarse": lambda: Surface(
        name="coarse", registry=coarse_registry(), description="one tool: do(op, args)"
    ),
    "fine": lambda: Surface(
        name="fine",
        registry=fine_registry(),
        description="typed tools: read_file, search_files, write_file, run_tests",
    ),
    "code": lambda: Surface(
        name="code",
        registry=code_registry(),
        description="one tool: run_python(code), calling the fine tools from the program",
    ),
}


def register_surface(name: str, factory: SurfaceFactory) -> None:
    """Add a surface (e.g. ``code`` over the sandbox's ``run_python``) under ``name``."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise DefinitionError(f"surface name {name!r}: use lower-case letters, digits and _")
    SURFACES[name] = factory


def get_surface(name: str) -> Surface:
    """The surface called ``name``; `DefinitionError` lists the known ones."""
    try:
        return SURFACES[name]()
    except KeyError:
        raise DefinitionError(
            f"unknown surface {name!r}; known surfaces: {', '.join(sorted(SURFACES))}"
        ) from None


def authority_for(workspace: Path, *, principal: str = "lab") -> Authority:
    """The authority of every lab run: `GRANTS`, the workspace as trusted context."""
    return Authority(
        principal=principal,
        grants=GRANTS,
        context={"workspace": str(workspace)},
        scope=principal,
    )

"""The public surface has an edge: what README, docs and examples import is public.

Public is `callgate` itself (its ``__all__``) and the modules in `PUBLIC` (each name in
its ``__all__``); every other module is private, whatever its name
(docs/architecture.md, "The public surface"). A private module's names stay importable
from where they were, but nothing a reader copies may import them.

Everything here is read from the source text (``ast``), not imported: the check needs
no extra installed and costs no framework import.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

PUBLIC = (
    "callgate.a2a",
    "callgate.agent",
    "callgate.authorize",
    "callgate.console",
    "callgate.eval",
    "callgate.grammar",
    "callgate.integrations",
    "callgate.integrations.langchain",
    "callgate.integrations.openai_agents",
    "callgate.integrations.pydantic_ai",
    "callgate.ledger",
    "callgate.lint",
    "callgate.llms",
    "callgate.mcp",
    "callgate.openapi",
    "callgate.providers",
    "callgate.providers.anthropic",
    "callgate.providers.gemini",
    "callgate.providers.mcp",
    "callgate.providers.openai_chat",
    "callgate.providers.openai_responses",
    "callgate.providers.text",
    "callgate.sandbox",
    "callgate.skills",
)
"""The public modules besides `callgate` (docs/architecture.md lists the same, with why)."""

MAX_NAMES = 30
"""A public module's ``__all__`` is small: at most this many names, unless in `LARGER`."""
LARGER = {"callgate": 60, "callgate.eval": 52}
"""Known exceptions to `MAX_NAMES`: ``callgate`` itself re-exports what most programs need
(50 entries now, 60 at most); ``callgate.eval`` is a debt, pinned at its size."""

MOVED = {
    "callgate.agent.transcript": ("TranscriptEntry", "callgate.agent"),
    "callgate.authorize.provenance": ("Readers", "callgate"),
    "callgate.cli.plain": ("plain", None),
    "callgate.eval.grammar_decision": ("GRADE_EVENT", "callgate.eval"),
    "callgate.ledger.sqlite": ("SQLiteLedger", "callgate.ledger"),
    "callgate.llms.base": ("Usage", "callgate.llms"),
    "callgate.llms.local": ("record_decodes", "callgate.llms"),
    "callgate.llms.scripted": ("ScriptedModel", "callgate.llms"),
}
"""Private paths the docs or examples used to import, one name each, and its public path
now (None: not public; the examples no longer need it): the old path keeps working."""


def _source_of(module: str) -> Path | None:
    base = SRC / module.replace(".", "/")
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


@cache
def _tree(module: str) -> ast.Module | None:
    path = _source_of(module)
    return ast.parse(path.read_text(encoding="utf-8")) if path else None


@cache
def exported(module: str) -> tuple[str, ...]:
    """The names in ``module``'s literal ``__all__`` (empty: none declared)."""
    tree = _tree(module)
    for node in tree.body if tree else ():
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            assert node.value is not None
            return tuple(ast.literal_eval(node.value))
    return ()


@cache
def _lazy_exports() -> dict[str, str]:
    """callgate's own table of lazily imported public names (``_EXPORTS``)."""
    tree = _tree("callgate")
    assert tree is not None
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "_EXPORTS":
            assert node.value is not None
            return dict(ast.literal_eval(node.value))
    raise AssertionError("callgate/__init__.py has no _EXPORTS table")


@cache
def _imported(module: str) -> dict[str, tuple[str, str]]:
    """Each name ``module`` binds by an absolute ``from X import y [as name]``: (X, y)."""
    tree = _tree(module)
    found: dict[str, tuple[str, str]] = {}
    nodes: list[ast.stmt] = list(tree.body) if tree else []
    while nodes:  # module level, and inside if/try blocks there (not function bodies)
        node = nodes.pop(0)
        if isinstance(node, ast.If | ast.Try):
            nodes.extend([*node.body, *node.orelse, *getattr(node, "finalbody", [])])
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                found.setdefault(alias.asname or alias.name, (node.module, alias.name))
    return found


@cache
def origin(module: str, name: str, depth: int = 0) -> str:
    """Where ``module.name`` is defined, following ``from X import name`` re-exports (a
    submodule of a package is its own origin)."""
    if module == "callgate" and name in _lazy_exports():
        return origin(_lazy_exports()[name], name, depth + 1)
    source = _imported(module).get(name)
    if source is not None and depth < 20:
        if _source_of(f"{source[0]}.{source[1]}"):
            return f"{source[0]}.{source[1]}"
        return origin(*source, depth + 1)
    if _source_of(f"{module}.{name}"):
        return f"{module}.{name}"
    return f"{module}:{name}"


def public_paths() -> dict[str, list[str]]:
    """Each public object's origin and the public paths it is exported under."""
    paths: dict[str, list[str]] = defaultdict(list)
    for module in ("callgate", *PUBLIC):
        for name in exported(module):
            paths[origin(module, name)].append(f"{module}.{name}")
    return paths


def _blocks(path: Path) -> list[tuple[int, str]]:
    """The Python a reader may copy from ``path``, with the line it starts on: a whole
    ``.py`` file, or a Markdown file's Python fences and import lines in other fences."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return [(1, text)]
    found = []
    for fence in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S):
        line = text.count("\n", 0, fence.start(2)) + 1
        if fence.group(1) in ("python", "py"):
            found.append((line, fence.group(2)))
            continue
        for match in re.finditer(
            r"^[ >$]*((?:from|import) callgate\b[^\n]*)$", fence.group(2), re.M
        ):
            found.append((line + fence.group(2).count("\n", 0, match.start()), match.group(1)))
    return found


def imports_in(path: Path) -> list[tuple[int, str, str | None]]:
    """``(line, module, name)`` for each callgate import in ``path`` (name None: a module)."""
    found: list[tuple[int, str, str | None]] = []
    for first, source in _blocks(path):
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            raise AssertionError(f"{path.relative_to(ROOT)}:{first}: not Python: {exc}") from exc
        for node in ast.walk(tree):
            line = first + getattr(node, "lineno", 1) - 1
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("callgate"):
                assert node.module is not None
                found.extend((line, node.module, a.name) for a in node.names)
            elif isinstance(node, ast.Import):
                found.extend(
                    (line, a.name, None) for a in node.names if a.name.split(".")[0] == "callgate"
                )
    return found


def reader_files() -> list[Path]:
    """README.md, docs/*.md and everything under examples/ that holds Python."""
    examples = ROOT / "examples"
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted(p for p in examples.rglob("*") if p.suffix in (".py", ".md")),
    ]


def not_public(module: str, name: str | None) -> str | None:
    """Why importing ``name`` from ``module`` is not public (None: it is)."""
    modules = ("callgate", *PUBLIC)
    if name is None:
        return None if module in modules else f"{module} is not a public module"
    if module not in modules:
        return f"{module} is not a public module"
    if name == "*" or name in exported(module) or f"{module}.{name}" in PUBLIC:
        return None
    return f"{name!r} is not in {module}.__all__"


def test_readme_docs_and_examples_import_only_public_names() -> None:
    """Every ``from callgate... import x`` and ``import callgate...`` that README.md, docs/
    or examples/ show imports a public module, or a name in a public module's __all__."""
    wrong = []
    paths = public_paths()
    for path in reader_files():
        for line, module, name in imports_in(path):
            why = not_public(module, name)
            if why is None:
                continue
            instead = paths.get(origin(module, name)) if name else None
            hint = ""
            if instead:
                shown = [
                    f"from {p.rpartition('.')[0]} import {p.rpartition('.')[2]}" for p in instead
                ]
                hint = "; instead: " + " or ".join(shown)
            wrong.append(f"{path.relative_to(ROOT)}:{line}: {module} import {name}: {why}{hint}")
    assert not wrong, "private imports shown to readers:\n" + "\n".join(wrong)


def test_the_check_sees_a_private_import_in_markdown_and_python(tmp_path: Path) -> None:
    """The check reads Python fences and import lines in shell fences of Markdown, and whole
    Python files, and calls private paths private (it is not vacuous)."""
    doc = tmp_path / "page.md"
    doc.write_text(
        "Text\n```python\nfrom callgate import Gate\n"
        "from callgate.ledger.sqlite import SQLiteLedger\n```\n"
        "```console\n$ python -c 'x'\n>>> import callgate.cli.plain\n```\n",
        encoding="utf-8",
    )
    script = tmp_path / "demo.py"
    script.write_text("import callgate.llms\nfrom callgate.llms.base import Usage\n")
    found = imports_in(doc) + imports_in(script)
    assert found == [
        (3, "callgate", "Gate"),
        (4, "callgate.ledger.sqlite", "SQLiteLedger"),
        (8, "callgate.cli.plain", None),
        (1, "callgate.llms", None),
        (2, "callgate.llms.base", "Usage"),
    ]
    verdicts = [not_public(module, name) for _, module, name in found]
    assert [v is None for v in verdicts] == [True, False, False, True, False]


def test_every_public_module_declares_a_small_all() -> None:
    """callgate and each module in PUBLIC declare ``__all__``, at most MAX_NAMES names (the
    two known exceptions at their bound in LARGER), none twice."""
    for module in ("callgate", *PUBLIC):
        names = exported(module)
        assert names, f"{module} declares no __all__: list its public names"
        bound = LARGER.get(module, MAX_NAMES)
        assert len(names) <= bound, f"{module}.__all__ has {len(names)} names, at most {bound}"
        assert len(set(names)) == len(names), f"{module}.__all__ repeats a name"


def test_no_object_is_exported_by_two_public_subpackages() -> None:
    """Each public object has one home: no two public modules besides ``callgate`` (which
    re-exports what most programs need) list the same object in their ``__all__``."""
    twice = {
        where: [p for p in paths if not p.startswith("callgate.") or p.count(".") > 1]
        for where, paths in public_paths().items()
    }
    twice = {where: paths for where, paths in twice.items() if len(paths) > 1}
    assert not twice, f"exported under two public paths: {twice}"


def test_each_top_level_name_is_exported_by_its_home_or_defined_there() -> None:
    """Every name in callgate.__all__ is also in the __all__ of the public module it comes
    from, or is defined in a module no public module exports it from (then callgate is its
    only public path)."""
    paths = public_paths()
    for name in exported("callgate"):
        if name == "__version__":
            continue
        homes = [p for p in paths[origin("callgate", name)] if p != f"callgate.{name}"]
        assert len(homes) <= 1, (name, homes)


@pytest.mark.parametrize("module", sorted(MOVED))
def test_a_private_path_readers_used_still_imports_the_same_object(module: str) -> None:
    """The paths docs and examples imported before the public surface was drawn keep
    working, and give the very object the public path gives."""
    name, public = MOVED[module]
    value = getattr(importlib.import_module(module), name)
    if public is not None:
        assert getattr(importlib.import_module(public), name) is value
        assert name in exported(public)


def test_the_consoles_classes_name_their_public_path() -> None:
    """A class re-exported by callgate.console names that path as its module (what reprs,
    docs and tracebacks show), not the private module that defines it."""
    import callgate.console

    for name in ("Credentials", "NoAuth", "Principal", "TokenAuth"):
        assert getattr(callgate.console, name).__module__ == "callgate.console", name

"""The fast tier's premises: ``import callgate`` is cheap, and its public names still resolve.

``callgate/__init__.py`` imports each public name on first access (PEP 562), and the
Unicode class tables behind Python-style ``\\w``/``\\d``/``\\s`` are built on first use.
These checks are structural (which modules a fresh interpreter holds), never timings.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

import callgate

HEAVY = (
    "pydantic",
    "pydantic_core",
    "re2",
    "anyio",
    "asyncio",
    "httpx",
    "jsonschema",
    "rich",
    "typer",
    "sqlite3",
    "psycopg",
    "opentelemetry",
    "mcp",
    "openai",
    "anthropic",
)
"""Third-party and standard modules that ``import callgate`` alone must not load."""


def _fresh(code: str) -> object:
    """What ``code`` prints as JSON on its last line, run in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_public_name_resolves_to_the_object_of_its_module() -> None:
    """Each name in ``callgate.__all__`` is importable from callgate and is the very object
    its module defines; ``__all__`` is sorted, matches the lazy table and shows in dir()."""
    exports = callgate._EXPORTS
    assert callgate.__all__ == sorted(callgate.__all__)
    assert set(callgate.__all__) == {*exports, "__version__"}
    assert set(callgate.__all__) <= set(dir(callgate))
    for name, module in exports.items():
        assert getattr(callgate, name) is getattr(importlib.import_module(module), name), name
    namespace: dict[str, object] = {}
    exec("from callgate import *", namespace)
    assert {n for n in namespace if n != "__builtins__"} == set(callgate.__all__)


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    """A name callgate does not export raises AttributeError (so hasattr() and
    ``from callgate import x`` behave as for any module), naming the name asked for."""
    with pytest.raises(AttributeError, match="no_such_name"):
        callgate.no_such_name  # type: ignore[attr-defined]  # noqa: B018


def test_import_callgate_loads_no_submodule_and_no_heavy_dependency() -> None:
    """A fresh ``import callgate`` holds only the package itself: no callgate submodule,
    none of the heavy dependencies (pydantic, re2, anyio, ...) that the names pull in."""
    loaded = _fresh("import sys, json, callgate; print(json.dumps(sorted(sys.modules)))")
    assert isinstance(loaded, list)
    ours = [m for m in loaded if m.startswith("callgate.")]
    assert ours == [], ours
    heavy = [m for m in loaded if m.split(".")[0] in HEAVY]
    assert heavy == [], heavy


def test_one_public_name_loads_it_on_first_access() -> None:
    """``from callgate import Gate`` in a fresh interpreter does load the gate module: the
    laziness defers imports, it does not lose them."""
    loaded = _fresh(
        "import sys, json; from callgate import Gate; "
        "print(json.dumps([Gate.__module__, 'callgate.gate' in sys.modules]))"
    )
    assert loaded == ["callgate.gate", True]


def test_the_text_module_builds_no_unicode_tables_at_import() -> None:
    """Importing the authorize stage's text module (links, words, tokens) leaves Python's
    Unicode class tables unbuilt: they are built when a pattern first needs them."""
    built = _fresh(
        "import json, callgate.authorize.text, callgate.regex as r; "
        "print(json.dumps(r._python_classes.cache_info().currsize))"
    )
    assert built == 0


def test_the_stored_unicode_ranges_are_what_re_measures_on_this_interpreter() -> None:
    """The ranges of Python's ``\\d``, ``\\s``, ``\\w`` stored in callgate._unicode_classes
    (read instead of measuring them in every process) equal what Python's `re` measures
    now; on another Unicode database they are not used at all."""
    from callgate import _unicode_classes, regex

    if unicodedata.unidata_version == _unicode_classes.UNIDATA_VERSION:
        assert regex._stored_ranges() == regex._measured_ranges()
    else:
        assert regex._stored_ranges() is None
    classes = regex._python_classes()
    for letter, sample, outside in (("d", "٣", "x"), ("w", "ß_9", "-"), ("s", "\u3000", "a")):
        assert re.fullmatch(f"\\{letter}+", sample)
        assert regex.compile_re2(f"[{classes[letter]}]+").fullmatch(sample)
        assert not regex.compile_re2(f"[{classes[letter]}]+").fullmatch(outside)


def test_tests_that_start_a_process_are_marked_integration() -> None:
    """tests/conftest.py marks a test `integration` when a helper it calls starts a process
    (here `_fresh`, through subprocess), and leaves an in-process test unmarked, so that
    ``make test-fast`` (``-m "not integration"``) runs the one and not the other. The marks
    are read from a collection of this whole file in its own process, so the check holds
    however this run was filtered."""
    here = Path(__file__)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-o",
            "addopts=",
            "-p",
            "no:cacheprovider",
            "-m",
            "integration",
            str(here),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=here.parent.parent,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    marked = {line.split("::")[-1] for line in done.stdout.splitlines() if "::" in line}
    spawning = {
        "test_import_callgate_loads_no_submodule_and_no_heavy_dependency",
        "test_the_text_module_builds_no_unicode_tables_at_import",
    }
    in_process = {
        "test_every_public_name_resolves_to_the_object_of_its_module",
        "test_an_unknown_name_is_an_attribute_error_naming_it",
    }
    assert spawning <= marked, done.stdout
    assert not in_process & marked, done.stdout


def test_every_slow_entry_names_a_test_that_exists() -> None:
    """Each ``path::name`` in tests/conftest.py's SLOW list names a file under tests/ that
    defines that test function: a renamed or moved test would otherwise drop out of the list
    silently and slow the fast tier down again."""
    import ast

    tests = Path(__file__).parent
    tree = ast.parse((tests / "conftest.py").read_text(encoding="utf-8"))
    [slow] = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SLOW"
    ]
    assert isinstance(slow, ast.Call)
    entries = ast.literal_eval(slow.args[0])
    assert entries, "SLOW is empty"
    missing = []
    for entry in sorted(entries):
        path, _, name = entry.partition("::")
        source = tests / path
        text = source.read_text(encoding="utf-8") if source.is_file() else ""
        if not re.search(rf"^\s*(async )?def {re.escape(name)}\(", text, re.M):
            missing.append(entry)
    assert not missing, f"SLOW names tests that do not exist (renamed or moved?): {missing}"

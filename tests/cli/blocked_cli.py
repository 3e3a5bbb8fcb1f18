"""Run ``callgate`` commands in this process with some top-level packages made missing.

Used by ``test_extras.py`` as ``python blocked_cli.py SPEC`` where SPEC is JSON:
``{"blocked": [module, ...], "commands": [[arg, ...], ...], "env": {...}}``. A
meta-path finder placed first raises ``ModuleNotFoundError`` for every blocked
top-level package, as Python does when it is not installed. ``import callgate``
comes first, then each command runs through ``callgate.cli.main`` (the console
script's entry point) with its own argv. One JSON line per command is printed on
the real stdout: the exit code, what it wrote, and a crash's traceback.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import io
import json
import os
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType
from typing import Any


class Blocker(importlib.abc.MetaPathFinder):
    """Finds every blocked top-level package, and its submodules, missing."""

    def __init__(self, blocked: set[str]) -> None:
        self.blocked = blocked

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> None:
        if name.partition(".")[0] in self.blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def run(args: list[str]) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    crash = None
    sys.argv = ["callgate", *args]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            from callgate.cli import main

            main()
        except SystemExit as exc:
            code = exc.code if exc.code is not None else 0
        except BaseException:
            code, crash = "crash", traceback.format_exc()
    return {"args": args, "code": code, "out": out.getvalue() + err.getvalue(), "crash": crash}


def main() -> None:
    spec = json.loads(sys.argv[1])
    blocked = set(spec["blocked"])
    sys.meta_path.insert(0, Blocker(blocked))
    os.environ.update(spec.get("env", {}))
    os.environ["COLUMNS"] = "200"  # rich's boxes would wrap the messages
    results = []
    try:
        import callgate

        results.append({"args": ["import callgate"], "code": 0, "out": callgate.__version__})
    except BaseException:
        results.append(
            {"args": ["import callgate"], "code": "crash", "crash": traceback.format_exc()}
        )
    results.extend(run(list(args)) for args in spec["commands"])
    loaded = sorted({m.partition(".")[0] for m in sys.modules} & blocked)
    print(json.dumps({"results": results, "loaded_blocked": loaded}))


if __name__ == "__main__":
    main()

"""Extract tau-bench's tool definitions and expected actions into ``tau_bench.json.gz``.

Not run by the tests. From a checkout of sierra-research/tau-bench::

    python -m tests.corpus.tau_bench.extract /path/to/tau-bench

Reads the source without running it: each ``tools/*.py`` file's ``get_info()`` returns a
dict literal (OpenAI's ``{"type": "function", "function": {...}}``), taken with
``ast.literal_eval``; each task file's ``Action(name=..., kwargs={...})`` calls are the
calls the benchmark expects, taken the same way (an action whose kwargs are not a
literal is skipped and counted).
"""

from __future__ import annotations

import ast
import gzip
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
DOMAINS = ("airline", "retail")


def tools(root: Path, domain: str) -> list[dict[str, Any]]:
    """Every tool definition of one domain, in file name order."""
    found = []
    for path in sorted((root / "tau_bench" / "envs" / domain / "tools").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "get_info":
                [ret] = [n for n in ast.walk(node) if isinstance(n, ast.Return)]
                found.append(ast.literal_eval(ret.value))
    return found


def actions(root: Path, domain: str) -> tuple[list[dict[str, Any]], int]:
    """Every expected action of one domain's task files, and how many were not literals."""
    taken: list[dict[str, Any]] = []
    skipped = 0
    for path in sorted((root / "tau_bench" / "envs" / domain).glob("tasks*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Action":
                values = {k.arg: k.value for k in node.keywords}
                try:
                    name = ast.literal_eval(values["name"])
                    kwargs = ast.literal_eval(values["kwargs"])
                except (KeyError, ValueError):
                    skipped += 1
                    continue
                taken.append({"file": path.name, "name": name, "kwargs": kwargs})
    return taken, skipped


def main() -> None:
    """Write ``tau_bench.json.gz`` beside this file."""
    root = Path(sys.argv[1])
    data: dict[str, Any] = {"tools": {}, "actions": {}, "skipped_actions": {}}
    for domain in DOMAINS:
        data["tools"][domain] = tools(root, domain)
        data["actions"][domain], data["skipped_actions"][domain] = actions(root, domain)
        print(domain, len(data["tools"][domain]), len(data["actions"][domain]), file=sys.stderr)
    raw = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False).encode()
    (HERE / "tau_bench.json.gz").write_bytes(gzip.compress(raw, 9, mtime=0))


if __name__ == "__main__":
    main()

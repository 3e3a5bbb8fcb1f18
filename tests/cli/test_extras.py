"""Every extra is optional: with any one extra missing, ``import callgate`` and the
``callgate`` command work, and a command that needs the missing extra exits 2 naming it.

Each case runs ``blocked_cli.py`` in a fresh interpreter with the top-level packages of
one extra, as pyproject.toml defines it, made missing (a meta-path finder that raises
``ModuleNotFoundError``, as an uninstalled package does). It checks ``import callgate``,
``callgate version``, ``callgate --help`` and the extra's own commands. The command used
to import ``callgate.eval`` (numpy) on start, so ``callgate version`` and ``callgate
console`` failed without the ``eval`` extra.

The ``dev`` extra (the test tools) and ``bench`` (the peers the benchmarks measure,
every one of them also in another extra) are not features of callgate and are left out.
"""

from __future__ import annotations

import concurrent.futures
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from callgate import __version__
from callgate.cli.extras import EXTRAS
from callgate.ledger import SQLiteLedger

ROOT = Path(__file__).parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
NOT_FEATURES = {"dev", "bench"}
PREREG = ROOT / "examples" / "lab" / "prereg.toml"


def _dist(requirement: str) -> str:
    name = re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0]
    return name.lower().replace("_", "-").replace(".", "-")


def _modules_of() -> dict[str, set[str]]:
    """Installed distribution name -> its importable top-level packages."""
    out: dict[str, set[str]] = {}
    for module, dists in importlib.metadata.packages_distributions().items():
        if module.startswith("_") or not module.isidentifier():
            continue
        for dist in dists:
            out.setdefault(_dist(dist), set()).add(module)
    return out


MODULES = _modules_of()
CORE = {m for r in PYPROJECT["dependencies"] for m in MODULES.get(_dist(r), ())}


def blocked_for(extra: str) -> list[str]:
    """The top-level packages only ``extra`` brings (not those of a core dependency)."""
    requirements = PYPROJECT["optional-dependencies"][extra]
    return sorted({m for r in requirements for m in MODULES.get(_dist(r), ())} - CORE)


FEATURES = sorted(set(PYPROJECT["optional-dependencies"]) - NOT_FEATURES)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger, a registry module, a policy, an OpenAPI document: what the commands read."""
    root = tmp_path_factory.mktemp("extras")
    SQLiteLedger(root / "ledger.db").close()
    (root / "extras_tools.py").write_text(
        "from callgate import Registry\n\nregistry = Registry()\n\n\n"
        "@registry.tool(effects='read:x')\ndef look(q: str) -> str:\n"
        "    '''Look.'''\n    return q\n"
    )
    (root / "policy.toml").write_text('[[rules]]\ntool = "look"\naction = "allow"\n')
    (root / "api.json").write_text(
        json.dumps(
            {
                "openapi": "3.0.3",
                "info": {"title": "t", "version": "1"},
                "servers": [{"url": "https://api.example.com"}],
                "paths": {"/x": {"get": {"operationId": "getX", "responses": {"200": {}}}}},
            }
        )
    )
    return root


def commands_for(extra: str, root: Path) -> list[list[str]]:
    """The commands that need ``extra`` (none for an extra only the library uses)."""
    db = str(root / "ledger.db")
    run = ["run", "start", "extras_tools:registry", "--message", "hi", "--db", db]
    lab = ["lab", "run", "--prereg", str(PREREG), "--tasks", "repo:1", "--db",
           str(root / f"lab-{extra}.db"), "--out", str(root / f"out-{extra}")]  # fmt: skip
    table: dict[str, list[list[str]]] = {
        "eval": [
            ["eval", "funnel", "--db", db],
            ["eval", "grammar-decision", "--db", db],
            ["lab", "analyse", "--prereg", str(PREREG), "--db", db],
            [*lab, "--model", "policy:oracle"],
        ],
        "console": [["console", "--db", db, "--no-auth", "--port", "0"]],
        "openai": [[*run, "--model", "openai:gpt-4.1"]],
        "anthropic": [[*run, "--model", "anthropic:claude-x"]],
        "mcp": [["mcp", "serve", "extras_tools:registry", "--policy", str(root / "policy.toml")]],
        "postgres": [["ledger", "list", "--dsn", "postgresql://nobody@127.0.0.1:1/none"]],
        "openapi": [
            ["openapi", "inspect", str(root / "api.json")],
            ["lint", str(root / "api.json")],
        ],
        "llama_cpp": [[*lab, "--model", "local:smollm2"], [*run, "--model", "local:smollm2+none"]],
    }
    return table.get(extra, [])


def _child_env(root: Path) -> dict[str, str]:
    """A small environment for the child: ``root`` first on its path, then the parent's
    own ``PYTHONPATH`` (the callgate under test), and ``HOME`` in the scratch directory."""
    path = [str(root), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(path), "HOME": str(root)}


def working_without(extra: str, root: Path) -> list[list[str]]:
    """Commands that need no extra: they must work whichever one is missing."""
    db = str(root / "ledger.db")
    return [["ledger", "list", "--db", db], ["console", "--help"], ["lab", "run", "--help"]]


def run_blocked(blocked: list[str], commands: list[list[str]], root: Path) -> list[dict[str, Any]]:
    spec = {
        "blocked": blocked,
        "commands": [["version"], ["--help"], *commands],
        "env": {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test"},
    }
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("blocked_cli.py")), json.dumps(spec)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env=_child_env(root),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["loaded_blocked"] == []  # the blocked packages were never imported
    results: list[dict[str, Any]] = report["results"]
    return results


@pytest.fixture(scope="module")
def outcomes(workspace: Path) -> dict[str, list[dict[str, Any]]]:
    """Each extra's results, the interpreters run side by side (one per core at most)."""
    jobs = {
        extra: (
            blocked_for(extra),
            working_without(extra, workspace) + commands_for(extra, workspace),
        )
        for extra in FEATURES
    }
    workers = max(1, min(len(jobs), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = {
            extra: pool.submit(run_blocked, blocked, commands, workspace)
            for extra, (blocked, commands) in jobs.items()
        }
        return {extra: future.result() for extra, future in futures.items()}


@pytest.mark.parametrize("extra", FEATURES)
def test_the_command_works_without_each_extra(
    extra: str, workspace: Path, outcomes: dict[str, list[dict[str, Any]]]
) -> None:
    """With ``extra``'s packages missing: ``import callgate``, ``version``, ``--help`` and
    commands that need no extra succeed, and each command that needs ``extra`` exits 2
    with its install line."""
    working = working_without(extra, workspace)
    imported, version, helped, *rest = outcomes[extra]
    assert imported["code"] == 0, imported.get("crash")
    assert (version["code"], version["out"].strip()) == (0, __version__), version
    assert helped["code"] == 0, helped
    assert "Usage: callgate" in helped["out"]
    for result in rest[: len(working)]:
        assert (result["code"], result["crash"]) == (0, None), result
    for result in rest[len(working) :]:
        assert result["crash"] is None, result["crash"]
        assert result["code"] == 2, result
        assert f"pip install 'callgate[{extra}]'" in result["out"], result


def test_the_cli_names_the_extra_of_each_package() -> None:
    """`callgate.cli.extras.EXTRAS` lists, for every extra of pyproject.toml, the installed
    top-level packages it brings (so a missing one is named with the right extra)."""
    for extra in FEATURES:
        assert set(blocked_for(extra)) <= set(EXTRAS.get(extra, ())), extra


@pytest.mark.integration
def test_the_console_serves_without_the_eval_extra(workspace: Path) -> None:
    """``callgate console`` with numpy, scipy and matplotlib missing starts, serves the runs
    page (without the evaluation funnel) and stops on SIGINT (it died on start with
    ``ModuleNotFoundError: numpy``)."""
    import signal
    import socket
    import time

    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    db = str(workspace / "ledger.db")
    spec = {
        "blocked": blocked_for("eval"),
        "commands": [["console", "--db", db, "--no-auth", "--port", str(port)]],
    }
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("blocked_cli.py")), json.dumps(spec)],
        cwd=workspace,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_child_env(workspace),
    )
    try:
        # No deadline of our own: pytest's timeout ends a console that never answers.
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.05)
        runs = httpx.get(f"http://127.0.0.1:{port}/runs")
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert out.strip(), err[-2000:]
    assert runs.status_code == 200, runs.text[:500]
    report = json.loads(out.splitlines()[-1])
    assert report["loaded_blocked"] == []
    served = report["results"][-1]
    assert (served["code"], served["crash"]) == (0, None), served

"""Running pytest over model-edited code: inside bubblewrap wherever the sandbox can run.

A run's repository holds code the model wrote, and both ``run_tests`` and the
task's verifier execute it. `run_pytest` runs pytest in `callgate.sandbox`
(a copy of the repository at ``/workspace``, no network, the host's pytest
bound read-only) when the sandbox can run here and its interpreter can import
pytest (probed once per process); otherwise it runs pytest as a host
subprocess and logs a warning once, naming why.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import subprocess
import sys
from pathlib import Path

from callgate.sync_loop import run_sync

__all__ = ["confinement", "pytest_command", "pytest_env", "run_pytest"]

_log = logging.getLogger("callgate.eval")
_FLAGS = ["-q", "-x", "-p", "no:cacheprovider"]


def pytest_command(*extra: str) -> list[str]:
    """The host pytest command: this interpreter, no plugins."""
    return [sys.executable, "-m", "pytest", *_FLAGS, *extra]


def pytest_env() -> dict[str, str]:
    """The environment pytest runs in: no third-party plugins, no bytecode files."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _site_packages() -> str | None:
    spec = importlib.util.find_spec("pytest")
    if spec is None or spec.origin is None:
        return None
    return str(Path(spec.origin).resolve().parent.parent)


def _program(site: str, args: list[str]) -> str:
    return (
        "import os, sys\n"
        f"sys.path.append({site!r})\n"
        "os.chdir('/workspace')\n"
        "sys.path.insert(0, '/workspace')\n"
        "import pytest\n"
        f"raise SystemExit(pytest.main({[*_FLAGS, *args]!r}))\n"
    )


def _sandboxed(root: Path | None, args: list[str], timeout: float) -> tuple[int | None, str]:
    from callgate.sandbox.config import SandboxConfig
    from callgate.sandbox.runner import run_code

    site = _site_packages()
    assert site is not None
    config = SandboxConfig(
        timeout=timeout,
        workspace=root,
        read_only=(site,),
        env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    if root is None:  # the probe: can the sandbox's interpreter import pytest at all?
        code = f"import sys\nsys.path.append({site!r})\nimport pytest\n"
    else:
        code = _program(site, args)
    # On this thread's kept loop (or a helper thread's, from async code): callgate.sync_loop.
    result = run_sync(functools.partial(run_code, code, config))
    if result.timed_out:
        return None, f"pytest did not finish within {timeout:g} s"
    return result.exit_code, result.stdout + result.stderr


@functools.cache
def confinement() -> str | None:
    """None when pytest runs inside the sandbox here; otherwise why it runs on the host."""
    try:
        from callgate.sandbox import unavailable_reason
    except ImportError as exc:
        return f"callgate.sandbox cannot be imported ({exc})"
    reason = unavailable_reason()
    if reason is not None:
        return reason
    if _site_packages() is None:
        return "pytest is not installed"
    code, output = _sandboxed(None, [], 30.0)
    if code != 0:
        return f"the sandbox's interpreter cannot import pytest: {output.strip()[-200:]}"
    return None


def run_pytest(root: Path, args: list[str], timeout: float) -> tuple[int, str]:
    """pytest with ``args`` over the repository at ``root``: exit code (-1: timed out) and
    output. Confined when `confinement` allows; on the host otherwise (warned once)."""
    reason = confinement()
    if reason is None:
        code, output = _sandboxed(root, args, timeout)
        return (-1 if code is None else code), output
    _warn(reason)
    try:
        done = subprocess.run(
            pytest_command(*args),
            cwd=root,
            env=pytest_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return -1, f"pytest did not finish within {timeout:g} s"
    return done.returncode, done.stdout + done.stderr


@functools.cache
def _warn(reason: str) -> None:
    _log.warning("pytest runs model-edited code on the host, unconfined: %s", reason)

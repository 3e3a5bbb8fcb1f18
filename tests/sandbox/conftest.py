"""Fixtures of the sandbox tests: bubblewrap must be usable (or, under CI=true, the test fails)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from callgate.sandbox import Limits, SandboxConfig, SandboxResult, run_code, unavailable_reason


def _bwrap_or_skip() -> None:
    reason = unavailable_reason()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the sandbox tests need bubblewrap under CI=true: {reason}")
    pytest.skip(f"bubblewrap sandbox unavailable here: {reason}")


@pytest.fixture
def sandboxed() -> Callable[..., SandboxResult]:
    """Run code in a fresh sandbox: ``sandboxed(code, timeout=..., env=..., **limits)``."""
    _bwrap_or_skip()

    def run(
        code: str,
        *,
        timeout: float = 10.0,
        mode: str = "bwrap",
        env: dict[str, str] | None = None,
        **limits: Any,
    ) -> SandboxResult:
        config = SandboxConfig(
            timeout=timeout,
            limits=Limits(**limits),
            mode=mode,  # type: ignore[arg-type]
            env=env or {},
        )
        return anyio.run(lambda: run_code(code, config))

    return run


@pytest.fixture
def bwrap_available() -> None:
    """Skip (or, under CI=true, fail) where bubblewrap cannot run."""
    _bwrap_or_skip()

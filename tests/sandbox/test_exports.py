"""The sandbox package's public surface is pinned: nothing leaks or vanishes by accident."""

from __future__ import annotations

import callgate.sandbox


def test_sandbox_exports_exactly_its_public_names() -> None:
    """callgate.sandbox.__all__ is this sorted list, and each name resolves."""
    expected = [
        "EXEC_EFFECT",
        "NETWORK_TOOL",
        "Limits",
        "Mode",
        "SandboxConfig",
        "SandboxResult",
        "network_tool",
        "python_tool",
        "run_code",
        "seccomp_missing",
        "shell_tool",
        "unavailable_reason",
    ]
    assert callgate.sandbox.__all__ == expected
    for name in expected:
        assert getattr(callgate.sandbox, name) is not None

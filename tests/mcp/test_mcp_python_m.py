"""``python -m callgate`` runs the ``callgate`` command (issue 30, LOW-8)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_python_m_callgate_runs_the_command(tmp_path: Path) -> None:
    """``python -m callgate mcp --help`` prints the MCP commands and exits 0."""
    done = subprocess.run(
        [sys.executable, "-m", "callgate", "mcp", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "proxy" in done.stdout

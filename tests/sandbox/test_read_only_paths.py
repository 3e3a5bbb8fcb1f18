"""Read-only paths bound into the sandbox stay visible where the sandbox mounts its own
``/tmp``: a checkout (and its venv) under ``/tmp`` is how CI runs the suite."""

from __future__ import annotations

from pathlib import Path

import anyio

from callgate.sandbox import SandboxConfig, run_code


def test_a_read_only_path_under_tmp_is_visible_inside(
    tmp_path: Path, bwrap_available: None
) -> None:
    """A host directory under /tmp given as read_only is readable at the same path inside,
    and still not writable."""
    shared = tmp_path / "site"
    shared.mkdir()
    (shared / "marker.txt").write_text("from the host", encoding="utf-8")
    shared.chmod(0o755)
    for parent in (tmp_path, *tmp_path.parents):
        if str(parent).startswith("/tmp/"):
            parent.chmod(parent.stat().st_mode | 0o055)  # readable by the sandbox's user
    code = (
        f"print(open({str(shared / 'marker.txt')!r}).read())\n"
        "try:\n"
        f"    open({str(shared / 'new.txt')!r}, 'w')\n"
        "    print('wrote')\n"
        "except OSError:\n"
        "    print('read-only')\n"
    )
    config = SandboxConfig(timeout=10.0, read_only=(str(shared),))
    result = anyio.run(lambda: run_code(code, config))
    assert result.stdout.splitlines() == ["from the host", "read-only"], result
    assert not (shared / "new.txt").exists()

"""Regenerate docs/console-inbox.png and docs/console-timeline.png from a real browser.

The screenshots are taken by the console's browser test
(tests/console/test_console_browser.py) in headless Chromium: the inbox just
before a reviewer approves the refund, and the run's timeline after the run
resumed and the refund ran. Nothing is drawn by hand.

    .venv/bin/python docs/screenshots.py

Needs chromium and chromium-driver (Debian packages); exits with pytest's code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    env = dict(os.environ, CALLGATE_CONSOLE_SCREENSHOTS=str(ROOT / "docs"), CI="true")
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/console/test_console_browser.py",
    ]
    done = subprocess.run(command, cwd=ROOT, env=env, check=False)
    if done.returncode == 0:
        for name in ("console-inbox.png", "console-timeline.png"):
            print(f"wrote {ROOT / 'docs' / name}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())

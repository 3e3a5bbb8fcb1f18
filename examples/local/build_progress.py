"""Run a pip build and show its progress in a few short lines, the whole log kept in a file.

``make demo-local`` builds llama-cpp-python from source: pip's ``--verbose`` log of that build
is about 15,000 lines (each compiler command a screenful), and without it the build is
silent for half an hour. This prints pip's steps (collecting, building, installed) and one
line per compiled file, ``[64/193] 33% 12m05s ggml-cpu.cpp``, writes every line to the log
file it names, and on failure prints the log's last lines and exits with pip's code.

    python examples/local/build_progress.py [--log FILE] -- python -m pip install --verbose PKG
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

PROGRESS = re.compile(r"^\s*\[(\d+)/(\d+)\]\s+(.*)$")
SOURCE = re.compile(r"\s-c\s+(\S+)")
OUTPUT = re.compile(r"\s-o\s+(\S+)")
STEP = re.compile(
    r"^\s*(Collecting|Downloading|Processing|Building wheel|Installing collected|"
    r"Successfully|ERROR|error:|\*\*\* )"
)
TAIL = 40


def short(command: str) -> str:
    """The file a ninja step works on, for one readable line: the source it compiles, else
    the file it writes (a link), else the step's first words."""
    found = SOURCE.search(command) or OUTPUT.search(command)
    if found:
        return Path(found.group(1)).name
    return " ".join(command.split()[:3])[:60]


def filter_lines(
    lines: Iterable[str], log: Callable[[str], None], say: Callable[[str], None], start: float
) -> deque[str]:
    """Log every line; say pip's steps and one short line per ninja step; the last lines."""
    tail: deque[str] = deque(maxlen=TAIL)
    for line in lines:
        log(line)
        tail.append(line.rstrip("\n"))
        step = PROGRESS.match(line)
        if step:
            done, total = int(step.group(1)), int(step.group(2))
            minutes, seconds = divmod(int(time.monotonic() - start), 60)
            say(
                f"  [{done}/{total}] {100 * done // max(total, 1):3d}% {minutes}m{seconds:02d}s "
                f"{short(step.group(3))}"
            )
        elif STEP.match(line):
            say("  " + line.strip()[:120])
    return tail


def main(argv: list[str] | None = None) -> int:
    """Run the command after ``--``; the command's exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        print("usage: build_progress.py [--log FILE] -- COMMAND...", file=sys.stderr)
        return 2
    cut = args.index("--")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--log",
        type=Path,
        default=Path(tempfile.gettempdir()) / "callgate-llama-build.log",
        help="where the whole build log goes (default: in the temporary directory)",
    )
    options = parser.parse_args(args[:cut])
    command = args[cut + 1 :]
    print(f"  (the whole build log: {options.log})", flush=True)
    start = time.monotonic()
    with (
        options.log.open("w", encoding="utf-8") as log,
        subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            env={**os.environ, "PYTHONUNBUFFERED": "1"},  # pip's lines as they come
        ) as proc,
    ):
        assert proc.stdout is not None
        tail = filter_lines(proc.stdout, log.write, lambda s: print(s, flush=True), start)
        code = proc.wait()
    minutes, seconds = divmod(int(time.monotonic() - start), 60)
    if code != 0:
        print(f"  the build failed (exit {code}) after {minutes}m{seconds:02d}s; its last lines:")
        for line in tail:
            print("  | " + (line if len(line) <= 400 else line[:400] + " …"))
        print(f"  the whole log: {options.log}")
    else:
        print(f"  done in {minutes}m{seconds:02d}s", flush=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())

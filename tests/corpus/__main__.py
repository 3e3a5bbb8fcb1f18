"""The corpus tier: ``python -m tests.corpus`` (``make corpus``) from the repository root.

Runs every source in ``tests/corpus/<source>/source.py`` (``run(full=True)``; ``--sample``
runs the fast samples ``make test`` runs), one progress line each, then prints the table:
source, definitions, imported, refused by reason, crashes, failed checks, time; and below
it every crash and failed check (``--show N`` of each per source, default 20). Exits 1 on
any crash or failed check, 0 otherwise (refusals with a reason are allowed).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import time
import traceback
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ._report import SourceReport

HERE = Path(__file__).parent


def sources() -> list[str]:
    """Every source folder (one with a ``source.py``), sorted by name."""
    return sorted(p.parent.name for p in HERE.glob("*/source.py"))


def run_source(name: str, full: bool) -> SourceReport:
    """One source's report; a source that cannot even be imported or run is one crash."""
    start = time.perf_counter()
    try:
        module = importlib.import_module(f".{name}.source", __package__)
        report: SourceReport = module.run(full)
    except Exception as exc:
        report = SourceReport(source=name)
        report.crashes.append(
            f"{name}: the source itself failed: {type(exc).__name__}: {exc}\n"
            + "".join(traceback.format_tb(exc.__traceback__)[-3:])
        )
    report.seconds = report.seconds or time.perf_counter() - start
    return report


def table(reports: list[SourceReport]) -> Table:
    """The summary table, one row per source and a total."""
    grid = Table(title="callgate corpus")
    for column in ("source", "definitions", "imported", "refused (by reason)", "crashes"):
        grid.add_column(column, justify="right" if column != "source" else "left")
    grid.add_column("failed checks", justify="right")
    grid.add_column("checked", justify="left")
    grid.add_column("time", justify="right")
    for r in reports:
        refused = "\n".join(f"{n} × {reason}" for reason, n in r.refused.most_common()) or "0"
        checked = "\n".join(f"{n} {what}" for what, n in sorted(r.checked.items()))
        grid.add_row(
            r.source,
            str(r.definitions),
            str(r.imported),
            refused,
            str(len(r.crashes)),
            str(len(r.checks_failed)),
            checked,
            f"{r.seconds:.1f} s",
        )
    grid.add_row(
        "total",
        str(sum(r.definitions for r in reports)),
        str(sum(r.imported for r in reports)),
        str(sum(sum(r.refused.values()) for r in reports)),
        str(sum(len(r.crashes) for r in reports)),
        str(sum(len(r.checks_failed) for r in reports)),
        "",
        f"{sum(r.seconds for r in reports):.1f} s",
    )
    return grid


def main(argv: list[str] | None = None) -> int:
    """Run the sources, print the table and the findings; 1 on any crash or failed check."""
    parser = argparse.ArgumentParser(prog="python -m tests.corpus", description=__doc__)
    parser.add_argument("--sample", action="store_true", help="the fast samples only")
    parser.add_argument("--only", action="append", help="run this source (repeatable)")
    parser.add_argument("--show", type=int, default=20, help="findings shown per source")
    args = parser.parse_args(argv)
    # Refused skill folders and unchecked MCP formats are logged as warnings; the table
    # counts them, so the log would only repeat it. The level is put back afterwards.
    logger = logging.getLogger("callgate")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return _run(args)
    finally:
        logger.setLevel(level)


def _run(args: argparse.Namespace) -> int:
    """Run the chosen sources, print the table and the findings, and say how it went."""
    console = Console(stderr=False, width=160)
    names = args.only or sources()
    unknown = sorted(set(names) - set(sources()))
    if unknown:
        print(f"no such source: {', '.join(unknown)}; sources: {', '.join(sources())}")
        return 2
    reports = []
    for index, name in enumerate(names, 1):
        print(f"[{index}/{len(names)}] {name} ...", file=sys.stderr, flush=True)
        report = run_source(name, full=not args.sample)
        print(
            f"[{index}/{len(names)}] {name}: {report.imported}/{report.definitions} imported, "
            f"{len(report.crashes)} crashes, {len(report.checks_failed)} failed checks, "
            f"{report.seconds:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        reports.append(report)
    console.print(table(reports))
    for report in reports:
        for kind, lines in (("crash", report.crashes), ("failed check", report.checks_failed)):
            for line in lines[: args.show]:
                console.print(f"[bold]{escape(report.source)}[/bold] {kind}: {escape(line)}")
            if len(lines) > args.show:
                console.print(f"{report.source}: {len(lines) - args.show} more {kind}s")
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())

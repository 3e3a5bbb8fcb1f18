"""The fuzz tier: ``python -m tests.fuzz --count 1000000 --seed 1`` (``make fuzz``).

Generates ``--count`` model outputs (`tests.fuzz.generate`), checks each on
``--workers`` processes (`tests.fuzz.harness`), shows a progress bar, and
prints a summary: counts per provider, source and mutation; failures
grouped by stage, exception type and location, each with the smallest
input that showed it, shrunk and saved as a reproducer under a temporary
directory (never the working tree); cut-off calls that reached a handler;
the time per input and the slowest inputs. Exits 1 if any invariant broke.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from .generate import DEFAULT_SETTINGS, Case, Settings, generate
from .harness import BUCKETS, Bench, Tally, scratch_directory
from .shrink import save_reproducer, shrink
from .workers import jobs, start, work


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=250, help="inputs per job")
    parser.add_argument("--limit", type=float, default=1.0, help="seconds allowed per input")
    parser.add_argument("--huge-rate", type=float, default=DEFAULT_SETTINGS.huge_rate)
    parser.add_argument("--no-shrink", action="store_true")
    args = parser.parse_args(argv)
    settings = Settings(huge_rate=args.huge_rate)
    console = Console()
    scratch = scratch_directory()
    ledgers = scratch / "ledgers"
    ledgers.mkdir()
    console.print(f"fuzz: {args.count:,} inputs, seed {args.seed}, {args.workers} workers")
    console.print(f"scratch directory (ledgers, reproducers): {scratch}")
    total = Tally()
    began = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    with (
        context.Pool(
            args.workers, initializer=start, initargs=(str(ledgers), settings, args.limit)
        ) as pool,
        Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("failing {task.fields[failing]} cut-ran {task.fields[cut]}"),
            TimeRemainingColumn(),
            console=console,
        ) as progress,
    ):
        task = progress.add_task("inputs", total=args.count, failing=0, cut=0)
        for tally in pool.imap_unordered(work, jobs(args.seed, args.count, args.chunk)):
            total.add(tally)
            progress.update(
                task, advance=tally.inputs, failing=total.failing_inputs, cut=total.violations
            )
    elapsed = time.perf_counter() - began
    shutil.rmtree(ledgers, ignore_errors=True)
    report(console, total, elapsed, args, settings, scratch)
    broken = total.failures or total.violations or total.over_limit
    return 1 if broken else 0


def report(
    console: Console,
    total: Tally,
    elapsed: float,
    args: argparse.Namespace,
    settings: Settings,
    scratch: Path,
) -> None:
    """Print the summary; shrink and save one reproducer per failure class."""
    out = console.print
    out(
        f"\n[bold]{total.inputs:,} inputs in {elapsed:,.0f} s[/bold] "
        f"({total.inputs / max(elapsed, 1e-9):,.0f}/s on {args.workers} workers)"
    )
    out(
        f"calls extracted and submitted: {total.calls:,}; cut calls tracked: {total.cut_calls:,}; "
        f"inputs that were not a response at all (TypeError, as documented): "
        f"{total.not_a_response:,}"
    )
    out("per provider: " + ", ".join(f"{k} {v:,}" for k, v in total.by_provider.most_common()))
    out("per source: " + ", ".join(f"{k} {v:,}" for k, v in total.by_source.most_common()))
    out("per mutation: " + ", ".join(f"{k} {v:,}" for k, v in total.by_mutation.most_common()))
    out(
        f"\n[bold]uncaught exceptions[/bold]: {sum(total.failures.values()):,} in "
        f"{total.failing_inputs:,} failing inputs "
        f"({100 * total.failing_inputs / max(1, total.inputs):.2f} %)"
    )
    out(
        "failing inputs per provider: "
        + ", ".join(f"{k} {v:,}" for k, v in total.failing_by_provider.most_common())
    )
    ranked = sorted(total.failures.items(), key=lambda kv: -kv[1])
    for n, (key, count) in enumerate(ranked, 1):
        stage, kind, location = key
        size, seed, index, message = total.examples[key][0]
        out(f"\n{n}. {count:,} x {kind} from {stage} at {location}")
        out(f"   message: {message[:160]}")
        out(f"   smallest input: seed {seed} index {index} (size {size:,})")
        if args.no_shrink:
            continue
        try:
            case = generate(seed, index, settings)
            small = shrink(case, key, scratch)
            path = save_reproducer(small, key, scratch / f"repro-{n:02d}")
        except Exception as exc:  # the summary matters more than one reproducer
            out(f"   (no reproducer: {type(exc).__name__}: {str(exc)[:100]})")
            continue
        out(f"   reproducer ({small.label}): {path}")
        literal = path.with_suffix(".txt").read_text(encoding="utf-8", errors="replace")
        out(f"   input: {literal[:400]}")
    out(f"\n[bold]cut-off calls that reached a handler[/bold]: {total.violations:,}")
    for seed, index, ledger, call_id in total.violation_examples[:10]:
        out(f"   seed {seed} index {index}: call {call_id!r} ran on the {ledger} ledger")
        if not args.no_shrink:
            case = generate(seed, index, settings)
            if (scratch / f"cut-{index}.py").exists():
                continue
            path = save_reproducer(case, ("cut", ledger, call_id), scratch / f"cut-{index}")
            out(f"   reproducer ({case.label}, cut ids {sorted(case.cut_ids)}): {path}")
    out(
        f"\n[bold]time per input[/bold] (extract + slower submit): "
        f"{total.over_limit:,} over {args.limit:g} s"
    )
    lower = 0.0
    for bound, count in zip(BUCKETS, total.buckets, strict=True):
        out(f"   {lower * 1000:>7.0f} ms - {bound * 1000:>7.0f} ms: {count:,}")
        lower = bound
    samples = sorted(total.samples)
    if samples:
        pick = [samples[min(len(samples) - 1, int(q * len(samples)))] for q in (0.5, 0.9, 0.99)]
        mean = 1000 * total.seconds_total / max(1, total.inputs)
        out(
            f"   median {pick[0] * 1000:.2f} ms, p90 {pick[1] * 1000:.2f} ms, "
            f"p99 {pick[2] * 1000:.2f} ms, max {total.slowest[0][0]:.3f} s, mean {mean:.2f} ms"
        )
    out("slowest inputs:")
    for seconds, seed, index, what in total.slowest:
        out(f"   {seconds:8.3f} s  seed {seed} index {index}: {what}")


def check_one(seed: int, index: int) -> None:
    """Run one input alone and print what happened (for a reproducer)."""
    case: Case = generate(seed, index)
    bench = Bench(scratch_directory())
    print(bench.check(case))


if __name__ == "__main__":
    sys.exit(main())

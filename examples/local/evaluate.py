"""Run the fifty shop tasks with the local model, free and constrained, into one ledger.

    python examples/local/evaluate.py --db /tmp/local-eval.db [--tasks 50] [--modes none,llguidance]
    callgate eval grammar-decision --db /tmp/local-eval.db

``--tasks N`` takes N tasks spread over the ten tools (`local.tasks.spread`:
one of each tool in turn), not the first N in tool order. Each task is one
agent run (two model calls at most: the proposal and the turn after its
observation, which is where a rejected call is retried). Each
run's decode timings are written as ``model.decode`` events and its grade as
an ``eval.graded`` event (success: the expected tool was called and ran), so
the decision rule has p_f, c_r, c_g and q from the ledger alone.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the examples importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from callgate import Agent, Authority, Gate, SQLiteLedger, Status
from callgate.agent import Budgets
from callgate.eval import GRADE_EVENT
from callgate.llms import LocalModel, record_decodes
from local.tasks import GRANTS, SYSTEM, TASKS, registry, spread


def main(argv: list[str] | None = None) -> int:
    """Run the task set; print one line per task and a tally per mode."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="the SQLite ledger to write")
    parser.add_argument(
        "--tasks",
        type=int,
        default=len(TASKS),
        help="how many tasks to run, spread over the tools (one of each tool in turn)",
    )
    parser.add_argument("--modes", default="none,llguidance", help="constraints, comma-separated")
    parser.add_argument("--model", default=None, help="a .gguf path (default: SmolLM2-135M)")
    parser.add_argument("--max-tokens", type=int, default=80)
    parser.add_argument("--steps", type=int, default=2, help="model calls per task at most")
    args = parser.parse_args(argv)
    tasks = spread(TASKS, args.tasks)
    ledger = SQLiteLedger(args.db)
    gate = Gate(registry, ledger=ledger)
    for mode in args.modes.split(","):
        model = LocalModel(args.model, constrain=mode, answer=False, max_tokens=args.max_tokens)  # type: ignore[arg-type]
        agent = Agent(model, gate, budgets=Budgets(steps=args.steps), system=SYSTEM, paging=False)
        tools = len({t.tool for t in tasks})
        print(
            f"{model.name}: {len(tasks)} tasks over {tools} tools, decoding {mode}; the first "
            "task waits longest (llama.cpp reads the system prompt and the tools' definitions)",
            flush=True,
        )
        ok = 0
        started = time.perf_counter()
        for task in tasks:
            seen = len(model.decodes)
            result = agent.run(
                task.prompt, authority=Authority(principal="shop-assistant", grants=list(GRANTS))
            )
            record_decodes(ledger, result.run_id, model.decodes[seen:])
            called = [o.tool for o in result.observations]
            success = any(
                o.tool == task.tool and o.status is Status.OK for o in result.observations
            )
            ok += success
            ledger.record_event(
                GRADE_EVENT,
                run_id=result.run_id,
                call_id=None,
                data={"task": task.id, "expected": task.tool, "called": called, "success": success},
            )
            stages = ",".join(
                f"{o.tool or '?'}:{o.status.value}/{o.stage.value}" for o in result.observations
            )
            print(
                f"{model.name:40} {task.id:18} {'ok ' if success else 'no '} {stages}", flush=True
            )
        seconds = time.perf_counter() - started
        print(f"{model.name}: {ok}/{len(tasks)} tasks succeeded in {seconds:.0f} s", flush=True)
    ledger.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``callgate run``: an agent over your registry and policy, and the replay of a run.

    callgate run myapp.tools:registry --policy policy.toml --model openai:gpt-4.1 \\
        --grant 'read:*' --grant 'spend:USD<=50' --context tenant=acme \\
        --message "Refund order o-1"
    callgate run replay RUN_ID

Every run is recorded in the ledger (``--db``, default ``$CALLGATE_DB`` or
``./callgate.db``), its transcript included, so ``replay`` can show it later.

What the model and the tools said is printed as plain text
(`callgate.cli.plain`): markup is shown, not obeyed, and control characters
are shown as escapes. ``replay`` opens the ledger read-only; ``run`` creates a
ledger where there is none, never inside another application's database.

Exit codes:
    0  the model answered
    1  the run stopped without an answer: a budget, oscillation, a security
       stop, an unresolved outcome, a model error (``replay``: no such run)
    2  bad usage or input: a registry that does not import, a bad policy file,
       an unknown ``--model``, a missing API key, no ledger there, a file that
       is not a callgate ledger
    3  the ledger could not be read: the database is damaged (or failed)
"""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.status import Status
from rich.text import Text
from typer.core import TyperGroup

from callgate.agent import Agent, AgentResult, Budgets
from callgate.agent.transcript import TranscriptEntry, replay
from callgate.authorize.policy import Authority, Policy
from callgate.cli.plain import cell, console, fail, plain, plain_json
from callgate.errors import DefinitionError
from callgate.gate import Gate
from callgate.ledger.base import LedgerError
from callgate.ledger.sqlite import DEFAULT_PATH, SQLiteLedger
from callgate.llms import SPEC_HELP, Model, model_from_spec

__all__ = ["app"]

OK, STOPPED, USAGE = 0, 1, 2


class _StartByDefault(TyperGroup):
    """``callgate run TARGET ...`` means ``callgate run start TARGET ...``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # typer's vendored click
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["start", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=_StartByDefault,
    name="run",
    help="Run an agent over your tools and policy, or replay a recorded run.\n\n"
    "callgate run MODULE:ATTR --model SPEC --message TEXT [--policy FILE] [--grant EFFECT]...: "
    "the model proposes calls, callgate decides and executes them, until the model answers "
    "(see 'callgate run start --help').\n\n"
    "callgate run replay RUN_ID: the run's transcript, rebuilt from the ledger.\n\n"
    "Exit codes: 0 the model answered; 1 the run stopped without an answer (a budget, "
    "oscillation, a security stop, an unresolved outcome, a model error), or replay found "
    "no such run; 2 bad usage or input (a file that is not a callgate ledger included); "
    "3 the ledger could not be read (the database is damaged, or failed).",
    no_args_is_help=True,
    add_completion=False,
)


REPLAY_HELP = (
    "Show a recorded run: the user's message, each model turn and its calls, every decision "
    "and attempt, every observation, how it ended; rebuilt from the ledger's audit trail "
    "alone.\n\n"
    "Exit codes: 0 shown; 1 the ledger has no such run; 2 no ledger at --db, or a file that "
    "is not a callgate ledger; 3 the ledger could not be read (damaged)."
)


class ApproveMode(StrEnum):
    """Who decides the approvals a run asks for."""

    prompt = "prompt"
    deny = "deny"
    all = "all"


DbOption = Annotated[
    Path,
    typer.Option("--db", envvar="CALLGATE_DB", help="The SQLite ledger file.", show_default=True),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def bad_usage(message: str, code: int = USAGE) -> typer.Exit:
    return fail(message, code)


def _err() -> Console:
    return console(stderr=True)


def load_model(spec: str) -> Model:
    """The model ``--model`` names; bad usage (exit 2) with the fix when it cannot be built."""
    try:
        return model_from_spec(spec)
    except DefinitionError as exc:
        raise bad_usage(str(exc)) from None


def _context(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise bad_usage(f"--context takes KEY=VALUE, got '{pair}'")
        out[key] = value
    return out


START_HELP = (
    "Run an agent: the model proposes calls, callgate decides and executes them, until the "
    "model answers or a budget ends the run.\n\n"
    "The user's message and the system prompt are trusted input; tool output is not. Only the "
    "tools the grants could cover are shown to the model. Calls that need a person's approval "
    "are decided by --approve. The run and its transcript are recorded in the ledger (--db).\n\n"
    "The answer goes to stdout; progress and the calls go to stderr. With --json, stdout holds "
    "one JSON object: run id, reason, answer, counters, every observation.\n\n"
    "Exit codes: 0 the model answered; 1 the run stopped without an answer; 2 bad usage or input."
)


@app.command(help=START_HELP)
def start(
    target: Annotated[
        str, typer.Argument(help="The tools: module:attribute of a callgate Registry.")
    ],
    message: Annotated[
        str, typer.Option("--message", "-m", help="The user's message (trusted input).")
    ],
    model: Annotated[str, typer.Option("--model", help=f"The model: {SPEC_HELP}.")],
    policy: Annotated[
        Path | None,
        typer.Option(help="A policy file (TOML); without one, granted effects suffice."),
    ] = None,
    grant: Annotated[
        list[str] | None,
        typer.Option(
            "--grant",
            "-g",
            help="An effect the run may have, e.g. 'read:*' or 'spend:USD<=50' (repeatable). "
            "Tools whose effects no grant could cover are not shown to the model.",
        ),
    ] = None,
    context: Annotated[
        list[str] | None,
        typer.Option(
            "--context",
            "-c",
            help="Trusted context for the tools, KEY=VALUE (repeatable); never shown to the model.",
        ),
    ] = None,
    principal: Annotated[str, typer.Option(help="Who the run acts for.")] = "cli",
    system: Annotated[str | None, typer.Option(help="The system prompt (trusted input).")] = None,
    approve: Annotated[
        ApproveMode | None,
        typer.Option(
            help="Who decides approvals: 'prompt' asks you (the default on a terminal), "
            "'deny' refuses them all (the default otherwise), 'all' approves them all.",
        ),
    ] = None,
    max_steps: Annotated[int, typer.Option(help="Budget: model calls.")] = 20,
    max_tool_calls: Annotated[int, typer.Option(help="Budget: proposed tool calls.")] = 100,
    max_seconds: Annotated[float, typer.Option(help="Budget: active seconds.")] = 600.0,
    max_tokens: Annotated[
        int | None, typer.Option(help="Budget: tokens, when the model reports usage.")
    ] = None,
    db: DbOption = Path(DEFAULT_PATH),
    as_json: JsonOption = False,
) -> None:
    """Run an agent over TARGET's tools (the help text is `START_HELP`)."""
    from callgate.cli.ledger import check_ledger
    from callgate.cli.policy import load_registry

    registry = load_registry(target)
    loaded = Policy()
    if policy is not None:
        try:
            loaded = Policy.from_file(policy)
        except DefinitionError as exc:
            raise bad_usage(str(exc)) from None
    chosen = load_model(model)
    try:
        authority = Authority(
            principal=principal, grants=grant or (), context=_context(context or [])
        )
        budgets = Budgets(
            steps=max_steps, tool_calls=max_tool_calls, seconds=max_seconds, tokens=max_tokens
        )
    except DefinitionError as exc:
        raise bad_usage(str(exc)) from None
    mode = approve or (ApproveMode.prompt if sys.stdin.isatty() else ApproveMode.deny)
    check_ledger(db, missing_ok=True)  # never inside another application's database
    try:
        ledger = SQLiteLedger(db, worker="callgate-run")
    except LedgerError as exc:
        raise bad_usage(str(exc)) from None
    try:
        gate = Gate(registry, policy=loaded, ledger=ledger)
        progress = _Progress(quiet=as_json)
        agent = Agent(chosen, gate, budgets=budgets, system=system, on_event=progress)
        with progress:
            result = agent.run(message, authority=authority)
            while result.paused:
                progress.stop()
                _decide(gate, result, mode)
                progress.start()
                result = agent.resume(result)
    finally:
        ledger.close()
    _report(result, as_json)
    raise typer.Exit(OK if result.answered else STOPPED)


def _decide(gate: Gate, result: AgentResult, mode: ApproveMode) -> None:
    who = f"cli:{os.environ.get('USER', 'user')}"
    for approval_id in result.pending_approvals:
        request = gate.approvals.get(approval_id)
        if request is None:
            continue
        if mode is ApproveMode.prompt:
            line = Text(f"approval {approval_id}", style="cyan")
            line.append(plain(f": {request.preview}"))
            _err().print(line, soft_wrap=True)
            _err().print(cell(f"  effects: {', '.join(request.effects) or 'none'}"), soft_wrap=True)
            yes = typer.confirm("  approve this exact call?", default=False, err=True)
        else:
            yes = mode is ApproveMode.all
        if yes:
            gate.approvals.approve(approval_id, by=who)
        else:
            gate.approvals.deny(
                approval_id, by=who, reason=f"denied from the command line ({mode})"
            )


class _Progress:
    """A spinner with the run's counters on stderr, and one line per observation."""

    def __init__(self, *, quiet: bool) -> None:
        self.quiet = quiet
        self.steps = 0
        self.calls = 0
        self.status: Status | None = None

    def __enter__(self) -> _Progress:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        if not self.quiet and self.status is None:
            self.status = _err().status(self._text())
            self.status.start()

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None

    def _text(self) -> str:
        return f"step {self.steps} · {self.calls} tool calls"

    def __call__(self, entry: TranscriptEntry) -> None:
        if self.quiet:
            return
        data = entry.data
        if entry.kind == "agent.model":
            self.steps = int(data["step"])
            self.calls += len(data["calls"])
            for call in data["calls"]:
                args = str(call["arguments"])[:120]
                _err().print(cell(f"→ {call['tool']}({args})", style="dim"), soft_wrap=True)
        elif entry.kind == "agent.observations":
            for r in data["results"]:
                line = Text("✔", style="green") if r["status"] == "ok" else Text("✘", style="red")
                line.append(plain(f" {r['tool']}: {r['status']} at {r['stage']}"))
                _err().print(line, soft_wrap=True)
        elif entry.kind == "security.boundary":
            line = Text("⚠ security.boundary", style="bold red")
            line.append(plain(f": {data['tool']} {data['rule']}"))
            _err().print(line, soft_wrap=True)
        if self.status is not None:
            self.status.update(self._text())


def _report(result: AgentResult, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(plain_json(_result_json(result), indent=2) + "\n")
        return
    if result.answered:
        console().print(cell(result.answer, multiline=True))
    else:
        line = Text(f"stopped: {result.reason.value}", style="yellow")
        line.append(plain(f": {result.detail}", multiline=True))
        _err().print(line)
    _err().print(
        cell(
            f"run {result.run_id}: {result.reason.value}, {result.steps} model calls, "
            f"{result.tool_calls} tool calls, {result.usage.total} tokens, "
            f"{result.elapsed:.2f} s; replay with: callgate run replay {result.run_id}",
            style="dim",
        ),
        soft_wrap=True,
    )


def _result_json(result: AgentResult) -> dict[str, Any]:
    return {
        "run_id": result.run_id,
        "reason": result.reason.value,
        "answered": result.answered,
        "detail": result.detail,
        "answer": result.answer,
        "steps": result.steps,
        "tool_calls": result.tool_calls,
        "tokens": {"input": result.usage.input_tokens, "output": result.usage.output_tokens},
        "seconds": round(result.elapsed, 3),
        "observations": [
            {
                "call_id": o.call_id,
                "tool": o.tool,
                "status": o.status.value,
                "stage": o.stage.value,
                "content": o.content,
            }
            for o in result.observations
        ],
    }


@app.command("replay", help=REPLAY_HELP)
def replay_command(
    run_id: Annotated[str, typer.Argument(help="The run's id (printed at the end of a run).")],
    db: DbOption = Path(DEFAULT_PATH),
    as_json: JsonOption = False,
) -> None:
    """Show a recorded run (the help text is `REPLAY_HELP`)."""
    from callgate.cli.ledger import open_ledger

    with open_ledger(db, None, dsn_hint=False) as ledger:
        transcript = replay(ledger, run_id)
        if not transcript.entries:
            raise bad_usage(f"the ledger has no run '{run_id}'", STOPPED)
        if as_json:
            entries = [
                {"seq": e.seq, "at": e.at, "kind": e.kind, "call_id": e.call_id, "data": e.data}
                for e in transcript.entries
            ]
            sys.stdout.write(plain_json(entries, indent=2) + "\n")
            return
        out = console()
        for entry in transcript.entries:
            out.print(cell(_line(entry)), soft_wrap=True)


def _line(entry: TranscriptEntry) -> str:
    """One entry of a transcript, for a person."""
    d = entry.data
    kind = entry.kind
    call = f" {entry.call_id}" if entry.call_id else ""
    if kind == "agent.started":
        text = f"user: {d.get('user')}; tools shown: {', '.join(map(str, d.get('tools', [])))}"
    elif kind == "agent.model":
        proposed = ", ".join(f"{c['tool']}({c['arguments']})" for c in d.get("calls", []))
        text = f"step {d.get('step')}: {d.get('text') or ''} {proposed}".strip()
    elif kind == "agent.observations":
        text = "; ".join(
            f"{r['call_id']} {r['tool']}: {r['status']} at {r['stage']}"
            for r in d.get("results", [])
        )
    elif kind == "agent.stopped":
        text = f"{d.get('reason')}: {d.get('answer') or d.get('detail')}"
    elif kind.startswith("attempt."):
        settled = " (reconciled)" if d.get("reconciled") else ""
        text = f"attempt {d.get('attempt')}{settled}"
        if d.get("error"):
            text += f": {d['error']}"
    elif kind.startswith("call."):
        decided = d.get("decided_by") or "-"
        text = f"{d.get('tool')} {d.get('stage')} ({decided}) {d.get('message') or ''}"
    else:
        text = plain_json(d)
    return plain(f"{entry.seq:>4} {kind}{call}: {' '.join(text.split())[:300]}")

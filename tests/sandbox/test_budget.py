"""What a program may cost the host: the environment never on a command line, and a
per-run budget on the bytes it sends through the bridge and on what the ledger keeps.

Before the budget, a 215-byte program made ~100 calls of 0.9 MB each and grew a SQLite
ledger by 131-181 MiB in one default run; these tests failed then.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from callgate import Authority, Gate, Registry, ToolCall, tool
from callgate.ledger import SQLiteLedger
from callgate.sandbox import Limits, SandboxConfig, python_tool, run_code
from callgate.sandbox.protocol import CallRequest

pytestmark = pytest.mark.usefixtures("bwrap_available")


def _command_lines_holding(value: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if value.encode() in Path(f"/proc/{entry.name}/cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_env_values_are_never_on_a_command_line() -> None:
    """While the code runs, no process's command line (readable by every local user) holds
    a value passed with ``env=``; the code itself still sees it in its environment."""
    secret = "cg-argv-secret-" + uuid.uuid4().hex
    seen: list[list[int]] = []

    async def answer(request: CallRequest) -> dict[str, Any]:
        seen.append(_command_lines_holding(secret))
        return {"status": "ok", "content": "looked"}

    config = SandboxConfig(timeout=10, env={"API_TOKEN": secret})
    code = "import os, tools; tools.look(); print(os.environ['API_TOKEN'] == " + repr(secret) + ")"
    result = asyncio.run(run_code(code, config, tools=[{"name": "look", "doc": ""}], answer=answer))
    assert result.stdout.strip() == "True", result
    assert seen == [[]], f"the secret is on the command line of processes {seen}"


stored: list[int] = []


@tool(effects="write:notes")
def keep(note: str) -> str:
    """Keep a note."""
    stored.append(len(note))
    return "kept"


@tool(effects="read:notes", risk="read", max_result_chars=400_000)
def fetch(n: int) -> str:
    """Fetch a big record."""
    return "r" * 300_000


FLOOD = """
import tools
done = refused = 0
for i in range(20):
    try:
        tools.{tool}({argument})
        done += 1
    except tools.CallRejected as exc:
        refused += 1
        message = exc.message
print(done, refused)
print(message)
"""


def _flood(tmp_path: Path, tool_name: str, argument: str, limits: Limits) -> tuple[Any, int]:
    path = tmp_path / "ledger.db"
    ledger = SQLiteLedger(str(path))
    registry = Registry([keep, fetch])
    registry.add(python_tool(tools=["keep", "fetch"], timeout=20, limits=limits))
    gate = Gate(registry, ledger=ledger)
    before = sum(p.stat().st_size for p in tmp_path.glob("ledger.db*"))
    run = gate.run(
        authority=Authority(principal="p", grants=["exec:sandbox", "write:notes", "read:notes"])
    )
    code = FLOOD.format(tool=tool_name, argument=argument)
    (obs,) = run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])
    ledger.close()
    grown = sum(p.stat().st_size for p in tmp_path.glob("ledger.db*")) - before
    return obs.result, grown


def test_bytes_sent_through_the_bridge_are_bounded_per_run(tmp_path: Path) -> None:
    """20 calls of 300 kB against a 1 MiB budget: the first three run, the rest are refused
    with a message naming the limit, and the ledger grows by a few MiB at most."""
    stored.clear()
    result, grown = _flood(
        tmp_path, "keep", "note='x' * 300_000", Limits(bridge_bytes=1 << 20, ledger_bytes=64 << 20)
    )
    done, refused = map(int, result["stdout"].split()[:2])
    assert (done, refused) == (3, 17), result
    assert "Limits.bridge_bytes" in result["stdout"]
    assert stored == [300_000] * 3
    assert grown < 4 << 20, grown


def test_what_the_ledger_keeps_for_a_run_of_code_is_bounded(tmp_path: Path) -> None:
    """Small calls with 300 kB results against a 1 MiB ledger budget: refused once spent."""
    result, grown = _flood(
        tmp_path, "fetch", "n=1", Limits(bridge_bytes=64 << 20, ledger_bytes=1 << 20)
    )
    done, refused = map(int, result["stdout"].split()[:2])
    assert done <= 4, result
    assert refused == 20 - done
    assert "Limits.ledger_bytes" in result["stdout"]
    assert grown < 6 << 20, grown


def test_the_ledger_grows_by_its_budget_not_twice_it(tmp_path: Path) -> None:
    """Calls of 300 kB arguments against a 2 MiB ledger budget (and a bridge budget that
    never binds): the SQLite ledger grows by the budget and one call past it at most. The
    ledger keeps a call's arguments twice (its journal record and its call row); counted
    once, as before, 7 calls ran and the file grew by 4 MiB, twice the budget."""
    stored.clear()
    result, grown = _flood(
        tmp_path, "keep", "note='x' * 300_000", Limits(bridge_bytes=64 << 20, ledger_bytes=2 << 20)
    )
    done, refused = map(int, result["stdout"].split()[:2])
    assert refused == 20 - done, result
    assert "Limits.ledger_bytes" in result["stdout"], result
    assert grown < (2 << 20) + (1 << 20), f"the ledger grew by {grown:,} bytes"


def test_many_small_calls_count_the_records_they_leave(tmp_path: Path) -> None:
    """256 calls of one character against a 256 KiB ledger budget: each call's records
    (decision, attempt, outcome, row) cost the ledger about 2 kB whatever its size, so
    the budget is spent before the calls are (the file grows by the budget and a call at
    most). Counted by their frames alone, as before, all 256 ran and the SQLite ledger
    grew by 0.46 MiB."""
    path = tmp_path / "ledger.db"
    ledger = SQLiteLedger(str(path))
    registry = Registry([keep])
    limits = Limits(ledger_bytes=256 << 10)
    registry.add(python_tool(tools=["keep"], timeout=20, limits=limits))
    gate = Gate(registry, ledger=ledger)
    run = gate.run(authority=Authority(principal="p", grants=["exec:sandbox", "write:notes"]))
    before = sum(p.stat().st_size for p in tmp_path.glob("ledger.db*"))
    code = (
        "import tools\n"
        "done = 0\n"
        "try:\n"
        "    for i in range(256):\n"
        "        tools.keep(note='a')\n"
        "        done += 1\n"
        "except tools.CallRejected as exc:\n"
        "    print(exc.message)\n"
        "print(done)\n"
    )
    (obs,) = run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])
    ledger.close()
    grown = sum(p.stat().st_size for p in tmp_path.glob("ledger.db*")) - before
    assert isinstance(obs.result, dict), obs.content
    assert "Limits.ledger_bytes" in obs.result["stdout"], obs.result
    assert int(obs.result["stdout"].split()[-1]) < 256
    assert grown < (256 << 10) + (64 << 10), f"the ledger grew by {grown:,} bytes"

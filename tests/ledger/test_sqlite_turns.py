"""Writers of one SQLite file taking turns on the same run and key.

`SQLiteLedger` keeps what its own last write transaction left (chain heads, the last
record number, the records since its truth's mark) and skips reading them again only
while ``PRAGMA data_version`` says no other connection committed. These tests make
another connection (another process, or another ledger object of the same process)
write the same run and the same idempotency key between each pair of a ledger's
transactions: a skip taken on stale knowledge would chain a record to an old head or
reuse a record number (verify fails, or the insert does) or hand the key out twice.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from callgate.canonical import digest
from callgate.ledger import AttemptFinish, AttemptStart, CallRecord, CallState, Outcome
from callgate.ledger.sqlite import SQLiteLedger

ROUNDS = 12
RUN = "shared-run"
KEY = "shared-key"
REQUEST = digest("charge", '{"amount":1}')

WORKER = r"""
import json, sys, time
from callgate.ledger import AttemptFinish, AttemptStart, CallRecord, CallState, Outcome
from callgate.ledger.sqlite import SQLiteLedger
path, worker, run, key, request = sys.argv[1:6]
ledger = SQLiteLedger(path, worker=worker)
for line in sys.stdin:
    op, call_id = line.split()
    now = time.time()
    if op == "call":
        ledger.record_decision(CallRecord(
            run_id=run, call_id=call_id, tool="charge", tool_version="1", principal="p",
            arguments='{"amount":1}', state=CallState.ADMITTED, stage="policy",
            request_hash=request, idempotency_key=key, decided_by="granted",
            created_at=now, updated_at=now))
        claim = ledger.begin_attempt(AttemptStart(
            run_id=run, call_id=call_id, tool="charge", tool_version="1", attempt=1,
            idempotency_key=key, request_hash=request, started_at=now,
            key_expires_at=now + 3600, side_effecting=True))
        ran = claim.kind.value == "run"
        if ran:
            ledger.finish_attempt(AttemptFinish(
                run_id=run, call_id=call_id, attempt=1, idempotency_key=key,
                outcome=Outcome(status="ok", content='{"done":1}', finished_at=time.time())))
        answer = {"claim": claim.kind.value, "ran": ran}
    elif op == "event":
        ledger.record_event("note.turn", run_id=run, call_id=None, data={"by": worker})
        answer = {}
    else:
        check = ledger.verify()
        answer = {"ok": check.ok, "problems": list(check.problems), "records": check.records}
    print(json.dumps(answer), flush=True)
ledger.close()
"""


class Worker:
    """A child process holding one `SQLiteLedger` on the file, driven line by line."""

    def __init__(self, path: Path, name: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(path), name, RUN, KEY, REQUEST],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, op: str, call_id: str = "-") -> dict[str, Any]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(f"{op} {call_id}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"worker exited with {self.proc.wait()} on {op} {call_id}"
        found: dict[str, Any] = json.loads(line)
        return found

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


def test_two_processes_alternating_on_one_run_and_key_run_it_once(tmp_path: Path) -> None:
    """Two processes alternating writes to one run and one key: one execution, verify ok."""
    path = tmp_path / "callgate.db"
    SQLiteLedger(path).close()
    workers = [Worker(path, "a"), Worker(path, "b")]
    try:
        ran = 0
        for n in range(ROUNDS):
            me, other = workers[n % 2], workers[1 - n % 2]
            answer = me.ask("call", f"c{n}")
            ran += answer["ran"]
            assert answer["claim"] == ("run" if n == 0 else "replay"), (n, answer)
            other.ask("event")
            me.ask("event")
        assert ran == 1
        for worker in workers:
            check = worker.ask("verify")
            assert check["ok"], check["problems"]
    finally:
        for worker in workers:
            worker.close()


def _decide(ledger: SQLiteLedger, call_id: str) -> None:
    now = time.time()
    ledger.record_decision(
        CallRecord(
            run_id=RUN,
            call_id=call_id,
            tool="charge",
            tool_version="1",
            principal="p",
            arguments='{"amount":1}',
            state=CallState.ADMITTED,
            stage="policy",
            request_hash=REQUEST,
            idempotency_key=KEY,
            decided_by="granted",
            created_at=now,
            updated_at=now,
        )
    )


def _start(call_id: str) -> AttemptStart:
    now = time.time()
    return AttemptStart(
        run_id=RUN,
        call_id=call_id,
        tool="charge",
        tool_version="1",
        attempt=1,
        idempotency_key=KEY,
        request_hash=REQUEST,
        started_at=now,
        key_expires_at=now + 3600,
        side_effecting=True,
    )


def test_two_connections_of_one_process_alternating_on_one_key_run_it_once(
    tmp_path: Path,
) -> None:
    """Two ledgers of one process alternating on one run and key: one execution, verify ok."""
    path = tmp_path / "callgate.db"
    a, b = SQLiteLedger(path, worker="a"), SQLiteLedger(path, worker="b")
    try:
        ran = 0
        for n in range(ROUNDS):
            me, other = (a, b) if n % 2 == 0 else (b, a)
            _decide(me, f"c{n}")
            claim = me.begin_attempt(_start(f"c{n}"))
            if claim.kind.value == "run":
                ran += 1
                me.finish_attempt(
                    AttemptFinish(
                        run_id=RUN,
                        call_id=f"c{n}",
                        attempt=1,
                        idempotency_key=KEY,
                        outcome=Outcome(status="ok", content="{}", finished_at=time.time()),
                    )
                )
            other.record_event("note.turn", run_id=RUN, call_id=None, data={"n": n})
            me.record_event("note.turn", run_id=RUN, call_id=None, data={"n": n})
        assert ran == 1
        for ledger in (a, b):
            check = ledger.verify()
            assert check.ok, check.problems
    finally:
        a.close()
        b.close()

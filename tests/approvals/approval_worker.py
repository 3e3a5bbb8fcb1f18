"""Another process for the approval tests: submit a refund that waits, or resume a run.

Run: ``python approval_worker.py submit|resume --ledger sqlite:PATH|postgres:DSN
--effects FILE --run RUN_ID [--wait-go]``.

* ``submit``: reads order o1, proposes a 20 USD refund (it asks a person),
  prints each observation as a JSON line and exits; nothing is approved here.
* ``resume``: rebuilds the run from the ledger (`Gate.resume_run`) and resumes
  it; prints each observation as a JSON line. ``--wait-go`` waits for a line
  ``go`` on stdin first (to start two resumers at the same moment).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from approval_domain import ALICE, gate, read_order, refund_call

from callgate.ledger import Ledger, PostgresLedger, SQLiteLedger


def open_ledger(spec: str) -> Ledger:
    kind, _, target = spec.partition(":")
    return SQLiteLedger(target) if kind == "sqlite" else PostgresLedger(target)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["submit", "resume"])
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--effects", required=True, type=Path)
    parser.add_argument("--run", required=True)
    parser.add_argument("--wait-go", action="store_true")
    args = parser.parse_args()
    ledger = open_ledger(args.ledger)
    try:
        g = gate(ledger, args.effects)
        if args.command == "submit":
            run = g.run(authority=ALICE, run_id=args.run)
            observations = run.submit([read_order()]) + run.submit([refund_call("refund-1")])
        else:
            run = g.resume_run(args.run, authority=ALICE)
            print(json.dumps({"ready": run.pending_approvals}), flush=True)
            if args.wait_go:
                sys.stdin.readline()
            observations = run.resume()
        for obs in observations:
            print(
                json.dumps(
                    {
                        "call_id": obs.call_id,
                        "status": obs.status.value,
                        "stage": obs.stage.value,
                        "approval_id": obs.approval_id,
                        "content": obs.content,
                    }
                ),
                flush=True,
            )
    finally:
        ledger.close()


if __name__ == "__main__":
    main()

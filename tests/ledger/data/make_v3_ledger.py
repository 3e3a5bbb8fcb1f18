"""Write a ledger of callgate's schema version 3, as the code before schema 4 wrote it.

The migration to schema 4 (a chain per run) is tested on what this script wrote:
``ledger_v3.sqlite`` and ``ledger_v3.pg.sql`` (``pg_dump --no-owner --no-privileges
--inserts`` of the same scenario on PostgreSQL 15). It must run on the code of commit
``e4c926e^`` (schema version 3), never on the working tree; it refuses any other schema.

Usage, from the repository root::

    mkdir /tmp/v3src && git archive e4c926e^ src | tar -x -C /tmp/v3src
    PYTHONPATH=/tmp/v3src/src .venv/bin/python tests/ledger/data/make_v3_ledger.py \\
        --sqlite /tmp/ledger_v3.sqlite
    PYTHONPATH=/tmp/v3src/src .venv/bin/python tests/ledger/data/make_v3_ledger.py \\
        --dsn "host=/tmp/sock dbname=empty"

The scenario: two runs of alice (``run-v3-a``, ``run-v3-b``), each with a charge under
its own business key (ok) and a read; ``run-v3-b`` sends run a's charge again under
another call id (replayed); a refund in ``run-v3-a`` asks a person, who approves it,
and the resumed run spends the approval (ok). 3 charges' effects ran: ``op-a``,
``op-b`` and the refund.
"""

from __future__ import annotations

import argparse
import sqlite3
from typing import Any

from callgate import Authority, Gate, Policy, Registry, ToolCall, allow, ask
from callgate.ledger.sql_schema import SCHEMA_VERSION

ALICE = Authority(principal="alice", grants=["spend:USD<=1000", "read:orders"])


def registry() -> Registry:
    reg = Registry()

    @reg.tool(effects="spend:USD={amount}", idempotency_key="{op}")
    def charge(op: str, amount: int) -> dict[str, Any]:
        """Charge."""
        return {"charged": amount, "op": op}

    @reg.tool(effects="read:orders", risk="read")
    def lookup(order_id: str) -> dict[str, Any]:
        """Look up."""
        return {"order": order_id}

    @reg.tool(effects="spend:USD={amount}")
    def refund(order_id: str, amount: int) -> dict[str, Any]:
        """Refund."""
        return {"refunded": amount}

    return reg


def scenario(ledger: Any) -> None:
    gate = Gate(
        registry(), policy=Policy([ask("refund"), allow("charge"), allow("lookup")]), ledger=ledger
    )
    a = gate.run(authority=ALICE, run_id="run-v3-a")
    a.submit([ToolCall(id="a1", name="charge", arguments={"op": "op-a", "amount": 10})])
    a.submit([ToolCall(id="a2", name="lookup", arguments={"order_id": "o1"})])
    b = gate.run(authority=ALICE, run_id="run-v3-b")
    b.submit([ToolCall(id="b1", name="charge", arguments={"op": "op-b", "amount": 20})])
    b.submit([ToolCall(id="b2", name="charge", arguments={"op": "op-a", "amount": 10})])
    b.submit([ToolCall(id="b3", name="lookup", arguments={"order_id": "o2"})])
    [obs] = a.submit([ToolCall(id="a3", name="refund", arguments={"order_id": "o1", "amount": 5})])
    assert obs.approval_id is not None, obs
    ledger.approvals().approve(obs.approval_id, by="maria")
    gate.resume_run("run-v3-a", authority=ALICE).resume()
    assert ledger.verify().ok


def main() -> None:
    if SCHEMA_VERSION != 3:
        raise SystemExit(f"run this on the schema-3 code (e4c926e^), not schema {SCHEMA_VERSION}")
    parser = argparse.ArgumentParser()
    parser.add_argument("--sqlite")
    parser.add_argument("--dsn")
    args = parser.parse_args()
    if args.sqlite:
        from callgate.ledger import SQLiteLedger

        with SQLiteLedger(args.sqlite, worker="fixture-v3") as ledger:
            scenario(ledger)
        conn = sqlite3.connect(args.sqlite)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.close()
    if args.dsn:
        from callgate.ledger import PostgresLedger

        ledger = PostgresLedger(args.dsn, worker="fixture-v3")
        try:
            scenario(ledger)
        finally:
            ledger.close()


if __name__ == "__main__":
    main()

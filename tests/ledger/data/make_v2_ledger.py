"""Write a ledger of callgate's schema version 2, as the released code writes it.

The migration to schema version 3 (``callgate ledger migrate``) is tested on the
files this script wrote: ``ledger_v2.sqlite``, ``ledger_v2.pg.sql`` and their
manifests (``ledger_v2.expected.json``, ``ledger_v2.pg.expected.json``). It must
run on the released code (commit 95112a4), never on the working tree, which is
being redesigned. It refuses to run on a callgate whose schema version is not 2.

Usage, from the repository root::

    git worktree add /tmp/v2src 95112a4
    PYTHONPATH=/tmp/v2src/src .venv/bin/python tests/ledger/data/make_v2_ledger.py \\
        --sqlite /tmp/ledger_v2.sqlite [--manifest /tmp/ledger_v2.expected.json]
    PYTHONPATH=/tmp/v2src/src .venv/bin/python tests/ledger/data/make_v2_ledger.py \\
        --dsn "host=/tmp/sock dbname=empty" [--pg-manifest /tmp/ledger_v2.pg.expected.json]
    # everything, checked (a throwaway PostgreSQL 15 cluster via tests/pgcluster.py, pg_dump):
    PYTHONPATH=/tmp/v2src/src .venv/bin/python tests/ledger/data/make_v2_ledger.py \\
        --regenerate tests/ledger/data
    git worktree remove /tmp/v2src --force

``--sqlite PATH`` needs a path where no file exists yet; the file is checkpointed
and left in rollback-journal mode (no ``-wal`` file). ``--dsn DSN`` needs an
empty database. The scenario is the same for both and deterministic in content
(ids, arguments, results, states, attempt counts, approval ids); timestamps, and
so the audit hashes, differ from one regeneration to the next.

The scenario (three principals, one run each):

* ``run-v2-alice`` (alice, tenant acme): a read; a read retried after an
  unknown first attempt; two refunds that ask a person (one approved, then used
  by a resumed run rebuilt in a second gate; one denied); a charge with a
  business idempotency key, then the same charge under another call id
  (replayed); a ``ToolFailure``; a batch with a policy denial, a schema
  rejection, a parse rejection (a lone surrogate) and a read sent again under
  an id already used (recorded as ``alice-read#2``).
* ``run-v2-bob`` (bob, tenant globex): a note with hostile text (control
  characters, an RTL override, ~10 KB) in its arguments and its result (plus a
  lone surrogate and a NUL, stored escaped), under a call id with an RTL
  override; a sync side-effecting tool past its timeout (unknown, then resolved
  ``ok`` by a person); a handler raising after its effect (left unknown); the
  charge key alice used (another tenant: it runs); a key reused with other
  arguments (rejected); an effect not granted; a false postcondition (error at
  verify); a refund and a payment with a secret field, both left pending.
* ``run-v2-carol-crash`` (carol): two calls whose process died in the handler
  (a child process, ``os._exit``); ``Gate.recover`` settles one with its
  reconcile hook (``ok``, reconciled) and leaves the other unknown, which a
  person resolves as ``error``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import callgate
from callgate import (
    Authority,
    CallContext,
    Evidence,
    Gate,
    Policy,
    Registry,
    Status,
    ToolCall,
    ToolFailure,
    allow,
    ask,
    deny,
)
from callgate.ledger import Ledger, PostgresLedger, SQLiteLedger
from callgate.ledger.sql_schema import SCHEMA_VERSION

RELEASED_COMMIT = "95112a4"
WORKER = "fixture-worker-a"
WORKER_B = "fixture-worker-b"
CRASHED_WORKER = "fixture-worker-crashed"
CRASH_EXIT = 17
SEED = 20_240_002
RESTRICT_KEY = "callgateLedgerV2Fixture"
"""The key of the dump's ``\\restrict`` line (pg_dump 15.14+), fixed so regenerations diff."""

ALICE_RUN = "run-v2-alice"
BOB_RUN = "run-v2-bob"
CAROL_RUN = "run-v2-carol-crash"

ALICE = Authority(
    principal="alice",
    grants=["read:*", "write:*", "spend:USD<=500", "disclose:*", "call:*"],
    context={"tenant": "acme", "api_token": "tok-acme-7f3e9b1c2d4a"},
)
BOB = Authority(
    principal="bob",
    grants=["read:*", "write:*", "spend:USD<=500", "disclose:*", "call:*"],
    context={"tenant": "globex"},
)
CAROL = Authority(principal="carol", grants=["write:*", "call:*"], context={"tenant": "initech"})

RLO = "\u202e"
"""RIGHT-TO-LEFT OVERRIDE: makes ``txt.exe`` read as ``exe.txt`` on a terminal."""
HOSTILE_TITLE = f"Q3 report \x1b[2J\x1b[31mCLEARED\x1b[0m\r\x07{RLO}fdp.exe\u200b\u2066\ufeff"
HOSTILE_BODY = (
    "ledger line \u00e9\u4e2d\U0001f600 \t|" + RLO + "|\x0b\x0c\x1b]0;owned\x07\n"
) * 220
"""About 10 KB of text with control characters, escapes and an RTL override."""
LONE_SURROGATE = "\ud800"


def _seeded_uuid4(rng: random.Random) -> Any:
    """A ``uuid.uuid4`` drawing from ``rng``, so approval ids are the same every time."""

    def uuid4() -> uuid.UUID:
        return uuid.UUID(int=rng.getrandbits(128), version=4)

    return uuid4


class World:
    """The back-end systems the tools act on, and the handles the scenario steers them with."""

    def __init__(self) -> None:
        self.effects: list[tuple[str, str]] = []
        self.search_attempts = 0
        self.wire_started = threading.Event()
        self.wire_release = threading.Event()
        self.wire_done = threading.Event()
        self.crash = False


def order_was_read(args: Any, evidence: Evidence) -> str | None:
    """A refund needs the order read in the same run."""
    if evidence.latest("get_order", order_id=args.order_id) is None:
        return f"call get_order for {args.order_id!r} first"
    return None


def make_registry(world: World) -> Registry:
    """The tools of the scenario: reads, writes, spends, and tools that fail every way."""
    registry = Registry()

    @registry.tool(effects="read:orders", risk="read")
    def get_order(order_id: str) -> dict[str, Any]:
        """Read an order."""
        return {"order_id": order_id, "status": "delivered", "total": 250, "currency": "USD"}

    @registry.tool(effects="read:notes", risk="read")
    def search_notes(query: str) -> list[str]:
        """Search the notes; the first attempt of the scenario loses its connection."""
        world.search_attempts += 1
        if world.search_attempts == 1:
            raise ConnectionResetError("notes index connection reset")
        return [f"note about {query}", "another note"]

    @registry.tool(
        effects="spend:{currency}={amount}",
        precondition=order_was_read,
        preview=lambda a: f"refund {a.amount:.2f} {a.currency} for {a.order_id}",  # type: ignore[attr-defined]
    )
    def refund(order_id: str, amount: float, currency: str) -> dict[str, Any]:
        """Refund part of an order."""
        world.effects.append(("refund", f"{order_id}:{amount}"))
        return {"refunded": amount, "currency": currency, "order_id": order_id}

    @registry.tool(effects="spend:{currency}={amount}", idempotency_key="{operation_id}")
    def charge(operation_id: str, amount: int, currency: str, ctx: CallContext) -> dict[str, Any]:
        """Charge a card; the operation id is the business idempotency key."""
        world.effects.append(("charge", operation_id))
        ctx.report_transaction(f"ch_{operation_id}_{ctx.principal}")
        return {"charged": amount, "currency": currency, "charge_id": f"ch_{operation_id}"}

    @registry.tool(effects="write:orders")
    def cancel_order(order_id: str) -> str:
        """Cancel an order that has not shipped."""
        raise ToolFailure(
            f"order {order_id} has already shipped; it cannot be cancelled, offer a return",
            retryable=False,
        )

    @registry.tool(effects="disclose:{to}")
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email."""
        world.effects.append(("email", to))
        return f"sent to {to}"

    @registry.tool(effects="write:notes")
    def write_note(title: str, body: str) -> dict[str, Any]:
        """Store a note; echoes it, with what the store added (text no database can hold)."""
        world.effects.append(("note", title[:10]))
        return {
            "title": title,
            "body": body,
            "store_comment": f"stored {LONE_SURROGATE} with a NUL here:\x00 and {RLO}RTL",
        }

    @registry.tool(effects="write:payments", timeout=0.5)
    def wire_transfer(iban: str, amount: int) -> str:
        """Send a bank transfer (sync; the bank answers late)."""
        world.wire_started.set()
        world.wire_release.wait(30)
        world.effects.append(("wire", iban))
        world.wire_done.set()
        return f"wired {amount} to {iban}"

    @registry.tool(effects="write:shipping")
    def ship_parcel(order_id: str) -> str:
        """Book a parcel; the carrier booked it, then the connection broke."""
        world.effects.append(("parcel", order_id))
        raise RuntimeError(f"carrier API connection reset after booking {order_id}")

    @registry.tool(effects="write:stock", verify=lambda args, result: False)
    def restock(sku: str, quantity: int) -> dict[str, Any]:
        """Restock an item; the stock system does not show it afterwards."""
        world.effects.append(("restock", sku))
        return {"sku": sku, "quantity": quantity}

    @registry.tool(effects="spend:USD={amount}", secret_fields=["pin"])
    def pay(iban: str, amount: float, pin: str) -> str:
        """Pay an IBAN, authorised with a PIN."""
        world.effects.append(("pay", iban))
        return f"paid {amount} to {iban}"

    def entry_found(args: Any, ctx: CallContext) -> dict[str, Any]:
        return {"entry_id": args.entry_id, "found": True, "by": "reconcile hook"}

    @registry.tool(effects="write:books", reconcile=entry_found)
    def post_entry(entry_id: str, amount: int) -> str:
        """Post a bookkeeping entry (has a reconcile hook)."""
        if world.crash:
            os._exit(CRASH_EXIT)
        return f"posted {entry_id}"

    @registry.tool(effects="write:labels")
    def print_label(order_id: str) -> str:
        """Print a shipping label (no reconcile hook)."""
        if world.crash:
            os._exit(CRASH_EXIT)
        return f"printed {order_id}"

    return registry


def to_evil(args: Any) -> bool:
    return str(args["to"]).endswith("@evil.example")


POLICY = Policy(
    [
        deny("send_email", when=to_evil, name="no mail to evil.example", reason="never mail it"),
        ask("refund", name="refunds need a person"),
        ask("pay", name="payments need a person"),
        allow("*", name="everything else"),
    ]
)


def open_ledger(sqlite_path: str | None, dsn: str | None, worker: str) -> Ledger:
    if sqlite_path is not None:
        return SQLiteLedger(sqlite_path, worker=worker)
    assert dsn is not None
    return PostgresLedger(dsn, worker=worker, min_size=1, max_size=4)


def call(call_id: str, name: str, arguments: str | dict[str, Any]) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def expect(observation: Any, status: Status, what: str) -> None:
    """Stop the generator when the released code did not do what the scenario is about."""
    if observation.status is not status:
        raise SystemExit(
            f"scenario step {what!r}: expected {status.value}, got "
            f"{observation.status.value} at {observation.stage.value}: {observation.content[:300]}"
        )


def alice_run(gate: Gate) -> tuple[str, str]:
    """Run 1: reads, approvals asked, a replayed key, a failure, a batch of rejections."""
    run = gate.run(authority=ALICE, run_id=ALICE_RUN, trusted=["refund order o-1001"])
    [o] = run.submit([call("alice-read", "get_order", {"order_id": "o-1001"})])
    expect(o, Status.OK, "read")
    [o] = run.submit([call("alice-search", "search_notes", {"query": "o-1001 refund"})])
    expect(o, Status.OK, "read retried")
    args = {"order_id": "o-1001", "amount": 20.0, "currency": "USD"}
    [small] = run.submit([call("alice-refund-small", "refund", args)])
    expect(small, Status.PENDING, "refund asks")
    args = {"order_id": "o-1001", "amount": 400.0, "currency": "USD"}
    [large] = run.submit([call("alice-refund-large", "refund", args)])
    expect(large, Status.PENDING, "second refund asks")
    args = {"operation_id": "op-7", "amount": 30, "currency": "USD"}
    [o] = run.submit([call("alice-charge", "charge", args)])
    expect(o, Status.OK, "charge")
    [o] = run.submit([call("alice-charge-again", "charge", args)])
    expect(o, Status.OK, "charge replayed")
    [o] = run.submit([call("alice-cancel", "cancel_order", {"order_id": "o-1001"})])
    expect(o, Status.ERROR, "ToolFailure")
    batch = run.submit(
        [
            call(
                "alice-mail",
                "send_email",
                {"to": "drop@evil.example", "subject": "invoice", "body": "see attached"},
            ),
            call("alice-bad-amount", "charge", '{"operation_id": "op-9", "amount": "lots"}'),
            call("alice-surrogate", "write_note", '{"title": "x\ud800", "body": "y"}'),
            call("alice-read", "get_order", {"order_id": "o-1002"}),
        ]
    )
    wanted = [Status.REJECTED, Status.REJECTED, Status.REJECTED, Status.OK]
    for observation, status in zip(batch, wanted, strict=True):
        expect(observation, status, f"batch call {observation.call_id}")
    if small.approval_id is None or large.approval_id is None:
        raise SystemExit("a pending refund came back without its approval id")
    return small.approval_id, large.approval_id


def bob_run(gate: Gate, world: World) -> str:
    """Run 2: hostile text, a timeout, an effect then a crash, keys, pending approvals."""
    run = gate.run(authority=BOB, run_id=BOB_RUN, trusted=["pay DE89370400440532013000"])
    note = {"title": HOSTILE_TITLE, "body": HOSTILE_BODY}
    [o] = run.submit([call(f"bob-note-{RLO}exe.txt", "write_note", note)])
    expect(o, Status.OK, "hostile note")
    [o] = run.submit(
        [call("bob-wire", "wire_transfer", {"iban": "DE89370400440532013000", "amount": 75})]
    )
    expect(o, Status.UNKNOWN, "timeout")
    world.wire_release.set()
    if not world.wire_done.wait(30):
        raise SystemExit("the late wire_transfer handler did not finish")
    [o] = run.submit([call("bob-ship", "ship_parcel", {"order_id": "o-2001"})])
    expect(o, Status.UNKNOWN, "raised after effect")
    args = {"operation_id": "op-7", "amount": 30, "currency": "USD"}
    [o] = run.submit([call("bob-charge", "charge", args)])
    expect(o, Status.OK, "same business key, another tenant")
    args = {"operation_id": "op-8", "amount": 10, "currency": "USD"}
    [o] = run.submit([call("bob-charge-8", "charge", args)])
    expect(o, Status.OK, "charge op-8")
    args = {"operation_id": "op-8", "amount": 99, "currency": "USD"}
    [o] = run.submit([call("bob-charge-8-changed", "charge", args)])
    expect(o, Status.REJECTED, "key reused with other arguments")
    args = {"operation_id": "op-eur", "amount": 900, "currency": "EUR"}
    [o] = run.submit([call("bob-charge-eur", "charge", args)])
    expect(o, Status.REJECTED, "effect not granted")
    [o] = run.submit([call("bob-restock", "restock", {"sku": "sku-1", "quantity": 3})])
    expect(o, Status.ERROR, "postcondition false")
    [o] = run.submit([call("bob-read", "get_order", {"order_id": "o-2001"})])
    expect(o, Status.OK, "bob read")
    args = {"order_id": "o-2001", "amount": 15.5, "currency": "USD"}
    [o] = run.submit([call("bob-refund", "refund", args)])
    expect(o, Status.PENDING, "refund left pending")
    args = {"iban": "DE89370400440532013000", "amount": 12.0, "pin": "4921"}
    [o] = run.submit([call("bob-pay", "pay", args)])
    expect(o, Status.PENDING, "payment with a secret field left pending")
    return o.approval_id or ""


def crash_child(tool: str, sqlite_path: str | None, dsn: str | None) -> None:
    """In a child process: submit one call whose handler kills the process."""
    world = World()
    world.crash = True
    ledger = open_ledger(sqlite_path, dsn, CRASHED_WORKER)
    gate = Gate(make_registry(world), policy=POLICY, ledger=ledger)
    run = gate.run(authority=CAROL, run_id=CAROL_RUN)
    arguments = (
        {"entry_id": "je-31", "amount": 1200} if tool == "post_entry" else {"order_id": "o-3001"}
    )
    run.submit([call(f"carol-{tool}", tool, arguments)])
    raise SystemExit(f"the handler of {tool} was meant to end the process")


def crash(tool: str, sqlite_path: str | None, dsn: str | None) -> None:
    command = [sys.executable, os.path.abspath(__file__), "--crash-child", tool]
    command += ["--sqlite", sqlite_path] if sqlite_path is not None else ["--dsn", str(dsn)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != CRASH_EXIT:
        raise SystemExit(f"the crashing child for {tool} exited {done.returncode}: {done.stderr}")


def scenario(sqlite_path: str | None, dsn: str | None) -> None:
    """Write the whole scenario to one empty ledger (exactly one of the two targets).

    Approval ids come from ``uuid.uuid4``: drawn from a seeded generator while the
    scenario runs, they are the same in every write.
    """
    real_uuid4 = uuid.uuid4
    uuid.uuid4 = _seeded_uuid4(random.Random(SEED))
    try:
        _scenario(sqlite_path, dsn)
    finally:
        uuid.uuid4 = real_uuid4


def _scenario(sqlite_path: str | None, dsn: str | None) -> None:
    world = World()
    registry = make_registry(world)

    # Process A: runs 1 and 2.
    ledger = open_ledger(sqlite_path, dsn, WORKER)
    gate = Gate(registry, policy=POLICY, ledger=ledger)
    small, large = alice_run(gate)
    bob_run(gate, world)
    gate.close()
    ledger.close()

    # People decide (the approvals CLI does the same), the unknown wire is resolved.
    ledger = open_ledger(sqlite_path, dsn, WORKER_B)
    store = ledger.approvals()
    store.approve(small, by="maria@acme")
    store.deny(large, by="maria@acme", reason=f"too large {RLO}gnirts\x1b[0m; ask finance")
    ledger.resolve(
        BOB_RUN,
        "bob-wire",
        status="ok",
        by="dana",
        note=f"bank statement shows the transfer \x1b[1mSEPA-991\x1b[0m {RLO}ok",
    )

    # Process B: alice's run rebuilt from the ledger and resumed.
    gate = Gate(registry, policy=POLICY, ledger=ledger)
    run = gate.resume_run(ALICE_RUN, authority=ALICE, trusted=["refund order o-1001"])
    resumed = {o.call_id: o for o in run.resume()}
    expect(resumed["alice-refund-small"], Status.OK, "approved refund resumed")
    expect(resumed["alice-refund-large"], Status.REJECTED, "denied refund resumed")
    gate.close()
    ledger.close()

    # A worker dies in two handlers; the next start recovers, a person resolves the rest.
    crash("post_entry", sqlite_path, dsn)
    crash("print_label", sqlite_path, dsn)
    ledger = open_ledger(sqlite_path, dsn, WORKER)
    gate = Gate(registry, policy=POLICY, ledger=ledger)
    report = gate.recover(worker=CRASHED_WORKER, context=dict(CAROL.context))
    statuses = sorted((r.call_id, r.status) for r in report.calls)
    if statuses != [("carol-post_entry", "ok"), ("carol-print_label", "unknown")]:
        raise SystemExit(f"recovery settled {statuses}")
    ledger.resolve(
        CAROL_RUN,
        "carol-print_label",
        status="error",
        by="erin",
        note="no label o-3001 in the printer log",
    )
    gate.close()
    ledger.close()


def checkpoint(path: str) -> None:
    """Fold the WAL into the file and leave it in rollback-journal mode: one file."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        conn.execute("PRAGMA journal_mode=DELETE").fetchall()
    finally:
        conn.close()
    for suffix in ("-wal", "-shm", "-journal"):
        if os.path.exists(path + suffix):
            raise SystemExit(f"{path}{suffix} is still there after the checkpoint")


def source_commit() -> str:
    """The commit of the callgate checkout this runs on, or 'unknown'."""
    root = Path(callgate.__file__).resolve().parents[2]
    done = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or "unknown"


def released_source_problem() -> str | None:
    """Why the callgate imported here is not the released code, or None."""
    where = Path(callgate.__file__).resolve().parent
    if SCHEMA_VERSION != 2:
        return f"the callgate at {where} writes schema version {SCHEMA_VERSION}, not 2"
    commit = source_commit()
    if not commit.startswith(RELEASED_COMMIT):
        return f"the callgate at {where} is at commit {commit}, not {RELEASED_COMMIT}"
    changed = subprocess.run(
        ["git", "-C", str(where), "status", "--porcelain", "--", "."],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    if changed.strip():
        return f"the callgate at {where} has changes not committed in {RELEASED_COMMIT}"
    return None


def manifest(ledger: Ledger) -> dict[str, Any]:
    """What the migration must keep, read back through the v2 code."""
    check = ledger.verify()
    if not check.ok:
        raise SystemExit(f"the written ledger does not verify: {check.problems}")
    calls = []
    for record in ledger.calls():
        rows = ledger.attempts(record.run_id, record.call_id)
        calls.append(
            {
                "run_id": record.run_id,
                "call_id": record.call_id,
                "tool": record.tool,
                "state": record.state.value,
                "stage": record.stage,
                "attempts": record.attempts,
                "attempt_rows": len(rows),
                "idempotency_key": record.idempotency_key,
                "reconciled": record.reconciled,
            }
        )
    calls.sort(key=lambda c: (c["run_id"], c["call_id"]))
    approvals = [
        {"id": a.id, "status": a.status.value, "run_id": a.run_id, "call_id": a.call_id}
        for a in ledger.approvals().list()
    ]
    approvals.sort(key=lambda a: a["id"])
    kinds: dict[str, int] = {}
    for r in ledger.audit():
        kinds[r.kind] = kinds.get(r.kind, 0) + 1
    return {
        "written_by": {
            "commit": source_commit(),
            "callgate": callgate.__version__,
            "schema_version": SCHEMA_VERSION,
        },
        "calls": calls,
        "approvals": approvals,
        "audit": {
            "records": check.records,
            "head": check.head,
            "kinds": dict(sorted(kinds.items())),
        },
    }


def comparable(data: dict[str, Any]) -> dict[str, Any]:
    """A manifest without what differs between two writes of the scenario (the head, the commit)."""
    return {k: v for k, v in data.items() if k != "written_by"} | {
        "audit": {k: v for k, v in data["audit"].items() if k != "head"}
    }


def write_json(path: str, data: dict[str, Any]) -> None:
    # ensure_ascii: control characters and the RTL override in call ids stay visible escapes.
    Path(path).write_text(json.dumps(data, indent=1, ensure_ascii=True) + "\n")


def sqlite_manifest(path: str) -> dict[str, Any]:
    with SQLiteLedger(path, read_only=True) as ledger:
        return manifest(ledger)


def pg_manifest(dsn: str) -> dict[str, Any]:
    with PostgresLedger(dsn, read_only=True, min_size=1, max_size=2) as ledger:
        return manifest(ledger)


def write_sqlite(path: str, manifest_path: str | None) -> dict[str, Any]:
    if os.path.exists(path):
        raise SystemExit(
            f"{path} exists; the scenario needs a new file (remove it or pick another)"
        )
    scenario(path, None)
    checkpoint(path)
    data = sqlite_manifest(path)
    if manifest_path is not None:
        write_json(manifest_path, data)
    return data


def write_pg(dsn: str, manifest_path: str | None) -> dict[str, Any]:
    scenario(None, dsn)
    data = pg_manifest(dsn)
    if manifest_path is not None:
        write_json(manifest_path, data)
    return data


def load_pgcluster() -> ModuleType:
    """tests/pgcluster.py, which starts a throwaway cluster (as the tests do)."""
    path = Path(__file__).resolve().parents[2] / "pgcluster.py"
    spec = importlib.util.spec_from_file_location("pgcluster", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["pgcluster"] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def regenerate(out: Path) -> None:
    """Write all four files into ``out``, each checked against the others."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ledger-v2-") as tmp:
        db = os.path.join(tmp, "ledger_v2.sqlite")
        lite = write_sqlite(db, None)
        size = os.path.getsize(db)
        if size >= 300_000:
            raise SystemExit(f"the SQLite fixture is {size} bytes; keep it under 300 KB")
        pgcluster = load_pgcluster()
        reason = pgcluster.missing_reason()
        if reason:
            raise SystemExit(reason)
        cluster = pgcluster.acquire()
        try:
            dsn = cluster.create_database()
            pg = write_pg(dsn, None)
            if comparable(pg) != comparable(lite):
                raise SystemExit("PostgreSQL and SQLite recorded different scenarios")
            dump = os.path.join(tmp, "ledger_v2.pg.sql")
            # initdb may be a link on PATH; pg_dump and psql sit beside its target.
            bindir = Path(os.path.realpath(cluster.bindir / "initdb")).parent
            name = dsn.rsplit("dbname=", 1)[1]
            connect = ["-h", str(cluster.socket_dir), "-p", str(pgcluster.PORT), "-U", "postgres"]
            options = ["--no-owner", "--no-privileges", "--inserts"]
            helptext = subprocess.run(
                [str(bindir / "pg_dump"), "--help"], capture_output=True, text=True, check=True
            ).stdout
            if "--restrict-key" in helptext:  # 15.14 and later: a fixed key, a stable file
                options.append("--restrict-key=" + RESTRICT_KEY)
            subprocess.run(
                [str(bindir / "pg_dump"), *connect, *options, "-f", dump, name], check=True
            )
            # The dump loads into an empty database and reads back the same.
            fresh = cluster.create_database()
            subprocess.run(
                [
                    str(bindir / "psql"),
                    *connect,
                    "-q",
                    "-v",
                    "ON_ERROR_STOP=1",
                    "-f",
                    dump,
                    fresh.rsplit("dbname=", 1)[1],
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            if pg_manifest(fresh) != pg:
                raise SystemExit("the dump, loaded into an empty database, reads back otherwise")
        finally:
            pgcluster.release()
        shutil.copyfile(db, out / "ledger_v2.sqlite")
        shutil.copyfile(dump, out / "ledger_v2.pg.sql")
    if sqlite_manifest(str(out / "ledger_v2.sqlite")) != lite:
        raise SystemExit("the copied SQLite fixture reads back otherwise")
    write_json(str(out / "ledger_v2.expected.json"), lite)
    write_json(str(out / "ledger_v2.pg.expected.json"), pg)
    print(
        f"wrote {out}: {len(lite['calls'])} calls, {len(lite['approvals'])} approvals, "
        f"{lite['audit']['records']} audit records; SQLite head {lite['audit']['head']}, "
        f"PostgreSQL head {pg['audit']['head']}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sqlite", metavar="PATH", help="write the scenario to a new SQLite file")
    parser.add_argument("--dsn", metavar="DSN", help="write the scenario to an empty PG database")
    parser.add_argument("--manifest", metavar="JSON", help="the SQLite ledger's manifest")
    parser.add_argument("--pg-manifest", metavar="JSON", help="the PostgreSQL ledger's manifest")
    parser.add_argument(
        "--regenerate", metavar="DIR", help="write and check all fixture files into DIR"
    )
    parser.add_argument("--crash-child", metavar="TOOL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    problem = released_source_problem()
    if problem is not None:
        raise SystemExit(
            f"{problem}: run with PYTHONPATH pointing at a clean checkout of {RELEASED_COMMIT} "
            f"(git worktree add /tmp/v2src {RELEASED_COMMIT}; PYTHONPATH=/tmp/v2src/src)"
        )
    if args.crash_child:
        crash_child(args.crash_child, args.sqlite, args.dsn)
        return
    if args.regenerate:
        regenerate(Path(args.regenerate))
        return
    if not args.sqlite and not args.dsn:
        parser.error("give --sqlite PATH and/or --dsn DSN (or --regenerate DIR)")
    if args.sqlite:
        data = write_sqlite(args.sqlite, args.manifest)
        print(f"{args.sqlite}: {len(data['calls'])} calls, head {data['audit']['head']}")
    if args.dsn:
        data = write_pg(args.dsn, args.pg_manifest)
        print(f"{args.dsn}: {len(data['calls'])} calls, head {data['audit']['head']}")


if __name__ == "__main__":
    main()

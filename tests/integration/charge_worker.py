"""A worker process: a stream of non-idempotent ``charge`` calls through a callgate `Gate`.

Run: ``python charge_worker.py --ledger sqlite:PATH|postgres:DSN --service URL
--ops OPS.json --worker ID``. On start it recovers the calls it left running
(`Gate.recover`), prints ``ready``, then submits one call per operation, in
order, and prints ``done``. Killed at any point and started again, it must
neither charge twice nor lose a charge.

``--hold SECONDS`` keeps each charge inside the handler that long;
``--wait-go`` waits for a line ``go`` on stdin before submitting (to start
two workers at the same moment). ``--start N --count C`` submit only the
operations ``N`` to ``N + C - 1`` of the file (benchmarks/crash.py hands out
windows). Each observation is printed as a JSON line: ``op``, ``status``,
``rule`` and, for ``ok``, the ``charge`` id the caller was told (a replay too).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from callgate import Authority, CallContext, Gate, OutcomeUnknown, Registry, ToolCall, ToolFailure
from callgate.ledger import Ledger, PostgresLedger, SQLiteLedger


def request(method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def build_registry(service: str, hold: float, rng: random.Random) -> Registry:
    registry = Registry()

    def post(operation_id: str, amount: int, key: str, source: str) -> dict[str, Any]:
        body = {"key": key, "operation_id": operation_id, "amount": amount, "source": source}
        try:
            status, charge = request("POST", f"{service}/charges", body)
        except OSError as exc:
            raise OutcomeUnknown(f"the payment service did not answer: {exc}") from exc
        if status == 409:
            raise ToolFailure("this key was used for another charge")
        if status not in (200, 201):
            raise OutcomeUnknown(f"the payment service answered {status}")
        return dict(charge)

    def reconcile(args: Any, ctx: CallContext) -> dict[str, Any]:
        """Read the service's record under the key; if there is none, complete the charge with
        the same key (the service honours it, so this can never charge twice)."""
        status, charge = request("GET", f"{service}/charges/{ctx.idempotency_key}")
        if status == 200:
            return dict(charge)
        return post(args.operation_id, args.amount, ctx.idempotency_key, "reconcile")

    @registry.tool(
        effects="spend:USD",
        writes="charge:{operation_id}",
        idempotency_key="{operation_id}",
        reconcile=reconcile,
        risk="write",
    )
    def charge(operation_id: str, amount: int, ctx: CallContext) -> dict[str, Any]:
        """Charge the customer's card; not idempotent on its own."""
        time.sleep(hold if hold else rng.uniform(0.002, 0.01))
        result = post(operation_id, amount, ctx.idempotency_key, "handler")
        time.sleep(0 if hold else rng.uniform(0.002, 0.01))
        return result

    return registry


def charge_of(obs: Any) -> str | None:
    """The charge id an ``ok`` observation names: its result, or for a replay the recorded
    result on the last line of its content (after the line saying it is a replay)."""
    result = obs.result
    if not isinstance(result, dict):
        try:
            result = json.loads(obs.content.rsplit("\n", 1)[-1])
        except ValueError:
            return None
    value = result.get("charge_id") if isinstance(result, dict) else None
    return value if isinstance(value, str) else None


def open_ledger(spec: str, worker: str) -> Ledger:
    kind, _, target = spec.partition(":")
    if kind == "sqlite":
        return SQLiteLedger(target, worker=worker)
    if kind == "postgres":
        return PostgresLedger(target, worker=worker)
    raise SystemExit(f"--ledger must be sqlite:PATH or postgres:DSN, not {spec!r}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--service", required=True)
    parser.add_argument("--ops", required=True)
    parser.add_argument("--worker", required=True)
    parser.add_argument("--hold", type=float, default=0.0)
    parser.add_argument("--wait-go", action="store_true")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=None)
    args = parser.parse_args()
    rng = random.Random(os.getpid())
    with open(args.ops) as f:
        ops = json.load(f)
    ops = ops[args.start : None if args.count is None else args.start + args.count]
    ledger = open_ledger(args.ledger, args.worker)
    gate = Gate(build_registry(args.service, args.hold, rng), ledger=ledger)
    report = gate.recover(worker=args.worker)
    print(json.dumps({"recovered": [[c.call_id, c.status, c.how] for c in report.calls]}))
    print("ready", flush=True)
    if args.wait_go and sys.stdin.readline().strip() != "go":
        raise SystemExit("expected 'go'")
    run = gate.run(
        authority=Authority(principal="billing", grants=["spend:USD"]),
        run_id=f"{args.worker}-{os.getpid()}",
    )
    for op in ops:
        call = ToolCall(
            id=op["operation_id"],
            name="charge",
            arguments={"operation_id": op["operation_id"], "amount": op["amount"]},
        )
        [obs] = run.submit([call])
        rule = obs.details[0].get("rule") if obs.details else None
        line = {"op": op["operation_id"], "status": obs.status.value, "rule": rule}
        if obs.status.value == "ok":
            line["charge"] = charge_of(obs)
        print(json.dumps(line), flush=True)
    ledger.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()

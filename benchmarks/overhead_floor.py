"""The floor under `overhead.py`: the same per-call work, written straight through.

Runs, step by step and with no function-call glue between them, exactly what
the gate does for one admitted call of ``add_item`` (validate, authorize,
canonical JSON and request hash, redaction of arguments and result, the three
ledger records, evidence, observation) and prints the µs each step costs with
the garbage collector off, next to the whole ``run.submit`` and the
reference. The sum is what no amount of tuning around the steps can go below:
a lower ratio needs fewer or cheaper steps. Run:
``.venv/bin/python benchmarks/overhead_floor.py``.
"""

from __future__ import annotations

import gc
import itertools
import json
import statistics
import time
from collections import defaultdict
from typing import Any

from overhead import ARGS, AddItem  # the same tool, arguments and reference
from overhead import add_item_sync as add_item

from callgate import Authority, Gate, MemoryLedger, Registry, ToolCall
from callgate.authorize.policy import authorize
from callgate.canonical import digest
from callgate.execute import Admitted, _observation, result_text
from callgate.ledger import AttemptFinish, AttemptStart, CallRecord, CallState, Outcome

N = 40_000
STEPS = (
    "validate",
    "authorize",
    "canonical JSON + hash",
    "redact arguments",
    "records: decision + Admitted",
    "ledger: decision + attempt start",
    "handler",
    "result text + redaction",
    "ledger: outcome",
    "evidence + observation",
)


def main() -> None:
    registry = Registry()
    registry.tool(name="add_item", effects="write:cart:{cart_id}")(add_item)
    authority = Authority(principal="bench", grants=["write:cart:*"])
    gate = Gate(registry, ledger=MemoryLedger())
    run = gate.run(authority=authority)
    spec = registry.get("add_item")
    assert spec is not None
    ledger, redactor = gate.ledger, gate.redactor
    cost: dict[str, int] = defaultdict(int)
    clock = time.perf_counter_ns

    def straight(call: ToolCall) -> Any:
        marks = [clock()]
        mark = marks.append
        model = spec.arguments_model.__pydantic_validator__.validate_json(call.arguments)
        mark(clock())
        decision = authorize(
            spec, model, authority, gate.policy, run.evidence, None, cache=run.state.decisions
        )
        mark(clock())
        canonical = model.__pydantic_serializer__.to_json(model).decode()
        request_hash = digest(spec.name, canonical)
        mark(clock())
        stored = redactor.text(canonical)
        mark(clock())
        key, now = f"{run.id}/{call.id}", time.time()
        record = CallRecord(
            run_id=run.id,
            call_id=call.id,
            tool=spec.name,
            tool_version=spec.version,
            principal=authority.principal,
            arguments=stored,
            state=CallState.ADMITTED,
            stage="policy",
            request_hash=request_hash,
            idempotency_key=key,
            decided_by=decision.rule,
            effects=decision.effect_names,
            created_at=now,
            updated_at=now,
        )
        item = Admitted(
            record=record,
            call=call,
            spec=spec,
            arguments=model,
            run_id=run.id,
            principal=authority.principal,
            idempotency_key=key,
            request_hash=request_hash,
        )
        mark(clock())
        ledger.record_decision(record)
        start = AttemptStart(
            run_id=run.id,
            call_id=call.id,
            tool=spec.name,
            tool_version=spec.version,
            attempt=1,
            idempotency_key=key,
            request_hash=request_hash,
            started_at=now,
            key_expires_at=now + spec.key_retention,
            side_effecting=True,
        )
        ledger.begin_attempt(start)
        mark(clock())
        result = spec.fn(**model.__dict__)
        mark(clock())
        outcome = Outcome(status="ok", content=result_text(result), finished_at=time.time())
        redactor.text(outcome.content)
        mark(clock())
        ledger.finish_attempt(
            AttemptFinish(
                run_id=run.id,
                call_id=call.id,
                attempt=1,
                idempotency_key=key,
                outcome=outcome,
                side_effecting=True,
            )
        )
        mark(clock())
        run.evidence.note(call.id, spec.name, model.__dict__, result)
        observation = _observation(item, outcome, 1, result)
        mark(clock())
        for step, (t0, t1) in zip(STEPS, itertools.pairwise(marks), strict=True):
            cost[step] += t1 - t0
        return observation

    def timed(fn: Any, n: int) -> float:
        t0 = time.perf_counter()
        for i in range(n):
            fn(i)
        return (time.perf_counter() - t0) / n * 1e6

    def reference(i: int) -> None:
        m = AddItem.model_validate(json.loads(ARGS))
        add_item(m.cart_id, m.sku, m.quantity)

    gc.disable()
    try:
        for i in range(N):  # warm-up
            straight(ToolCall(id=f"w{i}", name="add_item", arguments=ARGS))
        cost.clear()
        for i in range(N):
            straight(ToolCall(id=f"s{i}", name="add_item", arguments=ARGS))
        probes: list[int] = []
        probe = probes.append
        t0 = clock()
        for _ in range(N):  # what one step's mark costs: a clock read and an append
            probe(clock())
        per_probe = (clock() - t0) / N / 1000
        ref = statistics.median(timed(reference, N) for _ in range(3))
        submit = statistics.median(
            timed(
                lambda i: run.submit([ToolCall(id=f"g{i}", name="add_item", arguments=ARGS)]),
                N,
            )
            for _ in range(3)
        )
    finally:
        gc.enable()
    total = 0.0
    print(f"{'step (garbage collector off)':<36} {'µs':>6}")
    for step, ns in cost.items():
        us = ns / N / 1000 - per_probe
        total += us
        print(f"{step:<36} {us:>6.2f}")
    print(f"{'sum: the floor':<36} {total:>6.2f}   {total / ref:.1f}x the reference")
    print(f"{'run.submit (same work, with glue)':<36} {submit:>6.2f}   {submit / ref:.1f}x")
    print(f"{'reference (json.loads + validate)':<36} {ref:>6.2f}")


if __name__ == "__main__":
    main()

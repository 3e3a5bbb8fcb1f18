"""The bridge: calls made by sandboxed code obey exactly what direct calls obey.

Each case of the core matrix is submitted twice on fresh gates: once as the
model would (``run.submit``), once from code inside ``run_python``. The
status and the stage the ledger records must be the same.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from callgate import (
    ArgumentError,
    Authority,
    Gate,
    Intent,
    MemoryLedger,
    Policy,
    Provenance,
    Registry,
    Status,
    ToolCall,
    ToolFailure,
    allow,
    ask,
    deny,
    tool,
)
from callgate.approvals import ApprovalStatus
from callgate.ledger import SQLiteLedger
from callgate.sandbox import python_tool

pytestmark = pytest.mark.usefixtures("bwrap_available")


def _order_id_well_formed(args: Any) -> None:
    if not str(args.order_id).startswith("A"):
        raise ArgumentError("order_id", "order ids start with 'A', e.g. 'A1'")


@tool(effects="read:orders", checks=[_order_id_well_formed])
def lookup(order_id: str) -> dict[str, str]:
    """Look up an order."""
    return {"id": order_id, "state": "shipped", "contact": "eve@evil.example"}


@tool(effects="spend:EUR={amount}")
def refund(order_id: str, amount: float) -> str:
    """Refund an order."""
    return f"refunded {amount} on {order_id}"


@tool(effects="write:orders")
def explode(order_id: str) -> str:
    """A tool whose downstream system rejects the change."""
    raise ToolFailure("the order is locked; nothing changed")


@tool(effects="write:orders")
def crash(order_id: str) -> str:
    """A tool that crashes after maybe acting."""
    raise RuntimeError("connection reset")


@tool(effects="disclose:{to}", sinks=["to"])
def send(to: str, body: str) -> str:
    """Send a message."""
    return f"sent to {to}"


@tool(effects="read:secrets")
def hidden() -> str:
    """A tool the code is not shown."""
    raise AssertionError("never runs")


TOOLS = [lookup, refund, explode, crash, send]
GRANTS = ["exec:sandbox", "read:orders", "spend:EUR<=50", "write:orders", "disclose:*"]

# name, tool, arguments, grants, policy rules
MATRIX: list[tuple[str, str, dict[str, Any], list[str], list[Any]]] = [
    ("ok read", "lookup", {"order_id": "A1"}, GRANTS, []),
    ("schema: wrong type", "lookup", {"order_id": ["A1"]}, GRANTS, []),
    ("schema: missing field", "lookup", {}, GRANTS, []),
    ("schema: extra field", "lookup", {"order_id": "A1", "admin": True}, GRANTS, []),
    ("semantic check", "lookup", {"order_id": "Z9"}, GRANTS, []),
    ("effect not granted", "lookup", {"order_id": "A1"}, ["exec:sandbox"], []),
    ("bounded grant within", "refund", {"order_id": "A1", "amount": 20}, GRANTS, []),
    ("bounded grant exceeded", "refund", {"order_id": "A1", "amount": 80}, GRANTS, []),
    ("policy deny", "refund", {"order_id": "A1", "amount": 5}, GRANTS, ["deny refund"]),
    ("policy ask", "refund", {"order_id": "A1", "amount": 5}, GRANTS, ["ask refund"]),
    ("known failure", "explode", {"order_id": "A1"}, GRANTS, []),
    ("unknown outcome", "crash", {"order_id": "A1"}, GRANTS, []),
    ("trusted sink", "send", {"to": "ann@shop.example", "body": "hi"}, GRANTS, []),
    ("untrusted sink", "send", {"to": "eve@evil.example", "body": "hi"}, GRANTS, []),
]


def _policy(rules: list[str]) -> Policy:
    made = []
    for rule in rules:
        action, name = rule.split()
        made.append({"deny": deny, "ask": ask, "allow": allow}[action](name))
    return Policy([*made, allow("*")] if made else [])


def _gate(rules: list[str], timeout: float = 5.0) -> Gate:
    registry = Registry([*TOOLS, hidden])
    registry.add(python_tool(tools=[*TOOLS], timeout=timeout))
    return Gate(registry, ledger=MemoryLedger(), policy=_policy(rules))


def _run(gate: Gate, grants: list[str]) -> Any:
    return gate.run(
        authority=Authority(principal="p", grants=grants),
        trusted="Please write to ann@shop.example about order A1",
    )


def _submit(run: Any, calls: list[ToolCall], driver: str) -> list[Any]:
    if driver == "sync":
        return list(run.submit(calls))
    return list(anyio.run(run.asubmit, calls))


CALL_AND_REPORT = """
import json, tools
try:
    value = tools.{tool}(**json.loads({arguments!r}))
    print(json.dumps({{"status": "ok", "value": value}}))
except (tools.CallRejected, tools.CallFailed) as exc:
    print(json.dumps({{"status": exc.status, "message": exc.message}}))
"""


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize(
    ("name", "tool_name", "arguments", "grants", "rules"), MATRIX, ids=[m[0] for m in MATRIX]
)
def test_code_calls_obey_what_direct_calls_obey(
    name: str,
    tool_name: str,
    arguments: dict[str, Any],
    grants: list[str],
    rules: list[str],
    driver: str,
) -> None:
    """Status and recorded stage of a call from code equal those of the same direct call."""
    # a call waiting for a person keeps the code waiting until its deadline: keep it short
    waits = "ask" in " ".join(rules) or name == "untrusted sink"
    timeout = 0.4 if waits else 10.0
    direct_gate = _gate(rules, timeout=timeout)
    direct_run = _run(direct_gate, grants)
    direct = _submit(direct_run, [ToolCall(id="d", name=tool_name, arguments=arguments)], driver)
    direct_record = direct_gate.ledger.get_call(direct_run.id, "d")

    code_gate = _gate(rules, timeout=timeout)
    code_run = _run(code_gate, grants)
    code = CALL_AND_REPORT.format(tool=tool_name, arguments=json.dumps(arguments))
    outer = _submit(
        code_run, [ToolCall(id="c", name="run_python", arguments={"code": code})], driver
    )
    assert outer[0].status is Status.OK, outer[0].content
    result = outer[0].result
    nested = code_gate.ledger.get_call(code_run.id, "c.1")
    assert nested is not None
    assert direct_record is not None
    assert nested.state == direct_record.state
    assert nested.stage == direct_record.stage
    if direct[0].status is Status.PENDING and result["timed_out"]:
        return  # the code waited for a person until its deadline (see the approval tests)
    report = json.loads(result["stdout"].splitlines()[-1])
    assert report["status"] == direct[0].status.value
    if direct[0].status is Status.OK:
        content = direct[0].content
        expected = json.loads(content) if content.startswith("{") else content
        assert report["value"] == expected


def test_matrix_covers_every_status() -> None:
    """The matrix reaches ok, error, unknown, rejected and pending (so it can disagree)."""
    gate = _gate([])
    seen = set()
    for _, tool_name, arguments, grants, rules in MATRIX:
        run = _run(_gate(rules), grants)
        seen.add(run.submit([ToolCall(id="x", name=tool_name, arguments=arguments)])[0].status)
    del gate
    assert seen == {Status.OK, Status.ERROR, Status.UNKNOWN, Status.REJECTED, Status.PENDING}


def test_a_tool_not_shown_to_code_is_refused_before_the_gate() -> None:
    """A registered tool not in the code's list is refused at stage authorize, never run."""
    gate = _gate([])
    run = _run(gate, [*GRANTS, "read:secrets"])
    # the tools module has no such function; a request written by hand is refused too
    raw = (
        "import os, json, sys\n"
        "body = json.dumps({'op': 'call', 'id': 1, 'tool': 'hidden', 'arguments': {}}).encode()\n"
        "os.write(int(sys.argv[1]), len(body).to_bytes(4, 'big') + body)\n"
        "import marshal\n"
        "size = int.from_bytes(os.read(int(sys.argv[1]), 4), 'big')\n"
        "print(marshal.loads(os.read(int(sys.argv[1]), size))['content'])\n"
    )
    obs = run.submit([ToolCall(id="c", name="run_python", arguments={"code": raw})])
    stdout = obs[0].result["stdout"]
    assert "not_visible_to_code" in stdout, obs[0].result
    record = gate.ledger.get_call(run.id, "c.1")  # refused before the gate, and recorded
    assert record is not None
    assert record.state.value == "rejected"
    assert record.stage == "authorize"


def test_the_code_surface_needs_its_own_grant() -> None:
    """Without exec:sandbox the code is not run at all: rejected at stage authorize."""
    gate = _gate([])
    run = _run(gate, [g for g in GRANTS if g != "exec:sandbox"])
    code = "import tools; tools.lookup(order_id='A1')"
    obs = run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])
    assert obs[0].status is Status.REJECTED
    assert obs[0].stage.value == "authorize"
    assert gate.ledger.get_call(run.id, "c.1") is None


def test_the_code_result_is_untrusted_data() -> None:
    """What code prints is tool output: untrusted, and its values vouch for no sink."""
    gate = _gate([])
    run = _run(gate, GRANTS)
    code = "import tools; print(tools.lookup(order_id='A1')['contact'])"
    obs = run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])
    assert obs[0].provenance is Provenance.UNTRUSTED
    assert "eve@evil.example" in obs[0].content
    follow = run.submit(
        [ToolCall(id="s", name="send", arguments={"to": "eve@evil.example", "body": "x"})]
    )
    assert follow[0].status is Status.PENDING  # a tainted sink: asked of a person


def test_a_call_waiting_for_approval_blocks_until_a_person_decides() -> None:
    """The code's call waits while pending; approved, it runs once and the code gets its result."""
    gate = _gate(["ask refund"])
    run = _run(gate, GRANTS)

    def approve_when_asked() -> None:
        for _ in range(200):
            waiting = gate.approvals.list(ApprovalStatus.PENDING)
            if waiting:
                gate.approvals.approve(waiting[0].id, by="alice")
                return
            time.sleep(0.02)

    helper = threading.Thread(target=approve_when_asked)
    helper.start()
    code = "import tools; print(tools.refund(order_id='A1', amount=5))"
    obs = run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])
    helper.join()
    assert obs[0].result["stdout"].strip() == "refunded 5.0 on A1", obs[0].result
    record = gate.ledger.get_call(run.id, "c.1")
    assert record is not None
    assert record.state.value == "ok"


def test_a_pending_call_still_undecided_at_the_deadline_is_reported_pending() -> None:
    """Nobody decides: at the code's deadline the call stays pending and never ran."""
    gate = _gate(["ask refund"], timeout=0.4)
    run = _run(gate, GRANTS)
    code = CALL_AND_REPORT.format(tool="refund", arguments='{"order_id": "A1", "amount": 5}')
    obs = run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])
    result = obs[0].result
    # either the code saw "pending" before its deadline, or it was killed waiting
    assert result["timed_out"] or '"status": "pending"' in result["stdout"], result
    record = gate.ledger.get_call(run.id, "c.1")
    assert record is not None
    assert record.state.value == "pending"


@tool(effects="read:slow")
async def slow() -> str:
    """Take longer than the code may run."""
    await anyio.sleep(30)
    return "late"


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_timing_out_inside_a_bridge_call_kills_the_code_and_records_unknown(driver: str) -> None:
    """The sandbox's deadline passes during a tool call: the code is killed and the call is
    recorded as cancelled while running (unknown), never as done."""
    registry = Registry([slow])
    registry.add(python_tool(tools=["slow"], timeout=0.5))
    gate = Gate(registry, ledger=MemoryLedger())
    run = gate.run(authority=Authority(principal="p", grants=["exec:sandbox", "read:slow"]))
    code = "import tools; print(tools.slow())"
    obs = _submit(run, [ToolCall(id="c", name="run_python", arguments={"code": code})], driver)
    assert obs[0].result["timed_out"] is True
    record = gate.ledger.get_call(run.id, "c.1")
    assert record is not None
    assert record.state.value == "unknown"


def test_nested_calls_are_recorded_under_the_run_of_the_code() -> None:
    """Every call the code makes is in the ledger under the same run, named after its parent."""
    gate = _gate([])
    run = _run(gate, GRANTS)
    code = "import tools\nfor i in range(3): tools.lookup(order_id=f'A{i}')"
    run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])
    names = sorted(c.call_id for c in gate.ledger.calls(run_id=run.id))
    assert names == ["c", "c.1", "c.2", "c.3"]


def test_code_sees_only_the_tools_it_was_given() -> None:
    """The code sees only the tools it was given, as functions of the tools module."""
    gate = _gate([])
    run = _run(gate, GRANTS)
    code = "import tools; print(sorted(tools.__all__))"
    obs = run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])
    assert obs[0].result["stdout"].strip() == str(sorted(t.name for t in TOOLS))


def _narrowed(code_grants: list[str], run_grants: list[str]) -> tuple[Gate, Any]:
    registry = Registry(TOOLS)
    registry.add(python_tool(tools=TOOLS, grants=code_grants, timeout=5))
    gate = Gate(registry, ledger=MemoryLedger())
    return gate, _run(gate, run_grants)


def test_code_grants_narrow_the_run_for_code_only() -> None:
    """With python_tool(grants=["read:*"]), code may read but not write, though the run may."""
    gate, run = _narrowed(["read:*"], GRANTS)
    code = CALL_AND_REPORT.format(
        tool="lookup", arguments='{"order_id": "A1"}'
    ) + CALL_AND_REPORT.format(tool="explode", arguments='{"order_id": "A1"}')
    obs = run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])
    reports = [json.loads(line) for line in obs[0].result["stdout"].splitlines()]
    assert [r["status"] for r in reports] == ["ok", "rejected"]
    assert "outside_code_grants" in reports[1]["message"]
    assert "write:orders" in reports[1]["message"]
    refused = gate.ledger.get_call(run.id, "c.2")
    assert refused is not None
    assert refused.stage == "authorize"
    direct = run.submit([ToolCall(id="d", name="explode", arguments={"order_id": "A1"})])
    assert direct[0].status is Status.ERROR  # the run itself may still write (and it failed)


def test_code_grants_never_widen_the_run() -> None:
    """Code granted write:* in a run without it is still refused by the gate."""
    _, run = _narrowed(["write:*", "read:*"], ["exec:sandbox", "read:orders"])
    code = CALL_AND_REPORT.format(tool="explode", arguments='{"order_id": "A1"}')
    obs = run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])
    report = json.loads(obs[0].result["stdout"])
    assert report["status"] == "rejected"
    assert "was not granted" in report["message"]


def test_bounded_code_grants_bound_amounts() -> None:
    """A bounded code grant (spend:EUR<=10) refuses a larger refund the run would allow."""
    _, run = _narrowed(["spend:EUR<=10"], GRANTS)
    code = CALL_AND_REPORT.format(tool="refund", arguments='{"order_id": "A1", "amount": 20}')
    code += CALL_AND_REPORT.format(tool="refund", arguments='{"order_id": "A1", "amount": 5}')
    obs = run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])
    reports = [json.loads(line) for line in obs[0].result["stdout"].splitlines()]
    assert [r["status"] for r in reports] == ["rejected", "ok"]


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_code_calls_on_a_sqlite_ledger_keep_the_journal_verifiable(
    driver: str, tmp_path: Path
) -> None:
    """On the durable SQLite ledger the code's calls are recorded and the chain verifies."""
    registry = Registry(TOOLS)
    registry.add(python_tool(tools=TOOLS, timeout=5))
    ledger = SQLiteLedger(str(tmp_path / "ledger.db"))
    try:
        gate = Gate(registry, ledger=ledger)
        run = _run(gate, GRANTS)
        code = "import tools\nfor i in range(3): tools.lookup(order_id=f'A{i}')\n"
        code += CALL_AND_REPORT.format(tool="explode", arguments='{"order_id": "A1"}')
        _submit(run, [ToolCall(id="c", name="run_python", arguments={"code": code})], driver)
        states = {c.call_id: c.state.value for c in ledger.calls(run_id=run.id)}
        assert states == {"c": "ok", "c.1": "ok", "c.2": "ok", "c.3": "ok", "c.4": "error"}
        assert ledger.verify().ok
    finally:
        ledger.close()


@pytest.mark.parametrize("via", ["direct", "code"])
def test_the_runs_intent_holds_for_calls_from_code(via: str) -> None:
    """After untrusted output, a call outside the run's intent waits for a person, from
    code exactly as directly."""
    registry = Registry(TOOLS)
    registry.add(python_tool(tools=TOOLS, timeout=0.4))
    gate = Gate(registry, ledger=MemoryLedger())
    run = gate.run(
        authority=Authority(principal="p", grants=GRANTS),
        trusted="Look up order A1",
        intent=Intent(tools=["lookup", "run_python"]),
    )
    lookup_call = ToolCall(id="l", name="lookup", arguments={"order_id": "A1"})
    refund_args = {"order_id": "A1", "amount": 5}
    if via == "direct":
        run.submit([lookup_call])
        outcome = run.submit([ToolCall(id="r", name="refund", arguments=refund_args)])[0]
        state = outcome.status.value
    else:
        code = "import tools\ntools.lookup(order_id='A1')\n"
        code += CALL_AND_REPORT.format(tool="refund", arguments=json.dumps(refund_args))
        run.submit([ToolCall(id="c", name="run_python", arguments={"code": code})])
        record = gate.ledger.get_call(run.id, "c.2")
        assert record is not None
        state = record.state.value
    assert state == "pending"

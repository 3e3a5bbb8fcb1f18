"""LangGraph re-runs a whole tool node when a graph resumes after an ``interrupt``: a call of
the same AI message whose outcome is unknown is not run again by that replay."""

from __future__ import annotations

import json
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.types import Command

from .support import CHARGE_5, REFUND_80, Shop, states
from .test_langchain import CONFIG, graph, tool_messages


def test_resuming_a_node_does_not_run_an_unknown_outcome_again(tmp_path: Path) -> None:
    """A charge with an unknown outcome and a refund that waits, in one AI message: after the
    approval the node runs again, the refund runs once and the charge is not attempted again."""
    shop = Shop()
    both = AIMessage(
        content="",
        tool_calls=[
            {"name": "charge", "args": json.loads(CHARGE_5), "id": "c1"},
            {"name": "refund", "args": json.loads(REFUND_80), "id": "c2"},
        ],
    )
    replies: list[BaseMessage] = [both, AIMessage(content="done")]
    app, run, gate = graph(shop, replies, tmp_path, pending="interrupt")
    paused = app.invoke({"messages": [HumanMessage("charge 5 and refund 80")]}, CONFIG)
    assert "__interrupt__" in paused
    assert shop.runs == {"charge": 1}
    [approval_id] = run.pending_approvals
    gate.approvals.approve(approval_id, by="lead@shop")
    done = app.invoke(Command(resume="approved"), CONFIG)
    assert shop.runs == {"charge": 1, "refund": 1}
    by_id = {m.tool_call_id: m for m in tool_messages(done)}
    assert "outcome is unknown" in str(by_id["c1"].content)
    assert by_id["c2"].content == "refunded 80.00 USD on o-1"
    assert states(gate.ledger, run.id) == {"charge": ["unknown"], "refund": ["ok"]}
    assert len(gate.ledger.attempts(run.id, "c1")) == 1

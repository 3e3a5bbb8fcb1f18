"""The host side of the bridge: each call the code makes becomes a `ToolCall` of the same run.

The code's authority is the run's own, narrowed to the tools the deployer
made visible to code and, if given, to the code's own grants
(``python_tool(grants=...)``): a call outside them is answered ``rejected``
at stage policy before the gate (and recorded), and any other call is submitted through the
run that is executing ``run_python`` (`callgate.gate.running_run`), so it is
parsed, validated, authorized (grants, policy rules, intents, provenance of
its sink values), approved and recorded exactly as if the model had proposed
it. Nothing here decides policy: the bridge only chooses which calls reach
the gate, never lets one past it.

The answer the code reads back is the observation's content: the same
redacted, bounded text the model would read, and still untrusted. Values the
code computes from it and passes on are judged by the gate's provenance rule
like any other (a sink value must be vouched for by trusted input).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import anyio
from pydantic import ValidationError

from callgate.approvals import ApprovalStatus
from callgate.calls import Observation, Stage, Status, ToolCall
from callgate.effects import Grants
from callgate.gate import Run
from callgate.sandbox.network import expecting_connection, take_connection
from callgate.sandbox.protocol import CallRequest

__all__ = ["Bridge"]

_POLL_SECONDS = 0.05


class Bridge:
    """Answers the calls of one run of code, through ``run``, under ``parent_id``."""

    def __init__(
        self,
        run: Run,
        visible: Sequence[str],
        parent_id: str,
        *,
        wait_until: float,
        grants: Grants | None = None,
    ) -> None:
        self.run = run
        self.visible = frozenset(visible)
        self.parent_id = parent_id
        self.grants = grants
        """The code's own grants (`python_tool(grants=...)`): a call needs them *and* the
        run's, so the code's authority is the run's narrowed, never wider."""
        self.wait_until = wait_until
        """``time.monotonic()`` after which a call waiting for approval stops waiting."""

    async def answer(self, request: CallRequest) -> dict[str, Any]:
        """Submit one call from the code; the reply the code reads (status, content)."""
        call = ToolCall(
            id=f"{self.parent_id}.{request.id}", name=request.tool, arguments=request.arguments
        )
        if request.tool not in self.visible:
            shown = ", ".join(sorted(self.visible)) or "none"
            return self._refuse(
                call,
                "not_visible_to_code",
                f"tool {request.tool!r} is not available to code; "
                f"the tools this code may call are: {shown}",
            )
        if self.grants is not None:
            refusal = self._outside_grants(call)
            if refusal is not None:
                return self._refuse(call, "outside_code_grants", refusal)
        with expecting_connection(self.run.id, call.id):
            obs = (await self.run.asubmit([call]))[0]
            if obs.status is Status.PENDING and obs.approval_id is not None:
                obs = await self._after_approval(call, obs.approval_id) or obs
        reply: dict[str, Any] = {"status": obs.status.value, "content": obs.content}
        if obs.status is Status.OK:
            connection = take_connection(self.run.id, call.id)
            if connection is not None:  # an admitted network_connect: the socket itself
                reply["_connection"] = connection
        return reply

    def _outside_grants(self, call: ToolCall) -> str | None:
        """Why the call needs an effect the code's own grants do not cover (None: they do).

        The effects are read from the arguments validated as the gate's fast path does;
        arguments that do not validate that way are refused here (fail closed) rather
        than let through unchecked."""
        assert self.grants is not None
        spec = self.run.gate.registry.get(call.name)
        if spec is None:
            return None  # the gate rejects an unknown tool itself
        try:
            arguments = spec.arguments_model.model_validate_json(json.dumps(call.arguments))
        except (ValidationError, TypeError, ValueError):
            return (
                "under the code's narrowed grants a call must have exactly valid arguments; "
                "check the tool's parameters and their types"
            )
        missing = self.grants.missing(spec.required_effects(arguments.__dict__))
        if not missing:
            return None
        needed = ", ".join(repr(str(e.name)) for e in missing)
        return (
            f"this call needs {needed}, which code in this run may not use "
            "(python_tool(grants=...)); do it another way, or ask the user"
        )

    def _refuse(self, call: ToolCall, rule: str, message: str) -> dict[str, Any]:
        """Answer ``rejected`` at stage policy before the gate, and record it in the ledger."""
        text = f"Rejected at the authorize stage (rule: {rule}):\n- {message}"
        self.run.record_rejected(
            [
                Observation(
                    call_id=call.id,
                    tool=call.name,
                    status=Status.REJECTED,
                    stage=Stage.AUTHORIZE,
                    content=text,
                    retryable=False,
                    details=({"rule": rule},),
                )
            ]
        )
        return {"status": "rejected", "content": text}

    async def _after_approval(self, call: ToolCall, approval_id: str) -> Any:
        """Wait for a person's decision on the call (until the code's deadline), then submit
        it again under that approval, as `Run.resume` does for one call."""
        approvals = self.run.gate.approvals
        while time.monotonic() < self.wait_until:
            request = approvals.get(approval_id)
            if request is None or request.status is not ApprovalStatus.PENDING:
                break
            await anyio.sleep(_POLL_SECONDS)
        else:
            return None
        state = self.run.state
        waiting = state.pending.pop(approval_id, None)
        if waiting is None:
            return None
        state.resuming[waiting.id] = approval_id
        try:
            return (await self.run.asubmit([waiting]))[0]
        finally:
            state.resuming.pop(waiting.id, None)

"""The agent loop: a model proposes, the gate decides, the loop carries the turns.

`Agent` (`callgate.agent.loop`) drives a model through a `Gate`; the package
holds its parts, each by its job: which tools the model sees
(`callgate.agent.exposure`), large results paged out of the conversation
(`callgate.agent.paging`), what happens after a rejection or a loop
(`callgate.agent.triage`), the run's state and budgets
(`callgate.agent.state`), and the transcript recorded in the ledger
(`callgate.agent.transcript`, `replay`). See docs/agent.md.
"""

from callgate.agent.loop import Agent
from callgate.agent.state import AgentResult, Budgets, StopReason
from callgate.agent.transcript import TranscriptEntry, replay

__all__ = ["Agent", "AgentResult", "Budgets", "StopReason", "TranscriptEntry", "replay"]

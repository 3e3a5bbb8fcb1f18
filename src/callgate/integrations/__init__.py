"""Drop-in adapters: callgate under the agent frameworks teams already use.

Each adapter keeps the framework's own loop and puts every tool call it makes
through a callgate `Run` (parse, validate, authorize, approve, execute, record):

* `callgate.integrations.openai_agents`: the OpenAI Agents SDK's function tools;
* `callgate.integrations.pydantic_ai`: a PydanticAI toolset wrapper;
* `callgate.integrations.langchain`: LangChain tools, for LangGraph's ``ToolNode``.

Each module imports its framework when it is imported (the ``integrations``
extra installs them); this package imports none of them. The part they share is
`callgate.integrations.common`. See docs/integrations.md.
"""

from __future__ import annotations

from callgate.integrations.common import Contracts, contract_for, frozen_arguments

__all__ = ["Contracts", "contract_for", "frozen_arguments"]

"""What the framework adapters share: the contracts of foreign tools, and one call through a run.

A framework's tool knows its name, description and arguments schema; callgate
also needs its contract (effects, risk, idempotency key, secret fields...),
which the application gives per tool name as `Contracts`. A tool given no
contract gets callgate's default effect ``call:<tool>``, so it runs only where
that effect is granted: deny by default holds for adapted tools too.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from callgate.calls import Observation, ToolCall
from callgate.errors import DefinitionError
from callgate.gate import Run
from callgate.tools import ContractOptions

__all__ = ["Contracts", "contract_for", "frozen_arguments", "submit_one", "submit_one_sync"]

Contracts = Mapping[str, ContractOptions]
"""Per tool name, the callgate contract options of `callgate.tool` (``effects``, ``risk``,
``idempotency_key``, ``secret_fields``, ``sinks``, ``timeout``...)."""


def contract_for(
    tool: str, contracts: Contracts | None, names: Collection[str] = ()
) -> ContractOptions:
    """The contract given for ``tool`` (empty: the default effect); with ``names`` (every
    tool being adapted), a contract naming no such tool is refused: a misspelt name would
    otherwise leave the real tool on the default contract."""
    if contracts is None:
        return {}
    if not isinstance(contracts, Mapping):
        raise DefinitionError(
            f"contracts must map tool names to contract options, got {type(contracts).__name__}"
        )
    if names:
        unknown = sorted(set(contracts) - set(names))
        if unknown:
            raise DefinitionError(
                f"contracts name {unknown[0]!r}, which is not one of the tools being adapted "
                f"({', '.join(sorted(names))}); fix the name or remove the entry"
            )
    contract = contracts.get(tool, {})
    if not isinstance(contract, Mapping):
        raise DefinitionError(
            f"the contract of tool {tool!r} must be a mapping of contract options "
            f"(effects=..., risk=...), got {type(contract).__name__}"
        )
    return ContractOptions(**contract)


def frozen_arguments(arguments: Mapping[str, Any]) -> str:
    """Validated arguments as the JSON text a framework's tool takes back."""
    return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False, default=str)


async def submit_one(
    run: Run, call_id: str, name: str, arguments: str | Mapping[str, Any]
) -> Observation:
    """One framework tool call through ``run``: its one observation."""
    [observation] = await run.asubmit([ToolCall(id=call_id, name=name, arguments=arguments)])
    return observation


def submit_one_sync(
    run: Run, call_id: str, name: str, arguments: str | Mapping[str, Any]
) -> Observation:
    """`submit_one` for frameworks that call tools from synchronous code."""
    [observation] = run.submit([ToolCall(id=call_id, name=name, arguments=arguments)])
    return observation

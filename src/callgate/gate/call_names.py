"""The names a run records its calls under, given the ids a model sends (docs/design-notes.md,
"Call ids").

Ids are the model's and come back: content-derived ids, ``call_0`` every turn. A run
answers each call under the id the model sent, and records it under a name that is
its own in the run:

* an id never used for an admitted call: the id itself;
* the same side-effecting call (tool and validated arguments) as an earlier admitted
  call the model sent under this id, one that did not end ``error``: that call's name,
  so its idempotency key answers (a replay, or *in progress*) and nothing runs twice,
  however often the same batch is submitted again;
* the same call as one still waiting for a person (any tool): that call's name, so
  the approval releases it;
* anything else (a different call, a read, the same call after an ``error``): a new
  name, ``<id>#2``, ``<id>#3``..., never one in use in the run or in the batch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["CallNames"]

_RENAMED = re.compile(r"^(?P<base>.+)#(?P<n>[0-9]+)$")


class CallNames:
    """A run's book of call names: what each model id was recorded as, and how each
    name's call stands (admitted, waiting for a person, ended ``error``)."""

    __slots__ = ("_calls", "_errored", "_names", "_next", "_waiting")

    def __init__(self) -> None:
        self._calls: dict[str, tuple[str, str]] = {}
        """Name → (tool, request hash) of each call admitted or waiting in the run."""
        self._names: dict[str, list[str]] = {}
        """Model id → the names its calls were recorded under, oldest first (only for an
        id recorded under another name at least once)."""
        self._waiting: set[str] = set()
        self._errored: set[str] = set()
        self._next: dict[str, int] = {}

    def name_for(
        self,
        model_id: str,
        tool: str,
        request_hash: str,
        *,
        side_effecting: bool,
        batch_ids: Iterable[str] = (),
    ) -> str:
        """The name to record a call under (see the module's docstring)."""
        names = self._names.get(model_id)
        if names is None and model_id not in self._calls:
            return model_id
        effect = (tool, request_hash)
        for name in reversed(names if names is not None else [model_id]):
            if self._calls.get(name) != effect:
                continue
            if name in self._waiting or (side_effecting and name not in self._errored):
                return name
        taken = set(batch_ids)
        n = self._next.get(model_id, 1)
        while True:
            n += 1
            name = f"{model_id}#{n}"
            if name not in self._calls and name not in taken:
                self._next[model_id] = n
                return name

    def admitted(self, model_id: str, name: str, tool: str, request_hash: str) -> None:
        """Note a call admitted under ``name`` (no longer waiting, if it was)."""
        self._note(model_id, name, tool, request_hash)
        if self._waiting:
            self._waiting.discard(name)
        if self._errored:
            self._errored.discard(name)

    def waiting(self, model_id: str, name: str, tool: str, request_hash: str) -> None:
        """Note a call waiting for a person under ``name``."""
        self._note(model_id, name, tool, request_hash)
        self._waiting.add(name)

    def errored(self, name: str) -> None:
        """Note that the call recorded as ``name`` ended ``error``: its effect did not happen."""
        self._errored.add(name)

    def recorded(self, name: str, tool: str, request_hash: str, *, state: str) -> None:
        """Note a call found in the ledger (a rebuilt run): ``name`` as recorded, its model
        id read back from a ``<id>#n`` name."""
        match = _RENAMED.match(name)
        model_id = match["base"] if match and match["base"] in self._calls else name
        self._note(model_id, name, tool, request_hash)
        if state == "pending":
            self._waiting.add(name)
        elif state == "error":
            self._errored.add(name)

    def _note(self, model_id: str, name: str, tool: str, request_hash: str) -> None:
        # A model id recorded under itself needs no entry in _names (the common case,
        # kept cheap): `name_for` looks the id itself up in _calls.
        if name != model_id:
            names = self._names.get(model_id)
            if names is None:
                names = self._names[model_id] = [model_id] if model_id in self._calls else []
            if name not in names:
                names.append(name)
        self._calls[name] = (tool, request_hash)

"""Rebuild a run from the ledger, so that another process can resume it.

A run that stopped waiting for approvals leaves, in the ledger, its calls in
state ``pending`` (each with its approval id) and the approval requests,
which hold the canonical arguments of each call. `rebuild` (used by
`Gate.resume_run`) gives a fresh `Run` object:

* its pending calls, each with the exact arguments the request was made for,
  so ``run.resume()`` submits them again without asking the model. A call
  whose arguments were not stored in clear (a tool with secret fields, or an
  argument that looked like a credential and was redacted) comes back
  without arguments: ``resume()`` tells the model to send it again;
* its evidence: every ``ok`` call of the run, its arguments validated again
  and its result decoded from the stored JSON text (a dict for a dict
  result; the text itself when it is not JSON). A tool with secret fields is
  left out (its arguments are redacted), and so is a result that was a
  Pydantic model in the first process: preconditions that read it see a
  dict, not the model.

A run is the same run everywhere: what it trusts and what bounds it are journal
records of the run (``run.*``, `callgate.ledger.base.Ledger.record_run`), written when
the run is started and whenever `Run.narrow`, `Run.trust`, `Run.trust_value`,
`Run.trust_record` or `Run.untrusted` adds to them. `restore` gives a rebuilt run
every one of them back: its intents (a resume that passes another intent adds it, so
it can only narrow), its trusted text, values and records, and its exposure.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from callgate.authorize.intent import Intent
from callgate.authorize.readers import label_from_record, label_record
from callgate.calls import ToolCall
from callgate.errors import DefinitionError
from callgate.evidence import EvidenceItem
from callgate.gate.run_state import GateParts, RunState
from callgate.ledger.base import AuditRecord, CallState, LedgerError

__all__ = [
    "MAX_FACT_TEXT",
    "Fact",
    "exposed_fact",
    "intent_fact",
    "rebuild",
    "restore",
    "trusted_fact",
]

Fact = tuple[str, dict[str, Any]]
"""A ``run.*`` record to write: its kind and data."""
MAX_FACT_TEXT = 200_000
"""Characters of one untrusted text kept in its ``run.exposed`` record (the exposure itself
is kept whatever its length)."""


def intent_fact(intent: Intent) -> Fact:
    """The ``run.intent`` record of an intent the run was narrowed to."""
    return ("run.intent", intent.as_record())


def trusted_fact(
    *,
    texts: Iterable[str] = (),
    values: Iterable[tuple[Any, str | None]] = (),
    records: Iterable[tuple[Mapping[str, Any], Mapping[str, Any] | None]] = (),
) -> Fact:
    """The ``run.trusted`` record of what the application vouched for. Text is stored as
    the redactor leaves it: a credential it scrubs is not trusted after a resume (narrower,
    never wider)."""
    return (
        "run.trusted",
        {
            "texts": list(texts),
            "values": [[v, k] for v, k in values],
            "records": [
                [dict(r), {n: label_record(v) for n, v in k.items()} if k else None]
                for r, k in records
            ],
        },
    )


def exposed_fact(source: str, text: str) -> Fact:
    """The ``run.exposed`` record of untrusted text the run read (`Run.untrusted`)."""
    return ("run.exposed", {"source": source, "text": text[:MAX_FACT_TEXT]})


def restore(run: RunState, facts: Sequence[AuditRecord]) -> None:
    """Give ``run`` back its recorded intents, trusted input and exposure, in order."""
    for rec in facts:
        d = rec.data
        try:
            if rec.kind == "run.intent":
                run.intents = (*run.intents, Intent.from_record(d))
            elif rec.kind == "run.trusted":
                for text in d.get("texts") or ():
                    run.provenance.add_trusted_text(str(text))
                for value, kind in d.get("values") or ():
                    run.provenance.add_trusted_value(value, kind)
                for record, kinds in d.get("records") or ():
                    labels = {n: label_from_record(v) for n, v in kinds.items()} if kinds else None
                    run.provenance.add_trusted_record(record, labels)
            elif rec.kind == "run.exposed":
                run.provenance.add_untrusted(str(d.get("text") or ""), str(d.get("source")))
        except (TypeError, ValueError, DefinitionError) as exc:
            raise LedgerError(
                f"record {rec.seq} ({rec.kind}) of run {run.id!r} cannot be read back "
                f"({type(exc).__name__}: {exc}); the run is not resumed without it: run "
                "'callgate ledger verify'"
            ) from exc


def rebuild(gate: GateParts, run: RunState) -> None:
    """Fill ``run`` (fresh, with the id of a run in the ledger) with its pending calls and
    evidence. `LedgerError` if the ledger has no call of that run, or if the run's calls
    were made by another principal than the run's authority."""
    calls = gate.ledger.calls(run_id=run.id)
    if not calls:
        raise LedgerError(f"no calls of run {run.id!r} in the ledger; nothing to resume")
    principals = {c.principal for c in calls}
    if principals != {run.authority.recorded_as}:
        raise LedgerError(
            f"run {run.id!r} was made by {', '.join(sorted(principals))}, not by "
            f"{run.authority.recorded_as!r}; resume it under the authority it ran with "
            "(the same principal and the same trusted scope: Authority.context or scope)"
        )
    for record in calls:
        if record.state is not CallState.REJECTED and record.request_hash is not None:
            run.names.recorded(
                record.call_id, record.tool, record.request_hash, state=record.state.value
            )
        if record.state is CallState.OK:
            _add_evidence(gate, run, record.call_id, record.tool, record.arguments)
            # The run read this output: unless the tool's output is trusted, the resumed run
            # stays exposed (evidence leaves out tools with secret fields).
            spec = gate.registry.get(record.tool)
            if spec is None or spec.output_trust is not True:
                run.provenance.add_untrusted("", source=record.call_id)
        elif record.state is CallState.PENDING and record.approval_id is not None:
            request = gate.approvals.get(record.approval_id)
            if request is None:
                continue
            run.pending[request.id] = (
                ToolCall(id=record.call_id, name=request.tool, arguments=request.arguments_json)
                if request.resumable
                else None
            )


def _returns_text(fn: Any) -> bool:
    """Whether a handler declares that it returns ``str`` (its result is stored as the text
    itself, so it must not be read back as JSON)."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # an annotation that does not resolve: read the result as before
        return False
    return hints.get("return") is str


def _add_evidence(gate: GateParts, run: RunState, call_id: str, tool: str, arguments: str) -> None:
    spec = gate.registry.get(tool)
    if spec is None or spec.secret_fields:
        return
    attempts = gate.ledger.attempts(run.id, call_id)
    outcome = attempts[-1].outcome if attempts else None
    if outcome is None or outcome.status != "ok":
        return
    try:
        model = spec.arguments_model.model_validate_json(arguments)
    except ValidationError:
        return
    result: Any
    if _returns_text(spec.fn):  # stored as it was: "42" stays the text "42"
        result = outcome.content
    else:
        try:
            result = json.loads(outcome.content)
        except ValueError:
            result = outcome.content
    run.evidence.add(EvidenceItem(call_id, tool, model, result))

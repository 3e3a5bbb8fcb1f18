"""What of one call the ledger may hold and the model may read.

A call's secrets are its secret fields' values (as far as its arguments were read) and the
run's trusted-context secrets; every text recorded or shown of the call (its arguments,
effect names, findings, a hook's error, a rejection that quotes its values) is scrubbed
of them, in all their forms, and of credential-shaped text. The gate's admission records
and answers; the scrubbing is done here, by the run's `Redactor`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from callgate.canonical import canonical_json
from callgate.redact import Redactor, hide_secret_problems
from callgate.render import Rejection, bounded

__all__ = [
    "MAX_RAW_ARGUMENT_CHARS",
    "call_secrets",
    "scrubbed_arguments",
    "scrubbed_effects",
    "scrubbed_findings",
    "scrubbed_raw_arguments",
    "scrubbed_rejection",
]

MAX_RAW_ARGUMENT_CHARS = 4000
"""Arguments that never decoded into a tool's model are recorded cut to this length."""


def call_secrets(
    redactor: Redactor, secret_fields: Collection[str], values: Any, context: tuple[str, ...]
) -> tuple[str, ...]:
    """Every value scrubbed from what is recorded or shown of one call: its secret fields'
    values (``values``: the arguments as far as they were read) and ``context``, the run's
    trusted-context secrets. The redactor looks for each in all its forms."""
    if not secret_fields or not isinstance(values, Mapping):
        return context
    return (*redactor.secret_values(values, secret_fields), *context)


def scrubbed_arguments(
    redactor: Redactor,
    model: BaseModel,
    secret_fields: Collection[str],
    canonical: Callable[[], str],
    secrets: Collection[str],
) -> str:
    """Validated arguments as the ledger may hold them: secret fields replaced (else the
    ``canonical`` text), and secret values and credentials scrubbed."""
    if secret_fields:
        text = canonical_json(redactor.arguments(model.model_dump(mode="json"), secret_fields))
    else:
        text = canonical()
    return redactor.text(text, secrets)


def scrubbed_raw_arguments(
    redactor: Redactor, arguments: Any, decoded: Any | None, context: tuple[str, ...]
) -> str:
    """Arguments that did not validate, as the ledger may hold them: the decoded value if
    there is one, else the text or mapping the model sent, bounded and scrubbed."""
    if decoded is not None:
        text = canonical_json(decoded)
    elif isinstance(arguments, str):
        text = arguments
    else:
        try:
            text = canonical_json(dict(arguments))
        except (TypeError, ValueError, RecursionError):  # beyond the parse stage's bounds
            text = '"(arguments not recorded: they cannot be written as JSON)"'
    return redactor.text(bounded(text, MAX_RAW_ARGUMENT_CHARS), context)


def scrubbed_rejection(
    redactor: Redactor,
    rejection: Rejection,
    secret_fields: Collection[str],
    values: Any,
    secrets: Collection[str],
) -> tuple[str, tuple[Mapping[str, Any], ...]]:
    """A rejection's message and details as the model and the ledger may read them. A
    secret field's value never reaches either, not even quoted back in a rejection of the
    call that sent it; a credential the model put anywhere is scrubbed."""
    if secret_fields:
        hidden = hide_secret_problems(rejection, secret_fields)
        return redactor.withheld_rejection(
            hidden.message,
            tuple(p.as_dict() for p in hidden.problems),
            values,
            secret_fields,
            secrets,
        )
    message = redactor.text(rejection.message, secrets)
    return message, tuple(redactor.value(p.as_dict(), secrets) for p in rejection.problems)


def scrubbed_effects(
    redactor: Redactor, effect_names: Iterable[str], secrets: Collection[str]
) -> tuple[str, ...]:
    """Effect names as records hold them: an effect templated on a secret field
    (``spend:card:{card_number}``) or on a context value is redacted there."""
    return tuple(redactor.text(e, secrets) for e in effect_names)


def scrubbed_findings(
    redactor: Redactor, findings: Iterable[Mapping[str, Any]], secrets: Collection[str]
) -> tuple[Any, ...]:
    """A decision's findings (each quotes an argument's value and the effect it was
    matched on), redacted like everything else recorded."""
    return tuple(redactor.value(f, secrets) for f in findings)

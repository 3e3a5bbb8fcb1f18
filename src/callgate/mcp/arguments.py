"""Arguments models for remote tools, built from the server's JSON Schema.

A remote tool's arguments are validated before anything is sent, by the same
machinery as a tool a developer defines by a schema:
`callgate.definitions.schema_arguments` (see its module for the readings:
typed fields where the schema is simple, ``jsonschema`` with the schema's own
semantics elsewhere, ``null`` meaning "not given" for an optional property
that does not accept it, integers never floats, patterns on RE2 in time linear
in the value, references never fetched, names such as ``_from`` kept as
aliases). Unknown top-level arguments are rejected even when the server's
schema leaves ``additionalProperties`` open: callgate forwards only declared
arguments.

One reading is the remote tool's own: a ``format`` callgate does not know is
an annotation, not a refusal. The server is a remote party whose vocabulary
callgate cannot extend (``"format": "github-repo"``), and refusing the whole
tool for a word would leave real servers' tools out. A format callgate
checks (``date``, ``email``, ``uuid``, ...) is asserted as for any other tool,
and patterns, bounds and types are never loosened. The formats left unchecked
are recorded on the result (`RemoteArguments.unchecked_formats`) and logged
when the tool is imported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from callgate.definitions import SchemaArguments, UnenforceableSchema, schema_arguments
from callgate.definitions.formats import unknown_formats

__all__ = ["RemoteArguments", "UnsupportedSchema", "remote_arguments"]


class UnsupportedSchema(UnenforceableSchema, ValueError):
    """A remote tool's input schema that callgate cannot validate or forward faithfully.

    The tool is left out of the import; the message says what in the schema and why.
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteArguments(SchemaArguments):
    """The arguments model of one remote tool and what the gate needs to know about it."""

    unchecked_formats: tuple[tuple[str, str], ...] = ()
    """Each ``format`` callgate does not know, with where it is (a JSON pointer): an annotation."""

    def payload(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments to send, by the server's names; optional ones left out when absent."""
        return self.by_schema_name(values)


def remote_arguments(tool: str, schema: Mapping[str, Any]) -> RemoteArguments:
    """Build the arguments model for a remote tool's input schema.

    Raises `UnsupportedSchema` when the schema is not a JSON Schema object
    with named properties that callgate can enforce and forward as written.
    """
    unchecked = tuple(unknown_formats(schema, {})) if isinstance(schema, Mapping) else ()
    try:
        built = schema_arguments(tool, schema, formats=dict.fromkeys(n for n, _ in unchecked))
    except UnenforceableSchema as exc:
        raise UnsupportedSchema(str(exc)) from None
    shared = {f.name: getattr(built, f.name) for f in dataclasses.fields(built)}
    return RemoteArguments(**shared, unchecked_formats=unchecked)

"""Definitions from elsewhere: tools from a JSON Schema, its dialects, formats and names.

The pieces `Registry.add_schema_tool` (in `callgate.tools`) is built from,
and that the importers (`callgate.openapi`, `callgate.a2a`, `callgate.skills`)
share:

* `schema_arguments`: a JSON Schema (2020-12) as an arguments model that
  validates with the schema's own semantics (`arguments`);
* `to_2020_12`: the OpenAPI 3.0 dialect read as 2020-12 (`dialects`);
* format checkers (`formats`) and reversible tool names (`names`).

See docs/definitions.md.
"""

from callgate.definitions.arguments import SchemaArguments, UnenforceableSchema, schema_arguments
from callgate.definitions.dialects import Dialect, to_2020_12
from callgate.definitions.formats import ANNOTATIONS, CHECKS, FormatCheck
from callgate.definitions.names import VALID_NAME, tool_name

__all__ = [
    "ANNOTATIONS",
    "CHECKS",
    "VALID_NAME",
    "Dialect",
    "FormatCheck",
    "SchemaArguments",
    "UnenforceableSchema",
    "schema_arguments",
    "to_2020_12",
    "tool_name",
]

"""Any JSON value given as a tool's arguments schema either defines a tool or is refused with
a `DefinitionError` saying why: never another exception (issue 26: one such crash aborted
``callgate lint`` on a whole file)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from callgate import DefinitionError, Registry

KEYWORDS = (
    "type",
    "properties",
    "items",
    "enum",
    "format",
    "required",
    "default",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "$ref",
    "$defs",
    "$schema",
    "additionalProperties",
    "pattern",
    "minimum",
    "maxLength",
    "multipleOf",
    "prefixItems",
    "patternProperties",
    "if",
    "then",
    "dependentRequired",
    "propertyNames",
    "unevaluatedProperties",
    "nullable",
    "examples",
    "a",
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["object", "string", "integer", "array", "null", "#/$defs/a", "#", "a"])
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYWORDS), inner, max_size=4)
    ),
    max_leaves=12,
)
schemas = st.dictionaries(st.sampled_from(KEYWORDS), json_values, max_size=4)


def _noop(**arguments: Any) -> None:
    return None


@settings(max_examples=150, deadline=None)
@given(schemas, st.sampled_from(["2020-12", "openapi-3.0"]))
def test_any_schema_defines_a_tool_or_is_refused_with_a_reason(schema: Any, dialect: Any) -> None:
    """``$schema: []`` and ``required: [[]]`` raised ``TypeError: unhashable type``."""
    reason = ""
    try:
        spec = Registry().add_schema_tool("t", "d", schema, _noop, dialect=dialect)
    except DefinitionError as exc:
        reason = str(exc)
        assert reason.startswith("tool 't'"), reason
    else:
        assert spec.input_schema["type"] == "object"

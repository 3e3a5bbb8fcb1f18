"""Properties of the pieces schema tools are built from: names, formats, dialects, and
validation of hostile argument values (hypothesis)."""

from __future__ import annotations

import datetime
import ipaddress
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate import DefinitionError, Registry
from callgate.definitions import CHECKS, VALID_NAME, to_2020_12
from callgate.render import Rejection
from callgate.validate import validate_arguments

from .test_schema_tools import ORDER


def _noop(**arguments: Any) -> None:
    return None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=8, unique=True))
def test_mapped_names_are_valid_distinct_and_lead_back(names: list[str]) -> None:
    """Every name a registry gives is accepted by providers, distinct, and maps back."""
    registry = Registry()
    given_names = {}
    for name in names:
        if name in registry.renamed():
            # A valid name that an earlier name was already mapped to: refused, saying so.
            with pytest.raises(DefinitionError, match="was mapped to it"):
                registry.add_schema_tool(name, "d", {"type": "object"}, _noop)
            continue
        spec = registry.add_schema_tool(name, "d", {"type": "object"}, _noop)
        given_names[spec.name] = name
    assert all(VALID_NAME.fullmatch(n) for n in registry.names())
    assert len(set(registry.names())) == len(given_names)
    for tool, original in given_names.items():
        assert registry.renamed().get(tool, tool) == original


@given(st.dates())
def test_every_calendar_date_is_a_date(day: datetime.date) -> None:
    """``format: date`` accepts each ISO date, and refuses it with another separator."""
    assert CHECKS["date"](day.isoformat())
    assert not CHECKS["date"](day.isoformat().replace("-", "/"))


@given(
    st.datetimes(min_value=datetime.datetime(1, 1, 1, 0, 0, 1)),
    st.integers(-23 * 60, 23 * 60).map(lambda m: datetime.timezone(datetime.timedelta(minutes=m))),
)
def test_every_rfc3339_timestamp_is_a_date_time(
    moment: datetime.datetime, zone: datetime.timezone
) -> None:
    """``format: date-time`` accepts a timestamp with an offset (or Z), not without one."""
    text = moment.replace(tzinfo=zone).isoformat()
    assert CHECKS["date-time"](text)
    assert CHECKS["date-time"](moment.isoformat() + "Z")
    assert not CHECKS["date-time"](moment.isoformat())


@given(st.uuids())
def test_every_uuid_in_its_usual_form_is_a_uuid(value: Any) -> None:
    """``format: uuid`` accepts the 36-character form and refuses it without hyphens."""
    assert CHECKS["uuid"](str(value))
    assert not CHECKS["uuid"](value.hex)


@given(st.ip_addresses())
def test_ip_addresses_are_told_apart_by_version(address: Any) -> None:
    """``ipv4`` and ``ipv6`` accept their own version only."""
    text = str(address)
    version = ipaddress.ip_address(text).version
    assert CHECKS["ipv4"](text) is (version == 4)
    assert CHECKS["ipv6"](text) is (version == 6)


@given(st.text(max_size=300))
def test_format_checks_never_raise_on_any_text(text: str) -> None:
    """A model's string, however odd, gets an answer from every checker."""
    for check in CHECKS.values():
        assert check(text) in (True, False)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
ORDER_TOOL = Registry().add_schema_tool("update_order", "d", ORDER, _noop)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from([*ORDER["properties"], "x", "_from"]), _JSON, max_size=6))
def test_any_argument_values_get_a_verdict_that_matches_jsonschema(value: dict[str, Any]) -> None:
    """Hostile values never raise; a value the gate accepts is valid JSON Schema-wise."""
    verdict = validate_arguments(ORDER_TOOL, value)
    json.dumps(value)  # the values are JSON
    if not isinstance(verdict, Rejection):
        plain = {k: v for k, v in value.items() if v is not None or k == "note"}
        jsonschema.Draft202012Validator(ORDER_TOOL.input_schema).validate(plain)


@given(
    st.sampled_from(["string", "integer", "boolean", "number"]),
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
)
def test_nullable_adds_null_and_keeps_every_other_value(kind: str, value: Any) -> None:
    """OpenAPI 3.0 ``nullable``: the 2020-12 form accepts null plus what the type accepts."""
    converted = to_2020_12({"type": kind, "nullable": True}, "openapi-3.0", tool="t")
    plain = jsonschema.Draft202012Validator({"type": kind}).is_valid(value)
    widened = jsonschema.Draft202012Validator(converted).is_valid(value)
    assert widened is (plain or value is None)

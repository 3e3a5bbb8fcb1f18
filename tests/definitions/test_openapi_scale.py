"""Checking each distinct subschema once (`callgate.definitions.metaschema`) refuses what
``jsonschema`` refuses: the memo that made large OpenAPI imports cheap never lets an
invalid schema through because its parts, or its twins, were seen valid before."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, SchemaError

from callgate.definitions import metaschema
from callgate.definitions.arguments import _validator
from callgate.openapi import import_openapi

pytestmark = pytest.mark.timeout(120)


def _document(bad: Any) -> dict[str, Any]:
    """Four operations: two whose bodies refer to the component ``Bad`` only (one through
    ``Wrapper``), two to the valid ``Good``."""
    ops: dict[str, Any] = {}
    for name, ref in (("a", "Good"), ("b", "Bad"), ("c", "Wrapper"), ("d", "Good")):
        ops[f"/{name}"] = {
            "post": {
                "operationId": name,
                "requestBody": {
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {"x": {"$ref": f"#/components/schemas/{ref}"}},
                            }
                        }
                    }
                },
                "responses": {"200": {"description": "ok"}},
            }
        }
    return {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "https://api.example.com"}],
        "paths": ops,
        "components": {
            "schemas": {
                "Good": {"type": "object", "properties": {"n": {"type": "integer"}}},
                "Bad": bad,
                "Wrapper": {"type": "array", "items": {"$ref": "#/components/schemas/Bad"}},
            }
        },
    }


def test_an_invalid_schema_reached_only_through_a_shared_component_is_refused() -> None:
    """``minimum: "zero"`` is not JSON Schema. A document whose component ``Bad`` is the same
    object but valid is imported first (its subschemas are remembered as valid); then
    every operation reaching the invalid ``Bad`` (directly or through ``Wrapper``) is left
    out with the metaschema's reason, and the others are imported."""
    valid = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}
    first = import_openapi(_document(valid), api="t", require_credentials=False)
    assert [t.name for t in first.tools] == ["a", "b", "c", "d"]
    invalid = {"type": "object", "properties": {"n": {"type": "integer", "minimum": "zero"}}}
    again = import_openapi(_document(invalid), api="t", require_credentials=False)
    assert [t.name for t in again.tools] == ["a", "d"]
    assert set(again.skipped) == {"POST /b", "POST /c"}
    for why in again.skipped.values():
        assert "not valid JSON Schema" in why
        assert "'zero' is not of type 'number'" in why


def _formats() -> Any:
    checker = copy.copy(Draft202012Validator.FORMAT_CHECKER)
    checker.checkers = {**checker.checkers, "regex": (lambda _: True, ())}
    return checker


_FORMATS = _formats()
"""One checker for every example: the memo is kept per checker, and stays warm across them."""
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.5, 1.0, -1.0]),
    st.text(max_size=3),
)
_KEYWORDS = ["type", "minimum", "items", "properties", "required", "anyOf", "$defs", "not"]
_KEYWORDS += ["enum", "minLength", "pattern", "format", "$ref", "additionalProperties", "x"]
_TYPES = st.sampled_from(["string", "integer", "object", "array", "null", "strnig"])


def _schemas() -> st.SearchStrategy[Any]:
    """JSON Schemas, valid and not: keywords with values of the right kind or not."""

    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        value = st.one_of(
            _SCALARS,
            _TYPES,
            inner,
            st.lists(inner, max_size=3),
            st.dictionaries(st.sampled_from(["a", "b", "type"]), inner, max_size=3),
        )
        return st.dictionaries(st.sampled_from(_KEYWORDS), value, max_size=4)

    return st.recursive(st.one_of(st.booleans(), st.just({})), extend, max_leaves=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_schemas(), min_size=1, max_size=6))
def test_the_memoized_check_agrees_with_jsonschema(schemas: list[Any]) -> None:
    """Schemas checked in a row (the memo warm from the earlier ones, and from earlier
    examples): each is refused exactly when ``jsonschema`` refuses it, with its message."""
    formats = _FORMATS
    for schema in schemas:
        try:
            Draft202012Validator.check_schema(schema, format_checker=formats)
        except SchemaError as exc:
            expected: str | None = exc.message
        else:
            expected = None
        try:
            metaschema.check_schema(Draft202012Validator, schema, formats)
        except SchemaError as exc:
            got: str | None = exc.message
        else:
            got = None
        assert got == expected, schema


def test_a_schema_invalid_deep_inside_a_remembered_one_is_refused() -> None:
    """The same tool schema twice, the second time with one leaf made invalid deep down:
    the first is accepted, the second refused (its changed parts are new structures)."""
    good: dict[str, Any] = {
        "type": "object",
        "properties": {"p": {"anyOf": [{"type": "array", "items": {"minLength": 1}}]}},
    }
    _validator(good, {})
    bad = copy.deepcopy(good)
    bad["properties"]["p"]["anyOf"][0]["items"]["minLength"] = -1
    with pytest.raises(Exception, match="not valid JSON Schema"):
        _validator(bad, {})
    metaschema.forget()
    with pytest.raises(Exception, match="not valid JSON Schema"):
        _validator(bad, {})


def test_the_memo_is_bounded_and_still_right_after_it_forgets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past `MEMO_LIMIT` interned values the memo starts empty: it never grows without
    bound in a long-running process, and what it forgot is checked again, in full."""
    monkeypatch.setattr(metaschema, "MEMO_LIMIT", 50)
    formats = _FORMATS
    for n in range(40):
        valid = {"type": "object", "properties": {f"p{n}": {"type": "integer", "minimum": n}}}
        metaschema.check_schema(Draft202012Validator, valid, formats)
        assert len(metaschema._interned) <= 50 + 12  # one schema's values past the bound
        invalid = {"type": "object", "properties": {f"p{n}": {"minimum": str(n)}}}
        with pytest.raises(SchemaError):
            metaschema.check_schema(Draft202012Validator, invalid, formats)

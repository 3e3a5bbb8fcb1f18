"""Property tests: whatever a model sends, `submit` answers every call and raises nothing.

The oracle for "fits the schema" is `jsonschema` run on the tool's own
``input_schema`` (the schema exported to providers), with two documented
adjustments that mirror deliberate gate behaviour:

* a ``null`` for an optional field means "use the default" (OpenAI strict
  mode sends it), so such nulls are dropped before checking;
* ``integer`` means a JSON integer literal: ``1.0`` does not count (the gate
  validates strictly; `test_integral_float_for_an_integer_field_is_admitted`
  pins that deviation from JSON Schema as a known issue).
"""

from __future__ import annotations

import json
import math
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from jsonschema import validators

from callgate import Gate, Registry, Stage, Status, ToolCall, ToolSpec

from .domains import ALLOW_ALL, GroceryStore, grocery_tools

SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in grocery_tools(GroceryStore())}
REGISTRY = Registry(TOOLS.values())


def _strict_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


def _finite_number(checker: Any, instance: Any) -> bool:
    """A JSON number a float can hold: the gate refuses NaN, Infinity and 10**400 for a
    ``number`` field (documented in docs/validation.md)."""
    if isinstance(instance, bool) or not isinstance(instance, int | float):
        return False
    try:
        return math.isfinite(float(instance))
    except OverflowError:
        return False


_Validator = validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _strict_integer, "number": _finite_number}
    ),
)


def _not_finite(value: Any) -> bool:
    """Whether decoded JSON holds NaN or an infinity anywhere (a ``parse`` rejection)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_not_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_not_finite(v) for v in value)
    return False


def fits(spec: ToolSpec, arguments: Any) -> bool:
    """Whether ``arguments`` is valid for the tool's exported JSON Schema (see module doc)."""
    if isinstance(arguments, dict):
        optional = set(spec.input_schema["properties"]) - set(spec.input_schema["required"])
        arguments = {k: v for k, v in arguments.items() if not (v is None and k in optional)}
    return _Validator(spec.input_schema).is_valid(arguments)


def new_run() -> Any:
    """A fresh gate and run over the shared grocery registry, every effect granted."""
    return Gate(REGISTRY, read_retries=0).run(authority=ALLOW_ALL)


# -- strategies ---------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=10), children, max_size=4),
    ),
    max_leaves=12,
)


def near(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a good value, sometimes any JSON value."""
    return st.one_of(good, good, json_values)


FIELD_VALUES: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "search_products": {
        "query": near(st.text(max_size=12)),
        "limit": near(st.one_of(st.integers(min_value=-5, max_value=60), st.none())),
    },
    "create_grocery_cart": {
        "store_id": near(st.sampled_from(["north", "south", "west", "North"])),
        "skus": near(st.lists(st.sampled_from(["sku-milk", "sku-oats", "x"]), max_size=3)),
    },
    "place_order": {
        "cart_id": near(st.text(max_size=8)),
        "total": near(
            st.one_of(
                st.floats(min_value=-10, max_value=1e6, allow_nan=False),
                st.integers(min_value=-10, max_value=10**6),
            )
        ),
        "currency": near(st.sampled_from(["USD", "EUR", "usd", "GBP"])),
    },
}


@st.composite
def near_valid_arguments(draw: st.DrawFn, tool: str) -> dict[str, Any]:
    """Arguments close to valid for ``tool``: some fields dropped, some wrong, some extra."""
    fields = FIELD_VALUES[tool]
    out: dict[str, Any] = {}
    for name, values in fields.items():
        if draw(st.integers(min_value=0, max_value=5)) > 0:
            out[name] = draw(values)
    if draw(st.integers(min_value=0, max_value=5)) == 0:
        out.update(draw(st.dictionaries(st.text(max_size=8), json_values, max_size=2)))
    return out


tool_names = st.one_of(st.sampled_from(sorted(TOOLS)), st.text(max_size=30))


@st.composite
def tool_and_arguments(draw: st.DrawFn) -> tuple[str, Any]:
    """A registered tool with near-valid or arbitrary decoded arguments."""
    tool = draw(st.sampled_from(sorted(TOOLS)))
    arguments = draw(st.one_of(near_valid_arguments(tool), json_values))
    return tool, arguments


# -- properties ------------------------------------------------------------------------------


@SETTINGS
@given(case=tool_and_arguments(), as_text=st.booleans())
@example(case=("search_products", {"query": "milk", "limit": None}), as_text=True)
@example(case=("search_products", {"query": "milk", "limit": 50}), as_text=False)
@example(case=("place_order", {"cart_id": "c", "total": 10**400, "currency": "USD"}), as_text=True)
@example(case=("create_grocery_cart", {"store_id": "north", "skus": []}), as_text=True)
@example(case=("create_grocery_cart", ""), as_text=False)
@example(case=("create_grocery_cart", {"store_id": "north", "skus": [], "": None}), as_text=False)
def test_arguments_that_fit_the_schema_are_admitted_and_others_rejected_at_schema(
    case: tuple[str, Any], as_text: bool
) -> None:
    """Decoded JSON or its text: fits the exported schema ⇔ admitted; else ``schema``/``parse``."""
    tool, arguments = case
    # A str in ToolCall.arguments is argument text, so a decoded string is always sent encoded.
    sent = json.dumps(arguments) if as_text or isinstance(arguments, str) else arguments
    [obs] = new_run().submit([ToolCall(id="c1", name=tool, arguments=sent)])
    assert obs.call_id == "c1"
    if not isinstance(arguments, dict):
        assert (obs.status, obs.stage) == (Status.REJECTED, Stage.PARSE)
    elif fits(TOOLS[tool], arguments):
        assert obs.status in (Status.OK, Status.ERROR), obs.content
        assert obs.stage is Stage.EXECUTE
    else:
        assert (obs.status, obs.stage) == (Status.REJECTED, Stage.VALIDATE), obs.content
        assert obs.retryable is True


@SETTINGS
@given(tool=tool_names, text=st.one_of(st.text(), json_values.map(json.dumps)))
@example(tool="search_products", text='{"query": "a", "query": 5}')
@example(tool="search_products", text='{"query": "a"')
@example(tool="search_products", text='{"query": NaN}')
@example(tool="search_products", text="[" * 3000)
@example(tool="search_products", text="")
def test_arbitrary_argument_text_never_raises_and_lands_at_the_right_stage(
    tool: str, text: str
) -> None:
    """Any text: one observation; JSON that is no object → ``parse``; an object → the oracle."""
    [obs] = new_run().submit([ToolCall(id="c1", name=tool, arguments=text)])
    assert obs.call_id == "c1"
    assert obs.status in (Status.OK, Status.ERROR, Status.REJECTED)
    spec = TOOLS.get(tool)
    if spec is None:
        assert (obs.status, obs.stage) == (Status.REJECTED, Stage.VALIDATE)
        return
    if obs.status is Status.REJECTED:
        assert obs.stage in (Stage.PARSE, Stage.VALIDATE)
    try:
        decoded = json.loads(text)
    except (ValueError, RecursionError):
        if not obs.repaired:
            assert obs.status is Status.REJECTED
        return
    if not isinstance(decoded, dict) or _not_finite(decoded):
        assert (obs.status, obs.stage) == (Status.REJECTED, Stage.PARSE)
    elif fits(spec, decoded):
        assert obs.status is not Status.REJECTED, obs.content
    else:
        assert (obs.status, obs.stage) == (Status.REJECTED, Stage.VALIDATE), obs.content


@st.composite
def batches(draw: st.DrawFn) -> list[ToolCall]:
    """Up to six calls with arbitrary names, ids (possibly repeated) and arguments."""
    size = draw(st.integers(min_value=0, max_value=6))
    calls = []
    for _ in range(size):
        name = draw(tool_names)
        call_id = draw(st.one_of(st.sampled_from(["a", "b", "c"]), st.text(max_size=6)))
        if name in TOOLS and draw(st.booleans()):
            arguments: Any = draw(near_valid_arguments(name))
        else:
            arguments = draw(st.one_of(json_values, st.text(max_size=30)))
        if draw(st.booleans()) and not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
    return calls


@SETTINGS
@given(calls=batches())
def test_observations_match_the_calls_in_number_order_and_ids(calls: list[ToolCall]) -> None:
    """One observation per call, in proposal order, each carrying its call's id and tool."""
    observations = new_run().submit(calls)
    assert [o.call_id for o in observations] == [c.id for c in calls]
    assert [o.tool for o in observations] == [c.name for c in calls]


@SETTINGS
@given(calls=batches())
def test_asubmit_answers_like_submit(calls: list[ToolCall]) -> None:
    """The async path keeps the same contract: one observation per call, same ids."""
    import anyio

    async def main() -> list[Any]:
        return await new_run().asubmit(calls)

    observations = anyio.run(main)
    assert [o.call_id for o in observations] == [c.id for c in calls]


@pytest.mark.xfail(
    strict=True,
    reason="known issue: strict validation rejects 1.0 for an integer field although the "
    "exported JSON Schema ('type': 'integer') accepts it",
)
def test_integral_float_for_an_integer_field_is_admitted() -> None:
    """JSON Schema counts ``1.0`` as an integer; a call the schema allows should be admitted."""
    arguments = {"query": "milk", "limit": 1.0}
    assert jsonschema.Draft202012Validator(TOOLS["search_products"].input_schema).is_valid(
        arguments
    )
    [obs] = new_run().submit([ToolCall(id="c1", name="search_products", arguments=arguments)])
    assert obs.status is Status.OK

"""`@tool` and `ToolSpec`: what a typed function becomes, and which definitions are refused."""

from __future__ import annotations

import enum
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import Field

from callgate import CallContext, DefinitionError, Registry, Risk, ToolSpec, tool

REPO = Path(__file__).resolve().parents[2]


class Size(enum.Enum):
    """Bag sizes."""

    SMALL = "small"
    LARGE = "large"


def _pack(item: str, size: Size, mode: Literal["fast", "careful"] = "fast") -> str:
    """Pack one item into a bag.

    The bag is sealed afterwards.

    Args:
        item: the thing to pack.
        size: which bag to use.
        mode: how to pack it.
    """
    return item


# -- names -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["search_products", "a", "x" * 64, "get-order-2", "A_B-c9"],
)
def test_tool_name_matching_the_provider_limit_is_accepted(name: str) -> None:
    """Names of 1-64 letters, digits, ``_`` or ``-`` are accepted as given."""
    spec = tool(name=name)(_pack)
    assert spec.name == name


@pytest.mark.parametrize(
    "name",
    ["x" * 65, "has space", "dotted.name", "slash/name", "émoji", "semi;colon", "pack\n"],
)
def test_bad_tool_name_raises_definition_error_at_definition_time(name: str) -> None:
    """A name outside ``^[a-zA-Z0-9_-]{1,64}$`` is refused when the tool is defined."""
    with pytest.raises(DefinitionError, match="name"):
        tool(name=name)(_pack)


def test_tool_name_defaults_to_the_function_name() -> None:
    """Without ``name=``, the tool is named after the function."""
    assert tool(_pack).name == "_pack"


def test_duplicate_tool_name_in_a_registry_is_a_definition_error() -> None:
    """Two tools of one name cannot be registered together."""
    registry = Registry([tool(name="pack")(_pack)])
    with pytest.raises(DefinitionError, match="already registered"):
        registry.add(tool(name="pack")(_pack))


# -- descriptions and schema --------------------------------------------------------


def test_description_comes_from_the_docstring_without_the_args_section() -> None:
    """The docstring's summary and body become the description; the Args section does not."""
    spec = tool(_pack)
    assert spec.description.startswith("Pack one item into a bag.")
    assert "The bag is sealed afterwards." in spec.description
    assert "Args" not in spec.description
    assert "the thing to pack" not in spec.description


def test_args_section_becomes_property_descriptions() -> None:
    """Each parameter's text from the Args section is its property's ``description``."""
    props = tool(_pack).input_schema["properties"]
    assert props["item"]["description"] == "the thing to pack."
    assert props["mode"]["description"] == "how to pack it."


def test_literal_becomes_enum() -> None:
    """A ``Literal`` parameter is a JSON Schema ``enum`` of its values."""
    props = tool(_pack).input_schema["properties"]
    assert props["mode"]["enum"] == ["fast", "careful"]


def test_enum_class_becomes_enum() -> None:
    """An ``Enum`` parameter is a JSON Schema ``enum`` of its members' values."""
    schema = tool(_pack).input_schema
    size = schema["properties"]["size"]
    if "$ref" in size:
        size = schema["$defs"][size["$ref"].rsplit("/", 1)[-1]]
    assert size["enum"] == ["small", "large"]


def test_annotated_field_bounds_become_ranges() -> None:
    """``Annotated[int, Field(ge=1, le=100)]`` gives ``minimum`` and ``maximum``."""

    def count(n: Annotated[int, Field(ge=1, le=100)], ratio: Annotated[float, Field(gt=0)]) -> int:
        """Count."""
        return n

    props = tool(count).input_schema["properties"]
    assert props["n"]["type"] == "integer"
    assert (props["n"]["minimum"], props["n"]["maximum"]) == (1, 100)
    assert props["ratio"]["exclusiveMinimum"] == 0


def test_parameters_with_defaults_are_optional_and_the_others_required() -> None:
    """A parameter with a default is not in ``required``; one without is."""
    schema = tool(_pack).input_schema
    assert sorted(schema["required"]) == ["item", "size"]
    assert schema["properties"]["mode"]["default"] == "fast"


def test_extra_fields_are_forbidden_in_the_schema() -> None:
    """The schema says ``additionalProperties: false``."""
    assert tool(_pack).input_schema["additionalProperties"] is False


def test_call_context_parameter_is_not_in_the_schema() -> None:
    """The `CallContext` parameter is injected, so the model never sees it."""

    def whoami(note: str, ctx: CallContext) -> str:
        """Say who acts."""
        return ctx.principal

    spec = tool(whoami)
    assert list(spec.input_schema["properties"]) == ["note"]
    assert spec.input_schema["required"] == ["note"]
    assert spec.context_param == "ctx"


def test_parameter_without_annotation_is_a_definition_error() -> None:
    """Every argument needs a type, or it cannot be validated."""

    def loose(x, y: int) -> int:  # type: ignore[no-untyped-def]
        """Loose."""
        return y

    with pytest.raises(DefinitionError, match="'x'"):
        tool(loose)


def test_async_function_is_marked_async() -> None:
    """An ``async def`` tool is recorded as async; a plain one is not."""

    async def fetch(url: str) -> str:
        """Fetch."""
        return url

    assert tool(fetch).is_async is True
    assert tool(_pack).is_async is False


# -- risk -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("effects", "risk", "expected"),
    [
        ((), None, Risk.WRITE),
        (("read:products",), None, Risk.READ),
        (("read:products", "read:prices"), None, Risk.READ),
        (("read:products", "write:cart"), None, Risk.WRITE),
        (("network:api.example.com",), None, Risk.WRITE),
        (("write:cart",), "write_idempotent", Risk.WRITE_IDEMPOTENT),
        (("read:products",), "write", Risk.WRITE),
    ],
)
def test_risk_defaults_to_write_unless_every_effect_is_a_read(
    effects: tuple[str, ...], risk: str | None, expected: Risk
) -> None:
    """Default risk is ``read`` only when every effect is ``read:``; an explicit risk wins."""
    spec = tool(effects=list(effects), risk=risk)(_pack)
    assert spec.risk is expected
    assert spec.side_effecting is (expected is not Risk.READ)


# -- templates --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "contract",
    [
        {"effects": "write:bag:{colour}"},
        {"effects": "spend:USD={amount}"},
        {"writes": "bag:{bag_id}"},
        {"reads": "item:{itemm}"},
        {"idempotency_key": "{operation_id}"},
        {"effects": "write:bag:{item!r}"},
        {"effects": "write:bag:{item:>10}"},
    ],
)
def test_template_naming_an_unknown_parameter_is_a_definition_error(
    contract: dict[str, Any],
) -> None:
    """Effect, resource and key templates may only name the tool's parameters, plainly."""
    with pytest.raises(DefinitionError):
        tool(**contract)(_pack)


def test_effect_without_kind_and_resource_is_a_definition_error() -> None:
    """An effect must read ``kind:resource``."""
    with pytest.raises(DefinitionError, match="kind and a resource"):
        tool(effects="shopping")(_pack)


def test_effect_templates_expand_on_arguments_with_a_quantity() -> None:
    """``spend:{currency}={total}`` expands to the currency's value and the total as quantity."""

    def pay(total: float, currency: Literal["USD", "EUR"]) -> None:
        """Pay."""

    spec = tool(effects=["spend:{currency}={total}", "write:ledger"])(pay)
    effects = spec.required_effects({"total": 12.5, "currency": "EUR"})
    assert [(e.name, e.quantity) for e in effects] == [("spend:EUR", 12.5), ("write:ledger", None)]


def test_context_parameter_cannot_be_used_in_a_template() -> None:
    """The injected context is not an argument, so no template may name it."""

    def whoami(note: str, ctx: CallContext) -> str:
        """Who."""
        return note

    with pytest.raises(DefinitionError):
        tool(effects="write:notes:{ctx}")(whoami)


# -- versions ----------------------------------------------------------------------------


def _versioned(**contract: Any) -> ToolSpec:
    base: dict[str, Any] = {"name": "pack", "effects": "write:bag", "writes": "bag:{item}"}
    base.update(contract)
    return tool(**base)(_pack)


def test_version_is_the_same_for_the_same_contract() -> None:
    """Defining the same tool twice gives the same version."""
    assert _versioned().version == _versioned().version
    assert len(_versioned().version) >= 8


@pytest.mark.parametrize(
    "change",
    [
        {"name": "pack2"},
        {"effects": "write:box"},
        {"effects": ["write:bag", "spend:USD"]},
        {"writes": "bag:{size}"},
        {"reads": "shelf:{item}"},
        {"risk": "write_idempotent"},
        {"idempotency_key": "{item}"},
    ],
)
def test_version_changes_when_the_declared_contract_changes(change: dict[str, Any]) -> None:
    """Name, effects, resources, risk and idempotency key are all part of the version."""
    assert _versioned(**change).version != _versioned().version


def test_version_changes_when_the_schema_changes() -> None:
    """A parameter whose type changes gives a different version."""

    def pack_a(item: str) -> str:
        """Pack."""
        return item

    def pack_b(item: int) -> str:
        """Pack."""
        return str(item)

    assert tool(name="pack")(pack_a).version != tool(name="pack")(pack_b).version


def test_version_does_not_depend_on_the_function_object() -> None:
    """Two different functions with the same name, schema and contract share a version."""

    def make() -> ToolSpec:
        def pack(item: str) -> str:
            """Pack."""
            return item

        return tool(effects="write:bag")(pack)

    first, second = make(), make()
    assert first.fn is not second.fn
    assert first.version == second.version


def test_version_is_stable_across_processes() -> None:
    """The version is a content hash: two interpreters with different hash seeds agree."""
    program = (
        "from callgate import tool\n"
        "def pack(item: str, count: int = 1) -> str:\n"
        "    '''Pack.'''\n"
        "    return item\n"
        "print(tool(effects=['write:bag:{item}'], writes='bag:{item}')(pack).version)\n"
    )
    versions = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", program],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            cwd=REPO,
        )
        versions.add(out.stdout.strip())
    assert len(versions) == 1
    assert versions != {""}


def test_version_is_recorded_on_observations() -> None:
    """Each observation of an admitted call carries the version of the tool it ran under."""
    from callgate import Authority, Gate, ToolCall

    spec = tool(name="pack", effects="write:bag")(_pack)
    run = Gate(Registry([spec])).run(authority=Authority(principal="p", grants=["write:bag"]))
    obs = run.submit([ToolCall(id="c1", name="pack", arguments={"item": "x", "size": "small"})])
    assert obs[0].tool_version == spec.version
    record = run.gate.ledger.get_call(run.id, "c1")
    assert record is not None
    assert record.tool_version == spec.version
    assert json.loads(record.arguments) == {"item": "x", "size": "small", "mode": "fast"}


def test_a_misspelt_risk_names_the_tool_and_the_risks() -> None:
    """``risk="reed"`` is refused where it is declared, naming the tool and the allowed values."""
    from callgate import Registry
    from callgate.errors import DefinitionError

    registry = Registry()
    with pytest.raises(DefinitionError) as caught:

        @registry.tool(risk="reed")  # type: ignore[arg-type]
        def lookup() -> str:
            """Look something up."""
            return "x"

    text = str(caught.value)
    assert "'lookup'" in text
    assert "'reed'" in text
    assert "write_idempotent" in text

"""What the provider tests share: a small shop registry, a gate, payloads, SDK checks."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from callgate import Authority, Gate, OutcomeUnknown, Registry, Run, ToolFailure

PAYLOADS = Path(__file__).parent / "payloads"


def payload(name: str) -> Any:
    """A recorded provider payload: ``.json`` decoded, ``.jsonl`` as a list, else text."""
    path = PAYLOADS / name
    text = path.read_text(encoding="utf-8")
    if name.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if name.endswith(".json"):
        return json.loads(text)
    return text


def shop_registry() -> Registry:
    """Four tools whose outcomes cover ok, error and unknown."""
    registry = Registry()

    @registry.tool(effects="read:weather")
    def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict[str, Any]:
        """Current weather for a city.

        Args:
            city: City name, e.g. "Paris".
            unit: Temperature unit.
        """
        return {"city": city, "temperature": 21 if unit == "c" else 70, "unit": unit}

    @registry.tool(effects="write:cart")
    def add_to_cart(
        cart_id: str, sku: str, quantity: Annotated[int, Field(ge=1, le=10)] = 1
    ) -> str:
        """Add an item to a cart."""
        return f"added {quantity} x {sku} to {cart_id}"

    @registry.tool(effects="write:orders")
    def cancel_order(order_id: str) -> str:
        """Cancel an order that has not shipped."""
        raise ToolFailure(f"order {order_id} has already shipped and cannot be cancelled")

    @registry.tool(effects="spend:USD")
    def charge_card(amount_cents: int) -> str:
        """Charge the customer's card."""
        raise OutcomeUnknown("the payment service did not answer")

    return registry


def shop_run(*, repair: bool = True) -> Run:
    """A run on the shop registry with every effect granted."""
    gate = Gate(shop_registry(), repair=repair)
    grants = ["read:weather", "write:cart", "write:orders", "spend:USD"]
    return gate.run(authority=Authority(principal="tester", grants=grants))


def sdk_accepts(type_: Any, value: Any) -> None:
    """Assert the SDK's request type accepts ``value`` as it is, with no unknown keys.

    Pydantic drops keys a TypedDict does not declare and validates iterables
    lazily; consuming everything and comparing with the input catches both.
    """
    adapter = TypeAdapter(type_)  # keep it alive: the lazy iterators refer to it
    validated = _materialize(adapter.validate_python(value))
    assert validated == _materialize(value)


def _materialize(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _materialize(v) for k, v in value.items()}
    if isinstance(value, list | tuple | Iterator):
        return [_materialize(v) for v in value]
    return value


def split_at(text: str, cuts: list[int]) -> list[str]:
    """``text`` cut at the given positions (taken modulo its length + 1) into fragments."""
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


def without_none(value: Any) -> Any:
    """``value`` with every ``None`` field removed, recursively (response → request shape)."""
    if isinstance(value, Mapping):
        return {k: without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_none(v) for v in value]
    return value


def json_values() -> Any:
    """A hypothesis strategy for arbitrary JSON values."""
    from hypothesis import strategies as st

    scalars = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=20)
        | st.sampled_from(KEYS)
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), inner, max_size=5)
        ),
        max_leaves=25,
    )


# Keys the provider formats read, so that arbitrary JSON reaches deep into extraction.
KEYS = [
    "choices",
    "message",
    "tool_calls",
    "function",
    "name",
    "arguments",
    "id",
    "type",
    "content",
    "refusal",
    "finish_reason",
    "function_call",
    "delta",
    "index",
    "output",
    "call_id",
    "status",
    "incomplete_details",
    "reason",
    "text",
    "input",
    "stop_reason",
    "tool_use",
    "candidates",
    "parts",
    "functionCall",
    "args",
    "finishReason",
    "responseId",
    "content_block",
    "partial_json",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "input_json_delta",
    "thought",
]

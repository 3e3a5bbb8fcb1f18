"""What the grammar tests share: tool registries, a random walk through a matcher with the
byte-level tokenizer, the gate's verdict on an output, and valid arguments drawn from a schema."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from enum import Enum
from typing import Annotated, Any, Literal

from hypothesis import strategies as st
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from callgate import Authority, Gate, MemoryLedger, Registry, Stage, Status
from callgate.grammar import BYTE_EOS, allowed_tokens, byte_tokenizer, matcher
from callgate.providers import text


class Colour(Enum):
    """An enum the schema writes as its values."""

    RED = "red"
    GREEN = "green"


class Address(BaseModel):
    """A nested model: a closed object in the schema."""

    city: str
    street: Annotated[str, Field(min_length=1, max_length=12)]
    unit: int | None = None


class Line(TypedDict):
    """A TypedDict item of a list."""

    sku: str
    qty: Annotated[int, Field(ge=1, le=9)]


_REGISTRIES: dict[str, Registry] = {}


def plain_registry() -> Registry:
    """Tools whose schemas use only keywords every grammar target enforces (built once)."""
    if "plain" not in _REGISTRIES:
        _REGISTRIES["plain"] = _plain()
    return _REGISTRIES["plain"]


def bounded_registry() -> Registry:
    """Tools with patterns and open-ended numeric bounds: only llguidance enforces these."""
    if "bounded" not in _REGISTRIES:
        _REGISTRIES["bounded"] = _bounded()
    return _REGISTRIES["bounded"]


def _plain() -> Registry:
    registry = Registry()

    @registry.tool(effects="read:x")
    def get_order(order_id: str, verbose: bool = False) -> str:
        """Look up an order."""
        return "ok"

    @registry.tool(effects="read:x")
    def ship(
        order_id: str,
        address: Address,
        lines: Annotated[list[Line], Field(min_length=1, max_length=3)],
        colour: Colour = Colour.RED,
        speed: Literal["slow", "fast"] = "slow",
        note: str | None = None,
    ) -> str:
        """Ship an order."""
        return "ok"

    @registry.tool(effects="read:x")
    def measure(
        weight: float,
        count: int,
        labels: dict[str, int] | None = None,
        point: tuple[int, str] | None = None,
        ratio: float = 0.5,
    ) -> str:
        """Measure a parcel."""
        return "ok"

    @registry.tool(effects="read:x")
    def ping() -> str:
        """No arguments at all."""
        return "ok"

    return registry


def _bounded() -> Registry:
    registry = Registry()

    @registry.tool(effects="read:x")
    def refund(
        order_id: Annotated[str, Field(pattern=r"^o-[0-9]{1,4}$")],
        amount: Annotated[float, Field(gt=0, le=500)],
        count: Annotated[int, Field(ge=0)] = 0,
        step: Annotated[float, Field(multiple_of=0.5, ge=0, le=10)] = 0,
    ) -> str:
        """Refund part of an order."""
        return "ok"

    @registry.tool(effects="read:x")
    def fetch(url: Annotated[str, Field(pattern=r"^https://[a-z0-9.-]+(/.*)?$")]) -> str:
        """Fetch a page."""
        return "ok"

    return registry


# -- walking the matcher ---------------------------------------------------------------

_CLOSERS = (ord('"'), ord("]"), ord("}"), BYTE_EOS)


_PRISTINE: dict[str, Any] = {}


def fresh_matcher(grammar: str) -> Any:
    """A matcher of ``grammar`` at its start (a copy of one built once: building is slow)."""
    if grammar not in _PRISTINE:
        _PRISTINE[grammar] = matcher(grammar, byte_tokenizer())
    return _PRISTINE[grammar].deep_copy()


def random_walk(grammar: str, rnd: random.Random, max_steps: int = 1500) -> bytes | None:
    """A random string the grammar's matcher accepts, byte by byte, or None if the walk
    was still going after ``max_steps`` bytes. Closing bytes are favoured so walks end."""
    tok = byte_tokenizer()
    found = fresh_matcher(grammar)
    out = bytearray()
    for _ in range(max_steps):
        allowed = allowed_tokens(found, tok.vocab_size)
        assert allowed, f"the matcher allows nothing after {bytes(out)!r}"
        closers = [t for t in allowed if t in _CLOSERS]
        token = rnd.choice(closers) if closers and rnd.random() < 0.3 else rnd.choice(allowed)
        if token == BYTE_EOS:
            assert found.is_accepting()
            return bytes(out)
        assert found.consume_token(token), found.get_error()
        out.append(token)
    return None


def accepts(grammar: str, output: str) -> bool:
    """Whether the grammar's matcher accepts exactly ``output`` (then the end token)."""
    found = fresh_matcher(grammar)
    return found.consume_tokens(list(output.encode())) and found.is_accepting()


# -- the gate's verdict ----------------------------------------------------------------


def gate_rejections(registry: Registry, output: str) -> list[tuple[str, str]]:
    """(stage, content) of every parse or schema rejection the gate gives ``output``,
    read as a local model's text (the Hermes tags) and submitted to a run."""
    extraction = text.extract(output)
    found = [(o.stage.value, o.content) for o in extraction.rejected if o.stage in _SHAPE_STAGES]
    if not extraction.calls:
        return found or [("parse", "no call was found in the output")]
    with Gate(registry, ledger=MemoryLedger()) as gate:
        run = gate.run(authority=Authority(principal="p", grants=["read:*"]))
        for obs in run.submit(list(extraction.calls)):
            if obs.status is Status.REJECTED and obs.stage in _SHAPE_STAGES:
                found.append((obs.stage.value, obs.content))
    return found


_SHAPE_STAGES = (Stage.PARSE, Stage.VALIDATE)


# -- valid arguments from a schema -------------------------------------------------------

_TEXT = st.text(max_size=12)


def from_schema(schema: Any, defs: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid under ``schema`` (the subset of JSON Schema the test tools use)."""
    if "$ref" in schema:
        return st.deferred(lambda: from_schema(defs[schema["$ref"].rsplit("/", 1)[-1]], defs))
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([from_schema(s, defs) for s in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "string":
        return st.text(
            min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 12), 12)
        )
    if kind == "integer":
        low = schema.get("minimum", -(10**12))
        high = schema.get("maximum", 10**12)
        return st.integers(low, high)
    if kind == "number":
        return st.floats(-1e9, 1e9, allow_nan=False) | st.integers(-(10**6), 10**6)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        if "prefixItems" in schema:
            return st.tuples(*[from_schema(s, defs) for s in schema["prefixItems"]]).map(list)
        return st.lists(
            from_schema(schema.get("items", {}), defs),
            min_size=schema.get("minItems", 0),
            max_size=min(schema.get("maxItems", 3), 3),
        )
    if kind == "object":
        props = schema.get("properties", {})
        if not props:
            extra = schema.get("additionalProperties", {})
            if extra is False:
                return st.just({})
            return st.dictionaries(_TEXT, from_schema(extra, defs), max_size=3)
        required = set(schema.get("required", ()))
        fields = {name: from_schema(sub, defs) for name, sub in props.items() if name in required}
        optional = {
            name: from_schema(sub, defs) for name, sub in props.items() if name not in required
        }
        return st.fixed_dictionaries(fields, optional=optional).map(
            lambda d: {k: d[k] for k in props if k in d}  # the schema's key order
        )
    raise AssertionError(f"the test generator does not know {schema!r}")


def written(name: str, arguments: Mapping[str, Any]) -> str:
    """A call as the grammar writes JSON: ', ' and ': ' separators, no other whitespace,
    '<' escaped as \\u003c (so that no string can hold the closing tag)."""
    call = {"name": name, "arguments": arguments}
    body = json.dumps(call, ensure_ascii=False, separators=(", ", ": ")).replace("<", "\\u003c")
    return f"<tool_call>{body}</tool_call>"

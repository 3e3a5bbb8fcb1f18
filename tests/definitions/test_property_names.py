"""Argument names that are words of JSON Schema, Python or Pydantic work wherever tools are
defined (issue 26): ``type``, ``properties``, ``$ref``, ``class``, ``model_config``...

A schema walker that takes a property *name* for a keyword crashes on it (``type`` made
`seal` raise ``TypeError: unhashable type: 'dict'``), drops it (``$defs``), or skips what
is under it (a format under a property named ``default`` went unchecked). Each path a tool
is defined by is checked: it registers, every export keeps the name, and a valid call
using the name is accepted by a real gate and reaches the handler under that name.
"""

from __future__ import annotations

import inspect
import json
import keyword
from collections.abc import Iterator, Mapping
from typing import Annotated, Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, create_model

from callgate import (
    Authority,
    DefinitionError,
    Gate,
    MemoryLedger,
    Observation,
    Policy,
    Registry,
    Status,
    ToolCall,
    ToolSpec,
    allow,
    tool,
)
from callgate.grammar import tool_grammar
from callgate.lint import lint
from callgate.providers import anthropic, gemini, openai_chat, openai_responses, text
from callgate.providers import mcp as mcp_export
from callgate.schema import inline_refs, strict_schema, subschemas
from grammar.support import accepts, written

pytestmark = pytest.mark.timeout(120)

JSON_SCHEMA_WORDS = (
    "type",
    "properties",
    "items",
    "enum",
    "format",
    "required",
    "default",
    "title",
    "description",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "$ref",
    "$defs",
    "definitions",
    "additionalProperties",
    "patternProperties",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "multipleOf",
    "minLength",
    "maxItems",
    "uniqueItems",
    "prefixItems",
    "contains",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "propertyNames",
    "unevaluatedProperties",
    "examples",
    "example",
    "nullable",
    "readOnly",
    "deprecated",
    "$schema",
    "$id",
    "$anchor",
    "$comment",
    "discriminator",
    "xml",
    "x-extension",
)
PYTHON_WORDS = (
    *keyword.kwlist,
    *(w for w in keyword.softkwlist if w != "_"),
    "id",
    "list",
    "dict",
    "self",
    "cls",
    "str",
    "object",
    "print",
    "open",
    "super",
    "len",
    "hash",
    "vars",
)
PYDANTIC_WORDS = (
    "model_config",
    "model_fields",
    "model_dump",
    "schema",
    "json",
    "copy",
    "validate",
    "construct",
    "fields",
    # pydantic-core's own words in a core schema
    "metadata",
    "ref",
    "cls",
    "config",
    "choices",
    "serialization",
    "schema_ref",
)
NAMES = tuple(dict.fromkeys((*JSON_SCHEMA_WORDS, *PYTHON_WORDS, *PYDANTIC_WORDS)))
names = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True)

GRANTS = ("call:*", "read:*", "write:*", "network:*")


def _python_parameter(name: str) -> bool:
    """Whether ``name`` can be a Python parameter and a Pydantic field as it is."""
    return (
        name.isidentifier()
        and not keyword.iskeyword(name)
        and not name.startswith(("_", "model_"))
        and not hasattr(BaseModel, name)
    )


def _submit(spec: ToolSpec | list[ToolSpec], arguments: dict[str, Any]) -> Observation:
    """A valid call through a real gate (policy, ledger, validation, execution)."""
    specs = spec if isinstance(spec, list) else [spec]
    gate = Gate(Registry(specs), policy=Policy([allow("*")]), ledger=MemoryLedger())
    run = gate.run(authority=Authority(principal="p", grants=GRANTS))
    (obs,) = run.submit([ToolCall(id="c1", name=specs[0].name, arguments=arguments)])
    assert obs.status is Status.OK, obs.content
    return obs


def _exported_properties(spec: ToolSpec) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The top-level ``properties`` of each export of ``spec``, by export."""
    [chat] = openai_chat.tool_definitions([spec])
    yield "openai chat", chat["function"]["parameters"]["properties"]
    [responses] = openai_responses.tool_definitions([spec])
    yield "openai responses", responses["parameters"]["properties"]
    [claude] = anthropic.tool_definitions([spec])
    yield "anthropic", claude["input_schema"]["properties"]
    [declaration] = gemini.tool_definitions([spec])
    yield "gemini", declaration["parameters"]["properties"]
    [mcp_tool] = mcp_export.tool_definitions([spec])
    yield "mcp", mcp_tool["inputSchema"]["properties"]
    [template] = text.tool_definitions([spec])
    yield "text (chat templates)", template["function"]["parameters"]["properties"]
    yield "strict", strict_schema(spec.input_schema)["properties"]
    yield "inlined", inline_refs(spec.input_schema)["properties"]
    call = tool_grammar([spec]).json_schema()
    yield "grammar", call["anyOf"][0]["properties"]["arguments"]["properties"]


def _check_everywhere(spec: ToolSpec, wire_names: list[str], arguments: dict[str, Any]) -> None:
    """Every export keeps each name; lint and the grammars are written; the grammar
    accepts the valid call."""
    for export, properties in _exported_properties(spec):
        assert list(properties) == list(spec.input_schema["properties"]), export
        for name in wire_names:
            assert name in properties, (export, name)
    [declaration] = gemini.tool_definitions([spec])
    refs = [w for w, n in subschemas(declaration["parameters"]) if isinstance(n.get("$ref"), str)]
    assert refs == [], "Gemini takes no references: each must be inlined"
    untyped = [n for n, p in declaration["parameters"]["properties"].items() if "type" not in p]
    assert untyped == [], "a reference dropped instead of inlined leaves a property untyped"
    [chat] = openai_chat.tool_definitions([spec])
    [claude] = anthropic.tool_definitions([spec])
    for exported in (chat["function"]["parameters"], claude["input_schema"]):
        jsonschema.Draft202012Validator.check_schema(exported)
    if chat["function"]["strict"]:
        assert set(chat["function"]["parameters"]["required"]) == set(wire_names)
    report = lint([spec])
    assert all(f.rule != "CG100" for f in report.findings)
    grammar = tool_grammar([spec])
    text = grammar.gbnf()
    for name in wire_names:
        assert json.dumps(json.dumps(name))[1:-1] in text or json.dumps(name) in text, name
    grammar.lark()
    assert accepts(grammar.llguidance(strict=False), written(spec.name, arguments))


# -- the decorator and Pydantic models -------------------------------------------------


def _decorated(wire_names: list[str]) -> ToolSpec:
    """``@tool`` on a function taking each name: as itself where Python and Pydantic allow
    it, otherwise as a parameter ``p<i>`` whose schema name is the name (an alias)."""
    parameters = []
    for i, name in enumerate(wire_names):
        if _python_parameter(name):
            parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY))
        else:
            parameters.append(
                inspect.Parameter(
                    f"p{i}",
                    inspect.Parameter.KEYWORD_ONLY,
                    annotation=Annotated[str, Field(alias=name)],
                )
            )
    annotations = {p.name: p.annotation if p.annotation is not p.empty else str for p in parameters}

    def echo(**given: Any) -> dict[str, Any]:
        return given

    echo.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [p.replace(annotation=annotations[p.name]) for p in parameters]
    )
    echo.__annotations__ = annotations
    return tool(name="echo")(echo)


@settings(max_examples=40, deadline=None)
@given(names)
def test_a_decorated_tool_takes_any_name(wire_names: list[str]) -> None:
    """A function's parameter named ``type``, ``json`` or ``self`` (or, by an alias, ``class``
    or ``$ref``) registers, exports under that name and is called with the value."""
    spec = _decorated(wire_names)
    arguments = {name: f"v-{i}" for i, name in enumerate(wire_names)}
    obs = _submit(spec, arguments)
    fields = [n if _python_parameter(n) else f"p{i}" for i, n in enumerate(wire_names)]
    assert obs.result == {field: f"v-{i}" for i, field in enumerate(fields)}
    _check_everywhere(spec, wire_names, arguments)


def _model(wire_names: list[str]) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for i, name in enumerate(wire_names):
        if _python_parameter(name):
            fields[name] = (str, ...)
        else:
            fields[f"f{i}"] = (str, Field(alias=name))
    return create_model("Named", **fields)


@settings(max_examples=40, deadline=None)
@given(names)
def test_a_pydantic_model_argument_takes_any_field_name(wire_names: list[str]) -> None:
    """A model whose fields are named ``type``, ``required``... (or aliased to ``class``,
    ``$defs``) is a nested object that keeps its names and validates."""
    model = _model(wire_names)

    def echo(item: Any) -> dict[str, Any]:
        return dict(item.model_dump(by_alias=True))

    echo.__annotations__ = {"item": model, "return": dict[str, Any]}
    spec = tool(name="echo")(echo)
    inner = {name: f"v-{i}" for i, name in enumerate(wire_names)}
    obs = _submit(spec, {"item": inner})
    assert obs.result == inner
    _check_everywhere(spec, ["item"], {"item": inner})
    nested = openai_chat.tool_definitions([spec])[0]["function"]["parameters"]
    target = nested["properties"]["item"]
    if "$ref" in target:
        target = nested["$defs"][target["$ref"].rsplit("/", 1)[-1]]
    assert list(target["properties"]) == wire_names


def test_a_parameter_pydantic_reserves_is_a_definition_error_that_says_what_to_do() -> None:
    """``model_config`` cannot be a Pydantic field: the decorator says so and how to name it
    (it raised a bare TypeError or ValueError)."""
    for name in ("model_config", "model_dump"):
        namespace: dict[str, Any] = {}
        exec(f"def f({name}: str) -> str:\n    return {name}", namespace)
        with pytest.raises(DefinitionError, match=rf"{name}.*alias"):
            tool(namespace["f"])


# -- tools defined by a JSON Schema ----------------------------------------------------


SHAPES = ("string", "date", "ref", "oldref", "nested", "array", "nullable")
"""How a property is typed: ``ref`` refers to ``$defs`` and ``oldref`` to ``definitions``
(draft-07's word, still read), each under the property's own name."""


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _property(name: str, shape: str, wire_names: list[str]) -> dict[str, Any]:
    if shape == "date":
        return {"type": "string", "format": "date"}
    if shape == "ref":
        return {"$ref": f"#/$defs/{_escape(name)}"}
    if shape == "oldref":
        return {"$ref": f"#/definitions/{_escape(name)}"}
    if shape == "nested":
        return {
            "type": "object",
            "properties": {n: {"type": "string"} for n in wire_names},
            "required": list(wire_names),
            "additionalProperties": False,
        }
    if shape == "array":
        return {"type": "array", "items": {"type": "string", "minLength": 1}}
    if shape == "nullable":
        return {"anyOf": [{"type": "string"}, {"type": "null"}]}
    return {"type": "string"}


def _value(shape: str, wire_names: list[str], i: int) -> Any:
    if shape == "date":
        return "2026-02-28"
    if shape in ("ref", "oldref"):
        return {"at": f"v-{i}"}
    if shape == "nested":
        return {n: f"w-{j}" for j, n in enumerate(wire_names)}
    if shape == "array":
        return [f"v-{i}"]
    return f"v-{i}"


def _invalid(shape: str) -> Any:
    """A value the property's own schema refuses."""
    refused = {"date": "2026-02-30", "ref": {"at": 5}, "oldref": {"at": 5}, "nested": {}}
    return {**refused, "array": [""]}.get(shape, 7)


def schema_with(wire_names: list[str], shapes: list[str]) -> dict[str, Any]:
    """An arguments schema with one property per name, of the shape drawn for it."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            n: _property(n, s, wire_names) for n, s in zip(wire_names, shapes, strict=True)
        },
        "required": list(wire_names),
    }
    for key, shape in (("$defs", "ref"), ("definitions", "oldref")):
        defs = {
            name: {
                "type": "object",
                "properties": {"at": {"type": "string"}},
                "required": ["at"],
                "additionalProperties": False,
            }
            for name, drawn in zip(wire_names, shapes, strict=True)
            if drawn == shape
        }
        if defs:
            schema[key] = defs
    return schema


named_shapes = names.flatmap(
    lambda ns: st.tuples(
        st.just(ns), st.lists(st.sampled_from(SHAPES), min_size=len(ns), max_size=len(ns))
    )
)


@settings(max_examples=60, deadline=None)
@given(named_shapes)
def test_a_schema_tool_takes_any_property_name(drawn: tuple[list[str], list[str]]) -> None:
    """`Registry.add_schema_tool` with properties named like keywords (strings, formats,
    references to ``$defs`` of the same name, nested objects, arrays, nullables): the
    schema's own checks still apply under each name, and a valid call runs."""
    wire_names, shapes = drawn
    schema = schema_with(wire_names, shapes)
    received: list[dict[str, Any]] = []

    def echo(**given: Any) -> str:
        received.append(given)
        return "ok"

    registry = Registry()
    spec = registry.add_schema_tool("echo", "Echo the arguments.", schema, echo)
    arguments = {
        n: _value(s, wire_names, i) for i, (n, s) in enumerate(zip(wire_names, shapes, strict=True))
    }
    _submit(spec, arguments)
    assert received == [arguments]
    _check_everywhere(spec, wire_names, arguments)
    for name, shape in zip(wire_names, shapes, strict=True):
        if shape == "nullable":
            continue
        gate = Gate(registry, policy=Policy([allow("*")]), ledger=MemoryLedger())
        run = gate.run(authority=Authority(principal="p", grants=GRANTS))
        (bad,) = run.submit(
            [ToolCall(id="c2", name="echo", arguments={**arguments, name: _invalid(shape)})]
        )
        assert bad.status is Status.REJECTED, (name, shape)
        assert bad.stage.value == "validate"
        fields = [str(d.get("field", "")) for d in bad.details]
        assert any(f == name or f.startswith((f"{name}[", f"{name}.")) for f in fields), fields
    assert len(received) == 1


def test_a_format_under_a_property_named_like_a_data_keyword_is_still_known() -> None:
    """A property named ``default`` or ``enum`` holds a schema, not data: a format callgate
    does not know inside it is refused like anywhere else (it was skipped unseen)."""
    for name in ("default", "enum", "const", "examples", "example"):
        schema = {"type": "object", "properties": {name: {"type": "string", "format": "sku"}}}
        with pytest.raises(DefinitionError, match="sku"):
            Registry().add_schema_tool("t", "d", schema, lambda **a: None)


def test_a_default_value_shaped_like_a_schema_is_left_alone() -> None:
    """A ``default`` that happens to look like a schema (``{"type": "object", ...}``) is data:
    no export rewrites it (strict mode would have added ``required`` to it)."""
    data = {"type": "object", "properties": {"a": {"type": "string"}}, "title": "kept"}
    schema = {
        "type": "object",
        "properties": {"options": {"type": "object", "default": data}},
    }
    spec = Registry().add_schema_tool("t", "d", schema, lambda **a: None)
    assert spec.input_schema["properties"]["options"]["default"] == data
    inlined = inline_refs(spec.input_schema)
    assert inlined["properties"]["options"]["default"] == data


def test_a_default_value_holding_a_title_keeps_it_in_the_export() -> None:
    """Pydantic's titles are dropped from schemas, never from data: a default value with a
    ``title`` key is exported as it is."""

    def label(style: dict[str, str] = {"title": "Dr", "type": "formal"}) -> str:  # noqa: B006
        return style["title"]

    spec = tool(label)
    assert spec.input_schema["properties"]["style"]["default"] == {"title": "Dr", "type": "formal"}


# -- OpenAPI: query parameters and body properties, against a real echo service --------


async def _echo_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An HTTP service that answers with the query and JSON body it received."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    from urllib.parse import parse_qsl

    answer = {
        "query": parse_qsl(scope["query_string"].decode(), keep_blank_values=True),
        "body": json.loads(body) if body else None,
    }
    data = json.dumps(answer).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": data})


@pytest.fixture(scope="module")
def echo_service() -> Iterator[str]:
    from servers import serving

    with serving(_echo_app, what="echo service", lifespan="off") as url:
        yield url


def openapi_document(wire_names: list[str], shapes: list[str]) -> dict[str, Any]:
    """A GET taking each name as a query parameter and a POST taking each as a body
    property (references to components of the same name included)."""
    body = schema_with(wire_names, shapes)
    components = {**body.pop("$defs", {}), **body.pop("definitions", {})}
    for prop in body["properties"].values():
        if "$ref" in prop:
            name = prop["$ref"].rsplit("/", 1)[-1]
            prop["$ref"] = f"#/components/schemas/{name}"
    ok = {"200": {"description": "what the service received"}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "echo", "version": "1"},
        "paths": {
            "/echo": {
                "get": {
                    "operationId": "find",
                    "parameters": [
                        {"name": n, "in": "query", "required": True, "schema": {"type": "string"}}
                        for n in wire_names
                    ],
                    "responses": ok,
                },
                "post": {
                    "operationId": "send",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": body}},
                    },
                    "responses": ok,
                },
            }
        },
        "components": {"schemas": components},
    }


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(drawn=named_shapes)
def test_an_openapi_operation_takes_any_parameter_or_body_property_name(
    echo_service: str, drawn: tuple[list[str], list[str]]
) -> None:
    """`import_openapi` on query parameters and body properties named ``type``, ``$ref``,
    ``class``...: both operations import, keep the names, and a valid call reaches the
    service with each value under its name."""
    from callgate.openapi import import_openapi

    wire_names, shapes = drawn
    api = import_openapi(openapi_document(wire_names, shapes), api="echo", base_url=echo_service)
    assert dict(api.skipped) == {}
    tools = {spec.name: spec for spec in api.tools}
    assert set(tools) == {"find", "send"}
    query = {n: f"v-{i}" for i, n in enumerate(wire_names)}
    found = _submit(tools["find"], query)
    assert sorted(map(tuple, found.result["query"])) == sorted(query.items())
    body = {
        n: _value(s, wire_names, i) for i, (n, s) in enumerate(zip(wire_names, shapes, strict=True))
    }
    sent = _submit(tools["send"], body)
    assert sent.result["body"] == body
    for spec, arguments in ((tools["find"], query), (tools["send"], body)):
        _check_everywhere(spec, wire_names, arguments)


# -- MCP: a server's tool whose input schema uses the names ----------------------------


@settings(max_examples=15, deadline=None)
@given(named_shapes)
def test_an_imported_mcp_tool_takes_any_property_name(drawn: tuple[list[str], list[str]]) -> None:
    """`callgate.mcp.import_tools_sync` on a real (in-process) MCP server whose tool's
    properties are named ``type``, ``$defs``, ``class``...: the tool imports, keeps the
    names, and a valid call reaches the server with each value under its name."""
    import mcp_types
    from mcp.server.lowlevel import Server

    from callgate.mcp import import_tools_sync

    wire_names, shapes = drawn
    schema = schema_with(wire_names, shapes)
    received: list[dict[str, Any]] = []

    async def list_tools(ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=[mcp_types.Tool(name="echo", input_schema=schema)])

    async def call_tool(ctx: Any, params: Any) -> mcp_types.CallToolResult:
        received.append(dict(params.arguments or {}))
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(text="done")])

    server = Server("echo", on_list_tools=list_tools, on_call_tool=call_tool)
    [spec] = import_tools_sync(server, server_name="echo")
    arguments = {
        n: _value(s, wire_names, i) for i, (n, s) in enumerate(zip(wire_names, shapes, strict=True))
    }
    _submit(spec, arguments)
    assert received == [arguments]
    _check_everywhere(spec, wire_names, arguments)


@pytest.mark.parametrize("shape", [s for s in SHAPES if s != "nested"])
def test_every_name_at_once_in_each_shape(shape: str) -> None:
    """All the names together, each as a property of one shape (and as a definition under
    ``$defs`` or ``definitions``): hypothesis draws a few at a time, this takes every one
    (nested objects of every name in every name are left to hypothesis: 17,000 fields)."""
    wire_names = list(NAMES)
    shapes = [shape] * len(wire_names)
    schema = schema_with(wire_names, shapes)
    received: list[dict[str, Any]] = []
    spec = Registry().add_schema_tool("echo", "d", schema, lambda **given: received.append(given))
    arguments = {n: _value(shape, wire_names, i) for i, n in enumerate(wire_names)}
    _submit(spec, arguments)
    assert received == [arguments]
    _check_everywhere(spec, wire_names, arguments)


def test_typeddict_and_dataclass_fields_take_keyword_names() -> None:
    """A TypedDict's or a dataclass's fields named ``type``, ``fields``, ``choices``, ``ref``
    (pydantic-core's own words for a schema's parts) validate and export by those names."""
    import dataclasses

    from typing_extensions import TypedDict

    Typed = TypedDict(  # noqa: UP013 - the names are not identifiers of a class body
        "Typed",
        {"type": str, "fields": str, "choices": str, "ref": str, "schema": str, "metadata": str},
    )

    @dataclasses.dataclass
    class Plain:
        type: str
        fields: str
        choices: str
        ref: str

    def both(typed: Any, plain: Any) -> dict[str, Any]:
        return {"typed": dict(typed), "plain": dataclasses.asdict(plain)}

    both.__annotations__ = {"typed": Typed, "plain": Plain, "return": dict[str, Any]}
    spec = tool(both)
    typed = {k: f"t-{k}" for k in ("type", "fields", "choices", "ref", "schema", "metadata")}
    plain = {k: f"p-{k}" for k in ("type", "fields", "choices", "ref")}
    obs = _submit(spec, {"typed": typed, "plain": plain})
    assert obs.result == {"typed": typed, "plain": plain}
    _check_everywhere(spec, ["typed", "plain"], {"typed": typed, "plain": plain})


def test_null_for_any_optional_name_means_its_default_as_the_strict_export_says() -> None:
    """OpenAI's strict mode makes each optional argument nullable and sends ``null`` for
    "not given": under every name, an alias (``class``, ``$ref``) included, the gate reads
    that ``null`` as the default (it rejected it under an alias: the field's Python name
    was looked up instead of the name the model sends)."""
    wire_names = list(NAMES)
    parameters = []
    for i, name in enumerate(wire_names):
        field = name if _python_parameter(name) else f"p{i}"
        annotation: Any = str if field == name else Annotated[str, Field(alias=name)]
        parameters.append(
            inspect.Parameter(
                field, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=f"d-{i}"
            )
        )

    def echo(**given: Any) -> dict[str, Any]:
        return given

    echo.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    echo.__annotations__ = {p.name: p.annotation for p in parameters}
    spec = tool(name="echo")(echo)
    [chat] = openai_chat.tool_definitions([spec])
    exported = chat["function"]["parameters"]
    assert chat["function"]["strict"] is True
    for name in wire_names:
        assert {"type": "null"} in exported["properties"][name]["anyOf"], name
    obs = _submit(spec, dict.fromkeys(wire_names))
    assert obs.result == {p.name: p.default for p in parameters}


@pytest.mark.parametrize("name", ["enum", "const", "examples", "example", "children"])
def test_a_recursive_component_recurses_under_any_property_name(name: str) -> None:
    """OpenAI's document marks recursive components with ``$recursiveAnchor`` and refers back
    with ``$recursiveRef: "#"``; under a property named ``enum`` (a name, not the keyword)
    the reference is followed too, so a bad value deep in the tree is refused."""
    from callgate.openapi import import_openapi

    node = {
        "$recursiveAnchor": True,
        "type": "object",
        "properties": {
            "label": {"type": "string"},
            name: {"type": "array", "items": {"$recursiveRef": "#"}},
        },
        "required": ["label"],
        "additionalProperties": False,
    }
    body = {"type": "object", "properties": {"tree": {"$ref": "#/components/schemas/Node"}}}
    document = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/trees": {
                "post": {
                    "operationId": "plant",
                    "requestBody": {"content": {"application/json": {"schema": body}}},
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
        "components": {"schemas": {"Node": node}},
    }
    api = import_openapi(document, api="t", base_url="http://api.invalid")
    [spec] = api.tools
    gate = Gate(Registry([spec]), policy=Policy([allow("*")]), ledger=MemoryLedger())
    run = gate.run(authority=Authority(principal="p", grants=GRANTS))
    deep = {"tree": {"label": "root", name: [{"label": "leaf", name: [{"label": 5}]}]}}
    (obs,) = run.submit([ToolCall(id="c1", name=spec.name, arguments=deep)])
    assert obs.status is Status.REJECTED, obs.content
    assert obs.stage.value == "validate"

"""Checks every corpus source runs on the registry it built from public definitions.

Two checks, both on a `callgate.Registry`:

* **exports** (`export_failures`): each tool's definition in every provider format
  validates against that provider's own shape. OpenAI Chat Completions and
  Responses and Anthropic Messages through the official SDKs' request types
  (``ChatCompletionFunctionToolParam``, ``FunctionToolParam``, ``ToolParam``,
  validated with Pydantic, no unknown key dropped), MCP through the SDK's
  ``Tool`` model; every parameters schema against the JSON Schema 2020-12
  metaschema; OpenAI strict exports against strict mode's documented rules (every
  object closed, every property required); Gemini, which has no SDK here,
  against `GEMINI_SCHEMA`, a metaschema written from Google's ``Schema``
  reference (its OpenAPI subset). Tool names against each provider's pattern.
* **calls** (`call_failures`): for each tool, a valid call generated from its
  schema (`tests.corpus._generate`, with every optional property and with only
  the required ones) is checked with ``jsonschema`` first, then submitted
  through a real `Gate` run whose tools are the same specs with a no-op handler
  (``dataclasses.replace``: no handler, precondition, verifier, reconciler or
  version reader of the source runs, so nothing has a real effect). A call
  must end ``ok`` (the no-op ran) or be stopped by the tool's own semantic
  checks; any other rejection is a failed check.

`register` wraps one definition's registration: a `DefinitionError` is a refusal
counted by a short, stable reason; anything else is a crash. `check_registry` runs
both checks into a `SourceReport`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import Any, TypeVar

import jsonschema
from pydantic import TypeAdapter, ValidationError

from callgate import (
    Authority,
    DefinitionError,
    Gate,
    MemoryLedger,
    Registry,
    Status,
    ToolCall,
    ToolSpec,
)
from callgate.calls import Observation, Stage
from callgate.providers import anthropic, gemini, mcp, openai_chat, openai_responses, text

from ._generate import NoInstance, instance
from ._report import SourceReport

__all__ = [
    "GEMINI_SCHEMA",
    "call_failures",
    "check_expected_call",
    "check_registry",
    "export_failures",
    "refusal_reason",
    "register",
    "timed",
]

T = TypeVar("T")

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""OpenAI's function name rule (Chat Completions and Responses)."""
ANTHROPIC_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""Anthropic's tool name rule (Messages API, ``tools[].name``)."""
GEMINI_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$")
"""Gemini's ``FunctionDeclaration.name``: a letter or underscore first; letters, digits,
underscores, dots, colons and dashes; at most 64 characters."""
MCP_NAME = re.compile(r"^[a-zA-Z0-9_.-]{1,128}$")
"""MCP's tool name guidance (SEP-986): 1-128 characters of letters, digits, ``_ - .``."""

_INT64 = {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": r"^\d+$"}]}

GEMINI_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$ref": "#/$defs/schema",
    "$defs": {
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "type": {
                    "enum": [
                        "string",
                        "number",
                        "integer",
                        "boolean",
                        "array",
                        "object",
                        "null",
                        "STRING",
                        "NUMBER",
                        "INTEGER",
                        "BOOLEAN",
                        "ARRAY",
                        "OBJECT",
                        "NULL",
                    ]
                },
                "format": {"type": "string"},
                "title": {"type": "string"},
                "description": {"type": "string"},
                "nullable": {"type": "boolean"},
                "enum": {"type": "array", "items": {"type": "string"}},
                "maxItems": _INT64,
                "minItems": _INT64,
                "minProperties": _INT64,
                "maxProperties": _INT64,
                "minLength": _INT64,
                "maxLength": _INT64,
                "pattern": {"type": "string"},
                "minimum": {"type": "number"},
                "maximum": {"type": "number"},
                "properties": {
                    "type": "object",
                    "additionalProperties": {"$ref": "#/$defs/schema"},
                },
                "required": {"type": "array", "items": {"type": "string"}},
                "propertyOrdering": {"type": "array", "items": {"type": "string"}},
                "items": {"$ref": "#/$defs/schema"},
                "anyOf": {"type": "array", "items": {"$ref": "#/$defs/schema"}},
                "default": True,
                "example": True,
            },
        }
    },
}
"""Gemini's ``Schema`` object (ai.google.dev, ``Schema`` in the Gemini API reference) as a
JSON Schema: only its fields, ``type`` one of its ``Type`` values, enums of strings, the
int64 fields as JSON numbers or decimal strings."""

_METASCHEMA = jsonschema.Draft202012Validator(jsonschema.Draft202012Validator.META_SCHEMA)
_GEMINI = jsonschema.Draft202012Validator(GEMINI_SCHEMA)


def _semantic(obs: Observation) -> bool:
    """Rejected by the tool's own checks (the validate stage's second half): the schema held."""
    return (
        obs.status is Status.REJECTED
        and obs.stage is Stage.VALIDATE
        and any(d.get("rule") == "semantic" for d in obs.details)
    )


@cache
def _adapter(kind: str) -> TypeAdapter[Any]:
    """The SDK request type for ``kind``, built once (a TypeAdapter is costly)."""
    if kind == "openai_chat":
        from openai.types.chat import ChatCompletionFunctionToolParam

        return TypeAdapter(ChatCompletionFunctionToolParam)
    if kind == "openai_responses":
        from openai.types.responses import FunctionToolParam

        return TypeAdapter(FunctionToolParam)
    from anthropic.types import ToolParam

    return TypeAdapter(ToolParam)


def _materialize(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _materialize(v) for k, v in value.items()}
    if isinstance(value, list | tuple | Iterator):
        return [_materialize(v) for v in value]
    return value


def _sdk_problem(kind: str, definition: Mapping[str, Any]) -> str | None:
    """Why the SDK's request type refuses ``definition`` or drops part of it, if it does."""
    try:
        validated = _materialize(_adapter(kind).validate_python(definition))
    except ValidationError as exc:
        return f"SDK type refuses it: {exc.errors()[0]['loc']} {exc.errors()[0]['msg']}"
    if validated != _materialize(definition):
        return "SDK type drops or changes keys"
    return None


def _metaschema_problem(schema: Any) -> str | None:
    error = jsonschema.exceptions.best_match(_METASCHEMA.iter_errors(schema))
    if error is None:
        return None
    return f"not a JSON Schema 2020-12 document: {error.message[:160]} at {list(error.path)}"


def _strict_problem(parameters: Mapping[str, Any]) -> str | None:
    """Strict mode's rules: an object root; every object closed with all properties required."""
    if parameters.get("type") != "object":
        return "strict parameters' root is not an object"
    for node in _nodes(parameters):
        if node.get("type") == "object" or "properties" in node:
            props = node.get("properties", {})
            if node.get("additionalProperties") is not False:
                return "strict object without additionalProperties: false"
            if sorted(node.get("required", [])) != sorted(props):
                return "strict object whose properties are not all required"
    return None


_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMAS = ("items", "additionalProperties", "not", "contains")


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    """Every schema in ``node`` by its keywords (a property named ``properties`` or
    ``type`` is a name, not a keyword)."""
    if not isinstance(node, dict):
        return
    yield node
    for key in _SUBSCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            for sub in node[key].values():
                yield from _nodes(sub)
    for key in _SUBSCHEMA_LISTS:
        if isinstance(node.get(key), list):
            for sub in node[key]:
                yield from _nodes(sub)
    for key in _SUBSCHEMAS:
        yield from _nodes(node.get(key))


def _name_problem(name: str, pattern: re.Pattern[str], provider: str) -> str | None:
    return None if pattern.match(name) else f"name {name!r} breaks {provider}'s name rule"


def _openai_chat(spec: ToolSpec, meta: Callable[[Any], str | None]) -> list[str | None]:
    [chat] = openai_chat.tool_definitions([spec])
    function = chat["function"]
    return [
        _sdk_problem("openai_chat", chat),
        _name_problem(function["name"], OPENAI_NAME, "OpenAI"),
        meta(function["parameters"]),
        _strict_problem(function["parameters"]) if function["strict"] else None,
    ]


def _openai_responses(spec: ToolSpec, meta: Callable[[Any], str | None]) -> list[str | None]:
    [responses] = openai_responses.tool_definitions([spec])
    return [
        _sdk_problem("openai_responses", responses),
        meta(responses["parameters"]),
        _strict_problem(responses["parameters"]) if responses["strict"] else None,
    ]


def _anthropic(spec: ToolSpec, meta: Callable[[Any], str | None]) -> list[str | None]:
    [claude] = anthropic.tool_definitions([spec])
    return [
        _sdk_problem("anthropic", claude),
        _name_problem(claude["name"], ANTHROPIC_NAME, "Anthropic"),
        meta(claude["input_schema"]),
    ]


def _gemini(spec: ToolSpec, meta: Callable[[Any], str | None]) -> list[str | None]:
    [declaration] = gemini.tool_definitions([spec])
    problems = [_name_problem(declaration["name"], GEMINI_NAME, "Gemini")]
    if "parameters" in declaration:
        error = jsonschema.exceptions.best_match(_GEMINI.iter_errors(declaration["parameters"]))
        if error is not None:
            problems.append(f"not a Gemini Schema: {error.message[:160]} at {list(error.path)}")
    return problems


def _mcp(spec: ToolSpec, meta: Callable[[Any], str | None]) -> list[str | None]:
    from mcp_types import Tool as McpTool

    [mcp_tool] = mcp.tool_definitions([spec])
    problems: list[str | None] = []
    try:
        McpTool.model_validate(mcp_tool)
    except ValidationError as exc:
        problems.append(f"SDK Tool refuses it: {exc.errors()[0]['msg']}")
    problems += [_name_problem(mcp_tool["name"], MCP_NAME, "MCP"), meta(mcp_tool["inputSchema"])]
    return problems


def _text(spec: ToolSpec, meta: Callable[[Any], str | None]) -> list[str | None]:
    [open_model] = text.tool_definitions([spec])
    return [meta(open_model["function"]["parameters"])]


FORMATS: dict[str, Callable[[ToolSpec, Callable[[Any], str | None]], list[str | None]]] = {
    "openai_chat": _openai_chat,
    "openai_responses": _openai_responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "mcp": _mcp,
    "text": _text,
}
"""Each provider format's check of one tool's export: the problems found (None: fine)."""


def _cached_metaschema() -> Callable[[Any], str | None]:
    """`_metaschema_problem` remembering its answers: most formats export one schema."""
    answers: dict[str, str | None] = {}

    def check(schema: Any) -> str | None:
        key = json.dumps(schema, sort_keys=True, default=str)
        if key not in answers:
            answers[key] = _metaschema_problem(schema)
        return answers[key]

    return check


def definition_failures(spec: ToolSpec, refused: Counter[str] | None = None) -> list[str]:
    """Every way ``spec``'s exports break a provider's shape, ``"<format>: <problem>"``.

    Each format is checked on its own. A format whose export raises `DefinitionError`
    (a schema it cannot express, said with a reason) is counted in ``refused`` as
    ``export refused: <format>: <reason>`` when ``refused`` is given, else it is a
    problem like any other; any other exception from an export is always a problem.
    """
    meta = _cached_metaschema()
    problems: list[str] = []
    for name, check in FORMATS.items():
        try:
            found = check(spec, meta)
        except DefinitionError as exc:
            if refused is None:
                found = [f"export raised DefinitionError: {str(exc)[:200]}"]
            else:
                refused[f"export refused: {name}: {refusal_reason(exc)}"] += 1
                found = []
        except Exception as exc:  # an export that crashes is a finding
            found = [f"export raised {type(exc).__name__}: {str(exc)[:200]}"]
        problems += [f"{name}: {p}" for p in found if p]
    return problems


def export_failures(registry: Registry, refused: Counter[str] | None = None) -> list[str]:
    """``"<tool>: <format>: <problem>"`` for every export that breaks its provider's shape.

    ``refused``, when given, counts the exports a format declined with a reason
    (`definition_failures`); without it those are failures too.
    """
    failures = []
    for spec in registry:
        failures += [f"{spec.name}: {p}" for p in definition_failures(spec, refused)]
    return failures


# -- generated valid calls through the gate --------------------------------------------


def _noop(*args: Any, **kwargs: Any) -> str:
    """Stands in for every handler: the corpus never runs a public tool's effect."""
    return "ok"


def _inert(spec: ToolSpec) -> ToolSpec:
    """``spec`` with a no-op handler and none of the hooks that could reach the world."""
    return dataclasses.replace(
        spec,
        fn=_noop,
        is_async=False,
        precondition=None,
        verify=None,
        reconcile=None,
        resource_version=None,
        preview=None,
    )


_FORMAT_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER


def _generated(spec: ToolSpec) -> tuple[list[dict[str, Any]], str | None]:
    """Distinct valid argument sets for ``spec`` (all properties; required only), or why none."""
    found: list[dict[str, Any]] = []
    why = None
    validator = jsonschema.Draft202012Validator(spec.input_schema, format_checker=_FORMAT_CHECKER)
    for fill in (True, False):
        try:
            arguments = instance(spec.input_schema, fill_optional=fill)
        except (NoInstance, RecursionError) as exc:
            why = f"generator: {str(exc)[:80]}"
            continue
        if not isinstance(arguments, dict):
            why = "generator: arguments are not an object"
            continue
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
        if error is not None:
            why = f"generator: jsonschema says invalid ({error.validator})"
            continue
        if arguments not in found:
            found.append(arguments)
    return found, (None if found else why)


@dataclasses.dataclass(kw_only=True)
class CallTally:
    """What the generated-call check saw."""

    failures: list[str] = dataclasses.field(default_factory=list)
    counts: Counter[str] = dataclasses.field(default_factory=Counter)


def call_failures(registry: Registry, *, batch: int = 50) -> CallTally:
    """Submit generated valid calls for every tool through a real gate with no-op handlers.

    ``counts`` says how many calls ran (``calls ok``), were stopped by a tool's own
    semantic check (``calls semantic``), and for how many tools the generator could
    not build a valid call (``no call: <why>``), which is not counted as a failure.
    """
    tally = CallTally()
    inert = Registry([_inert(spec) for spec in registry])
    gate = Gate(inert, ledger=MemoryLedger())
    pending: list[tuple[ToolCall, str]] = []

    def flush() -> None:
        if not pending:
            return
        trusted = [json.dumps(call.arguments) for call, _ in pending]
        run = gate.run(
            authority=Authority(principal="corpus", grants=["*:*"]),
            trusted=trusted,
            trusted_values=[call.arguments for call, _ in pending],
        )
        observations = run.submit([call for call, _ in pending])
        for (call, shown), obs in zip(pending, observations, strict=True):
            if obs.status is Status.OK:
                tally.counts["calls ok"] += 1
            elif obs.status is Status.REJECTED and _semantic(obs):
                tally.counts["calls semantic"] += 1
            else:
                tally.failures.append(
                    f"{call.name}: valid call {shown} ended {obs.status.value} at "
                    f"{obs.stage.value}: {obs.content[:300]}"
                )
        pending.clear()

    for spec in inert:
        calls, why = _generated(spec)
        if why:
            tally.counts[f"no call: {why}"] += 1
        for arguments in calls:
            call_id = f"corpus-{sum(tally.counts.values())}-{len(pending)}"
            shown = json.dumps(arguments)[:200]
            pending.append((ToolCall(id=call_id, name=spec.name, arguments=arguments), shown))
            if len(pending) >= batch:
                flush()
    flush()
    return tally


# -- a data set's own expected calls ---------------------------------------------------


def uncheckable_formats(schema: Any) -> set[str]:
    """Formats ``schema`` uses that this ``jsonschema`` cannot check (``time``,
    ``date-time``, ``uri`` need packages not installed here): on a value of one of them,
    its "valid" decides nothing."""
    found: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("format"), str):
                found.add(node["format"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found - set(_FORMAT_CHECKER.checkers)


def check_expected_call(
    gate: Gate,
    name: str,
    schema: Mapping[str, Any],
    arguments: dict[str, Any],
    report: SourceReport,
    label: str,
) -> None:
    """Submit a call a data set expects and compare callgate's verdict with jsonschema's.

    ``schema`` is the definition's own parameters schema, as published. A call it
    allows must be accepted (``ok``, or stopped only by the tool's semantic checks); a
    call it forbids must be rejected. A disagreement is a failed check, except a
    rejection on a format ``jsonschema`` cannot check here, which is counted apart.
    ``gate``'s tools must be inert (`call_failures` builds such tools; `register` with a
    no-op handler does too).
    """
    validator = jsonschema.Draft202012Validator(schema, format_checker=_FORMAT_CHECKER)
    valid = validator.is_valid(arguments)
    shown = json.dumps(arguments, ensure_ascii=False)[:200]
    run = gate.run(
        authority=Authority(principal="corpus", grants=["*:*"]),
        trusted=[json.dumps(arguments, ensure_ascii=False)],
        trusted_values=[arguments],
    )
    [obs] = run.submit([ToolCall(id="expected", name=name, arguments=arguments)])
    accepted = obs.status is Status.OK or _semantic(obs)
    formats = uncheckable_formats(schema)
    if valid and accepted:
        report.checked["expected call: valid, accepted"] += 1
    elif not valid and not accepted:
        report.checked["expected call: invalid, rejected"] += 1
    elif valid and formats and "required format" in obs.content:
        listed = ", ".join(sorted(formats))
        report.checked[f"expected call: rejected on a format not checked here ({listed})"] += 1
    elif valid:
        report.checks_failed.append(
            f"{label}: {name}({shown}) is valid by its schema but ended "
            f"{obs.status.value} at {obs.stage.value}: {obs.content[:200]}"
        )
    else:
        report.checks_failed.append(f"{label}: {name}({shown}) is invalid by its schema but ran")


# -- registering definitions and reporting ----------------------------------------------

_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`")
_NUMBER = re.compile(r"\d+")


def refusal_reason(exc: BaseException) -> str:
    """A short, stable phrase for a refusal: quoted names and numbers blanked, one clause."""
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    phrase = _NUMBER.sub("N", _QUOTED.sub("…", message))
    for stop in ("; ", " (", ": write", ". "):
        cut = phrase.find(stop, 20)
        if cut > 0:
            phrase = phrase[:cut]
    return f"{type(exc).__name__}: {phrase[:110]}"


def register(report: SourceReport, label: str, add: Callable[[], T]) -> T | None:
    """Run ``add`` (one definition's registration) and count it on ``report``.

    A `DefinitionError` (callgate refusing with a reason) counts as refused; any
    other exception is a crash, kept with ``label`` and the innermost frames.
    """
    report.definitions += 1
    try:
        result = add()
    except DefinitionError as exc:
        report.refused[refusal_reason(exc)] += 1
        return None
    except Exception as exc:  # a crash is what the corpus exists to find
        report.crashes.append(f"{label}: {crash_text(exc)}")
        return None
    report.imported += 1
    return result


def crash_text(exc: BaseException) -> str:
    """``Type: message`` with the last three frames, for a crash line."""
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    where = " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}" for f in reversed(frames))
    return f"{type(exc).__name__}: {str(exc)[:200]} [{where}]"


def check_registry(registry: Registry, report: SourceReport) -> None:
    """Run the export and generated-call checks on ``registry`` into ``report``.

    A check that itself crashes (a callgate bug) is a crash, not a failed check.
    """
    try:
        report.checks_failed += export_failures(registry, report.checked)
    except Exception as exc:
        report.crashes.append(f"export check: {crash_text(exc)}")
    try:
        tally = call_failures(registry)
    except Exception as exc:
        report.crashes.append(f"call check: {crash_text(exc)}")
        return
    report.checks_failed += tally.failures
    report.checked.update(tally.counts)
    report.checked["exports"] += len(registry)


@contextmanager
def timed(report: SourceReport) -> Iterator[SourceReport]:
    """Time the block into ``report.seconds``."""
    start = time.perf_counter()
    try:
        yield report
    finally:
        report.seconds += time.perf_counter() - start

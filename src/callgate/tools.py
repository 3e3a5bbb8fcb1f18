"""Tools: typed Python functions with a declared contract, and the registry of them.

``@tool`` (or ``registry.tool``) turns a function, sync or async, into a
`ToolSpec`: a name, a description, an arguments model built from the
signature, and the contract the gate enforces (effects, resources, risk,
precondition, postcondition, reconciliation, timeout, result bound).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import hashlib
import inspect
import json
import re
import string
import typing
from collections.abc import Awaitable, Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypedDict, overload

from pydantic import BaseModel
from typing_extensions import Unpack

from callgate.definitions.arguments import UnenforceableSchema, schema_arguments
from callgate.definitions.dialects import Dialect, to_2020_12
from callgate.definitions.formats import FormatCheck
from callgate.definitions.names import tool_name as mapped_tool_name
from callgate.definitions.templates import EffectTemplate, Template
from callgate.effects import Effect
from callgate.errors import DefinitionError
from callgate.schema import (
    ArgumentsModel,
    build_arguments_model,
    has_open_objects,
    json_schema,
    parse_docstring,
    strict_obstacle,
)

if TYPE_CHECKING:
    from callgate.evidence import Evidence

OutputTrust = Any
"""How a tool labels its output (``True``, ``{path: kind}``, a function of one record,
`Owned`/`Designated`). Its exact type is `callgate.authorize.provenance.OutputTrust`, made
of the authorize stage's classes (``Readers``, ``RecordTrust``); the data model stores the
value as given and names no stage, so it is ``Any`` here."""

__all__ = [
    "CallContext",
    "ContractOptions",
    "EffectTemplate",
    "NameTaken",
    "Registry",
    "Risk",
    "Template",
    "ToolSpec",
    "schema_spec",
    "tool",
]

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
DEFAULT_MAX_RESULT_CHARS = 20_000
DEFAULT_KEY_RETENTION_SECONDS = 24 * 3600.0


class Risk(enum.StrEnum):
    """How dangerous it is to run a tool twice."""

    READ = "read"
    """No side effect: safe to retry."""
    WRITE_IDEMPOTENT = "write_idempotent"
    """A side effect that the downstream system deduplicates by idempotency key."""
    WRITE = "write"
    """A side effect that may happen twice if the call is sent twice."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallContext:
    """Trusted values injected into a handler; never part of the schema.

    Annotate one parameter of a tool with this type to receive it. The model
    cannot choose any of these values: the tenant comes from ``context``.
    """

    principal: str
    context: Mapping[str, Any]
    run_id: str
    call_id: str
    tool: str
    idempotency_key: str
    attempt: int = 1
    reported: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    """What the handler reported about the attempt (see `report_transaction`)."""

    def report_transaction(self, transaction_id: str) -> None:
        """Record the downstream system's id for this attempt (a charge id, a message id).

        It is stored with the attempt in the ledger, so that a person or a
        reconcile hook can look the operation up later.
        """
        self.reported["transaction_id"] = str(transaction_id)[:200]


Precondition = Callable[[BaseModel, "Evidence"], str | None]
Verifier = Callable[[BaseModel, Any], bool | Awaitable[bool]]
Reconciler = Callable[[BaseModel, CallContext], Any]
Check = Callable[[BaseModel], None]
Preview = Callable[[BaseModel], str]


def default_effect(tool: str) -> str:
    """The effect of a tool declared without effects: ``call:<tool>``."""
    return f"call:{tool}"


@dataclass(frozen=True, kw_only=True, eq=False)
class ToolSpec:
    """A tool and its contract. Calling it calls the function directly."""

    name: str
    description: str
    fn: Callable[..., Any]
    is_async: bool
    arguments_model: type[ArgumentsModel]
    context_param: str | None
    input_schema: dict[str, Any]
    effects: tuple[EffectTemplate, ...] = ()
    reads: tuple[Template, ...] = ()
    writes: tuple[Template, ...] = ()
    risk: Risk = Risk.WRITE
    precondition: Precondition | None = None
    verify: Verifier | None = None
    reconcile: Reconciler | None = None
    checks: tuple[Check, ...] = ()
    preview: Preview | None = None
    idempotency_key: Template | None = None
    key_retention: float = DEFAULT_KEY_RETENTION_SECONDS
    timeout: float | None = None
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    secret_fields: frozenset[str] = frozenset()
    ordered: bool = False
    max_concurrency: int | None = None
    """Calls of this tool running at once within one batch (None: only the gate's bound)."""
    sinks: Mapping[str, str | None] = field(default_factory=dict)
    """Arguments whose value decides where an effect goes, with an optional kind."""
    output_trust: OutputTrust | None = None
    """Which parts of the output come from a trusted system of record (default: none)."""
    resource_version: Callable[[BaseModel], str | None] | None = None
    """Reads the current version of the resource a call acts on, for approvals."""
    version: str = ""
    null_means_default: frozenset[str] = field(default=frozenset())
    dump_is_canonical: bool = False
    """Whether ``model_dump_json`` is canonical (no free-form objects whose key order varies)."""
    external_name: str | None = None
    """The name the definition gave, when it is not a valid tool name (``billing.refund``)."""

    def __post_init__(self) -> None:
        if not self.effects:
            # Deny by default holds for every tool: one declared without effects needs
            # the effect of calling it, granted like any other (docs/policy.md).
            default = EffectTemplate(default_effect(self.name), tool=self.name, parameters=())
            object.__setattr__(self, "effects", (default,))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    @property
    def strict_obstacle(self) -> str | None:
        """Why this tool's schema cannot be exported in OpenAI's strict mode (None if it can)."""
        return strict_obstacle(self.input_schema)

    @property
    def side_effecting(self) -> bool:
        """True unless the tool is declared read-only."""
        return self.risk is not Risk.READ

    def required_effects(self, arguments: Mapping[str, Any]) -> tuple[Effect, ...]:
        """The effects this call needs, templates expanded on its arguments."""
        return tuple(t.expand(arguments) for t in self.effects)


def _spec_version(spec: ToolSpec) -> str:
    """A stable hash of the tool's name, schema and declared contract."""
    contract = {
        "name": spec.name,
        "description": spec.description,
        "schema": spec.input_schema,
        "effects": [t.text for t in spec.effects],
        "reads": [t.text for t in spec.reads],
        "writes": [t.text for t in spec.writes],
        "risk": spec.risk.value,
        "idempotency_key": spec.idempotency_key.text if spec.idempotency_key else None,
        "sinks": dict(spec.sinks),
    }
    blob = json.dumps(contract, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def sink_declarations(
    tool: str, sinks: Sequence[str] | Mapping[str, str | None], params: Sequence[str]
) -> dict[str, str | None]:
    """Sink declarations as ``{argument: kind or None}``, checked against the parameters."""
    declared = dict(sinks) if isinstance(sinks, Mapping) else dict.fromkeys(sinks)
    for name in declared:
        if name not in params:
            raise DefinitionError(
                f"tool {tool!r}: sink {name!r} is not a parameter; use one of {sorted(params)}"
            )
    return declared


def _as_tuple(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def _is_call_context(annotation: Any) -> bool:
    return annotation is CallContext


def _null_means_default(model: type[ArgumentsModel]) -> frozenset[str]:
    """Optional fields whose type does not itself accept ``None``, by the names the model
    sends (a field's alias where it has one).

    OpenAI strict mode makes such fields nullable; a ``null`` there means
    "not given".
    """
    names = set()
    properties = model.model_json_schema(by_alias=True)["properties"]
    for name, info in model.model_fields.items():
        if info.is_required():
            continue
        # By the name the model sends: a field's alias (``class`` for ``class_``).
        sent = info.alias or name
        schema = properties.get(sent, {})
        accepts_null = schema.get("type") == "null" or any(
            alt.get("type") == "null" for alt in schema.get("anyOf", [])
        )
        if not accepts_null:
            names.add(sent)
    return frozenset(names)


def make_spec(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    **contract: Unpack[ContractOptions],
) -> ToolSpec:
    """Build a `ToolSpec` from a function and its declared contract."""
    _check_options(contract, ContractOptions.__annotations__)
    tool_name = fn.__name__ if name is None else name
    if not TOOL_NAME.fullmatch(tool_name):
        raise DefinitionError(
            f"tool name {tool_name!r} is not allowed: use 1 to 64 letters, digits, '_' or '-' "
            "(the strictest limit among model providers)"
        )
    doc_description, param_docs = parse_docstring(fn)
    model, context_param = build_arguments_model(
        fn, model_name=tool_name, descriptions=param_docs, injected=_is_call_context
    )
    schema = json_schema(model)
    spec = ToolSpec(
        name=tool_name,
        description=(description or doc_description).strip(),
        fn=fn,
        is_async=inspect.iscoroutinefunction(fn),
        arguments_model=model,
        context_param=context_param,
        input_schema=schema,
        null_means_default=_null_means_default(model),
        dump_is_canonical=_dump_is_canonical(schema),
        **_contract(tool_name, tuple(model.model_fields), contract),
    )
    return dataclasses.replace(spec, version=_spec_version(spec))


def _contract(
    tool_name: str, params: tuple[str, ...], options: Mapping[str, Any]
) -> dict[str, Any]:
    """The contract fields of a `ToolSpec`, checked against the tool's parameters.

    One place for every way of defining a tool (a decorated function, a JSON Schema).
    """
    effects = options.get("effects")
    risk = options.get("risk")
    timeout = options.get("timeout")
    max_concurrency = options.get("max_concurrency")
    max_result_chars = options.get("max_result_chars", DEFAULT_MAX_RESULT_CHARS)
    secret_fields = options.get("secret_fields", ())
    idempotency_key = options.get("idempotency_key")
    if timeout is not None and timeout <= 0:
        raise DefinitionError(f"tool {tool_name!r}: timeout must be positive, got {timeout}")
    if max_concurrency is not None and (
        isinstance(max_concurrency, bool)
        or not isinstance(max_concurrency, int)
        or max_concurrency < 1
    ):
        raise DefinitionError(
            f"tool {tool_name!r}: max_concurrency must be a positive integer or None, "
            f"got {max_concurrency!r}"
        )
    if max_result_chars < 100:
        raise DefinitionError(
            f"tool {tool_name!r}: max_result_chars must be at least 100, got {max_result_chars}"
        )
    for secret in secret_fields:
        if secret not in params:
            raise DefinitionError(f"tool {tool_name!r}: secret field {secret!r} is not a parameter")

    def templates(values: str | Sequence[str] | None, what: str) -> tuple[Template, ...]:
        return tuple(
            Template(v, tool=tool_name, parameters=params, what=what) for v in _as_tuple(values)
        )

    effect_templates = tuple(
        EffectTemplate(v, tool=tool_name, parameters=params) for v in _as_tuple(effects)
    )
    if risk is None:
        all_reads = bool(effect_templates) and all(
            t.text.startswith("read:") for t in effect_templates
        )
        resolved_risk = Risk.READ if all_reads else Risk.WRITE
    else:
        try:
            resolved_risk = Risk(risk)
        except ValueError:
            raise DefinitionError(
                f"tool {tool_name!r}: risk {risk!r} is not a risk; use one of "
                f"{[r.value for r in Risk]} (or leave it out: read when every effect is read:)"
            ) from None
    return {
        "effects": effect_templates,
        "reads": templates(options.get("reads"), "reads"),
        "writes": templates(options.get("writes"), "writes"),
        "risk": resolved_risk,
        "precondition": options.get("precondition"),
        "verify": options.get("verify"),
        "reconcile": options.get("reconcile"),
        "checks": tuple(options.get("checks", ())),
        "preview": options.get("preview"),
        "idempotency_key": (
            Template(idempotency_key, tool=tool_name, parameters=params, what="idempotency key")
            if idempotency_key
            else None
        ),
        "key_retention": options.get("key_retention", DEFAULT_KEY_RETENTION_SECONDS),
        "timeout": timeout,
        "max_result_chars": max_result_chars,
        "secret_fields": frozenset(secret_fields),
        "ordered": options.get("ordered", False),
        "max_concurrency": max_concurrency,
        "sinks": sink_declarations(tool_name, options.get("sinks", ()), params),
        "output_trust": options.get("output_trust"),
        "resource_version": options.get("resource_version"),
    }


def _dump_is_canonical(schema: Mapping[str, Any]) -> bool:
    """Whether the model's own JSON dump is canonical: no free-form objects (whose key order
    varies) and no sets (dumped in the order they were built)."""
    return not has_open_objects(schema) and '"uniqueItems"' not in json.dumps(schema)


@overload
def tool(fn: Callable[..., Any], /) -> ToolSpec: ...
@overload
def tool(**contract: Unpack[ToolOptions]) -> Callable[[Callable[..., Any]], ToolSpec]: ...
def tool(
    fn: Callable[..., Any] | None = None, /, **contract: Any
) -> ToolSpec | Callable[[Callable[..., Any]], ToolSpec]:
    """Declare a tool: ``@tool`` or ``@tool(effects=[...], writes=..., ...)``.

    Contract fields:
        effects: effect templates the call needs, e.g. ``"spend:{currency}"``.
        reads / writes: resource templates for the scheduler, e.g. ``"order:{order_id}"``.
        risk: ``read``, ``write_idempotent`` or ``write`` (default: ``write`` unless
            every effect is a ``read:``).
        precondition: ``(args, evidence) -> message | None``; a message means
            the call lacks the evidence it needs.
        verify: ``(args, result) -> bool``, the postcondition, checked against
            authoritative state after the handler returns.
        reconcile: ``(args, ctx) -> result``: look up the authoritative outcome of
            an attempt whose outcome is unknown. Return the result if the effect
            happened; raise `ToolFailure` if it did not; `OutcomeUnknown` if it
            still cannot be told.
        checks: semantic checks ``(args) -> None`` raising `ArgumentError`.
        idempotency_key: a template on business fields (default: run and call id).
        timeout: seconds before the outcome is declared unknown.
        max_result_chars: results longer than this are cut with a marker.
        secret_fields: arguments never written to the ledger or audit in clear.
        sinks: arguments whose value decides where an effect goes (recipient, account,
            URL, path, id of a thing to delete): ``["to"]`` or ``{"file_id": "file"}``
            for a typed identifier. Their values must come from trusted input.
        output_trust: which output comes from a trusted system of record: ``True``,
            ``{"field": "kind"}``, or a function of one output record. A label may be
            ``Readers("user", "keys(shared_with)")``: who may receive that field's value
            (a ``disclose:{argument}`` effect names the recipients; docs/policy.md).
        resource_version: ``(args) -> str``, the current version of the resource the
            call acts on; an approval covers only that version.
        ordered: calls of this tool in one batch run in proposal order, each
            depending on the one before.
        max_concurrency: at most this many calls of this tool run at once in a
            batch (a downstream rate limit, a connection pool).
    """
    if fn is not None:
        return make_spec(fn)
    _check_options(contract)

    def decorate(f: Callable[..., Any]) -> ToolSpec:
        return make_spec(f, **contract)

    return decorate


class ContractOptions(TypedDict, total=False):
    """The contract options every tool takes, however it is defined (see `tool`)."""

    effects: str | Sequence[str] | None
    reads: str | Sequence[str] | None
    writes: str | Sequence[str] | None
    risk: Risk | Literal["read", "write_idempotent", "write"] | None
    precondition: Precondition | None
    verify: Verifier | None
    reconcile: Reconciler | None
    checks: Sequence[Check]
    preview: Preview | None
    idempotency_key: str | None
    key_retention: float
    timeout: float | None
    max_result_chars: int
    secret_fields: Sequence[str]
    ordered: bool
    max_concurrency: int | None
    sinks: Sequence[str] | Mapping[str, str | None]
    output_trust: OutputTrust | None
    resource_version: Callable[[BaseModel], str | None] | None


class ToolOptions(ContractOptions, total=False):
    """The contract options of `tool` and `Registry.tool`: one typed signature for both,
    so a misspelt option (``effect=``) is a type error, and a `DefinitionError` at once."""

    name: str | None
    description: str | None


def _check_options(
    contract: Mapping[str, Any], known: Mapping[str, Any] = ToolOptions.__annotations__
) -> None:
    """A misspelt option fails where the tool is declared, naming the closest option."""
    for option in contract:
        if option not in known:
            near = difflib.get_close_matches(option, known, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise DefinitionError(
                f"unknown tool option {option!r}{hint} (options: {', '.join(sorted(known))})"
            )


# -- tools defined by a JSON Schema ------------------------------------------------

_CONTRACT_OPTIONS = ContractOptions.__annotations__


def schema_spec(
    name: str,
    description: str,
    schema: Mapping[str, Any],
    handler: Callable[..., Any],
    *,
    dialect: Dialect = "2020-12",
    formats: Mapping[str, FormatCheck | None] | None = None,
    taken: Container[str] = (),
    **contract: Unpack[ContractOptions],
) -> ToolSpec:
    """Build a `ToolSpec` from a name, a description, a JSON Schema and a handler.

    See `Registry.add_schema_tool`, which also registers it.
    """
    _check_options(contract, _CONTRACT_OPTIONS)
    if not isinstance(name, str) or not name:
        raise DefinitionError(f"a tool needs a non-empty name, got {name!r}")
    if not callable(handler):
        raise DefinitionError(f"tool {name!r}: the handler must be callable, got {handler!r}")
    final_name = mapped_tool_name(name, taken)
    if not isinstance(schema, Mapping):
        raise UnenforceableSchema(
            f"tool {name!r}: the arguments schema must be a JSON object (a dict), "
            f"got {type(schema).__name__}"
        )
    converted = to_2020_12(schema, dialect, tool=name)
    extra = converted.get("additionalProperties", False)
    if extra is not False:
        raise UnenforceableSchema(
            f"tool {name!r}: the schema's top level accepts arguments beyond its properties "
            f"(additionalProperties is {json.dumps(extra)[:60]}); callgate hands a handler only "
            "declared arguments. Declare each argument under 'properties', or put the open "
            "map in one property of type object"
        )
    converted.setdefault("type", "object")
    converted.setdefault("properties", {})
    converted["additionalProperties"] = False
    try:
        arguments = schema_arguments(final_name, converted, formats=formats)
    except UnenforceableSchema as exc:
        text = str(exc)
        raise UnenforceableSchema(
            text if text.startswith("tool ") else f"tool {name!r}: {text}"
        ) from None
    fields = arguments.fields
    context_param = _schema_handler_check(name, handler, list(fields))
    options: dict[str, Any] = dict(contract)
    for key in ("effects", "reads", "writes"):
        if options.get(key) is not None:
            options[key] = [_renamed(t, fields) for t in _as_tuple(options[key])]
    if options.get("idempotency_key"):
        options["idempotency_key"] = _renamed(options["idempotency_key"], fields)
    for key in ("secret_fields", "sinks"):
        value = options.get(key)
        if isinstance(value, Mapping):
            options[key] = {fields.get(k, k): v for k, v in value.items()}
        elif value is not None:
            options[key] = [fields.get(k, k) for k in value]
    names = arguments.names
    optional = frozenset(fields[n] for n in fields) - arguments.required

    fn: Callable[..., Any] = handler
    if names or optional:
        # Arguments arrive by field name; the handler takes the schema's names, and an
        # optional argument that was not given is not passed (the handler's own default).
        def values(given: dict[str, Any]) -> dict[str, Any]:
            return {
                names.get(k, k): v for k, v in given.items() if v is not None or k not in optional
            }

        if inspect.iscoroutinefunction(handler):

            async def call_async(**given: Any) -> Any:
                return await handler(**values(given))

            fn = call_async
        else:

            def call(**given: Any) -> Any:
                return handler(**values(given))

            fn = call
        fn.__name__ = final_name
        fn.__qualname__ = getattr(handler, "__qualname__", final_name)
    spec = ToolSpec(
        name=final_name,
        description=description.strip(),
        fn=fn,
        is_async=inspect.iscoroutinefunction(handler),
        arguments_model=arguments.model,
        context_param=context_param,
        input_schema=converted,
        null_means_default=arguments.null_means_default,
        dump_is_canonical=arguments.typed_only,
        external_name=name if final_name != name else None,
        **_contract(final_name, tuple(arguments.model.model_fields), options),
    )
    # The ledger records arguments by the schema's names (``_token``), the gate reads them
    # by field name (``token_``): a secret is known by both.
    secrets = spec.secret_fields | {names[f] for f in spec.secret_fields if f in names}
    return dataclasses.replace(spec, secret_fields=secrets, version=_spec_version(spec))


def _schema_handler_check(tool: str, handler: Callable[..., Any], names: list[str]) -> str | None:
    """The handler's `CallContext` parameter, after checking it takes every argument."""
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):
        return None  # a builtin or C callable: called with the arguments as they are
    try:
        hints = typing.get_type_hints(handler)
    except Exception:
        hints = {}
    context = None
    takes_any = False
    params = signature.parameters
    for pname, param in params.items():
        annotation = hints.get(pname, param.annotation)
        if annotation is CallContext or annotation == "CallContext":
            if pname in names:
                raise DefinitionError(
                    f"tool {tool!r}: the handler's CallContext parameter {pname!r} has the name "
                    "of an argument the schema declares; rename the parameter"
                )
            context = pname
        if param.kind is param.VAR_KEYWORD:
            takes_any = True
    if not takes_any:
        missing = [
            n for n in names if n not in params or params[n].kind is params[n].VAR_POSITIONAL
        ]
        if missing:
            raise DefinitionError(
                f"tool {tool!r}: the handler {getattr(handler, '__qualname__', handler)} takes "
                f"no parameter {missing[0]!r}, which the schema declares; add it, or take "
                "**arguments (names such as 'class' or 'a.b' can only arrive that way)"
            )
    return context


def _renamed(text: str, fields: Mapping[str, str]) -> str:
    """A template on the schema's names, rewritten on the field names (``{_from}``)."""
    if all(k == v for k, v in fields.items()):
        return text
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return text  # Template reports it
    out = []
    for literal, field_name, spec, conversion in parsed:
        out.append(literal.replace("{", "{{").replace("}", "}}"))
        if field_name is not None:
            name = fields.get(field_name, field_name)
            out.append(
                "{"
                + name
                + (f"!{conversion}" if conversion else "")
                + (f":{spec}" if spec else "")
                + "}"
            )
    return "".join(out)


class NameTaken(DefinitionError):
    """A tool defined under a name already in use in the registry (as given, or as mapped)."""


class Registry:
    """The set of tools a gate can run, by name."""

    def __init__(self, tools: Iterable[ToolSpec] = ()) -> None:
        self._tools: dict[str, ToolSpec] = {}
        self._given: dict[str, str] = {}
        """The name each tool was defined under (its `ToolSpec.external_name`, or its
        name) → its registered name: one tool per name given, so a mapping leads back."""
        for spec in tools:
            self.add(spec)

    def add(self, spec: ToolSpec) -> ToolSpec:
        """Register a tool; a second tool of the same name is a definition error.

        So is a second tool *defined* under the same name (``math.gcd`` twice,
        the second mapped to ``math_gcd_3416fd2b``): two tools would lead back to
        one name, and the mapping would no longer be reversible.
        """
        if not isinstance(spec, ToolSpec):
            raise DefinitionError(
                f"Registry.add expects a ToolSpec (decorate the function with @tool), "
                f"got {type(spec).__name__}"
            )
        if spec.name in self._tools:
            earlier = self._tools[spec.name].external_name
            mapped = f" (the name {earlier!r} was mapped to it)" if earlier else ""
            raise NameTaken(
                f"a tool named {spec.name!r} is already registered{mapped}; give one of them "
                "another name"
            )
        given = spec.external_name or spec.name
        if given in self._given:
            raise NameTaken(
                f"a tool named {given!r} is already registered (as {self._given[given]!r}); a "
                f"second one (as {spec.name!r}) would lead back to the same name, so the "
                "mapping would not be reversible. Give one of them another name"
            )
        self._tools[spec.name] = spec
        self._given[given] = spec.name
        return spec

    @overload
    def tool(self, fn: Callable[..., Any], /) -> ToolSpec: ...
    @overload
    def tool(self, **contract: Unpack[ToolOptions]) -> Callable[[Callable[..., Any]], ToolSpec]: ...
    def tool(  # type: ignore[misc]
        self, fn: Callable[..., Any] | None = None, /, **contract: Any
    ) -> ToolSpec | Callable[[Callable[..., Any]], ToolSpec]:
        """Like `tool`, and register the result in this registry."""
        if fn is not None:
            return self.add(make_spec(fn))
        _check_options(contract)

        def decorate(f: Callable[..., Any]) -> ToolSpec:
            return self.add(make_spec(f, **contract))

        return decorate

    def add_schema_tool(
        self,
        name: str,
        description: str,
        schema: Mapping[str, Any],
        handler: Callable[..., Any],
        *,
        dialect: Dialect = "2020-12",
        formats: Mapping[str, FormatCheck | None] | None = None,
        **contract: Unpack[ContractOptions],
    ) -> ToolSpec:
        """Register a tool defined by a JSON Schema instead of a Python signature.

        ``schema`` is the arguments object's JSON Schema (``dialect`` ``"2020-12"``,
        or ``"openapi-3.0"`` for an OpenAPI 3.0 Schema Object); calls are
        validated with its own semantics (formats, patterns on RE2, ``$ref``,
        ``anyOf``/``oneOf``, ``additionalProperties`` below the top level).
        ``handler(**arguments)`` receives the validated arguments by the
        schema's names (a parameter annotated `CallContext` receives the
        context); optional arguments not given are left out. The contract
        options are `tool`'s; templates, ``secret_fields`` and ``sinks`` name
        arguments by the schema's names. A name providers would refuse
        (``billing.refund``) is mapped (``billing_refund``) and kept in
        `ToolSpec.external_name`. A schema callgate cannot enforce as written
        raises `UnenforceableSchema` (a `DefinitionError`) saying why.
        """
        spec = schema_spec(
            name,
            description,
            schema,
            handler,
            dialect=dialect,
            formats=formats,
            taken=self._tools,
            **contract,
        )
        return self.add(spec)

    def renamed(self) -> dict[str, str]:
        """``{tool name: name its definition gave}`` for every tool whose name was mapped."""
        return {n: s.external_name for n, s in self._tools.items() if s.external_name}

    def replace(self, spec: ToolSpec) -> ToolSpec:
        """Put ``spec`` in place of the registered tool of the same name (it must exist)."""
        if spec.name not in self._tools:
            raise DefinitionError(f"no tool named {spec.name!r} is registered; use add()")
        old = self._tools[spec.name]
        given = spec.external_name or spec.name
        if self._given.get(given, spec.name) != spec.name:
            raise NameTaken(
                f"a tool named {given!r} is already registered (as {self._given[given]!r}); "
                f"{spec.name!r} cannot be replaced by another tool of that name"
            )
        del self._given[old.external_name or old.name]
        self._tools[spec.name] = spec
        self._given[given] = spec.name
        return spec

    def remove(self, name: str) -> ToolSpec:
        """Unregister a tool and return it."""
        try:
            spec = self._tools.pop(name)
        except KeyError:
            raise DefinitionError(f"no tool named {name!r} is registered") from None
        del self._given[spec.external_name or spec.name]
        return spec

    def get(self, name: str) -> ToolSpec | None:
        """The tool of that name, or None."""
        return self._tools.get(name)

    def closest(self, name: str, n: int = 3) -> list[str]:
        """Registered names closest to ``name``, for 'did you mean' messages."""
        names = list(self._tools)
        close = difflib.get_close_matches(name, names, n=n, cutoff=0.5)
        if not close:
            lowered = name.lower()
            close = [t for t in names if lowered in t.lower() or t.lower() in lowered][:n]
        return close

    def names(self) -> list[str]:
        """Names of every registered tool, in registration order."""
        return list(self._tools)

    def subset(self, names: Iterable[str]) -> Registry:
        """A registry holding only the named tools (least privilege in the prompt)."""
        return Registry(self._tools[n] for n in names if n in self._tools)

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

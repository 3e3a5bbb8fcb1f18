"""Checking a tool's schema against the JSON Schema metaschema, each distinct subschema once.

``jsonschema``'s own ``check_schema`` walks every subschema of every tool
against the 2020-12 metaschema's eight vocabularies; an OpenAPI document's
tools repeat the same subschemas (Stripe's 417 operations hold 9,906 schema
objects, 2,118 distinct; each of OpenAI's copies the components it refers
to), so an import spent most of its time checking the same text again
(Stripe's 4.2 MB document: about 3 of its 4.6 s).

`check_schema` gives the same answer and the same first error as
``cls.check_schema(schema, format_checker=...)``, and remembers which
subschemas passed: every place where the metaschema checks a subschema
(``"$dynamicRef": "#meta"``: properties, items, ``$defs``, ``anyOf``, ...)
is skipped for a subschema *structurally equal* to one that passed before.
Equality is exact, never a hash: each object and array is interned bottom-up
to a number from its keys and its children's numbers, and scalars keep their
type (``1``, ``1.0`` and ``true`` differ). A subschema that fails is checked
in full every time, so an invalid schema is refused with the error
``jsonschema`` gives, however its valid parts were seen before. Only the
2020-12 dialect is memoized (its ``#meta`` always names the whole
metaschema, whatever the dynamic scope); any other dialect is checked by
``jsonschema`` as is.

The memo is process-wide, bounded (`MEMO_LIMIT` interned values, then
forgotten at once) and locked: two threads never share a numbering.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["MEMO_LIMIT", "check_schema", "forget"]

MEMO_LIMIT = 200_000
"""Interned values kept between checks; past it the memo starts empty again."""

_LOCK = threading.Lock()
_interned: dict[Any, int] = {}
_valid: set[int] = set()
_ids: dict[int, int] = {}
"""``id(node) -> interned number`` of the schema being checked (under `_LOCK`)."""
_meta: dict[type[Any], tuple[Any, Any]] = {}
"""The memoizing metaschema validator class and the format checker, by dialect class."""


def forget() -> None:
    """Empty the memo (benchmarks measure a cold import this way)."""
    with _LOCK:
        _interned.clear()
        _valid.clear()


def check_schema(cls: Any, schema: Mapping[str, Any], format_checker: Any) -> None:
    """Raise ``jsonschema.SchemaError`` if ``schema`` is not valid for the dialect ``cls``.

    ``cls`` is a ``jsonschema`` validator class (``validator_for(schema)``) and
    ``format_checker`` the checker of the metaschema's formats, as
    ``cls.check_schema`` takes them.
    """
    from jsonschema import Draft202012Validator, SchemaError  # type: ignore[import-untyped]

    if cls is not Draft202012Validator:
        cls.check_schema(schema, format_checker=format_checker)
        return
    with _LOCK:
        if len(_interned) > MEMO_LIMIT:
            _interned.clear()
            _valid.clear()
        validator = _validator(cls, format_checker)
        _ids.clear()
        try:
            try:
                _intern(schema)
            except RecursionError:
                _ids.clear()  # nests too deep to number: checked in full below
            for error in validator.iter_errors(schema):
                raise SchemaError.create_from(error)
        finally:
            _ids.clear()


def _intern(node: Any) -> Any:
    """The exact structural key of ``node``: a number for an object or array (recorded in
    `_ids` by identity), ``(type, value)`` for a scalar; None if it cannot be keyed."""
    if isinstance(node, Mapping):
        parts: list[Any] = [0]
        for key, value in node.items():
            k, v = _intern(key), _intern(value)
            if k is None or v is None:
                return None
            parts += (k, v)
    elif isinstance(node, list):
        parts = [1]
        for value in node:
            v = _intern(value)
            if v is None:
                return None
            parts.append(v)
    else:
        try:
            hash(node)
        except TypeError:
            return None  # a YAML set, say: never memoized
        return (type(node), node)
    structure = tuple(parts)
    number = _interned.get(structure)
    if number is None:
        number = _interned[structure] = len(_interned)
    _ids[id(node)] = number
    return number


def _validator(cls: Any, format_checker: Any) -> Any:
    """A validator of the metaschema whose ``$dynamicRef`` skips subschemas that passed."""
    cached = _meta.get(cls)
    if cached is not None and cached[1] is format_checker:
        return cached[0]
    # What passed with another format checker may not pass with this one.
    _interned.clear()
    _valid.clear()
    _ids.clear()
    from jsonschema.validators import SPECIFICATIONS, extend  # type: ignore[import-untyped]
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    original = cls.VALIDATORS["$dynamicRef"]

    def dynamic_ref(validator: Any, ref: Any, instance: Any, schema: Any) -> Iterator[Any]:
        number = _ids.get(id(instance)) if ref == "#meta" else None
        if number is not None and number in _valid:
            return
        errors = list(original(validator, ref, instance, schema))
        if not errors and number is not None:
            _valid.add(number)
        yield from errors

    memoizing = extend(cls, {"$dynamicRef": dynamic_ref})
    # The metaschema and its vocabularies without their "$schema": with it, ``jsonschema``
    # would switch back to its own class at the first "$ref" and never meet `dynamic_ref`.
    # Crawled, so that their "$dynamicAnchor"s replace the published ones.
    top = str(cls.META_SCHEMA["$id"])
    prefix = top.removesuffix("schema")
    resources = [
        (uri, DRAFT202012.create_resource(_without_schema(SPECIFICATIONS.contents(uri))))
        for uri in SPECIFICATIONS
        if uri == top or uri.startswith(prefix + "meta/")
    ]
    registry = Registry().with_resources(resources).crawl()
    validator = memoizing(
        schema=_without_schema(cls.META_SCHEMA),
        registry=registry,
        format_checker=format_checker,
    )
    _meta[cls] = (validator, format_checker)
    return validator


def _without_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k != "$schema"}

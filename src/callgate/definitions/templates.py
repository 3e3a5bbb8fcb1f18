"""Templates on a call's validated arguments: resources, idempotency keys, effects.

``Template("order:{order_id}")`` names only the tool's parameters (a typo is a
`DefinitionError` where the tool is defined) and expands on a call's values;
`EffectTemplate` adds the optional quantity of a bounded effect
(``"spend:{currency}={amount}"``). Both are re-exported by `callgate.tools`,
whose tools (decorated or defined by a schema) are built from them.
"""

from __future__ import annotations

import enum
import json
import re
import string
from collections.abc import Iterable, Mapping
from typing import Any

from callgate.effects import Effect, normal_name
from callgate.errors import DefinitionError

__all__ = ["EffectTemplate", "Template"]


class Template:
    """A string with ``{argument}`` fields, expanded on a call's validated arguments."""

    __slots__ = ("_literal", "_parts", "_resolve", "fields", "text")

    def __init__(self, text: str, *, tool: str, parameters: Iterable[str], what: str) -> None:
        names = set(parameters)
        fields: list[str] = []
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError as exc:
            raise DefinitionError(
                f"tool {tool!r}: {what} template {text!r} is malformed: {exc}"
            ) from exc
        for _, field_name, spec, conversion in parsed:
            if field_name is None:
                continue
            if field_name not in names or spec or conversion:
                raise DefinitionError(
                    f"tool {tool!r}: {what} template {text!r} names {{{field_name}}}, "
                    f"which is not a parameter; use one of {sorted(names)}"
                )
            fields.append(field_name)
        self.text = text
        self.fields = tuple(fields)
        # Resources a call reads or writes name the path it reaches, as effects do: calls
        # on "/a/../b" and "/b" conflict (`callgate.effects.normal_name`).
        self._resolve = what in ("reads", "writes")
        self._parts = tuple((literal, name) for literal, name, _, _ in parsed)
        # With no field the template is its literal text, braces unescaped ("{{x}}" is "{x}").
        self._literal = "".join(literal for literal, _ in self._parts)

    def expand(self, values: Mapping[str, Any]) -> str:
        """The template with each field replaced by the argument's value."""
        if not self.fields:
            return self._literal
        if len(self._parts) == 1:  # "kind:{field}": the common shape, without a join
            literal, name = self._parts[0]
            text = literal + str(_plain(values[name]))  # type: ignore[index]
        else:
            out = []
            for literal, name in self._parts:
                out.append(literal)
                if name is not None:
                    out.append(str(_plain(values[name])))
            text = "".join(out)
        return normal_name(text) if self._resolve else text

    def key(self, values: Mapping[str, Any]) -> str:
        """The template expanded as an idempotency key: two different sets of values never
        give one key.

        `expand` joins the values with the template's literal text, so ``{order_id}-{line}``
        gave ``o-1-2`` for both ``("o-1", "2")`` and ``("o", "1-2")``. Here, when every
        value is *plain* (holds no character of the literal text between two fields) and no
        two fields touch, the key is `expand`'s text, exactly as before, so a call recorded
        by an earlier callgate still finds its key; otherwise it is ``\x00`` and the JSON
        array of the values' texts, which no plain expansion can equal (it starts with
        ``\x00``, which neither the template's leading text nor a plain value may hold).
        """
        if not self.fields:
            return self._literal
        texts = [str(_plain(values[name])) for name in self.fields]
        separators = self._separators
        if separators is not None and not any(
            "\x00" in text or any(c in separators for c in text) for text in texts
        ):
            return self.expand(values)
        return "\x00" + json.dumps(texts, ensure_ascii=False)

    @property
    def _separators(self) -> frozenset[str] | None:
        """The characters of the literal text between fields; None if two fields touch or
        the leading text holds ``\x00`` (then every key is quoted)."""
        leading, between, pending = "", [], None  # the literal text since the last field
        for literal, name in self._parts:
            if pending is None:
                leading += literal
            else:
                pending += literal
            if name is not None:
                if pending is not None:
                    between.append(pending)
                pending = ""
        if any(not literal for literal in between) or "\x00" in leading:
            return None
        return frozenset("".join(between))

    def __repr__(self) -> str:
        return f"Template({self.text!r})"


class EffectTemplate:
    """An effect template: ``"write:cart:{cart_id}"``, or ``"spend:{currency}={amount}"``.

    A trailing ``={field}`` gives the effect a quantity that bounded grants check.
    """

    __slots__ = ("_fields", "_memo", "name", "quantity_field", "text")

    def __init__(self, text: str, *, tool: str, parameters: Iterable[str]) -> None:
        params = tuple(parameters)
        match = _QUANTITY.match(text)
        name_text = match["name"] if match else text
        self.quantity_field = match["field"] if match else None
        if self.quantity_field is not None and self.quantity_field not in params:
            raise DefinitionError(
                f"tool {tool!r}: effect {text!r} takes its quantity from "
                f"{{{self.quantity_field}}}, which is not a parameter; "
                f"use one of {sorted(params)}"
            )
        if ":" not in name_text:
            raise DefinitionError(
                f"tool {tool!r}: effect {text!r} needs a kind and a resource, "
                "e.g. 'read:orders', 'write:cart:{cart_id}', 'spend:{currency}={amount}'"
            )
        self.text = text
        self.name = Template(name_text, tool=tool, parameters=params, what="effect")
        quantity = (self.quantity_field,) if self.quantity_field is not None else ()
        self._fields = (*self.name.fields, *quantity)
        self._memo: dict[tuple[tuple[type, Any], ...], Effect] = {}

    def expand(self, values: Mapping[str, Any]) -> Effect:
        """The effect this template names for these argument values."""
        # Calls repeat their values (one cart, one currency): remember recent expansions,
        # by type and value (1, 1.0 and True are equal keys but different text).
        try:
            key = tuple([(type(v), v) for v in map(values.__getitem__, self._fields)])
            hit = self._memo.get(key)
        except TypeError:  # an unhashable value: expand it every time
            return self._expand(values)
        if hit is None:
            hit = self._expand(values)
            if len(self._memo) >= 1024:
                self._memo.clear()
            self._memo[key] = hit
        return hit

    def _expand(self, values: Mapping[str, Any]) -> Effect:
        quantity: float | None = None
        if self.quantity_field is not None:
            try:
                quantity = float(_plain(values[self.quantity_field]))
            except (TypeError, ValueError, OverflowError):
                quantity = None
        return Effect(normal_name(self.name.expand(values)), quantity)

    def __repr__(self) -> str:
        return f"EffectTemplate({self.text!r})"


_QUANTITY = re.compile(r"^(?P<name>.*)=\{(?P<field>\w+)\}$")


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value

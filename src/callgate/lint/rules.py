"""The schema design rules, each a function from the registry to findings.

From the lecture notes' design rules for schemas (§2.2.4), the parts a
program can check:

- CG100 a definition left out (read from a file of function definitions or
  an OpenAPI document; `callgate.lint.sources`): the reason, whether its
  schema cannot be enforced as written, its name is defined twice, or it is
  not a definition at all; and a source that yields no tool;
- CG101 free-form objects where a typed schema is possible (rule 6): an
  object (at any depth) with no declared properties, or open to extra fields;
- CG102 finite choice sets not enumerated (rule 2): a string whose
  description or pattern lists its values, without ``enum``;
- CG103 decorative descriptions (rule 3): a tool description that states no
  precondition and no failure mode;
- CG104 missing descriptions (rule 3): a tool without one, or a short
  argument name without one;
- CG105 inconsistent naming across tools (rule 4): mixed naming styles, or
  synonyms for one verb (``get_x`` beside ``fetch_y``);
- CG106 nested structure where single strings would do (rule 1): an object
  wrapping one field, or objects nested three deep;
- CG107 interface cost: a tool's definition over the per-tool token budget,
  the registry's over its budget (estimated tokens, `callgate.lint.tokens`);
- CG108 export: the reason a tool is exported to OpenAI without ``strict``;
- CG109 export: a tool whose given name providers refuse, and the name used.

Heuristics, not laws (the notes say as much): each finding says why it was
raised and what to change, and any rule can be switched off.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from callgate.lint.tokens import definition_text, estimate_tokens
from callgate.tools import ToolSpec

__all__ = ["RULES", "Budgets", "Finding", "Severity"]

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One thing the linter found: which rule, where, why, and what to do."""

    rule: str
    severity: Severity
    tool: str | None
    location: str
    """Where in the tool: ``description``, ``argument 'x'``, ``argument 'x' › field 'y'``."""
    message: str
    fix: str

    def as_dict(self) -> dict[str, Any]:
        """The finding as plain data (for ``--json``)."""
        return {
            "rule": self.rule,
            "severity": self.severity,
            "tool": self.tool,
            "location": self.location,
            "message": self.message,
            "fix": self.fix,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Budgets:
    """Token budgets for CG107 (estimated tokens, see `callgate.lint.tokens`)."""

    per_tool: int = 600
    """A tool whose definition is over this is flagged (a long manual page per call)."""
    registry: int = 6_000
    """The whole registry over this is flagged (paid in every request's context)."""


def _walk(schema: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any], int]]:
    """Every property schema with a readable location and its object depth (1 = argument)."""
    defs = schema.get("$defs") if isinstance(schema.get("$defs"), Mapping) else {}
    stack: list[tuple[str, Any, int, frozenset[str]]] = [
        (f"argument '{name}'", sub, 1, frozenset())
        for name, sub in reversed(list((schema.get("properties") or {}).items()))
    ]
    while stack:
        where, node, depth, seen = stack.pop()
        if not isinstance(node, Mapping):
            continue
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            if name in seen or not isinstance(defs, Mapping) or name not in defs:
                continue
            merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
            stack.append((where, merged, depth, seen | {name}))
            continue
        yield where, node, depth
        for key in ("anyOf", "oneOf", "allOf"):
            for alt in node.get(key) or []:
                stack.append((where, alt, depth, seen))
        if isinstance(node.get("items"), Mapping):
            stack.append((f"{where} › each item", node["items"], depth, seen))
        for name, sub in (node.get("properties") or {}).items():
            stack.append((f"{where} › field '{name}'", sub, depth + 1, seen))


def _is_object(node: Mapping[str, Any]) -> bool:
    kind = node.get("type")
    return (
        kind == "object" or (isinstance(kind, list) and "object" in kind) or ("properties" in node)
    )


def free_form_objects(spec: ToolSpec, budgets: Budgets) -> Iterator[Finding]:
    """CG101: an object with no declared fields, or one open to fields it does not declare."""
    for where, node, _ in _walk(spec.input_schema):
        if not _is_object(node):
            continue
        props = node.get("properties")
        extra = node.get("additionalProperties", True)
        if not props:
            yield Finding(
                rule="CG101",
                severity="warning",
                tool=spec.name,
                location=where,
                message="a free-form object: the model must remember its keys from prose",
                fix="declare its fields under 'properties' with their types (a model or "
                "TypedDict), or, if its keys really vary, say so and type its values",
            )
        elif extra is not False:
            yield Finding(
                rule="CG101",
                severity="info",
                tool=spec.name,
                location=where,
                message="an object that accepts fields beyond the ones it declares",
                fix="set additionalProperties to false unless extra fields are meant",
            )


_LISTED = re.compile(
    r"\bone of\b|\beither\b.+\bor\b|(?:['\"`][\w-]+['\"`]\s*(?:,|\bor\b|\|)\s*){2,}"
    r"|(?:^|[\s(])\w+(?:\s*\|\s*\w+){2,}|\b(?:possible|allowed|valid|supported) values\b",
    re.IGNORECASE,
)
_ALTERNATION = re.compile(r"^\^?\(?(?:[\w-]+\|)+[\w-]+\)?\$?$")


def unenumerated_choices(spec: ToolSpec, budgets: Budgets) -> Iterator[Finding]:
    """CG102: a string whose description or pattern lists its values, without an enum."""
    for where, node, _ in _walk(spec.input_schema):
        if node.get("type") != "string" or "enum" in node or "const" in node:
            continue
        description = str(node.get("description") or "")
        pattern = node.get("pattern")
        listed = bool(_LISTED.search(description))
        alternation = isinstance(pattern, str) and bool(_ALTERNATION.match(pattern))
        if listed or alternation:
            said = "its pattern" if alternation else "its description"
            yield Finding(
                rule="CG102",
                severity="warning",
                tool=spec.name,
                location=where,
                message=f"a finite set of values is listed in {said} but not enumerated",
                fix="give the values as 'enum' (a Literal[...] or Enum): the model then "
                "cannot send a value outside them, and the schema says it once",
            )


_CONDITIONS = re.compile(
    r"\b(if|unless|when|only|must|requires?|needs?|fails?|errors?|returns?|raises?|"
    r"rejects?|refuses?|before|after|otherwise|at most|at least|cannot|never|not|once|"
    r"[1-5]\d\d)\b",
    re.IGNORECASE,
)


def decorative_descriptions(spec: ToolSpec, budgets: Budgets) -> Iterator[Finding]:
    """CG103 and CG104: descriptions that say nothing of preconditions or failure modes."""
    text = spec.description.strip()
    if not text:
        yield Finding(
            rule="CG104",
            severity="warning",
            tool=spec.name,
            location="description",
            message="the tool has no description: the model chooses it by its name alone",
            fix="say what it does, what it needs first, and how it fails",
        )
    elif not _CONDITIONS.search(text):
        yield Finding(
            rule="CG103",
            severity="warning",
            tool=spec.name,
            location="description",
            message=f"the description ({len(text.split())} words) states no precondition "
            "and no failure mode",
            fix="add what must hold before the call and what it returns when it fails, "
            "e.g. 'returns an error if the order has shipped'",
        )
    for name, node in (spec.input_schema.get("properties") or {}).items():
        if not isinstance(node, Mapping) or node.get("description") or "enum" in node:
            continue
        if "$ref" in node or len(str(name)) > 3:
            continue
        yield Finding(
            rule="CG104",
            severity="info",
            tool=spec.name,
            location=f"argument '{name}'",
            message="a short argument name without a description",
            fix="describe what the argument takes (units, format, where the value comes from)",
        )


_SYNONYMS = (
    ("get", "fetch", "read", "retrieve", "load", "lookup", "find", "show"),
    ("list", "search", "query", "browse", "enumerate"),
    ("create", "add", "new", "make", "insert", "post"),
    ("update", "edit", "modify", "change", "set", "patch", "put"),
    ("delete", "remove", "rm", "del", "destroy", "drop", "cancel"),
    ("send", "post", "submit", "dispatch"),
)
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def _style(name: str) -> str:
    if "-" in name:
        return "kebab-case"
    if "_" in name.strip("_"):
        return "snake_case"
    if any(c.isupper() for c in name[1:]) and name[:1].islower():
        return "camelCase"
    if name[:1].isupper():
        return "PascalCase"
    return "one word"


def inconsistent_naming(specs: Sequence[ToolSpec], budgets: Budgets) -> Iterator[Finding]:
    """CG105: naming styles that differ across tools, and synonyms for one verb."""
    styles = {spec.name: _style(spec.name) for spec in specs}
    counted = Counter(s for s in styles.values() if s != "one word")
    if len(counted) > 1:
        usual, _ = counted.most_common(1)[0]
        for spec in specs:
            style = styles[spec.name]
            if style not in (usual, "one word"):
                yield Finding(
                    rule="CG105",
                    severity="warning",
                    tool=spec.name,
                    location="name",
                    message=f"named in {style}; most tools here use {usual}",
                    fix=f"rename it in {usual}, so the model can generalise the pattern",
                )
    verbs: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for spec in specs:
        words = [w.lower() for w in _WORDS.findall(spec.name)]
        if not words:
            continue
        for group, synonyms in enumerate(_SYNONYMS):
            if words[0] in synonyms:
                verbs[group][words[0]].append(spec.name)
                break
    for used in verbs.values():
        if len(used) < 2:
            continue
        usual = max(used, key=lambda verb: (len(used[verb]), -sorted(used).index(verb)))
        for verb, names in used.items():
            if verb == usual:
                continue
            for name in names:
                yield Finding(
                    rule="CG105",
                    severity="warning",
                    tool=name,
                    location="name",
                    message=f"'{verb}' here, '{usual}' in {', '.join(used[usual][:3])}: two "
                    "words for one action",
                    fix=f"use one verb for one action: rename it to start with '{usual}'",
                )


def needless_nesting(spec: ToolSpec, budgets: Budgets) -> Iterator[Finding]:
    """CG106: an object wrapping one field, or objects nested three deep."""
    for where, node, depth in _walk(spec.input_schema):
        if not _is_object(node):
            continue
        props = node.get("properties") or {}
        if len(props) == 1:
            (only,) = props
            yield Finding(
                rule="CG106",
                severity="warning",
                tool=spec.name,
                location=where,
                message=f"an object holding one field ('{only}')",
                fix=f"take '{only}' as an argument of its own: models fill flat strings "
                "more reliably than nested structure",
            )
        elif depth >= 3:
            yield Finding(
                rule="CG106",
                severity="info",
                tool=spec.name,
                location=where,
                message=f"objects nested {depth} deep",
                fix="flatten the arguments where the structure does not carry meaning",
            )


def interface_cost(specs: Sequence[ToolSpec], budgets: Budgets) -> Iterator[Finding]:
    """CG107: each tool's and the registry's definition length in (estimated) tokens."""
    total = 0
    for spec in specs:
        tokens = estimate_tokens(definition_text(spec))
        total += tokens
        if tokens > budgets.per_tool:
            yield Finding(
                rule="CG107",
                severity="warning",
                tool=spec.name,
                location="definition",
                message=f"about {tokens} tokens (budget {budgets.per_tool}), paid in every "
                "request that offers this tool",
                fix="shorten the description, drop examples from the schema, or split the tool",
            )
    if total > budgets.registry:
        yield Finding(
            rule="CG107",
            severity="warning",
            tool=None,
            location="registry",
            message=f"the registry's definitions are about {total} tokens "
            f"(budget {budgets.registry}) in every request",
            fix="offer each run only the tools it needs (Registry.subset), or merge tools",
        )


def export_notes(spec: ToolSpec, budgets: Budgets) -> Iterator[Finding]:
    """CG108 and CG109: what the export could not keep as given."""
    obstacle = spec.strict_obstacle
    if obstacle is not None:
        yield Finding(
            rule="CG108",
            severity="info",
            tool=spec.name,
            location="schema",
            message=f"exported to OpenAI without strict mode: {obstacle}",
            fix="close every object (additionalProperties: false, declared properties) and "
            "use anyOf rather than oneOf, if the tool should be constrained at decoding",
        )
    if spec.external_name:
        yield Finding(
            rule="CG109",
            severity="info",
            tool=spec.name,
            location="name",
            message=f"defined as {spec.external_name!r}, which providers refuse; "
            f"exported as {spec.name!r}",
            fix="name it with letters, digits, '_' and '-' only (64 at most)",
        )


PerTool = Callable[[ToolSpec, Budgets], Iterator[Finding]]
PerRegistry = Callable[[Sequence[ToolSpec], Budgets], Iterator[Finding]]

RULES: Mapping[str, tuple[str, PerTool | None, PerRegistry | None]] = {
    "CG100": ("definition left out", None, None),  # raised while reading definitions
    "CG101": ("free-form object", free_form_objects, None),
    "CG102": ("finite choices not enumerated", unenumerated_choices, None),
    "CG103": ("decorative description", decorative_descriptions, None),
    "CG104": ("missing description", None, None),  # raised by CG103's function
    "CG105": ("inconsistent naming", None, inconsistent_naming),
    "CG106": ("needless nesting", needless_nesting, None),
    "CG107": ("interface cost in tokens", None, interface_cost),
    "CG108": ("not strict", export_notes, None),
    "CG109": ("name mapped", None, None),  # raised by CG108's function
}
"""Each rule id: its short name, and the function that raises it (per tool or per registry)."""

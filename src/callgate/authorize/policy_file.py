"""Policies written as TOML files, and the argument predicates they use.

```toml
version = "2026-11-29"           # optional label recorded with approvals
preset = "standard"              # optional fallback by risk: "none" (default) or "standard"
untrusted_sinks = "ask"          # or "deny": sink values no trusted input vouches for
integrity = ["write:calendar*"]  # effects that need the run's intent after untrusted content
outside_intent = "ask"           # or "deny": calls outside the intent after untrusted content
named_targets = ["delete:*"]     # effects whose targets the request itself must name

[[rule]]
name = "small refunds"
action = "allow"                 # allow | ask | deny
tool = "refund"                  # glob on the tool name (default "*")
effect = "spend:*"               # optional glob on the call's effects
reason = "..."                   # shown to the model when the rule denies
when.amount = { le = 50 }        # every predicate must hold
when.currency = { in = ["USD", "EUR"] }
```

Predicates: ``eq``, ``ne``, ``in``, ``not_in``, ``glob``, ``regex``, ``lt``,
``le``, ``gt``, ``ge``, and ``under`` (a path inside a root after ``..`` and
symlinks are resolved). Several in one table must all hold. ``glob`` and
``regex`` are case-sensitive (write ``(?i)`` in a regex to ignore case).

A ``regex`` is written and read as in Python's `re` and must match the whole
value, but it runs on RE2, in time linear in the length of the value: the
model chooses the value, so it must never choose how long the policy takes.
Constructs RE2 cannot run that way (backreferences, lookahead and lookbehind,
atomic groups, possessive quantifiers, conditionals, ``\\b``, the ``(?x)`` and
``(?a)`` flags, counts above 1000) are refused when the policy is loaded.
For a list-valued argument a ``deny`` or ``ask`` rule applies if *any*
element satisfies its predicates, an ``allow`` rule only if *every* element
does, so a list can neither hide a blocked value nor smuggle in one that is
not allowed.

Evaluation: a matching ``deny`` wins, then a matching ``ask``, then a
matching ``allow``, whatever their order in the file; with no matching rule
the preset decides, and without one the call is denied.
"""

from __future__ import annotations

import datetime
import enum
import fnmatch
import math
import os
import re
import tomllib
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callgate.authorize.policy import Action, Policy, Preset, Rule
from callgate.errors import DefinitionError
from callgate.regex import (
    ADVICE,
    RE2Error,
    Unsupported,
    compile_re2,
    python_regex,
    re2_reason,
    safe_text,
)
from callgate.render import bounded

__all__ = ["ArgumentTest", "PolicyFileError", "load_policy_file", "parse_policy"]


class PolicyFileError(DefinitionError):
    """A policy file that cannot be loaded; the message names file, line, rule and fix."""


_ACTIONS = {"allow": Action.ADMIT, "ask": Action.ASK, "deny": Action.DENY}
_RULE_KEYS = {"name", "action", "tool", "effect", "reason", "when"}
_TOP_KEYS = {
    "version",
    "preset",
    "untrusted_sinks",
    "integrity",
    "outside_intent",
    "named_targets",
    "rule",
}
_OPS = ("eq", "ne", "in", "not_in", "glob", "regex", "lt", "le", "gt", "ge", "under")
_RULE_HEADER = re.compile(r"^\s*\[\[\s*rule\s*\]\]\s*(?:#.*)?$")
_ERROR_LINE = re.compile(r"at line (?P<line>\d+)")


@dataclass(frozen=True, slots=True)
class ArgumentTest:
    """One predicate on one argument, e.g. ``amount <= 50``; callable on argument values.

    A ``regex`` operand is a pattern in Python's `re` syntax (or a compiled
    ``re.Pattern`` with at most the ``IGNORECASE``, ``MULTILINE`` and ``DOTALL``
    flags); it is translated for RE2 when the test is built, and a pattern RE2
    cannot run in linear time raises `DefinitionError` naming why.
    """

    argument: str
    op: str
    operand: Any
    each: str = "any"
    """For a list-valued argument: ``"any"`` element must satisfy the test (the
    default, used by ``deny`` and ``ask`` rules) or ``"all"`` (``allow`` rules),
    so a list can neither slip a blocked value past a deny nor an unlisted one
    into an allow."""
    _regex: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.op not in _OP_FUNCS:
            raise DefinitionError(
                f"when.{self.argument}: unknown predicate '{self.op}'; use one of {', '.join(_OPS)}"
            )
        if self.op == "regex":
            source, regex = linear_regex(self.operand, f"when.{self.argument}.regex")
            object.__setattr__(self, "operand", source)
            object.__setattr__(self, "_regex", regex)

    def __call__(self, values: Mapping[str, Any]) -> bool:
        if self.argument not in values:
            return False
        value = values[self.argument]
        test = _OP_FUNCS[self.op]
        operand = self._regex if self.op == "regex" else self.operand
        if isinstance(value, list | tuple | set | frozenset) and not (
            self.op in ("eq", "ne") and isinstance(self.operand, list)
        ):
            items = [_plain(v) for v in value]
            if self.each == "all":
                return all(test(v, operand) for v in items)
            return any(test(v, operand) for v in items)
        return bool(test(_plain(value), operand))

    def describe(self) -> str:
        """The predicate as a person reads it."""
        symbol = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
        if self.op in symbol:
            return f"{self.argument} {symbol[self.op]} {_shown(self.operand)}"
        return f"{self.argument} {self.op.replace('_', ' ')} {_shown(self.operand)}"


def _shown(operand: Any) -> str:
    """An operand as a person reads it: text in quotes as written (a pattern's
    backslashes not doubled), lists as lists, never a Python repr."""
    if isinstance(operand, re.Pattern):
        operand = operand.pattern
    if isinstance(operand, str):
        return f'"{operand}"'
    if isinstance(operand, list | tuple | set | frozenset):
        items = sorted(operand, key=str) if isinstance(operand, set | frozenset) else operand
        return "[" + ", ".join(_shown(v) for v in items) + "]"
    if isinstance(operand, bool):
        return "true" if operand else "false"
    return str(operand)


def _plain(value: Any) -> Any:
    """An Enum member's value; anything else as it is."""
    return getattr(value, "value", value) if isinstance(value, enum.Enum) else value


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _compare(check: Callable[[float, float], bool]) -> Callable[[Any, Any], bool]:
    def run(value: Any, operand: Any) -> bool:
        number = _number(value)
        return number is not None and check(number, float(operand))

    return run


def _under(value: Any, root: Any) -> bool:
    """Whether the path ``value`` lies inside ``root`` once ``..`` and symlinks are resolved."""
    if not isinstance(value, str) or not value or "\x00" in value:
        return False
    resolved_root = Path(os.path.realpath(str(root)))
    candidate = Path(value)
    if not candidate.is_absolute():
        candidate = resolved_root / candidate
    resolved = Path(os.path.realpath(candidate))
    return resolved == resolved_root or resolved_root in resolved.parents


_OP_FUNCS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda v, o: bool(v == o),
    "ne": lambda v, o: bool(v != o),
    "in": lambda v, o: v in o,
    "not_in": lambda v, o: v not in o,
    "glob": lambda v, o: isinstance(v, str) and fnmatch.fnmatchcase(v, o),
    "regex": lambda v, o: isinstance(v, str) and _fullmatch(o, v),
    "lt": _compare(lambda a, b: a < b),
    "le": _compare(lambda a, b: a <= b),
    "gt": _compare(lambda a, b: a > b),
    "ge": _compare(lambda a, b: a >= b),
    "under": _under,
}


class _AllOf:
    """Several argument tests that must all hold; named for explanations."""

    def __init__(self, tests: list[ArgumentTest]) -> None:
        self.tests = tests
        self.__name__ = " and ".join(t.describe() for t in tests)
        self.__qualname__ = self.__name__

    def __call__(self, values: Mapping[str, Any]) -> bool:
        return all(t(values) for t in self.tests)


def load_policy_file(path: str | os.PathLike[str]) -> Policy:
    """Read and validate a policy file."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyFileError(f"{file}: cannot read the policy file: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        line = exc.object.count(b"\n", 0, exc.start) + 1
        raise PolicyFileError(
            f"{file}:{line}: the policy file is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} "
            f"at offset {exc.start}); TOML files are UTF-8: save it as UTF-8"
        ) from None
    return parse_policy(text, source=str(file))


def parse_policy(text: str, *, source: str = "<policy>") -> Policy:
    """Build a `Policy` from TOML text; every error names the line and the rule."""
    rule_lines = [i + 1 for i, line in enumerate(text.splitlines()) if _RULE_HEADER.match(line)]
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise PolicyFileError(
            f"{source}: not valid TOML for callgate: arrays or tables are nested too deeply "
            "for the TOML reader; a policy needs only a few levels"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        at = _ERROR_LINE.search(str(exc))
        line = int(at["line"]) if at else None
        inside = sum(1 for start in rule_lines if line is not None and start <= line)
        where = f"{source}:{line}" if line else source
        rule = f" (in rule {inside})" if inside else ""
        raise PolicyFileError(f"{where}{rule}: not valid TOML: {exc}") from exc
    unknown = set(data) - _TOP_KEYS
    if unknown:
        first = sorted(unknown)[0]
        raise PolicyFileError(
            f"{source}:{_key_line(text, first)}: unknown top-level key(s) {sorted(unknown)}; "
            f"allowed: {sorted(_TOP_KEYS)}"
        )
    version = _version(data, text, source)
    raw_rules = data.get("rule", [])
    if not isinstance(raw_rules, list):
        raise PolicyFileError(f"{source}: 'rule' must be an array of tables: write [[rule]]")
    rules = []
    for index, raw in enumerate(raw_rules):
        line = rule_lines[index] if index < len(rule_lines) else None
        where = f"{source}:{line}" if line else source
        name = raw.get("name") if isinstance(raw, dict) else None
        label = f"rule {index + 1}" + (f" ({name!r})" if name else "")
        rules.append(_rule(raw, f"{where}: {label}"))
    integrity = _patterns(data, "integrity", source)
    named = _patterns(data, "named_targets", source)
    try:
        return Policy(
            rules,
            preset=data.get("preset", Preset.NONE),
            untrusted_sinks=data.get("untrusted_sinks", "ask"),
            integrity=integrity,
            outside_intent=data.get("outside_intent", "ask"),
            named_targets=named,
            version=version,
        )
    except DefinitionError as exc:
        raise PolicyFileError(f"{source}: {exc}") from exc


def _key_line(text: str, key: str) -> int | str:
    """The line of a top-level ``key = ...`` in the file, or ``?``."""
    return next(
        (
            i + 1
            for i, t in enumerate(text.splitlines())
            if re.match(rf"\s*\"?{re.escape(key)}\"?\s*=", t)
        ),
        "?",
    )


def _version(data: Mapping[str, Any], text: str, source: str) -> str | None:
    """The policy's ``version`` label: text, or an integer or a date written bare (read as
    their text). A table, an array, a boolean or a float is refused: it is no label
    (``1.10`` would be read as ``1.1``), and was recorded with approvals as its Python
    ``str()``."""
    if "version" not in data:
        return None
    value = data["version"]
    if isinstance(value, str):
        return value
    if isinstance(value, int | datetime.date | datetime.time) and not isinstance(value, bool):
        return str(value)
    kinds = {dict: "a table", list: "an array", bool: "a boolean", float: "a number with a point"}
    kind = kinds.get(type(value), type(value).__name__)
    raise PolicyFileError(
        f"{source}:{_key_line(text, 'version')}: 'version' must be a text label, got {kind}; "
        'write it in quotes, e.g. version = "2026-11-29" or version = "1.10"'
    )


def _patterns(data: Mapping[str, Any], key: str, source: str) -> list[str]:
    """A top-level list of effect patterns (``integrity``, ``named_targets``)."""
    patterns = data.get(key, [])
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise PolicyFileError(
            f"{source}: '{key}' must be a list of effect patterns, got {patterns!r}; "
            f'write {key} = ["write:calendar*", "delete:*"]'
        )
    return patterns


def _rule(raw: Any, where: str) -> Rule:
    if not isinstance(raw, dict):
        raise PolicyFileError(f"{where}: a rule must be a table")
    unknown = set(raw) - _RULE_KEYS
    if unknown:
        raise PolicyFileError(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))}; a rule may have "
            f"{', '.join(sorted(_RULE_KEYS))}"
        )
    action = raw.get("action")
    if action not in _ACTIONS:
        raise PolicyFileError(
            f"{where}: action must be one of 'allow', 'ask', 'deny', got {action!r}"
        )
    for key in ("name", "tool", "effect", "reason"):
        if key in raw and not isinstance(raw[key], str):
            raise PolicyFileError(f"{where}: '{key}' must be a string, got {raw[key]!r}")
    when = raw.get("when", {})
    if not isinstance(when, dict):
        raise PolicyFileError(
            f"{where}: 'when' must be a table of argument predicates, e.g. "
            "when.amount = { le = 50 }"
        )
    each = "all" if action == "allow" else "any"
    tests = [t for argument, spec in when.items() for t in _tests(argument, spec, where, each)]
    return Rule(
        action=_ACTIONS[action],
        tool=raw.get("tool", "*"),
        effect=raw.get("effect"),
        when=_AllOf(tests) if tests else None,
        name=raw.get("name", ""),
        reason=raw.get("reason", ""),
    )


def _tests(argument: str, spec: Any, where: str, each: str) -> list[ArgumentTest]:
    if not isinstance(spec, dict):
        spec = {"eq": spec}
    if not spec:
        raise PolicyFileError(f"{where}: when.{argument} is empty; give a predicate such as eq")
    tests = []
    for op, operand in spec.items():
        if op not in _OPS:
            raise PolicyFileError(
                f"{where}: when.{argument}: unknown predicate '{op}'; use one of {', '.join(_OPS)}"
            )
        if op in ("lt", "le", "gt", "ge") and _number(operand) is None:
            raise PolicyFileError(f"{where}: when.{argument}.{op} needs a number, got {operand!r}")
        if op in ("in", "not_in") and not isinstance(operand, list):
            raise PolicyFileError(
                f'{where}: when.{argument}.{op} needs a list, e.g. ["USD", "EUR"]'
            )
        if op in ("glob", "under") and not isinstance(operand, str):
            raise PolicyFileError(f"{where}: when.{argument}.{op} needs a string")
        if op == "regex" and not isinstance(operand, str):
            raise PolicyFileError(f"{where}: when.{argument}.regex needs a string")
        try:
            tests.append(ArgumentTest(argument, op, operand, each))
        except DefinitionError as exc:
            raise PolicyFileError(f"{where}: {exc}") from exc
    return tests


# -- regex predicates on RE2 -------------------------------------------------------------
#
# A pattern is checked by Python's `re` (so its syntax and errors are Python's), then
# translated by `callgate.regex` into RE2 syntax with Python's meaning. What RE2 cannot
# run is refused here, with the reason and what to write instead.

_MAX_SHOWN = 120


def linear_regex(pattern: Any, where: str) -> tuple[str, Any]:
    """``pattern`` (text or an ``re.Pattern``) compiled for RE2 with Python's meaning.

    Returns the pattern as written (with a compiled pattern's flags spelled
    inline) and the RE2 pattern; raises `DefinitionError`, starting with
    ``where``, for a pattern that is invalid or that RE2 cannot run.
    """
    source = _pattern_source(pattern, where)
    shown = source if len(source) <= _MAX_SHOWN else source[: _MAX_SHOWN - 3] + "..."
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "possible nested set": the pattern is read as Python does
        try:
            re.compile(source)
        except re.error as exc:
            raise DefinitionError(
                bounded(f"{where} is not a valid regular expression: {exc}", 600)
            ) from None
        except (RecursionError, OverflowError):
            raise DefinitionError(f"{where} '{shown}' is too deeply nested or too large") from None
    try:
        translated = python_regex(source)
        compiled = compile_re2(translated)
    except Unsupported as exc:
        at = f" at position {exc.position}" if exc.position is not None else ""
        advice = ADVICE.get(exc.construct, "simplify the pattern")
        message = (
            f"{where} '{shown}' uses {exc.construct}{at}, which callgate cannot run: {exc.why}. "
            "Policy patterns run on RE2, in time linear in the length of the value. "
            f"Instead, {advice}."
        )
        raise DefinitionError(bounded(message, 700)) from None
    except RE2Error as exc:
        raise DefinitionError(bounded(_re2_refusal(where, shown, exc), 700)) from None
    except UnicodeEncodeError:
        raise DefinitionError(
            f"{where} '{shown}' is not valid Unicode text (it holds a lone surrogate); "
            "write the characters it should match instead"
        ) from None
    return source, compiled


def _pattern_source(pattern: Any, where: str) -> str:
    """The pattern's text, with a compiled pattern's flags written inline."""
    if isinstance(pattern, str):
        return pattern
    if isinstance(pattern, re.Pattern) and isinstance(pattern.pattern, str):
        flags = pattern.flags & ~re.UNICODE
        refused = {re.VERBOSE: "x", re.ASCII: "a"}
        for flag, letter in refused.items():
            if flags & flag:
                raise DefinitionError(
                    f"{where} has the flag re.{flag.name} ({letter}), which RE2 cannot run. "
                    f"Instead, {ADVICE[f'the flag (?{letter})']}"
                )
        inline = "".join(
            letter
            for flag, letter in ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"))
            if flags & flag
        )
        return f"(?{inline}){pattern.pattern}" if inline else pattern.pattern
    kind = "bytes" if isinstance(pattern, bytes | re.Pattern) else type(pattern).__name__
    raise DefinitionError(f"{where} needs a pattern as text (str), got {kind}")


def _re2_refusal(where: str, shown: str, exc: Exception) -> str:
    reason = re2_reason(exc)
    if reason.startswith("invalid repetition size"):
        construct, why = "more than 1000 repetitions", "RE2 counts repetitions up to 1000"
    elif reason.startswith("pattern too large"):
        return (
            f"{where} '{shown}' is too large for RE2, which compiles a pattern within a fixed "
            "memory budget (each \\d, \\w or \\s stands for hundreds of character ranges). "
            "Instead, simplify the pattern: fewer or smaller counted repetitions."
        )
    else:
        construct, why = "a construct RE2 does not accept", f"RE2 says: {reason}"
    advice = ADVICE.get(construct, "simplify the pattern")
    return (
        f"{where} '{shown}' uses {construct}, which callgate cannot run: {why}. "
        "Policy patterns run on RE2, in time linear in the length of the value. "
        f"Instead, {advice}."
    )


def _fullmatch(regex: Any, value: str) -> bool:
    """Whether ``value`` matches as a whole; a lone surrogate reads as U+FFFD."""
    return regex.fullmatch(safe_text(value)) is not None

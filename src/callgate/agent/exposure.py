"""Least privilege in the prompt: which tools a run's model is shown.

A tool is shown when the run could ever be allowed to call it:

* every effect template it declares could be covered by one of the
  authority's grants. A template's ``{field}`` can take any value, so it is
  read as the glob ``*`` and tested for a *non-empty intersection* with each
  grant's glob (``spend:{currency}`` meets ``spend:USD<=50``, since
  ``spend:USD`` matches both; ``write:orders`` never meets ``read:*``). A
  bounded grant (``<=50``) only covers effects with a quantity, so it counts
  only for templates with a ``={field}`` quantity;
* the policy does not deny it whatever the arguments: no unconditional
  ``deny`` rule names it (a rule without ``when`` and ``effect``), and, with
  rules and no preset, some rule names it at all (otherwise the default deny
  always applies).

This decides what the model is *told*; the gate still checks every call
(a hidden tool called by name is rejected on its own merits).
"""

from __future__ import annotations

import fnmatch
import string
from collections.abc import Iterable

from callgate.authorize.policy import Action, Authority, Policy, Preset
from callgate.effects import Grant
from callgate.tools import EffectTemplate, Registry, ToolSpec

__all__ = ["exposed_tools", "globs_intersect", "may_expose", "template_glob"]


def exposed_tools(
    registry: Registry | Iterable[ToolSpec], authority: Authority, policy: Policy | None = None
) -> list[ToolSpec]:
    """The tools of ``registry`` this authority could ever be allowed to call, in order."""
    grants = _grants(authority)
    return [spec for spec in registry if _may_expose(spec, grants, policy)]


def may_expose(spec: ToolSpec, authority: Authority, policy: Policy | None = None) -> bool:
    """Whether ``spec`` is shown to a run with this authority and policy (module docstring)."""
    return _may_expose(spec, _grants(authority), policy)


def _grants(authority: Authority) -> tuple[Grant, ...]:
    return tuple(g if isinstance(g, Grant) else Grant(g) for g in authority.grants)


def _may_expose(spec: ToolSpec, grants: tuple[Grant, ...], policy: Policy | None) -> bool:
    if not all(_could_cover(t, grants) for t in spec.effects):
        return False
    return policy is None or not _always_denied(spec, policy)


def template_glob(template: EffectTemplate) -> str:
    """The effect template's name with every ``{field}`` replaced by ``*``."""
    parts = []
    for literal, field, _, _ in string.Formatter().parse(template.name.text):
        parts.append(literal)
        if field is not None:
            parts.append("*")
    return "".join(parts)


def _could_cover(template: EffectTemplate, grants: tuple[Grant, ...]) -> bool:
    glob = template_glob(template)
    for grant in grants:
        if grant.bound is not None and template.quantity_field is None:
            continue
        if globs_intersect(glob, grant.pattern):
            return True
    return False


def globs_intersect(a: str, b: str) -> bool:
    """Whether some string matches both globs, ``*`` being the only wildcard.

    A search over pairs of positions: equal literals advance both, a ``*``
    may absorb the other side's next literal or end. Linear in
    ``len(a) * len(b)``.
    """
    seen: set[tuple[int, int]] = set()
    todo = [(0, 0)]
    end = (len(a), len(b))
    while todo:
        state = todo.pop()
        if state in seen:
            continue
        seen.add(state)
        if state == end:
            return True
        i, j = state
        ca = a[i] if i < len(a) else None
        cb = b[j] if j < len(b) else None
        if ca == "*":
            todo.append((i + 1, j))
            if cb is not None and cb != "*":
                todo.append((i, j + 1))
        if cb == "*":
            todo.append((i, j + 1))
            if ca is not None and ca != "*":
                todo.append((i + 1, j))
        if ca is not None and ca == cb and ca != "*":
            todo.append((i + 1, j + 1))
    return False


def _always_denied(spec: ToolSpec, policy: Policy) -> bool:
    naming = [r for r in policy.rules if fnmatch.fnmatchcase(spec.name, r.tool)]
    if any(r.action is Action.DENY and r.when is None and r.effect is None for r in naming):
        return True
    return bool(policy.rules) and not naming and policy.preset is Preset.NONE

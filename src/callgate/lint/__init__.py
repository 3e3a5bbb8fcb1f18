"""A linter for tool schemas: the design rules of the lecture notes, checked on a registry.

```python
from callgate.lint import lint

report = lint(registry)
for finding in report.findings:
    print(finding.rule, finding.tool, finding.location, finding.message, finding.fix)
```

``callgate lint module:registry`` (or an OpenAPI document) runs it from the
command line; see `callgate.lint.rules` for the rules and docs/lint.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from callgate.lint.rules import RULES, Budgets, Finding, Severity
from callgate.lint.tokens import definition_text, estimate_tokens
from callgate.tools import Registry, ToolSpec

__all__ = ["RULES", "Budgets", "Finding", "LintReport", "Severity", "estimate_tokens", "lint"]

_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True, kw_only=True)
class LintReport:
    """The findings, and each tool's estimated definition length in tokens."""

    findings: tuple[Finding, ...]
    tokens: dict[str, int] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        """The registry's definitions together, in estimated tokens."""
        return sum(self.tokens.values())

    def at_least(self, severity: Severity) -> list[Finding]:
        """The findings of ``severity`` or worse."""
        return [f for f in self.findings if _ORDER[f.severity] <= _ORDER[severity]]


def lint(
    tools: Registry | Iterable[ToolSpec],
    *,
    budgets: Budgets | None = None,
    disable: Iterable[str] = (),
    refused: Iterable[Finding] = (),
) -> LintReport:
    """Check every tool (and the set of them) against the schema design rules.

    ``refused`` carries CG100 findings for definitions that could not be made
    into tools at all (see `callgate.lint.sources`).
    """
    specs = list(tools)
    budgets = budgets or Budgets()
    off = set(disable)
    findings: list[Finding] = list(refused)
    for _, per_tool, per_registry in RULES.values():
        if per_tool is not None:
            for spec in specs:
                findings.extend(per_tool(spec, budgets))
        if per_registry is not None:
            findings.extend(per_registry(specs, budgets))
    kept = [f for f in findings if f.rule not in off]
    kept.sort(key=lambda f: (f.tool or "", _ORDER[f.severity], f.rule, f.location))
    tokens = {spec.name: estimate_tokens(definition_text(spec)) for spec in specs}
    return LintReport(findings=tuple(kept), tokens=tokens)

"""callgate's top-level modules form no import cycle, even with type-only imports counted.

`lint-imports` counts imports made under ``TYPE_CHECKING`` too (``.importlinter``), so
its contracts already keep this; the test says it without import-linter's vocabulary,
over the whole graph of top-level modules (subpackages folded into their package).
"""

from __future__ import annotations

import grimp


def _cycles(exclude_type_checking_imports: bool) -> list[set[str]]:
    """Strongly connected components (of more than one) of callgate's top-level modules."""
    graph = grimp.build_graph(
        "callgate", exclude_type_checking_imports=exclude_type_checking_imports, cache_dir=None
    )

    def top(module: str) -> str:
        return ".".join(module.split(".")[:2])

    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if top(module) != top(imported):
                edges.setdefault(top(module), set()).add(top(imported))

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reachable = {node: reach(node) for node in edges}
    components: list[set[str]] = []
    for node in sorted(edges):
        component = {node} | {n for n in reachable[node] if node in reachable.get(n, set())}
        if len(component) > 1 and component not in components:
            components.append(component)
    return components


def test_no_cycle_even_through_type_only_imports() -> None:
    """No two top-level modules import each other, not even through annotations (the last
    two, telemetry ↔ execute and tools ↔ authorize, are gone: telemetry names the shape
    of a call it traces, and tools stores a tool's output trust as given)."""
    assert _cycles(exclude_type_checking_imports=False) == []
    assert _cycles(exclude_type_checking_imports=True) == []

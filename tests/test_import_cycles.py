"""The import cycles docs/design-notes.md names: with type-only imports counted, exactly two.

`lint-imports` leaves out imports made under ``TYPE_CHECKING`` (``.importlinter``), so
at run time callgate's top-level modules form no cycle. design-notes.md says which
two pairs close a cycle once those annotation-only imports are counted; this test
keeps that sentence true (it fails when a cycle is added or one is removed).
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


def test_type_only_imports_close_exactly_the_two_cycles_the_notes_name() -> None:
    """telemetry ↔ execute and tools ↔ authorize, through annotations only (that no cycle
    exists at run time is lint-imports' own contract, checked by ``make test``)."""
    assert _cycles(exclude_type_checking_imports=False) == [
        {"callgate.authorize", "callgate.tools"},
        {"callgate.execute", "callgate.telemetry"},
    ]

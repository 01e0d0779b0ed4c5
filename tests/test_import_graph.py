"""The import graph of the three packages has no circle, counting every import: top-level,
inside functions and under ``TYPE_CHECKING`` (a lazy import that hides a circle is still one)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("occurrences", "scheduler", "pysolate")


def _modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _imported(name: str, path: Path, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> list[str]:
    """The project modules one import statement names (``from . import sub`` names the
    submodule, not its package)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in modules]
    if node.level:
        base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join([*base, *([node.module] if node.module else [])])
    else:
        target = node.module or ""
    subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
    named = subs if len(subs) == len(node.names) else [target, *subs]
    return [m for m in named if m in modules]


def import_graph() -> nx.DiGraph:
    modules = _modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                graph.add_edges_from((name, m) for m in _imported(name, path, node, modules) if m != name)
    return graph


def test_the_graph_sees_the_imports() -> None:
    """A check that finds nothing because it reads nothing would pass too."""
    graph = import_graph()
    assert graph.has_edge("pysolate._host", "pysolate._run")
    assert any(m.startswith("occurrences") for m in graph.successors("scheduler._lane"))
    assert graph.number_of_edges() > 200


def test_no_import_circle() -> None:
    graph = import_graph()
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert circles == [], f"import circles: {circles}"


def test_imports_flow_from_occurrences_to_scheduler_to_pysolate() -> None:
    rank = {package: i for i, package in enumerate(PACKAGES)}
    upward = [
        (a, b) for a, b in import_graph().edges if rank[b.split(".")[0]] > rank[a.split(".")[0]]
    ]
    assert upward == []


def _owner(module: str) -> str | None:
    """The package a private module belongs to (``a.b`` of ``a.b._c`` or ``a.b._c.d``),
    None for a public module."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_"):
            return ".".join(parts[:i])
    return None


def test_no_private_import_from_outside_its_package() -> None:
    """A package's private modules are its own: a neighbour imports what the package
    exports (its ``__init__`` or a public module), so the package can reshape its insides."""
    leaks = []
    for importer, imported in import_graph().edges:
        owner = _owner(imported)
        if owner is not None and importer != owner and not importer.startswith(owner + "."):
            leaks.append(f"{importer} -> {imported}")
    assert sorted(leaks) == []


def test_the_private_import_check_sees_a_leak() -> None:
    assert _owner("occurrences.evaluator._free_names") == "occurrences.evaluator"
    assert _owner("pysolate._guest._child") == "pysolate"
    assert _owner("occurrences.plain") is None
    graph = import_graph()
    assert graph.has_edge("pysolate._guest._child", "occurrences.plain")

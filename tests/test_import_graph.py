"""The import graph of the three packages has no circle, counting every import: top-level,
inside functions and under ``TYPE_CHECKING`` (a lazy import that hides a circle is still one)."""

from __future__ import annotations

import ast
import sys
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


def _imported(
    name: str, path: Path, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]
) -> list[str]:
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
                graph.add_edges_from(
                    (name, m) for m in _imported(name, path, node, modules) if m != name
                )
    return graph


def test_the_graph_sees_the_imports() -> None:
    """A check that finds nothing because it reads nothing would pass too."""
    graph = import_graph()
    assert graph.has_edge("pysolate._run._host", "pysolate._run._run")
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
    assert _owner("pysolate._guest.child._child") == "pysolate"
    assert _owner("occurrences.plain") is None
    graph = import_graph()
    assert graph.has_edge("pysolate._guest.child._child", "occurrences.plain")


def _packages(graph: nx.DiGraph) -> list[str]:
    return sorted({m.rsplit(".", 1)[0] for m in graph if "." in m} | set(PACKAGES))


def rooms(graph: nx.DiGraph, package: str) -> nx.DiGraph:
    """The arrows between the rooms of one package: its modules and sub-packages, each
    sub-package one room whatever its insides import, and the package's own ``__init__``
    (its face) a room too."""
    depth = package.count(".") + 1
    quotient = nx.DiGraph()
    for a, b in graph.edges:
        inside = [m == package or m.startswith(package + ".") for m in (a, b)]
        if not all(inside):
            continue
        ra, rb = ("__init__" if m == package else m.split(".")[depth] for m in (a, b))
        if ra != rb:
            quotient.add_edge(ra, rb)
    return quotient


def test_no_arrow_runs_back_up_between_rooms() -> None:
    """At every scale the rooms stand in floors: a room imports only rooms below it, so each
    one can be read knowing only what is beneath (a circle of rooms has no bottom)."""
    graph = import_graph()
    circles = {}
    for package in _packages(graph):
        found = list(nx.simple_cycles(rooms(graph, package)))
        if found:
            circles[package] = found
    assert circles == {}


def test_the_room_check_sees_a_circle() -> None:
    graph = import_graph()
    graph.add_edge("pysolate._report._result", "pysolate._run._host")
    assert not nx.is_directed_acyclic_graph(rooms(graph, "pysolate"))
    assert rooms(graph, "pysolate").has_edge("_run", "_calls")


def test_the_guest_child_imports_nothing_of_the_host() -> None:
    """The child reads only ``pysolate/_guest/child``, ``pysolate/_guest_errors.py`` and
    ``occurrences`` (``_isolation._CHILD_SOURCES``); anything else it imported would be a
    module the sandbox cannot read, or a Host module made readable to every program."""
    graph = import_graph()
    child = [m for m in graph if m.startswith("pysolate._guest.child")]
    assert "pysolate._guest.child._child" in child
    outside = sorted(
        f"{a} -> {b}"
        for a in child
        for b in graph.successors(a)
        if not (
            b.startswith(("pysolate._guest.child", "occurrences")) or b == "pysolate._guest_errors"
        )
    )
    assert outside == []
    for module in child:
        tree = ast.parse(_modules()[module].read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top in ("pysolate", "occurrences"), (
                    module,
                    name,
                )

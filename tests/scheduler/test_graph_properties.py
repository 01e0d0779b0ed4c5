"""Properties of the event graph over generated programs.

- Any chunking of a source (statement boundaries, or arbitrary character chunks through
  the prefix parser) yields the same graph as feeding it whole.
- When results arrive does not matter: completing ready nodes between chunks or only at
  the end yields the same final graph (nodes, arguments, keys, flags, edges, states).
- The frontier hands out each node at most once, only READY, speculable, pre-write nodes
  with a key, and never two with equal keys (except a certain node after a discardable
  one, which it must not wait for).
"""

from __future__ import annotations

import ast
import sysconfig
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_graph import CAPS, key_for

from occurrences import PrefixParser
from scheduler import EventGraph, Node, State

COMMON = [
    'v{i} = docs.search("q{a}")',
    "v{i} = docs.get(v{k})",
    "v{i} = v{k} + v{k}",
    "v{i} = [docs.get(p) for p in v{k}]",
    "for f in v{k}:\n    v{i} = workspace.read_text(f)",
    'for f in ["a", "b{a}"]:\n    v{i} = docs.get(f)',
    'if v{k}[0] == "s":\n    v{i} = docs.get("yes{a}")\nelse:\n    v{i} = workspace.read_text("no")',
    "if len(v{k}) > 1:\n    v{i} = docs.get(v{k}[1])",
    'v{i} = workspace.read_text("f{a}")',
    'v{i} = fn("{a}")',
    'try:\n    v{i} = docs.get(v{k})\nexcept KeyError:\n    v{i} = docs.get("h")',
]
RARE = [
    'v{i} = workspace.write_text("out", "{a}")',
    "v{i} = docs.now()",
    "v{i} = fn(v{k})",
    "v{k}.append(1)\nv{i} = v{k}",
]
TEMPLATES = COMMON * 4 + RARE
PRELUDE = 'v0 = ["s"]\ndef fn(x):\n    r = docs.search(x)\n    return r\n'


@st.composite
def programs(draw: st.DrawFn) -> str:
    lines = [PRELUDE]
    for i in range(1, draw(st.integers(1, 12)) + 1):
        template = draw(st.sampled_from(TEMPLATES))
        lines.append(template.format(i=i, k=draw(st.integers(0, i - 1)), a=draw(st.integers(0, 2))))
    return "\n".join(lines) + "\n"


def result_for(node: Node) -> object:
    """Deterministic fake results that depend only on the call key."""
    assert node.key is not None
    return [f"{node.site.method}:{node.key.digest()[:4]}", "z"]


def settle_all(graph: EventGraph) -> None:
    """Run every ready, certain node (failing those whose key ends in 0) until nothing is
    ready: the lane's default policy, which leaves discardable work alone."""
    while ready := [n for n in graph.take_ready() if not n.discardable]:
        for node in ready:
            graph.mark_dispatched(node.id)
            if node.key is not None and node.key.digest().endswith("0"):
                graph.fail(node.id)
            else:
                graph.complete(node.id, result_for(node))


def fingerprint(graph: EventGraph, *, timing_free: bool = False) -> object:
    """Everything about the final graph; ``timing_free`` leaves out what legitimately
    depends on when results arrived: discovery order, and what became of a node under a
    branch that died (dropped, or completed alongside an equal-key leader first) or that is
    still undecided (it may complete by following an equal-key certain node, or wait)."""
    nodes = sorted(
        (
            str(n.id),
            n.args,
            n.kwargs,
            n.key,
            n.pre_write,
            n.discardable,
            n.dead,
            "dead"
            if timing_free and n.dead
            else "undecided"
            if timing_free and n.discardable
            else n.state,
            None if timing_free else n.order,
        )
        for n in graph.nodes()
    )
    edges = sorted((str(a), str(b), d["kind"]) for a, b, d in graph.graph.edges(data=True))
    return repr(nodes), edges


def fed_by_statements(src: str, cuts: list[int]) -> EventGraph:
    body = ast.parse(src).body
    graph = EventGraph(CAPS, key_for)
    start = 0
    for cut in [*sorted(c % (len(body) + 1) for c in cuts), len(body)]:
        graph.add_statements(body[start:cut] if cut >= start else [])
        start = max(start, cut)
    return graph


def fed_by_parser(src: str, cuts: list[int]) -> EventGraph:
    graph = EventGraph(CAPS, key_for)
    parser = PrefixParser()
    positions = sorted({c % (len(src) + 1) for c in cuts})
    start = 0
    for end in [*positions, len(src)]:
        snapshot = parser.feed(src[start:end])
        if snapshot is not None:
            graph.add_statements(snapshot.new_statements)
        start = end
    final = parser.close()
    graph.add_statements(final.new_statements)
    return graph


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(programs(), st.lists(st.integers(0, 10_000), max_size=6))
def test_any_statement_chunking_yields_the_same_graph(src: str, cuts: list[int]) -> None:
    whole = EventGraph(CAPS, key_for)
    whole.add_statements(ast.parse(src).body)
    chunked = fed_by_statements(src, cuts)
    assert fingerprint(chunked) == fingerprint(whole)
    settle_all(whole)
    settle_all(chunked)
    assert fingerprint(chunked) == fingerprint(whole)


@SETTINGS
@given(programs(), st.lists(st.integers(0, 10_000), max_size=12))
def test_any_character_chunking_through_the_parser_yields_the_same_graph(
    src: str, cuts: list[int]
) -> None:
    whole = EventGraph(CAPS, key_for)
    whole.add_statements(ast.parse(src).body)
    assert fingerprint(fed_by_parser(src, cuts)) == fingerprint(whole)


@SETTINGS
@given(programs(), st.lists(st.integers(0, 10_000), max_size=6))
def test_when_results_arrive_does_not_change_the_final_graph(src: str, cuts: list[int]) -> None:
    at_end = EventGraph(CAPS, key_for)
    at_end.add_statements(ast.parse(src).body)
    settle_all(at_end)
    body = ast.parse(src).body
    eager = EventGraph(CAPS, key_for)
    start = 0
    for cut in [*sorted(c % (len(body) + 1) for c in cuts), len(body)]:
        eager.add_statements(body[start:cut] if cut >= start else [])
        start = max(start, cut)
        settle_all(eager)
    assert fingerprint(eager, timing_free=True) == fingerprint(at_end, timing_free=True)


@SETTINGS
@given(programs())
def test_frontier_hands_out_only_eligible_nodes_once_with_distinct_keys(src: str) -> None:
    graph = EventGraph(CAPS, key_for)
    graph.add_statements(ast.parse(src).body)
    seen: set[object] = set()
    keys: dict[object, Node] = {}
    while ready := graph.take_ready():
        assert all(node.state is State.READY for node in ready)
        for node in ready:
            if node.state is not State.READY:
                continue  # an earlier completion in this batch decided its branch or its leader
            assert node.id not in seen
            seen.add(node.id)
            assert node.key is not None
            assert node.effect.speculable and node.pre_write
            earlier = keys.get(node.key)
            # Only a certain node may repeat a key, and only one held by a discardable node.
            assert earlier is None or (earlier.discardable and not node.discardable)
            keys[node.key] = node
            graph.mark_dispatched(node.id)
            graph.complete(node.id, result_for(node))
    stats = graph.statistics()
    assert sum(stats.states.values()) == stats.nodes


def _corpus_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)


def _survives(path: Path) -> int:
    """Feed the module and every function body in ``path`` as top-level code (with
    capability names that real code uses), run every ready node; returns nodes seen."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return 0
    caps = {
        name: {
            "join": CAPS["docs"]["get"],
            "get": CAPS["docs"]["search"],
            "write": CAPS["workspace"]["write_text"],
        }
        for name in ("os", "sys", "re", "self", "cls", "path", "result", "name")
    }
    bodies = [tree.body] + [
        f.body for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    seen = 0
    for body in bodies:
        graph = EventGraph(caps, key_for)
        graph.add_statements(body)
        while ready := graph.take_ready():
            for node in ready:
                graph.mark_dispatched(node.id)
                graph.complete(node.id, ["a", "b"])
        seen += graph.statistics().nodes
    return seen


def test_discovery_survives_real_code_sampled() -> None:
    """Nothing in real Python code makes discovery or the graph raise (40 stdlib files)."""
    files = _corpus_files()
    assert sum(_survives(p) for p in files[:: max(1, len(files) // 40)]) > 0


@pytest.mark.corpus
def test_discovery_survives_real_code_whole_stdlib(request: pytest.FixtureRequest) -> None:
    """The whole standard library (about two minutes): only when selected with ``-m corpus``."""
    if "corpus" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("whole standard library: select with -m corpus")
    for path in _corpus_files():
        _survives(path)

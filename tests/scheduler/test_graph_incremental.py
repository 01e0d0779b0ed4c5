"""Provisional discovery is incremental (issue 36, divergence 6 / item 7).

An unfinished ``for`` over known items is discovered again for every line its body gains.
Each new line must cost that line - one walk of the new statement per iteration - not the
block, while every provisional call it offers is the one a fresh walk of the same parse
offers (within an iteration: the names the statements before it bound there). Counted in
statements walked, not timed.
"""

from __future__ import annotations

import ast

import pytest

from occurrences import CallKey, Effect, MethodSpec, NotPlain, PrefixParser, canonical_arguments
from occurrences.discovery import _provisional
from scheduler import EventGraph, Node, State

CAPS = {
    "docs": {"get": MethodSpec(Effect.IMMUTABLE_READ, "1"), "search": MethodSpec(Effect.PURE, "1")}
}


def key_for(
    capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> CallKey | None:
    try:
        return CallKey(
            capability, method, "1", canonical_arguments({"args": args, "kwargs": kwargs}), "root"
        )
    except NotPlain:
        return None


def loop(lines: int) -> str:
    body = "".join(
        f'    p{i} = "doc/" + d + "/{i}"\n    r{i} = docs.get(p{i})\n' for i in range(lines)
    )
    return 'items = ["a", "b", "c"]\nfor d in items:\n' + body + "done = 1\n"


def streamed(source: str, size: int = 5) -> tuple[EventGraph, list[int]]:
    """Stream ``source`` in ``size``-character chunks; the graph, and the statements
    discovery walked in each provisional update."""
    parser, graph = PrefixParser(), EventGraph(CAPS, key_for)
    walked: list[int] = []
    count = 0
    original = _provisional.ProvisionalDiscovery._stmt

    def counting(self: _provisional.ProvisionalDiscovery, node: ast.stmt, ctx: object) -> None:
        nonlocal count
        count += 1
        original(self, node, ctx)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_provisional.ProvisionalDiscovery, "_stmt", counting)
        for at in range(0, len(source), size):
            snap = parser.feed(source[at : at + size])
            if snap is not None:
                graph.add_statements(snap.new_statements)
            found = parser.pending()
            if found is not None:
                count = 0
                graph.add_provisional(found)
                walked.append(count)
            answer(graph)
    return graph, walked


def answer(graph: EventGraph) -> None:
    for node in graph.take_ready():
        if node.state is State.READY:
            graph.mark_dispatched(node.id)
            graph.complete(node.id, f"got {node.args[0] if node.args else ''}")


def gets(nodes: list[Node]) -> list[object]:
    return [n.args[0] for n in nodes if n.args]


def test_each_new_line_walks_that_line_in_each_iteration_only() -> None:
    _, short = streamed(loop(10))
    _, long = streamed(loop(40))
    assert len(long) >= 40, "a provisional update per line at least"
    # Three iterations: a resumed update walks the new statements (one or two) in each.
    assert max(long[2:]) <= 3 * 2 + 1 and max(long[2:]) == max(short[2:]), (short, long)


def test_a_resumed_walk_offers_what_a_fresh_walk_of_the_same_parse_offers() -> None:
    """Within each iteration a new line reads what the lines before it bound there: the
    keys of the provisional calls are those of the final, accepted loop."""
    graph, _ = streamed(loop(12))
    provisional = {(n.site.lineno, n.args) for n in graph.nodes() if n.provisional and n.args}
    real = {(n.site.lineno, n.args) for n in graph.nodes() if not n.provisional and n.args}
    assert len(real) == 12 * 3
    assert real <= provisional, sorted(real - provisional)[:5]


def test_a_loop_that_may_write_is_walked_afresh() -> None:
    """Branch writes must be speculated in program order, which a resumed walk does not keep:
    a body with a write is discovered afresh for each line (it stays correct, not linear)."""
    caps = {**CAPS, "kv": {"put": MethodSpec(Effect.WRITE, "1")}}
    source = (
        'for d in ["a", "b"]:\n' + "".join(f"    kv.put(d, {i})\n" for i in range(6)) + "done = 1\n"
    )
    parser, graph = PrefixParser(), EventGraph(caps, key_for)
    for at in range(0, len(source), 7):
        snap = parser.feed(source[at : at + 7])
        if snap is not None:
            graph.add_statements(snap.new_statements)
        found = parser.pending()
        if found is not None:
            graph.add_provisional(found)
            live = graph.provisional_generation
            puts = [
                n for n in graph.nodes() if n.provisional and graph.provisional_parse(n) == live
            ]
            (top,) = found.statements
            assert isinstance(top, ast.For)
            assert len(puts) == 2 * len(top.body), "the newest parse holds every write"

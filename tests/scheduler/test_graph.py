"""The event graph: lifecycle, data edges, the ready frontier and dedup of equal keys."""

from __future__ import annotations

import ast

import pytest

from occurrences import CallKey, Effect, MethodSpec, NotPlain, canonical_arguments
from scheduler import EventGraph, IllegalTransition, Node, State, transition

CAPS = {
    "docs": {
        "search": MethodSpec(Effect.PURE, "1"),
        "get": MethodSpec(Effect.PURE, "1"),
        "now": MethodSpec(Effect.LIVE_READ, "1"),
    },
    "workspace": {
        "read_text": MethodSpec(Effect.IMMUTABLE_READ, "1"),
        "list_dir": MethodSpec(Effect.IMMUTABLE_READ, "1"),
        "write_text": MethodSpec(Effect.WRITE, "1"),
    },
}


def key_for(
    capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> CallKey | None:
    """A stand-in for the Host's binding: refuses a keyword named ``unbindable``."""
    if "unbindable" in kwargs:
        return None
    try:
        arguments = canonical_arguments({"args": args, "kwargs": kwargs})
    except NotPlain:
        return None
    return CallKey(capability, method, "1", arguments, "root")


def graph_of(src: str) -> EventGraph:
    graph = EventGraph(CAPS, key_for)
    graph.add_statements(ast.parse(src).body)
    return graph


def by_line(graph: EventGraph, lineno: int) -> Node:
    (node,) = [n for n in graph.nodes() if n.site.lineno == lineno]
    return node


def run(graph: EventGraph, node: Node, result: object) -> None:
    graph.mark_dispatched(node.id)
    graph.complete(node.id, result)


def test_straight_line_calls_are_ready_in_source_order() -> None:
    graph = graph_of(
        'a = docs.search("x")\nb = workspace.read_text("f.py")\ndocs.get(3, mode="full")\n'
    )
    ready = graph.take_ready()
    assert [(n.site.method, n.args, n.kwargs) for n in ready] == [
        ("search", ("x",), {}),
        ("read_text", ("f.py",), {}),
        ("get", (3,), {"mode": "full"}),
    ]
    assert all(n.state is State.READY and n.key is not None and not n.discardable for n in ready)
    assert graph.take_ready() == [], "each node is handed out once"


def test_non_speculable_occurrences_are_nodes_but_never_ready() -> None:
    graph = graph_of('docs.now()\nworkspace.write_text("a", "b")\ndocs.unheard_of(1)\n')
    states = [(n.site.method, n.effect, n.state) for n in graph.nodes()]
    assert states == [
        ("now", Effect.LIVE_READ, State.INELIGIBLE),
        ("write_text", Effect.WRITE, State.INELIGIBLE),
        ("unheard_of", Effect.UNKNOWN, State.INELIGIBLE),
    ]
    assert graph.take_ready() == []


def test_read_after_write_on_same_capability_is_not_pre_write() -> None:
    graph = graph_of(
        'workspace.read_text("a")\nworkspace.write_text("a", "x")\n'
        'workspace.read_text("a")\ndocs.get(1)\n'
    )
    first, _, after, other = graph.nodes()
    assert first.pre_write and first.state is State.READY
    assert not after.pre_write and after.state is State.INELIGIBLE
    assert other.pre_write, "a write on workspace does not move docs to a new view"


def test_live_read_does_not_change_views() -> None:
    graph = graph_of('docs.now()\ndocs.get("a")\n')
    assert by_line(graph, 2).pre_write


def test_unbindable_key_is_never_eligible() -> None:
    graph = graph_of('r = docs.search("x", unbindable=1)\ndocs.get(r)\n')
    first, dependent = graph.nodes()
    assert first.state is State.INELIGIBLE and first.key is None
    assert dependent.state is State.INELIGIBLE, "what reads a result that never comes stays unknown"


def test_data_edge_blocks_until_result_then_arguments_are_evaluated() -> None:
    graph = graph_of('r = docs.search("q")\nfirst = r[0]\ndocs.get(first.upper(), n=len(r))\n')
    (search,) = graph.take_ready()
    get = by_line(graph, 3)
    assert get.state is State.BLOCKED and get.args is None
    assert graph.graph.has_edge(search.id, get.id)
    assert graph.graph.edges[search.id, get.id]["kind"] == "data"
    run(graph, search, ["abc", "def"])
    assert get.state is State.READY
    assert get.args == ("ABC",) and get.kwargs == {"n": 2}
    assert graph.take_ready() == [get]


def test_nested_call_argument_is_a_data_edge() -> None:
    graph = graph_of('docs.get(docs.search("q")[1])\n')
    (inner,) = graph.take_ready()
    assert inner.site.method == "search"
    run(graph, inner, ["a", "b"])
    (outer,) = graph.take_ready()
    assert outer.site.method == "get" and outer.args == ("b",)


def test_failed_producer_leaves_dependents_unknown_forever() -> None:
    graph = graph_of('r = docs.search("q")\ndocs.get(r)\n')
    (search,) = graph.take_ready()
    graph.mark_dispatched(search.id)
    graph.fail(search.id)
    get = by_line(graph, 2)
    assert search.state is State.FAILED
    assert get.state is State.INELIGIBLE and get.args is None
    assert graph.take_ready() == []


def test_non_speculable_producer_leaves_dependents_unknown() -> None:
    graph = graph_of("t = docs.now()\ndocs.get(t)\n")
    assert by_line(graph, 2).state is State.INELIGIBLE
    assert graph.take_ready() == []


def test_result_is_copied_and_never_aliased_into_arguments() -> None:
    graph = graph_of('r = docs.search("q")\ndocs.get(r)\n')
    (search,) = graph.take_ready()
    value = [["x"]]
    run(graph, search, value)
    (get,) = graph.take_ready()
    value[0].append("mutated by the tool afterwards")
    assert get.args == ([["x"]],)


def test_equal_keys_are_handed_out_once_and_followers_complete_with_leader() -> None:
    graph = graph_of('a = docs.search("q")\nb = docs.search("q")\ndocs.get(b)\n')
    ready = graph.take_ready()
    assert len(ready) == 1
    leader = ready[0]
    follower = by_line(graph, 2)
    assert follower.state is State.FOLLOWING and follower.leader == leader.id
    assert leader.followers == [follower.id]
    run(graph, leader, ["r"])
    assert follower.state is State.COMPLETED
    (get,) = graph.take_ready()
    assert get.args == (["r"],), "the follower's dependents get the shared result"


def test_node_ready_after_leader_completed_follows_immediately() -> None:
    graph = graph_of('a = docs.search("q")\n')
    (leader,) = graph.take_ready()
    run(graph, leader, "R")
    graph.add_statements(ast.parse('a = 1\nb = docs.search("q")\ndocs.get(b)\n').body)
    follower = by_line(graph, 2)
    assert follower.state is State.COMPLETED
    (get,) = graph.take_ready()
    assert get.args == ("R",)


def test_follower_of_failed_leader_fails() -> None:
    graph = graph_of('docs.search("q")\ndocs.search("q")\n')
    (leader,) = graph.take_ready()
    graph.mark_dispatched(leader.id)
    graph.fail(leader.id)
    assert by_line(graph, 2).state is State.FAILED


def test_different_views_or_arguments_are_not_deduplicated() -> None:
    graph = graph_of('docs.search("q")\ndocs.search("q", 2)\ndocs.get("q")\n')
    assert len(graph.take_ready()) == 3


def test_settle_dispositions_and_illegal_moves() -> None:
    graph = graph_of('docs.search("a")\ndocs.search("b")\n')
    a, b = graph.take_ready()
    run(graph, a, 1)
    graph.settle(a.id, "claimed")
    assert a.state is State.CLAIMED
    with pytest.raises(IllegalTransition):
        graph.settle(a.id, State.ORPHANED)
    with pytest.raises(ValueError):
        graph.settle(b.id, State.COMPLETED)
    with pytest.raises(IllegalTransition):
        graph.complete(b.id, 1)  # never dispatched
    graph.mark_dispatched(b.id)
    graph.settle(b.id, State.CANCELLED)
    graph.settle(b.id, State.LATE)
    assert b.state is State.LATE


def test_transition_function_rejects_what_the_lifecycle_does_not_allow() -> None:
    assert transition(State.DISCOVERED, State.BLOCKED) is State.BLOCKED
    for current, target in [
        (State.DISCOVERED, State.DISPATCHED),
        (State.BLOCKED, State.COMPLETED),
        (State.INELIGIBLE, State.READY),
        (State.CLAIMED, State.ORPHANED),
        (State.DROPPED, State.READY),
    ]:
        with pytest.raises(IllegalTransition):
            transition(current, target)


def test_statistics_is_an_immutable_snapshot() -> None:
    graph = graph_of('r = docs.search("q")\ndocs.get(r)\nworkspace.write_text("a", "b")\n')
    stats = graph.statistics()
    assert (stats.nodes, stats.edges, stats.queued) == (3, 1, 1)
    assert stats.states[State.READY] == 1
    assert stats.states[State.BLOCKED] == 1
    assert stats.states[State.INELIGIBLE] == 1
    graph.take_ready()
    assert stats.queued == 1 and graph.statistics().handed_out == 1
    with pytest.raises(TypeError):
        stats.states[State.READY] = 5  # type: ignore[index]


def test_incremental_feeding_equals_whole_feeding() -> None:
    src = 'r = docs.search("q")\nx = r + "!"\ndocs.get(x)\nworkspace.read_text("a")\n'
    whole = graph_of(src)
    parts = EventGraph(CAPS, key_for)
    for stmt in ast.parse(src).body:
        parts.add_statements([stmt])
    assert [(n.id, n.state, n.args) for n in whole.nodes()] == [
        (n.id, n.state, n.args) for n in parts.nodes()
    ]
    assert sorted(map(str, whole.graph.edges)) == sorted(map(str, parts.graph.edges))


def test_branch_on_a_result_hands_out_discardable_nodes_then_resolves() -> None:
    graph = graph_of(
        'r = docs.search("q")\nif r:\n    docs.get("yes")\nelse:\n    docs.get("no")\n'
    )
    search, yes, no = graph.take_ready()
    assert yes.discardable and no.discardable
    assert graph.graph.edges[search.id, yes.id]["kind"] == "control"
    graph.mark_dispatched(yes.id)  # the policy allows discardable work; "no" was declined
    run(graph, search, [])
    assert not no.discardable and not no.dead
    assert yes.dead and yes.state is State.DISPATCHED, "already running: the lane decides"
    assert graph.take_ready() == [no], "declined while discardable, offered again once taken"
    assert graph.take_ready() == []


def test_a_ready_node_not_dispatched_is_dropped_when_its_branch_dies() -> None:
    graph = graph_of('r = docs.search("q")\nif r:\n    docs.get("yes")\n')
    search, yes = graph.take_ready()
    run(graph, search, [])
    assert yes.state is State.DROPPED


def test_dead_branch_nodes_not_yet_ready_are_dropped() -> None:
    graph = graph_of('r = docs.search("q")\nif r:\n    docs.get(r[0])\n')
    (search,) = graph.take_ready()
    get = by_line(graph, 3)
    assert get.state is State.BLOCKED
    run(graph, search, [])
    assert get.state is State.DROPPED
    assert graph.take_ready() == []


def test_loop_over_a_result_adds_ready_nodes_when_it_completes() -> None:
    graph = graph_of(
        'for f in workspace.list_dir("."):\n    workspace.read_text(f)\nworkspace.read_text("z")\n'
    )
    listing, z = graph.take_ready()
    run(graph, listing, ["a", "b"])
    ready = graph.take_ready()
    assert [(n.args, n.id.path) for n in ready] == [(("a",), (0,)), (("b",), (1,))]
    assert z.order < ready[0].order, "program order is discovery order"


def test_a_certain_node_does_not_follow_a_discardable_one() -> None:
    graph = graph_of('if ask():\n    docs.get("k")\ndocs.get("k")\n')
    inside, outside = graph.take_ready()
    assert inside.discardable and not outside.discardable
    assert outside.state is State.READY and outside.leader is None


def test_a_follower_takes_over_when_its_leader_is_dropped() -> None:
    graph = graph_of(
        'r = docs.search("q")\nif r:\n    docs.get("k")\nif ask():\n    docs.get("k")\n'
    )
    _, leader = graph.take_ready()
    follower = by_line(graph, 5)
    assert follower.state is State.FOLLOWING
    graph.mark_dispatched(leader.id)
    graph.settle(leader.id, State.CANCELLED)
    assert follower.state is State.READY and follower.leader is None
    assert graph.take_ready() == [follower]


def test_a_follower_settles_as_its_leader_when_the_leader_never_delivered() -> None:
    graph = graph_of('docs.search("q")\ndocs.search("q")\ndocs.get("a")\ndocs.get("a")\n')
    late, cancelled = graph.take_ready()
    for leader, disposition in ((late, State.LATE), (cancelled, State.CANCELLED)):
        graph.mark_dispatched(leader.id)
        (follower_id,) = leader.followers
        graph.settle(follower_id, disposition)  # the lane settles followers first
        graph.settle(leader.id, disposition)
        assert graph.node(follower_id).state is disposition and leader.state is disposition


def test_a_node_that_becomes_certain_leads_instead_of_following_an_undecided_leader() -> None:
    """Equal keys in two branches: the first stays undecided (its condition's call fails),
    the second's condition resolves; the certain one must be handed out, not left waiting on
    a discardable leader that a lane refusing discardable work never runs."""
    graph = graph_of(
        "a = docs.search('never')\n"
        "b = docs.search('soon')\n"
        "if a:\n    x = docs.get('k')\n"
        "if b:\n    y = docs.get('k')\n"
    )
    by_site = {(n.site.method, n.site.lineno): n for n in graph.nodes()}
    first, second = by_site[("get", 4)], by_site[("get", 6)]
    for node in graph.take_ready():
        if node.discardable:
            continue  # what a lane with the default policy does
        graph.mark_dispatched(node.id)
        if node.args == ("never",):
            graph.fail(node.id)
        else:
            graph.complete(node.id, ["hit"])
    assert first.discardable and not second.discardable
    ready = [n for n in graph.take_ready() if not n.discardable]
    assert [n.id for n in ready] == [second.id]
    assert first.state is State.FOLLOWING and first.leader == second.id
    graph.mark_dispatched(second.id)
    graph.complete(second.id, "v")
    assert (first.state, second.state) == (State.COMPLETED, State.COMPLETED)

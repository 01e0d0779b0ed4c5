"""Dead early work is released at once (issue 36, item 4).

When the graph learns that a dispatched occurrence can no longer be reached - a ``break``
after a loop's calls, a branch not taken, an element of a statement still streaming that
changed - it hands the occurrence to the lane (``take_withdrawn``) in the same update, so
the lane can cancel its early call and free its slot. Work something newer may still want
is kept: an equal-key occurrence of the newer description, a twin at the same call site
whose arguments are not known yet, a call site the accepted statement has not reached yet.

Each case streams a program line by line into a graph as ``run_stream`` does, marking the
ready calls dispatched (a lane that starts everything and never finishes).
"""

from __future__ import annotations

from occurrences import CallKey, Effect, MethodSpec, NotPlain, PrefixParser, canonical_arguments
from scheduler import EventGraph, Node, State

CAPS = {
    "docs": {"search": MethodSpec(Effect.PURE, "1"), "get": MethodSpec(Effect.IMMUTABLE_READ, "1")},
    "kb": {"get": MethodSpec(Effect.IMMUTABLE_READ, "1")},
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


class Running:
    """A graph fed line by line whose ready calls are all dispatched and left running."""

    def __init__(self) -> None:
        self.parser = PrefixParser()
        self.graph = EventGraph(CAPS, key_for)
        self.running: list[Node] = []

    def feed(self, text: str) -> list[Node]:
        """Feed ``text``; the nodes withdrawn by it."""
        snap = self.parser.feed(text)
        if snap is not None:
            self.graph.add_statements(snap.new_statements)
            self.dispatch()
        found = self.parser.pending()
        if found is not None:
            self.graph.add_provisional(found)
            self.dispatch()
        return [self.graph.node(i) for i in self.graph.take_withdrawn()]

    def dispatch(self) -> None:
        for node in self.graph.take_ready():
            self.graph.mark_dispatched(node.id)
            self.running.append(node)


def queries(nodes: list[Node]) -> list[object]:
    """Each call's one argument."""
    return [
        next(iter(n.kwargs.values())) if n.kwargs else n.args[0] if n.args else None for n in nodes
    ]


def test_a_break_withdraws_the_later_iterations_when_it_streams() -> None:
    s = Running()
    s.feed('topics = ["a", "b", "c", "d"]\n')
    s.feed("for t in topics:\n")
    assert s.feed("    docs.search(query=t)\n") == []
    assert queries(s.running) == ["a", "b", "c", "d"]
    withdrawn = s.feed("    break\n")
    assert queries(withdrawn) == ["b", "c", "d"], "before the loop is complete"
    assert all(n.state is State.DISPATCHED for n in withdrawn), "settled by the lane, not here"
    assert s.feed("done = 1\n") == [], "the first one is the accepted loop's"


def test_a_break_under_a_known_condition_withdraws_what_follows_it() -> None:
    s = Running()
    s.feed('topics = ["a", "b", "c"]\n')
    s.feed("for t in topics:\n")
    s.feed("    docs.search(query=t)\n")
    assert s.feed("    if t == 'b':\n") == []
    assert queries(s.feed("        break\n")) == ["c"], "the items are known: it breaks at b"
    assert s.feed("done = 1\n") == []


def test_a_branch_not_taken_withdraws_its_running_work() -> None:
    s = Running()
    s.feed('mode = kb.get(key="mode")\n')
    (mode,) = s.running
    s.feed("if mode:\n")
    s.feed('    docs.search(query="on")\n')
    s.feed("else:\n")
    s.feed('    docs.search(query="off")\n')
    assert s.feed("x = 1\n") == []
    on, off = (n for n in s.running if n.site.method == "search")
    assert on.discardable and off.discardable and queries([on, off]) == ["on", "off"]
    s.graph.complete(mode.id, "")
    assert s.graph.take_withdrawn() == [on.id], "mode is false: the body's search is dead"


def test_an_element_that_changed_is_withdrawn_and_its_twin_leads_anew() -> None:
    s = Running()
    s.feed('q = "outer"\n')
    s.feed("pages = [(\n")
    s.feed("    docs.search(query=q),\n")
    assert queries(s.running) == ["outer"]
    withdrawn = s.feed('    1) for q in ["a", "b"]]\n')
    assert queries(withdrawn) == ["outer"], "the element reads the loop's q now"
    assert queries(s.running[1:]) == ["a", "b"]


def test_work_a_twin_may_still_want_is_kept_until_its_arguments_are_known() -> None:
    """At acceptance the real occurrence of a dependent call waits for the result its
    argument reads (the lane joins its producer to the early work after the update): the
    early dependent call is kept; withdrawn only if its twin's key turns out different."""
    s = Running()
    s.feed("if True:\n")
    s.feed('    k = kb.get(key="mode")\n')
    (get,) = s.running
    s.graph.complete(get.id, "m1")
    s.dispatch()
    s.feed("    docs.search(query=k)\n")
    (search,) = s.running[1:]
    assert queries([search]) == ["m1"]
    assert s.feed("x = 1\n") == [], "its twin is blocked on the real kb.get"
    real_get = next(n for n in s.running if not n.provisional and n.site.method == "get")
    s.graph.complete(real_get.id, "m2")
    assert s.graph.take_withdrawn() == [search.id], "the real call reads m2"


def test_work_in_a_loop_the_accepted_statement_has_not_expanded_is_kept() -> None:
    """A loop over a call's result expands when the result arrives: at acceptance the
    real loop has not reached the call site, so early work there is not given up."""
    s = Running()
    s.feed('for t in docs.search(query="topics"):\n')
    (listing,) = s.running
    s.graph.complete(listing.id, ["a", "b"])
    s.dispatch()
    s.feed("    docs.get(t)\n")
    assert queries(s.running[1:]) == ["a", "b"]
    assert s.feed("x = 1\n") == []
    real_listing = next(n for n in s.running if not n.provisional and n.site.method == "search")
    s.graph.complete(real_listing.id, ["a"])
    assert queries([s.graph.node(i) for i in s.graph.take_withdrawn()]) == ["b"]

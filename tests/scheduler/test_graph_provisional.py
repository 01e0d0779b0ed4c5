"""Provisional occurrences: calls found in a statement that is still streaming.

Each case streams a program line by line through ``PrefixParser`` into an ``EventGraph``
(``add_provisional`` after each line, ``add_statements`` when the parser accepts), as the
stream-run glue does, and checks which calls became ready before their statement was
complete, and what became of them once it was: dispatched work is kept for the real
occurrence with the same key (joined in the lane) or ends orphaned/cancelled; work never
dispatched is dropped.
"""

from __future__ import annotations

import anyio
import pytest
from waiting import wait_until_quiet

from occurrences import CallKey, Effect, MethodSpec, NotPlain, PrefixParser, canonical_arguments
from scheduler import Disposition, EventGraph, LanePolicy, Node, Observation, SpeculativeLane, State

CAPS = {
    "docs": {"search": MethodSpec(Effect.PURE, "1"), "get": MethodSpec(Effect.IMMUTABLE_READ, "1")},
    "kb": {"get": MethodSpec(Effect.IMMUTABLE_READ, "1"), "put": MethodSpec(Effect.WRITE, "1")},
}


def key_for(
    capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> CallKey | None:
    try:
        arguments = canonical_arguments({"args": args, "kwargs": kwargs})
    except NotPlain:
        return None
    return CallKey(capability, method, "1", arguments, "root")


class Streamed:
    """A graph fed the way ``run_stream`` feeds it, one piece at a time."""

    def __init__(self) -> None:
        self.parser = PrefixParser()
        self.graph = EventGraph(CAPS, key_for)

    def feed(self, text: str) -> list[Node]:
        """Feed ``text``; the nodes that became ready (taken from the frontier)."""
        self.put(text)
        return self.graph.take_ready()

    def put(self, text: str) -> None:
        """Feed ``text``, leaving the frontier to a lane."""
        snap = self.parser.feed(text)
        if snap is not None:
            self.graph.add_statements(snap.new_statements)
        found = self.parser.pending()
        if found is not None:
            self.graph.add_provisional(found)

    def close(self) -> list[Node]:
        self.graph.add_statements(self.parser.close().new_statements)
        return self.graph.take_ready()


def calls(nodes: list[Node]) -> list[tuple[str, tuple[object, ...], bool]]:
    return [
        (n.site.method, tuple(n.kwargs.values()) if n.kwargs else n.args or (), n.provisional)
        for n in nodes
    ]


def run(graph: EventGraph, node: Node, result: object) -> None:
    graph.mark_dispatched(node.id)
    graph.complete(node.id, result)


def test_a_read_in_an_if_body_is_ready_before_the_if_is_complete() -> None:
    """Branch taken: the body's read is ready (provisional) once its line has streamed and
    the condition is known; the real occurrence arrives with the same key when the ``if``
    is accepted, so the lane can join it to the early work."""
    s = Streamed()
    assert s.feed('mode = "fast"\n') == []
    assert s.feed('if mode == "fast":\n') == []
    ready = s.feed('    plan = docs.search(query="fast path")\n')
    assert calls(ready) == [("search", ("fast path",), True)]
    early = ready[0]
    assert not early.discardable, "the condition is known: taken"
    run(s.graph, early, ["p"])
    assert s.feed("else:\n") == []
    assert calls(s.feed('    plan = docs.search(query="safe")\n')) == [], "a dead branch"
    real = s.feed("x = 1\n")
    assert calls(real) == [("search", ("fast path",), False)]
    assert real[0].key == early.key
    assert early.state is State.COMPLETED, "dispatched work is kept"


def test_branch_not_taken_is_dropped_when_the_condition_arrives() -> None:
    """The condition reads a result: the body's read waits (discardable) and is dropped
    when the result says the branch is not taken."""
    s = Streamed()
    (mode,) = s.feed('mode = kb.get(key="mode")\n')
    s.feed('if mode == "fast":\n')
    ready = s.feed('    plan = docs.search(query="fast path")\n')
    assert calls(ready) == [("search", ("fast path",), True)]
    assert ready[0].discardable, "undecided until the result arrives"
    run(s.graph, mode, "safe")
    assert ready[0].state is State.DROPPED
    assert s.feed("else:\n") == []
    (taken,) = s.feed('    plan = docs.search(query="safe path")\n')
    assert calls([taken]) == [("search", ("safe path",), True)] and not taken.discardable


def test_loop_body_later_iterations_are_unsure_but_not_discardable() -> None:
    """A ``break`` may still follow in the body: only the first iteration runs for sure.
    The later ones are *unsure* provisional work, offered like every provisional call (the
    loop's items and the call's text are final), not held back as discardable."""
    s = Streamed()
    s.feed('topics = ["a", "b", "c"]\n')
    s.feed("for t in topics:\n")
    ready = s.feed("    docs.search(query=t)\n")
    assert calls(ready) == [
        ("search", ("a",), True),
        ("search", ("b",), True),
        ("search", ("c",), True),
    ]
    assert [n.unsure for n in ready] == [False, True, True]
    assert not any(n.discardable for n in ready)
    s.feed("    if t == 'b':\n        break\n")
    final = s.feed("done = 1\n")
    assert calls(final) == [("search", ("a",), False), ("search", ("b",), False)], "it breaks at b"
    assert all(not n.provisional for n in final)
    assert all(n.state is State.DROPPED for n in ready), "superseded, never dispatched"


def test_later_iterations_run_early_and_a_break_leaves_the_extra_one_orphaned() -> None:
    """The lane (discardable work refused) starts every iteration's read once the body's
    line has streamed; the ``break`` that follows makes the third one unneeded: the real
    occurrences claim the first two by key, the third is accounted orphaned, and with the
    provisional policy off none of them runs before the loop is complete."""

    async def main(policy: LanePolicy) -> tuple[list[str], dict[int, Disposition]]:
        s = Streamed()
        started: list[str] = []

        async def execute(node: Node, obs: Observation) -> object:
            obs.probe.invoke()
            assert node.kwargs is not None
            started.append(str(node.kwargs["query"]))
            return ["r"]

        async with SpeculativeLane(s.graph, execute, policy) as lane:
            for text in (
                'topics = ["a", "b", "c"]\n',
                "for t in topics:\n",
                "    docs.search(query=t)\n",
            ):
                s.put(text)
                lane.pump()
                await wait_until_quiet()
            early = list(started)
            for text in ("    if t == 'b':\n        break\n", "done = 1\n"):
                s.put(text)
                lane.pump()
                await wait_until_quiet()
            for n in s.graph.nodes():
                if not n.provisional and n.key is not None:
                    await lane.claim(n.key)
        return early, lane.dispositions()

    early, dispositions = anyio.run(main, LanePolicy())
    assert early == ["a", "b", "c"]
    assert sorted(d.value for d in dispositions.values()) == ["claimed", "claimed", "orphaned"]
    early, dispositions = anyio.run(main, LanePolicy(provisional=False))
    assert early == []
    assert sorted(d.value for d in dispositions.values()) == ["claimed", "claimed"]


def test_try_body_read_is_provisional_and_failure_is_held() -> None:
    """A read in a ``try`` body that is still streaming is ready; when it fails, what reads
    its result stays unknown, and the handler's calls stay discardable."""
    s = Streamed()
    s.feed("try:\n")
    (owner,) = s.feed('    owner = kb.get(key="owner:billing")\n')
    assert owner.provisional and not owner.discardable
    s.graph.mark_dispatched(owner.id)
    s.graph.fail(owner.id)
    assert s.feed("    docs.get(owner)\n") == [], "reads a failed result: unknown"
    s.feed("except KeyError:\n")
    handler = s.feed('    docs.search(query="unassigned")\n')
    assert handler and all(n.discardable for n in handler)
    assert owner.state is State.FAILED


def test_multiline_tuple_elements_are_ready_at_their_comma_not_the_incomplete_one() -> None:
    """Complete elements are ready as they stream; a call still open, closed only by the
    repair, is never ready."""
    s = Streamed()
    assert s.feed("results = (\n") == []
    first = s.feed('    docs.search(query="a"),\n')
    assert calls(first) == [("search", ("a",), True)]
    assert s.feed("    docs.search(\n") == []
    (second,) = s.feed('        query="b"),\n')
    assert calls([second]) == [("search", ("b",), True)]
    assert s.feed(")\n") and all(n.state is State.DROPPED for n in (*first, second))
    synthetic = [n for n in s.graph.nodes() if n.provisional and n.state is State.INELIGIBLE]
    assert synthetic == [], "the open call was never discovered with partial arguments"


def test_a_call_closed_by_the_repair_is_ineligible() -> None:
    s = Streamed()
    ready = s.feed('x = f(docs.search("a"), docs.get("b",\n')
    assert calls(ready) == [("search", ("a",), True)]
    (opened,) = [n for n in s.graph.nodes() if n.site.method == "get"]
    assert opened.state is State.INELIGIBLE, "its ')' was the repair's, not the model's"
    ready = s.feed('    "c"), docs.search("d"),\n')
    assert calls(ready) == [("get", ("b", "c"), True), ("search", ("d",), True)]


def test_an_element_that_later_changes_is_never_claimed_and_accounted() -> None:
    """``q`` is the outer name while the element streams, the loop variable once the
    comprehension's ``for`` arrives: the early read has another key than every real one,
    so nothing claims it; the lane accounts it orphaned."""

    async def main() -> tuple[dict[int, Disposition], list[Node], list[CallKey]]:
        s = Streamed()
        done: list[CallKey] = []

        async def execute(node: Node, obs: Observation) -> object:
            obs.probe.invoke()
            done.append(obs.key)
            return ["r"]

        async with SpeculativeLane(s.graph, execute, LanePolicy()) as lane:
            for text in ('q = "outer"\n', "pages = [(\n", "    docs.search(query=q),\n"):
                s.put(text)
                lane.pump()
                await wait_until_quiet()
            for text in ('    1) for q in ["a", "b"]]\n', "x = 1\n"):
                s.put(text)
                lane.pump()
                await wait_until_quiet()
            real = [n for n in s.graph.nodes() if not n.provisional and n.site.method == "search"]
            for n in real:
                assert n.key is not None
                await lane.claim(n.key)
        return lane.dispositions(), real, done

    dispositions, real, done = anyio.run(main)
    assert [tuple(n.kwargs.values()) for n in real if n.kwargs] == [("a",), ("b",)]
    outer = key_for("docs", "search", (), {"query": "outer"})
    assert outer in done
    assert sorted(d.value for d in dispositions.values()) == ["claimed", "claimed", "orphaned"]


def test_provisional_work_is_refused_when_the_policy_says_so() -> None:
    async def main(policy: LanePolicy) -> int:
        s = Streamed()
        started = 0

        async def execute(node: Node, obs: Observation) -> object:
            obs.probe.invoke()
            nonlocal started
            started += 1
            return 1

        async with SpeculativeLane(s.graph, execute, policy) as lane:
            for text in ("if True:\n", '    docs.search(query="a")\n'):
                s.put(text)
                lane.pump()
            await wait_until_quiet()
        return started

    assert anyio.run(main, LanePolicy()) == 1
    assert anyio.run(main, LanePolicy(provisional=False)) == 0


@pytest.mark.parametrize("cut", range(1, 12))
def test_chunking_never_changes_the_real_graph(cut: int) -> None:
    """Provisional passes leave discovery's state as it was: the real occurrences and
    their arguments are those of discovering the whole program at once."""
    src = (
        'mode = kb.get(key="mode")\n'
        "if mode:\n"
        "    x = 1\n"
        '    docs.search(query="in")\n'
        "else:\n"
        "    y = 2\n"
        "z = (\n"
        "    docs.get(x),\n"
        '    docs.get("k"),\n'
        ")\n"
        'docs.search(query=f"{z}")\n'
    )
    s = Streamed()
    for i in range(0, len(src), cut):
        s.feed(src[i : i + cut])
    s.close()
    whole = EventGraph(CAPS, key_for)
    parser = PrefixParser()
    parser.feed(src)
    whole.add_statements(parser.close().statements)
    real = [(str(n.id), n.args, n.kwargs, n.state) for n in s.graph.nodes() if not n.provisional]
    assert real == [(str(n.id), n.args, n.kwargs, n.state) for n in whole.nodes()]


def test_a_top_level_read_starts_at_its_closing_parenthesis_and_is_claimed_once() -> None:
    """The chunk that brings ``)`` starts the read (provisional: the line may still go on);
    the statement accepted at its newline holds the same call, which claims that work: one
    physical call, nothing orphaned."""

    async def main() -> tuple[list[list[str]], dict[int, Disposition]]:
        s = Streamed()
        started: list[str] = []
        seen: list[list[str]] = []

        async def execute(node: Node, obs: Observation) -> object:
            obs.probe.invoke()
            assert node.kwargs is not None
            started.append(str(node.kwargs["query"]))
            return ["r"]

        async with SpeculativeLane(s.graph, execute, LanePolicy()) as lane:
            for text in ('plan = docs.search(query="a"', ")", ".copy()", "\n", "n = 1\n"):
                s.put(text)
                lane.pump()
                await wait_until_quiet()
                seen.append(list(started))
            s.graph.add_statements(s.parser.close().new_statements)
            for n in s.graph.nodes():
                if not n.provisional and n.key is not None:
                    await lane.claim(n.key)
        return seen, lane.dispositions()

    seen, dispositions = anyio.run(main)
    assert seen == [[], ["a"], ["a"], ["a"], ["a"]]
    assert [d.value for d in dispositions.values()] == ["claimed"]

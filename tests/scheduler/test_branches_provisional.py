"""Branch writes from a statement still streaming: speculated, then reconciled.

A program streams line by line through ``PrefixParser`` into the graph (``add_provisional``
after each line, ``add_statements`` when the parser accepts), as the stream-run glue feeds
it, with ``BranchSpeculation`` over the dict-backed layers of ``test_branches``. Then the
program's calls are made as a sequential run of the sealed source makes them (the Guest's
part): each write claims its early write or runs on the branch, each read after a write
claims by key or reads the branch. Every test requires the final branch and every value to
equal the sequential run's, and states what ran early, what was claimed and what was
discarded. Trio's mock clock: "the write ran before the loop was accepted" is a fact.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio
import pytest
from test_branches import SPECS, DictLayers, root_key
from trio.testing import MockClock

from occurrences import CallKey, PrefixParser
from scheduler import BranchSpeculation, EventGraph, LanePolicy, Node, Observation, SpeculativeLane

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.parametrize(
        "anyio_backend", [("trio", {"clock": MockClock(autojump_threshold=0)})]
    ),
]


@dataclass
class Sequential:
    """``kv`` for the sequential run: the calls made, the state left."""

    state: dict[str, object] = field(default_factory=dict)
    calls: list[tuple[str, tuple[object, ...], object]] = field(default_factory=list)

    def put(self, key: object, value: object) -> None:
        self.calls.append(("put", (key, value), None))
        self.state[str(key)] = value

    def get(self, key: object) -> object:
        value = self.state.get(str(key))
        self.calls.append(("get", (key,), value))
        return value

    def poke(self, key: object) -> None:
        self.calls.append(("poke", (key,), None))
        self.state["poked"] = key


class Streamed:
    """One run: the stream so far, its graph, lane, layers and branch speculation."""

    def __init__(self, lane: SpeculativeLane, graph: EventGraph, layers: DictLayers) -> None:
        self.parser = PrefixParser()
        self.graph, self.lane, self.layers = graph, lane, layers
        self.branches = BranchSpeculation(graph, lane, layers, ["kv"])
        lane.on_pump(self.branches.pump)
        self.source = ""
        self.statements = 0  # accepted so far

    async def feed(self, *lines: str) -> None:
        """Stream ``lines`` one chunk each, then let the early work run."""
        for text in lines:
            self.source += text
            snap = self.parser.feed(text)
            if snap is not None:
                self.statements += len(snap.new_statements)
                self.graph.add_statements(snap.new_statements)
                self.lane.pump()
            found = self.parser.pending()
            if found is not None:
                self.graph.add_provisional(found)
                self.lane.pump()
        await anyio.sleep(0.1)

    def puts(self) -> list[tuple[int, tuple[object, ...]]]:
        """(version, arguments) of each write that ran early, in start order."""
        return [(version, args) for method, version, args in self.layers.ran if method == "put"]

    async def seal_and_run(self) -> list[str]:
        """Seal, then make the sequential run's calls against the branch; how each was
        served (``layer``/``direct``). Requires the sequential run's values and state."""
        self.graph.add_statements(self.parser.close().new_statements)
        self.lane.pump()
        reference = Sequential()
        exec(compile(self.source, "<program>", "exec"), {"kv": reference})
        served = []
        for method, args, value in reference.calls:
            key = CallKey("kv", method, "1", repr(args), repr(sorted(self.layers.branch.items())))
            if method == "get":
                obs = await self.lane.claim(key)
                got = obs.value if obs is not None else self.layers.branch.get(str(args[0]))
                assert got == value, (method, args)
            else:
                obs = await self.branches.claim_write("kv", key)
                if obs is None:
                    self.layers.branch["poked" if method == "poke" else str(args[0])] = args[-1]
            served.append("direct" if obs is None else "layer")
        assert self.layers.branch == reference.state
        return served


async def base_reads(layers: DictLayers, node: Node, obs: Observation) -> object:
    """A pre-write read: of the branch as the run began (version 0); ``flag`` never
    answers while the stream lasts (what it decides stays undecided)."""
    assert node.args is not None and obs.probe.invoke()
    if node.args[0] == "flag":
        await anyio.sleep_forever()
    return layers.versions[0].get(str(node.args[0]))


async def streamed(policy: LanePolicy | None = None) -> tuple[Streamed, SpeculativeLane]:
    graph = EventGraph(SPECS, root_key)
    layers = DictLayers()

    async def execute(node: Node, obs: Observation) -> object:
        return await base_reads(layers, node, obs)

    lane = SpeculativeLane(graph, execute, policy)
    return Streamed(lane, graph, layers), lane


LOOP = ["for k in ['a', 'b', 'c']:\n", "    kv.put(k, 1)\n"]


async def test_a_loop_body_write_runs_before_the_loop_is_accepted_and_its_twin_claims_it() -> None:
    s, lane = await streamed()
    async with lane:
        await s.feed(*LOOP, "    x = kv.get(k)\n")
        assert s.statements == 0, "the loop is still streaming"
        assert s.puts() == [(1, ("a", 1)), (2, ("b", 1)), (3, ("c", 1))]
        assert ("get", 3, ("c",)) in s.layers.ran, "a read after the write, on its layer"
        await s.feed("kv.put('z', 2)\n")
        assert s.statements == 2
        assert len(s.puts()) == 4, "the accepted loop's writes are the early ones: none runs again"
        assert await s.seal_and_run() == ["layer"] * 7
    stats = s.branches.statistics()
    assert (stats.writes, stats.claimed, stats.discarded) == (4, 4, 0)


async def test_a_break_added_after_the_write_retracts_the_extra_iteration() -> None:
    s, lane = await streamed()
    async with lane:
        await s.feed(*LOOP)
        assert [a for _, a in s.puts()] == [("a", 1), ("b", 1), ("c", 1)]
        await s.feed("    if k == 'b':\n", "        break\n", "kv.put('z', 2)\n")
        # The write of 'c' is withdrawn; 'z' runs on a fresh fork of the state after 'b'.
        assert s.puts()[3] == (4, ("z", 2)) and s.layers.versions[4] == {"a": 1, "b": 1, "z": 2}
        assert await s.seal_and_run() == ["layer"] * 3
    stats = s.branches.statistics()
    assert (stats.writes, stats.claimed, stats.discarded) == (4, 3, 1)


async def test_an_if_added_after_the_write_retracts_from_the_first_write_it_moves() -> None:
    s, lane = await streamed()
    async with lane:
        await s.feed(*LOOP)
        await s.feed("    if k == 'a':\n", "        kv.put('extra', 0)\n", "done = 1\n")
        assert [a for _, a in s.puts()] == [
            ("a", 1),
            ("b", 1),
            ("c", 1),
            ("extra", 0),
            ("b", 1),
            ("c", 1),
        ]
        assert await s.seal_and_run() == ["layer"] * 4
    stats = s.branches.statistics()
    assert (stats.writes, stats.claimed, stats.discarded) == (6, 4, 2)


async def test_a_twin_with_another_key_retracts_and_the_reads_on_its_layer_go_with_it() -> None:
    """The body rebinds what the write reads after it: the second iteration's write turns
    out to have other arguments; the read on the withdrawn layer is never claimed."""
    s, lane = await streamed()
    async with lane:
        await s.feed(
            "v = 'first'\n", "for k in ['a', 'b']:\n", "    kv.put(v, k)\n", "    y = kv.get(v)\n"
        )
        assert [a for _, a in s.puts()] == [("first", "a"), ("first", "b")]
        await s.feed("    v = k\n", "done = 1\n")
        assert [a for _, a in s.puts()] == [("first", "a"), ("first", "b"), ("a", "b")]
        assert await s.seal_and_run() == ["layer"] * 4
    stats = s.branches.statistics()
    assert (stats.claimed, stats.discarded) == (2, 2)  # the write of ('first', 'b'), its read


async def test_an_unknown_call_added_to_the_body_still_closes_the_chain() -> None:
    s, lane = await streamed()
    async with lane:
        await s.feed(*LOOP)
        await s.feed("    kv.poke(k)\n", "kv.put('z', 2)\n")
        assert len(s.puts()) == 3, "nothing more is speculated"
        served = await s.seal_and_run()
    assert served == ["layer"] + ["direct"] * 6
    assert s.branches.statistics().discarded == 2  # 'b' and 'c', withdrawn behind the poke


async def test_a_write_under_an_undecided_if_in_the_body_waits() -> None:
    """Sound either way (the claim decides), but a wrong guess would be found out only by
    the program's claim, too late to speculate anything else: it waits for the condition."""
    s, lane = await streamed()
    async with lane:
        await s.feed(
            "flag = kv.get('flag')\n",
            "for k in ['a', 'b']:\n",
            "    if flag:\n",
            "        kv.put(k, 1)\n",
        )
        assert s.puts() == []
        await s.feed("kv.put('z', 2)\n")
        assert s.puts() == [], "and so does every write after it"
        assert await s.seal_and_run() == ["direct", "direct"]


async def test_a_write_closed_by_the_repair_never_runs_and_waits_for_its_text() -> None:
    s, lane = await streamed()
    async with lane:
        await s.feed("for k in ['a']:\n", "    kv.put(k, [1,\n")
        assert s.puts() == [], "its ')' is the repair's, not the model's"
        await s.feed("            2])\n")
        assert s.puts() == [(1, ("a", [1, 2]))]
        await s.feed("done = 1\n")
        assert await s.seal_and_run() == ["layer"]


async def test_with_provisional_work_off_a_body_write_waits_for_the_loop() -> None:
    s, lane = await streamed(LanePolicy(provisional=False))
    async with lane:
        await s.feed(*LOOP)
        assert s.puts() == []
        await s.feed("done = 1\n")
        assert len(s.puts()) == 3
        assert await s.seal_and_run() == ["layer"] * 3

"""``BranchSpeculation`` alone: the real event graph and lane over a dict-backed ``Layers``.

A version here is a plain dict, its view the sorted items themselves (a truthful view id:
equal ids, equal contents), so each test states the rule under test directly: program
order, waiting for arguments and for the previous layer, in-order exact claims, discards.
Each layer call takes 10 ms of trio's mock clock.
"""

from __future__ import annotations

import ast
from collections.abc import Awaitable, Mapping

import anyio
import anyio.lowlevel
import pytest
from trio.testing import MockClock

from occurrences import CallKey, Effect, MethodSpec
from scheduler import BranchSpeculation, EventGraph, Node, Observation, SpeculativeLane

pytestmark = [
    pytest.mark.anyio,
    # A virtual clock: "the first write ended, the second is running" is a fact, not a race.
    pytest.mark.parametrize(
        "anyio_backend", [("trio", {"clock": MockClock(autojump_threshold=0)})]
    ),
]

SPECS = {
    "kv": {
        "put": MethodSpec(Effect.WRITE, "1", scope="key", scope_position=0),
        "get": MethodSpec(Effect.IMMUTABLE_READ, "1", scope="key", scope_position=0),
        "poke": MethodSpec(Effect.UNKNOWN, "1"),
    }
}


class DictLayers:
    """Versions as dicts; ``put(key, value)`` writes, ``get(key)`` reads; 10 ms each."""

    def __init__(self) -> None:
        self.versions: list[dict[str, object]] = [{}]
        self.branch: dict[str, object] = {}
        self.ran: list[tuple[str, int, tuple[object, ...]]] = []

    def key(
        self,
        capability: str,
        version: int,
        method: str,
        args: tuple[object, ...],
        kwargs: Mapping[str, object],
    ) -> CallKey:
        return CallKey(
            capability, method, "1", repr(args), repr(sorted(self.versions[version].items()))
        )

    def admits(
        self,
        capability: str,
        version: int,
        method: str,
        args: tuple[object, ...],
        kwargs: Mapping[str, object],
    ) -> bool:
        return args[:1] != ("huge",)

    def fork(self, capability: str, version: int) -> int:
        self.versions.append(dict(self.versions[version]))
        return len(self.versions) - 1

    def run(self, capability: str, version: int, node: Node, obs: Observation) -> Awaitable[object]:
        async def go() -> object:
            assert node.args is not None and obs.probe.invoke()
            self.ran.append((node.site.method, version, node.args))  # when it starts
            await anyio.sleep(0.01)
            if node.site.method == "put":
                self.versions[version][str(node.args[0])] = node.args[1]
                return None
            return self.versions[version].get(str(node.args[0]))

        return go()

    def adopt(self, capability: str, version: int) -> None:
        self.branch = dict(self.versions[version])

    def claimable(self, obs: Observation) -> bool:
        return True

    def independent(self, capability: str, write: Node, read: Node) -> bool:
        return write.args is not None and read.args is not None and write.args[0] != read.args[0]


def root_key(
    capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> CallKey:
    return CallKey(capability, method, "1", repr(args), "root")


async def speculate(source: str) -> tuple[DictLayers, BranchSpeculation, SpeculativeLane]:
    """Feed ``source`` to a graph and let the early work run (the lane stays open)."""
    graph = EventGraph(SPECS, root_key)
    layers = DictLayers()

    async def no_root_reads(node: Node, obs: Observation) -> object:
        raise AssertionError("no root read in these programs")

    lane = SpeculativeLane(graph, no_root_reads)
    branches = BranchSpeculation(graph, lane, layers, ["kv"])
    lane.on_pump(branches.pump)
    graph.add_statements(ast.parse(source).body)
    return layers, branches, lane


async def formal(
    layers: DictLayers, branches: BranchSpeculation, method: str, *args: object
) -> Observation | None:
    """The Guest's write: claim it, or run it on the branch as a direct call would."""
    key = CallKey("kv", method, "1", repr(args), repr(sorted(layers.branch.items())))
    obs = await branches.claim_write("kv", key)
    if obs is None:
        layers.branch[str(args[0])] = args[1]
    return obs


PROGRAM = "kv.put('a', 1)\nx = kv.get('a')\nkv.put('b', 2)\ny = kv.get('b')\n"


async def test_writes_run_in_program_order_each_on_a_fork_and_reads_on_their_layer() -> None:
    layers, branches, lane = await speculate(PROGRAM)
    async with lane:
        lane.pump()
        await anyio.sleep(0.1)
        assert [r for r in layers.ran if r[0] == "put"] == [
            ("put", 1, ("a", 1)),
            ("put", 2, ("b", 2)),
        ]
        assert {r for r in layers.ran if r[0] == "get"} == {("get", 1, ("a",)), ("get", 2, ("b",))}
        assert layers.versions == [{}, {"a": 1}, {"a": 1, "b": 2}]
        assert await formal(layers, branches, "put", "a", 1) is not None
        assert await formal(layers, branches, "put", "b", 2) is not None
    assert layers.branch == {"a": 1, "b": 2}
    assert branches.statistics().claimed == 2 and branches.statistics().discarded == 0


async def test_a_claim_waits_for_its_write_still_running() -> None:
    layers, branches, lane = await speculate(PROGRAM)
    async with lane:
        lane.pump()
        while not layers.ran:
            await anyio.lowlevel.checkpoint()
        claimed = await formal(layers, branches, "put", "a", 1)  # started, not finished yet
        assert claimed is not None and claimed.done.is_set()
    assert layers.branch == {"a": 1}


async def test_a_write_that_has_not_begun_is_withdrawn_and_the_guests_write_runs() -> None:
    """Contract 7: the Guest's write never waits behind early work that has not started;
    the early write is withdrawn and never runs, its layer discarded."""
    layers, branches, lane = await speculate(PROGRAM)
    async with lane:
        lane.pump()  # the early write is only scheduled: its tool has not run
        assert await formal(layers, branches, "put", "a", 1) is None
        await anyio.sleep(0.05)
    assert layers.ran == [] and layers.branch == {"a": 1}
    assert branches.statistics().claimed == 0


async def test_the_first_write_that_does_not_claim_discards_the_layer_from_there() -> None:
    layers, branches, lane = await speculate(PROGRAM)
    async with lane:
        lane.pump()
        await anyio.sleep(0.1)
        assert await formal(layers, branches, "put", "a", 1) is not None
        assert await formal(layers, branches, "put", "b", 99) is None  # another value
        assert await formal(layers, branches, "put", "c", 3) is None  # lost: nothing claims again
    assert layers.branch == {"a": 1, "b": 99, "c": 3}
    stats = branches.statistics()
    assert (stats.claimed, stats.discarded) == (1, 2)  # the write of b and the read on its layer


async def test_a_write_with_unknown_arguments_waits_and_so_does_every_write_after_it() -> None:
    layers, _, lane = await speculate("kv.put('a', z)\nkv.put('b', 2)\n")
    async with lane:
        lane.pump()
        await anyio.sleep(0.1)
    assert layers.ran == []


async def test_an_unknown_call_or_a_write_past_the_limits_ends_the_chain() -> None:
    for middle in ("kv.poke('x')", "kv.put('huge', 0)"):
        layers, _, lane = await speculate(f"kv.put('a', 1)\n{middle}\nkv.put('b', 2)\n")
        async with lane:
            lane.pump()
            await anyio.sleep(0.1)
        assert layers.ran == [("put", 1, ("a", 1))], middle


async def test_a_read_the_pending_write_cannot_touch_runs_on_the_last_complete_layer() -> None:
    layers, _, lane = await speculate(
        "kv.put('a', 1)\nkv.put('b', 2)\nx = kv.get('a')\ny = kv.get('b')\n"
    )
    async with lane:
        lane.pump()
        await anyio.sleep(0.015)  # the first write ended, the second is running
        assert ("get", 1, ("a",)) in layers.ran
        assert not any(m == "get" and a == ("b",) for m, _, a in layers.ran)
        await anyio.sleep(0.1)
        assert ("get", 2, ("b",)) in layers.ran


async def test_a_read_after_a_queued_write_it_cannot_touch_runs_before_that_write_starts() -> None:
    """The third write waits for the second's layer; the read after it, of a key neither
    pending write touches, runs on the last complete version meanwhile; the read of the
    queued write's own key waits for it."""
    layers, branches, lane = await speculate(
        "kv.put('a', 1)\nkv.put('b', 2)\nkv.put('c', 3)\nx = kv.get('a')\ny = kv.get('c')\n"
    )
    async with lane:
        lane.pump()
        await anyio.sleep(0.015)  # the first write ended, the second is running, the third waits
        assert [r for r in layers.ran if r[0] == "put"] == [
            ("put", 1, ("a", 1)),
            ("put", 2, ("b", 2)),
        ]
        assert ("get", 1, ("a",)) in layers.ran
        assert not any(a == ("c",) for m, _, a in layers.ran if m == "get")
        await anyio.sleep(0.1)
        assert ("get", 3, ("c",)) in layers.ran
        for args in (("a", 1), ("b", 2), ("c", 3)):
            assert await formal(layers, branches, "put", *args) is not None
    assert branches.statistics().discarded == 0

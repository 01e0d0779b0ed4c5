"""The speculative lane against a scripted frontier: eligibility, budget, claims, dispositions.

The graph here is a minimal stand-in with the frontier interface, so each property of the
lane is checked in isolation from discovery; the end-to-end tests use the real graph.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel
import pytest
from trio.testing import MockClock
from waiting import wait_until_quiet

from occurrences import CallKey, Effect
from scheduler._lane import LanePolicy, SpeculativeLane
from scheduler._observation import Disposition, Observation
from scheduler._state import State

pytestmark = pytest.mark.anyio


def key(name: str, view: str = "root") -> CallKey:
    return CallKey("docs", "search", "1", name, view)


@dataclass(eq=False)
class FakeNode:
    id: str
    key: CallKey | None
    effect: Effect = Effect.PURE
    discardable: bool = False
    pre_write: bool = True
    state: State = State.READY
    followers: list[str] = field(default_factory=list)
    provisional: bool = False


@dataclass
class FakeGraph:
    ready: list[FakeNode] = field(default_factory=list)
    dispatched: list[str] = field(default_factory=list)
    completed: dict[str, object] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    on_complete: dict[str, list[FakeNode]] = field(default_factory=dict)
    nodes: dict[str, FakeNode] = field(default_factory=dict)
    settled: dict[str, str] = field(default_factory=dict)
    withdrawn: list[str] = field(default_factory=list)

    def take_withdrawn(self) -> list[str]:
        out, self.withdrawn = self.withdrawn, []
        return out

    def take_ready(self) -> list[FakeNode]:
        out, self.ready = self.ready, []
        self.nodes.update((n.id, n) for n in out)
        return out

    def node(self, node_id: str) -> FakeNode:
        return self.nodes[node_id]

    def mark_dispatched(self, node_id: str) -> None:
        self.dispatched.append(node_id)
        self.nodes[node_id].state = State.DISPATCHED

    def settle(self, node_id: str, disposition: str) -> None:
        self.settled[node_id] = disposition

    def complete(self, node_id: str, result: object) -> None:
        self.completed[node_id] = result
        self.ready.extend(self.on_complete.pop(node_id, []))

    def fail(self, node_id: str) -> None:
        self.failed.append(node_id)


class Tools:
    """Executes nodes; each call waits for its own gate so tests decide completion order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.gates: dict[str, anyio.Event] = {}

    def gate(self, node_id: str) -> anyio.Event:
        return self.gates.setdefault(node_id, anyio.Event())

    async def execute(self, node: FakeNode, obs: Observation) -> object:
        assert obs.probe.invoke(), "the lane never runs withdrawn work"
        self.calls.append(node.id)
        await self.gate(node.id).wait()
        if node.id.startswith("fail"):
            raise FileNotFoundError(node.id)
        return {"result": node.id}


async def test_only_pure_and_immutable_reads_are_dispatched() -> None:
    graph, tools = FakeGraph(), Tools()
    graph.ready = [
        FakeNode("pure", key("a"), Effect.PURE),
        FakeNode("imm", key("b"), Effect.IMMUTABLE_READ),
        FakeNode("live", key("c"), Effect.LIVE_READ),
        FakeNode("write", key("d"), Effect.WRITE),
        FakeNode("unknown", key("e"), Effect.UNKNOWN),
        FakeNode("post-write", key("f"), pre_write=False),
        FakeNode("no-key", None),
        FakeNode("discardable", key("g"), discardable=True),
    ]
    async with SpeculativeLane(graph, tools.execute) as lane:
        lane.pump()
        await wait_until_quiet()
        assert sorted(tools.calls) == ["imm", "pure"]
        for gate in tools.gates.values():
            gate.set()
    assert graph.dispatched == ["pure", "imm"]


async def test_discardable_only_when_policy_allows() -> None:
    graph, tools = FakeGraph(), Tools()
    graph.ready = [FakeNode("discardable", key("g"), discardable=True)]
    async with SpeculativeLane(graph, tools.execute, LanePolicy(allow_discardable=True)) as lane:
        lane.pump()
        await wait_until_quiet()
        assert tools.calls == ["discardable"]
        tools.gate("discardable").set()


async def test_budget_limits_early_physical_calls() -> None:
    graph, tools = FakeGraph(), Tools()
    graph.ready = [FakeNode(f"n{i}", key(f"k{i}")) for i in range(5)]
    async with SpeculativeLane(graph, tools.execute, LanePolicy(budget=3)) as lane:
        lane.pump()
        await wait_until_quiet()
        assert tools.calls == ["n0", "n1", "n2"]
        for gate in tools.gates.values():
            gate.set()
    assert lane.statistics().dispatched == 3


async def test_concurrency_limit_queues_in_source_order() -> None:
    graph, tools = FakeGraph(), Tools()
    graph.ready = [FakeNode(f"n{i}", key(f"k{i}")) for i in range(4)]
    async with SpeculativeLane(graph, tools.execute, LanePolicy(concurrency=2)) as lane:
        lane.pump()
        await wait_until_quiet()
        assert tools.calls == ["n0", "n1"]
        tools.gate("n1").set()
        await wait_until_quiet()
        assert tools.calls == ["n0", "n1", "n2"]
        for name in ("n0", "n2", "n3"):
            tools.gate(name).set()
            await wait_until_quiet()
    assert tools.calls == ["n0", "n1", "n2", "n3"]


async def test_claim_waits_for_running_result_and_results_flow_back() -> None:
    graph, tools = FakeGraph(), Tools()
    graph.ready = [FakeNode("a", key("a"))]
    graph.on_complete["a"] = [FakeNode("b", key("b"))]
    async with SpeculativeLane(graph, tools.execute) as lane:
        lane.pump()
        await wait_until_quiet()
        claimed = []

        async def claimer() -> None:
            claimed.append(await lane.claim(key("a")))

        async with anyio.create_task_group() as tg:
            tg.start_soon(claimer)
            await wait_until_quiet()
            assert claimed == []  # still running: the claim waits
            tools.gate("a").set()
        (obs,) = claimed
        assert obs is not None and obs.value == {"result": "a"}
        await wait_until_quiet()
        assert tools.calls == ["a", "b"], "a completed result made its dependent ready"
        tools.gate("b").set()
        await wait_until_quiet()
    stats = lane.statistics()
    assert (stats.claimed, stats.orphaned) == (1, 1)


async def test_failure_is_held_until_claimed() -> None:
    graph, tools = FakeGraph(), Tools()
    graph.ready = [FakeNode("fail1", key("x"))]
    async with SpeculativeLane(graph, tools.execute) as lane:
        lane.pump()
        tools.gate("fail1").set()
        await wait_until_quiet()
        assert graph.failed == ["fail1"]
        obs = await lane.claim(key("x"))
        assert obs is not None and isinstance(obs.error, FileNotFoundError)
    assert lane.dispositions() == {obs.id: Disposition.CLAIMED}
    assert graph.settled == {"fail1": "claimed"}


async def test_unequal_key_never_claims() -> None:
    graph, tools = FakeGraph(), Tools()
    graph.ready = [FakeNode("a", key("a", view="root"))]
    async with SpeculativeLane(graph, tools.execute) as lane:
        lane.pump()
        tools.gate("a").set()
        await wait_until_quiet()
        assert await lane.claim(key("a", view="after-write")) is None
    assert lane.statistics().orphaned == 1


async def test_unfinished_work_is_cancelled_at_close() -> None:
    graph, tools = FakeGraph(), Tools()
    graph.ready = [FakeNode("slow", key("s")), FakeNode("queued", key("q"))]
    async with SpeculativeLane(graph, tools.execute, LanePolicy(concurrency=1)) as lane:
        lane.pump()
        await wait_until_quiet()
    stats = lane.statistics()
    assert (stats.cancelled, stats.physical) == (2, 1), (
        "queued work never ran, so it is not physical"
    )


async def test_uninterruptible_thread_is_late() -> None:
    release, started = threading.Event(), threading.Event()

    async def in_thread(node: FakeNode, obs: Observation) -> object:
        def work() -> str:
            assert obs.probe.invoke()
            started.set()
            try:
                release.wait(5)
                return "done"
            finally:
                obs.probe.thread_done = True

        obs.probe.in_thread = True
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)

    graph = FakeGraph(ready=[FakeNode("t", key("t"))])
    async with SpeculativeLane(graph, in_thread) as lane:
        lane.pump()
        with anyio.fail_after(5):  # the thread runs its tool (a fixed sleep raced its start)
            while not started.is_set():
                await anyio.sleep(0.001)
    release.set()
    assert lane.statistics().late == 1


async def test_equal_keys_share_one_observation_and_count_shared() -> None:
    graph, tools = FakeGraph(), Tools()
    graph.ready = [FakeNode("a1", key("a")), FakeNode("a2", key("a"))]
    async with SpeculativeLane(graph, tools.execute) as lane:
        lane.pump()
        await wait_until_quiet()  # a1 runs (a claim would withdraw it before)
        tools.gate("a1").set()
        first = await lane.claim(key("a"))
        second = await lane.claim(key("a"))
        assert first is second
    stats = lane.statistics()
    assert tools.calls == ["a1"]
    assert (stats.physical, stats.claimed, stats.shared) == (1, 1, 1)
    assert graph.completed == {"a1": {"result": "a1"}, "a2": {"result": "a1"}}


async def test_formal_results_are_shared_but_failures_are_not() -> None:
    graph, tools = FakeGraph(), Tools()
    async with SpeculativeLane(graph, tools.execute) as lane:
        ok = lane.begin_formal(key("a"))
        lane.end_formal(ok, value=[1])
        assert await lane.claim(key("a")) is ok
        bad = lane.begin_formal(key("b"))
        lane.end_formal(bad, error=TimeoutError("slow"))
        assert await lane.claim(key("b")) is None
    assert lane.statistics().shared == 1


@pytest.mark.parametrize("anyio_backend", [("trio", {"clock": MockClock(autojump_threshold=0)})])
async def test_time_saved_under_a_controlled_clock() -> None:
    """Claiming after the early call finished saves its whole latency (virtual time)."""
    graph = FakeGraph(ready=[FakeNode("a", key("a"))])

    async def half_second(node: FakeNode, obs: Observation) -> object:
        assert obs.probe.invoke()
        await anyio.sleep(0.5)
        return 1

    async with SpeculativeLane(graph, half_second) as lane:
        lane.pump()
        await anyio.sleep(2)
        assert await lane.claim(key("a")) is not None
    assert lane.statistics().time_saved == pytest.approx(0.5)


async def test_work_on_a_view_is_claimed_by_its_exact_key_only() -> None:
    """``start_on_view``: one observation per key, within budget, claimed only by the key it
    was started with (a read after a write, on the write's view), settled like all early work."""
    graph, tools = FakeGraph(), Tools()
    after = key("a", view="epoch:1")

    async def run(obs: Observation) -> object:
        return await tools.execute(FakeNode("view", obs.key), obs)

    async with SpeculativeLane(graph, tools.execute, LanePolicy(budget=2)) as lane:
        first = lane.start_on_view(after, run)
        assert first is not None
        assert lane.start_on_view(after, run) is None, "one observation per key"
        other = lane.start_on_view(key("b", view="epoch:1"), run)
        assert other is not None
        assert lane.start_on_view(key("c", view="epoch:1"), run) is None, "budget"
        await wait_until_quiet()
        assert await lane.claim(key("a")) is None, "the root key is another call"
        tools.gate("view").set()
        claimed = await lane.claim(after)
        assert claimed is first and claimed.value == {"result": "view"}
    assert lane.dispositions() == {first.id: Disposition.CLAIMED, other.id: Disposition.ORPHANED}
    assert lane.start_on_view(key("d", view="epoch:1"), run) is None, "closed"


async def test_claiming_settled_work_does_not_yield_to_the_loop() -> None:
    """Settled work is handed over in the claiming task's own step: the reply to the
    Guest's claim waits for no other task (a set event's ``wait`` would still go round
    the loop once, latency at the end of every run)."""
    graph, ran = FakeGraph(), []

    async def other() -> None:
        ran.append("other")

    async with SpeculativeLane(graph, Tools().execute) as lane, anyio.create_task_group() as tg:
        obs = lane.begin_formal(key("a"))
        lane.end_formal(obs, value=[1])
        tg.start_soon(other)
        assert await lane.claim(key("a")) is obs
        assert ran == []
    assert ran == ["other"]


async def test_early_work_starts_in_its_tasks_first_step() -> None:
    """With a slot free, an early call's tool is invoked in its task's first step: the
    limiter's own ``acquire`` would go round the loop once more, and every early call (each
    read re-speculated after a write) would start one trip late."""
    graph, tools = FakeGraph(), Tools()
    graph.ready = [FakeNode("a", key("a")), FakeNode("b", key("b"))]
    async with SpeculativeLane(graph, tools.execute) as lane:
        lane.pump()
        await anyio.lowlevel.checkpoint()  # one trip: each task's first step
        assert sorted(tools.calls) == ["a", "b"]
        for name in ("a", "b"):
            tools.gate(name).set()
    assert graph.completed == {"a": {"result": "a"}, "b": {"result": "b"}}


async def test_early_work_beyond_the_concurrency_waits_for_a_slot() -> None:
    graph, tools = FakeGraph(), Tools()
    graph.ready = [FakeNode("a", key("a")), FakeNode("b", key("b"))]
    async with SpeculativeLane(graph, tools.execute, LanePolicy(concurrency=1)) as lane:
        lane.pump()
        await wait_until_quiet()  # the one slot taken, the other call waits for it
        assert len(tools.calls) == 1
        tools.gate(tools.calls[0]).set()
        await wait_until_quiet()
        assert len(tools.calls) == 2
        tools.gate(tools.calls[1]).set()
    assert len(graph.completed) == 2


async def test_a_lane_closed_before_its_early_work_ran_starts_none_of_it() -> None:
    graph, tools = FakeGraph(), Tools()
    graph.ready = [FakeNode("a", key("a"))]
    async with SpeculativeLane(graph, tools.execute) as lane:
        lane.pump()
    assert tools.calls == []
    assert lane.statistics().cancelled == 1


# -- contract 7: early work never holds the program back ---------------------------------


async def test_a_claim_withdraws_queued_work_instead_of_waiting_behind_it() -> None:
    """With the lane's one slot busy, the Guest's call of the queued key gets None at once
    (it runs the call itself); the queued tool never runs, accounted ``cancelled``."""
    graph, tools = FakeGraph(), Tools()
    graph.ready = [FakeNode("busy", key("busy")), FakeNode("queued", key("q"))]
    async with SpeculativeLane(graph, tools.execute, LanePolicy(concurrency=1)) as lane:
        lane.pump()
        await wait_until_quiet()
        assert await lane.claim(key("q")) is None
        tools.gate("busy").set()
        await wait_until_quiet()
        assert lane.statistics().physical == 1
    assert tools.calls == ["busy"], "the withdrawn call never ran"
    assert lane.statistics().cancelled == 1


async def test_running_work_is_not_withdrawn_the_claim_waits_for_it() -> None:
    graph, tools = FakeGraph(), Tools()
    graph.ready = [FakeNode("a", key("a"))]
    async with SpeculativeLane(graph, tools.execute) as lane, anyio.create_task_group() as tg:
        lane.pump()
        await wait_until_quiet()
        claimed: list[Observation | None] = []

        async def claimer() -> None:
            claimed.append(await lane.claim(key("a")))

        tg.start_soon(claimer)
        await wait_until_quiet()
        assert claimed == []
        tools.gate("a").set()
    assert claimed[0] is not None and claimed[0].value == {"result": "a"}


async def test_a_freed_slot_goes_to_certain_work_before_provisional() -> None:
    """Provisional work queued first does not hold back a certain occurrence queued after it."""
    graph, tools = FakeGraph(), Tools()
    graph.ready = [
        FakeNode("busy", key("busy")),
        FakeNode("maybe", key("m"), provisional=True),
        FakeNode("sure", key("s")),
    ]
    async with SpeculativeLane(graph, tools.execute, LanePolicy(concurrency=1)) as lane:
        lane.pump()
        await wait_until_quiet()
        tools.gate("busy").set()
        await wait_until_quiet()
        assert tools.calls == ["busy", "sure"]
        tools.gate("sure").set()
        await wait_until_quiet()
        assert tools.calls == ["busy", "sure", "maybe"]
        tools.gate("maybe").set()


async def test_a_provisional_waiter_confirmed_meanwhile_counts_as_certain() -> None:
    graph, tools = FakeGraph(), Tools()
    early = FakeNode("early", key("e"), provisional=True)
    graph.ready = [FakeNode("busy", key("busy")), early, FakeNode("sure", key("s"))]
    async with SpeculativeLane(graph, tools.execute, LanePolicy(concurrency=1)) as lane:
        lane.pump()
        await wait_until_quiet()
        early.provisional = False  # its statement was accepted while it waited
        tools.gate("busy").set()
        await wait_until_quiet()
        assert tools.calls == ["busy", "early"]
        for name in ("early", "sure"):
            tools.gate(name).set()
            await wait_until_quiet()


async def test_work_the_lane_stopped_is_never_claimed() -> None:
    """``LaneStopped`` (an early timeout: the wait may have been shared with other early
    work) is no outcome of the tool: the claim gets None and the Guest's call runs."""
    from scheduler import LaneStopped

    async def times_out(node: FakeNode, obs: Observation) -> object:
        assert obs.probe.invoke()
        raise LaneStopped("did not finish within 1s early")

    graph = FakeGraph(ready=[FakeNode("t", key("t"))])
    async with SpeculativeLane(graph, times_out) as lane:
        lane.pump()
        await wait_until_quiet()
        assert await lane.claim(key("t")) is None
        assert graph.failed == [], "nothing is delivered to the graph as a failure either"
    assert lane.statistics().cancelled == 1


# -- dead work released at once (issue 36, item 4) ---------------------------------------


async def test_withdrawn_work_is_cancelled_at_once_and_frees_its_slot() -> None:
    """The graph withdraws a running early call (its occurrence became unreachable): the
    next pump cancels it, so the call queued behind it starts without waiting for it; it
    is accounted cancelled, out of the claim table (a claim of its key finds nothing)."""
    graph, tools = FakeGraph(), Tools()
    graph.ready = [FakeNode("a", key("a")), FakeNode("b", key("b")), FakeNode("c", key("c"))]
    async with SpeculativeLane(graph, tools.execute, LanePolicy(concurrency=2)) as lane:
        lane.pump()
        await wait_until_quiet()
        assert tools.calls == ["a", "b"]
        graph.withdrawn = ["a"]
        lane.pump()
        await wait_until_quiet()
        assert tools.calls == ["a", "b", "c"], "a's slot went to c"
        assert await lane.claim(key("a")) is None
        tools.gate("b").set()
        tools.gate("c").set()
    assert lane.dispositions()[1] is Disposition.CANCELLED
    assert graph.settled["a"] == "cancelled"


async def test_work_another_occurrence_still_wants_is_not_withdrawn() -> None:
    """One observation serving two occurrences (equal keys) stops only when both are
    withdrawn; one that already ended is left alone (it stays claimable)."""
    graph, tools = FakeGraph(), Tools()
    graph.ready = [FakeNode("a", key("a")), FakeNode("done", key("d"))]
    async with SpeculativeLane(graph, tools.execute) as lane:
        lane.pump()
        graph.ready = [FakeNode("a2", key("a"))]
        lane.pump()
        await wait_until_quiet()
        tools.gate("done").set()
        await wait_until_quiet()
        graph.withdrawn = ["a", "done"]
        lane.pump()
        await wait_until_quiet()
        assert not tools.gate("a").is_set() and graph.completed == {"done": {"result": "done"}}
        tools.gate("a").set()
        claimed = await lane.claim(key("a"))
        assert claimed is not None and claimed.value == {"result": "a"}
        assert await lane.claim(key("d")) is not None

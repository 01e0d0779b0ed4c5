"""Ray Guests on a real local multi-node Ray cluster (``-m ray``): a head node without the
Guest resource and two Guest nodes, all on this machine."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest
from equivalence.harness import Pair, build_host, check_pair, stream_of
from equivalence.programs import conditions, programs
from hypothesis import HealthCheck, given, settings

from pysolate import Effect, Host
from pysolate._guest import start_subprocess_guest
from pysolate._guest_api import GuestLimits
from pysolate._report._equivalence import differences

from .test_link import CAPS, LIMITS, PROGRAMS, _local, _remote

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from pysolate.ray import AGENT_RESOURCE, HostPool, RayGuestFactory  # noqa: E402
from pysolate.testing import Script, scripted_tool  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.anyio]

EQUIVALENCE_PROGRAMS = int(os.environ.get("PYSOLATE_RAY_PROGRAMS", "200"))


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[str, object]]:
    ray.shutdown()  # a local cluster an earlier test started (the Guest suites' ray mode)
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    workers = [nodes.add_node(num_cpus=1, resources={AGENT_RESOURCE: 1}) for _ in range(2)]
    ray.init(address=nodes.address, include_dashboard=False, log_to_driver=False)
    try:
        yield {
            "head": ray.get_runtime_context().get_node_id(),
            "workers": {w.node_id for w in workers},
        }
    finally:
        ray.shutdown()
        nodes.shutdown()


@pytest.mark.parametrize("source", PROGRAMS)
async def test_the_guest_contract_holds_on_ray_nodes(cluster, source: str) -> None:
    async with RayGuestFactory() as factory:
        remote = await _remote(factory, source)
    local = await _local(source)
    assert (remote.status, remote.value, remote.stdout, remote.error) == (
        local.status,
        local.value,
        local.stdout,
        local.error,
    )
    assert remote.isolation == local.isolation


async def test_guests_run_on_the_guest_nodes_only(cluster) -> None:
    async with RayGuestFactory() as factory:
        guests = [await factory(CAPS, LIMITS) for _ in range(6)]
        try:
            placed = {g.placement["node_id"] for g in guests}
        finally:
            for guest in guests:
                await guest.aclose()
        assert placed == cluster["workers"], "both Guest nodes used, never the head"
        stats = [await agent.stats.remote() for agent in factory.agents]
    assert all(s["live"] == 0 and s["alive_pids"] == [] for s in stats)


async def test_killing_the_node_agent_mid_call_is_a_crash(cluster) -> None:
    started = anyio.Event()

    async def slow(capability, method, args, kwargs):  # type: ignore[no-untyped-def]
        started.set()
        await anyio.sleep(30)

    async with RayGuestFactory(agents=1) as factory:
        guest = await factory(CAPS, GuestLimits(wall_time=60))
        (agent,) = factory.agents
        async with anyio.create_task_group() as tg:

            async def kill_when_called() -> None:
                await started.wait()
                ray.kill(agent, no_restart=True)

            tg.start_soon(kill_when_called)
            with anyio.fail_after(20):
                outcome = await guest.run("docs.search(1)\ndocs.search(2)", slow)
    assert outcome.status == "crashed" and outcome.error.type == "GuestCrashed"
    with anyio.fail_after(10):  # the agent's reaper sees its pipe break, then kills
        while _alive(guest.placement["guest_pid"]):
            await anyio.sleep(0.05)


async def test_killing_the_guest_process_is_a_crash(cluster) -> None:
    async def kill_guest(capability, method, args, kwargs):  # type: ignore[no-untyped-def]
        os.kill(guest.placement["guest_pid"], signal.SIGKILL)
        await anyio.sleep(1)
        return 1

    async with RayGuestFactory() as factory:
        guest = await factory(CAPS, LIMITS)
        outcome = await guest.run("docs.search(1)\nprint('after')", kill_guest)
    assert outcome.status == "crashed" and "after" not in outcome.stdout


async def test_cancelling_a_run_leaves_nothing_on_the_node(cluster) -> None:
    started = anyio.Event()

    async def slow(capability, method, args, kwargs):  # type: ignore[no-untyped-def]
        started.set()
        await anyio.sleep(30)

    async with RayGuestFactory() as factory:
        guest = await factory(CAPS, LIMITS)
        async with anyio.create_task_group() as tg:
            tg.start_soon(guest.run, "docs.search(1)", slow)
            await started.wait()
            tg.cancel_scope.cancel()
        assert not _alive(guest.placement["guest_pid"])
        stats = [await agent.stats.remote() for agent in factory.agents]
    assert all(s["live"] == 0 for s in stats)


@settings(
    max_examples=EQUIVALENCE_PROGRAMS,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
@given(programs(max_statements=5), conditions())
def test_streamed_runs_on_ray_guests_equal_their_local_sequential_twins(
    cluster, source, case
) -> None:
    async def pair() -> Pair:
        ref_host, ref_tools = build_host(case, start_subprocess_guest)
        reference = await ref_host.run_source(source, speculate=False)
        async with RayGuestFactory() as factory:
            host, tools = build_host(case, factory)
            chunks = stream_of(source, case)
            speculative = await host.run_stream(
                chunks, code="markdown" if case.markdown else "raw", policy=case.policy
            )
        return Pair(
            source, reference, speculative, ref_tools, tools, chunks.ended, host.method_specs()
        )  # type: ignore[arg-type]

    result = anyio.run(pair)
    assert result.speculative.isolation == result.reference.isolation
    check_pair(result)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def _pool_host() -> Host:
    host = Host(instrument=None)
    host.register(
        "docs",
        scripted_tool(
            search=Script(lambda query: [query.upper()], effect=Effect.PURE, latency=0.01)
        ),
    )
    return host


async def _chunks(text: str, fail: bool = False) -> AsyncIterator[str]:
    for i in range(0, len(text), 5):
        await anyio.sleep(0.002)
        yield text[i : i + 5]
    if fail:
        raise ConnectionError("the model's stream broke")


async def test_a_host_pool_pins_keys_and_equals_local_runs(cluster) -> None:
    source = "hits = [docs.search(q) for q in ('a', 'b', 'c')]\nprint(hits)\nhits[0]\n"
    # Ray workers cannot import this test module: ship ``_pool_host`` by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    async with HostPool(_pool_host, workers=2) as pool:
        pids = {key: (await pool.identity(key))["pid"] for key in ("s1", "s2", "s3", "s4", "s5")}
        assert len(set(pids.values())) == 2, "keys spread over both workers"
        again = {key: (await pool.identity(key))["pid"] for key in pids}
        assert again == pids, "each key pinned to its worker"
        local = await _pool_host().run_source(source, speculate=False)
        for key in pids:
            streamed = await pool.run_stream(_chunks(source), key=key)
            assert differences(local, streamed) == [] and streamed.report.claimed == 3
            assert differences(local, await pool.run_source(source, key=key, speculate=False)) == []
        broken = await pool.run_stream(_chunks(source, fail=True), key="s1")
        local_broken = await _pool_host().run_stream(_chunks(source, fail=True))
    assert (broken.status, broken.error) == (local_broken.status, local_broken.error)

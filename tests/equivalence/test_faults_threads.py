"""Fault catalogue, worker threads (issue 13, item 3).

Early sync calls have a thread budget of their own, so the program's own sync call gets a
thread however many early ones block; threads of abandoned calls are counted per Host and
bounded, and past the bound a new sync call fails with a clear ``RuntimeError`` in the
program (the same in both lanes) instead of piling up one more thread.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback

import anyio
import pytest

from pysolate import Host, LanePolicy
from pysolate._calls._threads import WorkerThreads
from pysolate._guest_api import GuestFactory

from .faulty import both_ways, guests, odd_host
from .harness import TimedChunks, assert_same
from .oddities import Odd

pytestmark = pytest.mark.anyio

BLOCKING = (
    "try:\n    q = [1 / 0, odd.stall('a'), odd.stall('b'), odd.stall('c')]\nexcept ZeroDivisionError:\n    q = None\n"
    "odd.tick()\n"
)
"""Three early sync reads that block (never reached), then the program's own sync call."""


@pytest.mark.parametrize("factory", guests())
async def test_early_sync_work_never_takes_the_programs_thread(factory: GuestFactory) -> None:
    """With ``threads=2`` the early budget is 1: one stall runs, two wait for it, and the
    program's ``tick`` still runs at once (no stall had returned by then)."""
    results = []
    for mode in ("source", "stream"):
        odd = Odd(stall_seconds=20.0)
        host, _ = odd_host(factory, odd, threads=2)
        try:
            if mode == "source":
                results.append(await host.run_source(BLOCKING, speculate=False))
            else:
                with anyio.fail_after(15):
                    results.append(
                        await host.run_stream(
                            TimedChunks(BLOCKING, (9,), (0.0,)),
                            policy=LanePolicy(allow_discardable=True),
                        )
                    )
                assert [c[0] for c in odd.calls].count(
                    "stall"
                ) >= 1  # early work did block a thread
                assert odd.ticks == [0]  # the program's call ran while it blocked
                assert host.thread_statistics().early_threads == 1
        finally:
            odd.release.set()
    reference, streamed = results
    assert (reference.status, reference.value) == ("ok", 1)
    assert_same(streamed, reference)
    assert streamed.report.late >= 1  # the abandoned early threads are accounted


async def _settle(host: Host, stuck: int) -> None:
    with anyio.fail_after(10):
        while host.thread_statistics().stuck != stuck:
            await anyio.sleep(0.01)


@pytest.mark.parametrize("factory", guests())
async def test_stuck_threads_are_counted_bounded_and_refused_past_the_bound(
    factory: GuestFactory,
) -> None:
    odd = Odd(stall_seconds=20.0)
    host, _ = odd_host(factory, odd, threads=2, max_stuck_threads=1, call_timeout=0.3)
    try:
        first = await host.run_source(
            "try:\n    odd.stall('x')\nexcept TimeoutError as e:\n    out = str(e)\nout\n",
            speculate=False,
        )
        assert (first.status, first.value) == ("ok", "odd.stall did not finish within 0.3s")
        await _settle(host, 1)
        # At the bound: every new sync call is refused at once, in both lanes alike.
        probe = "try:\n    odd.tick()\nexcept RuntimeError as e:\n    out = str(e)\n[out, odd.echo('async still works')]\n"
        refused = await host.run_source(probe, speculate=False)
        streamed = await host.run_stream(TimedChunks(probe, (6,), (0.0,)))
        message = (
            "odd.tick was not started: 1 worker threads of earlier calls that were abandoned "
            "have not returned (this Host allows 1)"
        )
        assert (refused.status, refused.value) == ("ok", [message, "async still works"])
        assert_same(streamed, refused)
        stats = host.thread_statistics()
        assert (stats.stuck, stats.max_stuck, stats.refused) == (1, 1, 2)
        assert odd.ticks == []  # the refused calls never ran
    finally:
        odd.release.set()
    await _settle(host, 0)  # the stuck thread returned: sync calls start again
    again = await host.run_source("odd.tick()\n", speculate=False)
    assert (again.status, again.value) == ("ok", 1)


def test_budgets_default_and_refuse_nonsense() -> None:
    stats = WorkerThreads(16).statistics()
    assert (stats.threads, stats.early_threads, stats.max_stuck, stats.stuck) == (16, 8, 16, 0)
    assert WorkerThreads(1).statistics().early_threads == 1
    with pytest.raises(ValueError, match="at least 1"):
        WorkerThreads(4, early_threads=0)


@pytest.mark.parametrize("factory", guests())
async def test_a_reached_stall_times_out_the_same_both_ways(factory: GuestFactory) -> None:
    source = "try:\n    odd.stall('x')\nexcept TimeoutError as e:\n    out = str(e)\nout\n"
    both = await both_ways(source, factory, call_timeout=0.3)
    assert both.streamed.value == "odd.stall did not finish within 0.3s"


def test_an_abandoned_early_thread_returning_after_its_loop_stopped_does_not_wait_for_it() -> None:
    """An abandoned early thread gives its slot back on its loop's own thread. A loop that
    stopped running without being closed (a test runner's between tests, any loop at
    interpreter exit) never answers, and a thread that waited for the answer held the
    process at exit forever. Now the release is only scheduled: the thread goes back to
    its pool at once, and the slot is free once the loop runs again."""
    threads = WorkerThreads(4)
    release = threading.Event()

    async def abandon() -> tuple[bool, object]:
        return await threads.run(
            lambda: release.wait(10), early=True, what="odd.stall", timeout=0.05
        )

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(abandon()) == (False, None)
        assert threads.statistics().early_stuck == 1
        release.set()  # it returns while the loop is not running
        deadline = time.monotonic() + 10
        while (threads.statistics().early_stuck or _releasing()) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert threads.statistics().early_stuck == 0
        assert not _releasing()  # no thread waits on the stopped loop
    finally:
        loop.close()


def _releasing() -> bool:
    """Whether a thread is inside ``_release_from_thread`` now."""
    return any(
        any(f.name == "_release_from_thread" for f in traceback.extract_stack(frame))
        for frame in sys._current_frames().values()
    )

"""Fault catalogue, contention (issue 36, divergences 1 and 2; contract 7).

Early work shares threads, slots, time and tools with the program's own calls. None of it
may change an outcome: the program's call never waits behind early work, a timeout counts
the tool's own run only, a failure the lane caused (its timeout, eaten by waits it shared)
is never claimed, and abandoned early threads shrink early capacity only, never the
program's, a later run's or a later turn's. Each case is run sequentially and streamed
and compared (status, value, error, call log), in both Guests.
"""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from pysolate import Effect, Host, capability
from pysolate._guest_api import GuestFactory
from pysolate.testing import check_invariants

from .faulty import guests
from .harness import TimedChunks, assert_same

pytestmark = pytest.mark.anyio


class SyncDb:
    """Sync reads taking ``seconds`` each; ``block`` (when set) holds ``stall`` until released."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.release = threading.Event()
        self.calls: list[str] = []

    @capability(effect=Effect.PURE, version="1")
    def get(self, key: str) -> str:
        self.calls.append(key)
        time.sleep(self.seconds)
        return key.upper()

    @capability(effect=Effect.PURE, version="1")
    def stall(self, key: str) -> str:
        self.release.wait(30)
        return key

    @capability(effect=Effect.PURE, version="1")
    def boom(self) -> str:
        raise ValueError("no")


class OneConnection:
    """An async tool that serialises its callers behind one connection (a lock)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.lock: anyio.Lock | None = None

    @capability(effect=Effect.PURE, version="1")
    async def get(self, key: str) -> str:
        if self.lock is None:
            self.lock = anyio.Lock()
        async with self.lock:
            await anyio.sleep(self.seconds)
        return key.upper()


def reads(n: int) -> str:
    return (
        "".join(f"v{i} = db.get('k{i}')\n" for i in range(n))
        + "["
        + ", ".join(f"v{i}" for i in range(n))
        + "]\n"
    )


def chunks(source: str) -> TimedChunks:
    return TimedChunks(source, (8,), (0.002,))


async def equal_both_ways(
    make: object, source: str, factory: GuestFactory, **host_kwargs: object
) -> None:
    """Sequential and streamed runs of ``source`` against fresh Hosts holding ``make()`` as
    ``db`` are equal, and the streamed run's accounting holds."""
    runs = []
    for streamed in (False, True):
        host = Host(guest_factory=factory, **host_kwargs)  # type: ignore[arg-type]
        host.register("db", make())  # type: ignore[operator]
        runs.append(
            await (
                host.run_stream(chunks(source))
                if streamed
                else host.run_source(source, speculate=False)
            )
        )
        if streamed:
            check_invariants(runs[-1], host.method_specs())
    reference, result = runs
    assert reference.status == "ok", reference.error
    assert_same(result, reference)


@pytest.mark.parametrize("factory", guests())
async def test_waiting_for_an_early_thread_is_not_the_tools_time(factory: GuestFactory) -> None:
    """Four 0.2 s reads with one early thread (``threads=2``) and ``call_timeout=0.5``: the
    last early read waits 0.6 s for its thread, which the sequential run never does."""
    await equal_both_ways(lambda: SyncDb(0.2), reads(4), factory, threads=2, call_timeout=0.5)


@pytest.mark.parametrize("factory", guests())
async def test_two_runs_sharing_the_early_threads_both_equal_their_twin(
    factory: GuestFactory,
) -> None:
    """Two concurrent runs of eight 0.3 s reads on one Host (eight early threads between
    them) with ``call_timeout=0.5``: half the early reads wait a whole read for a thread."""
    source = reads(8)
    host = Host(guest_factory=factory, call_timeout=0.5)
    host.register("db", SyncDb(0.3))
    reference = await host.run_source(source, speculate=False)
    results = []

    async def one() -> None:
        results.append(await host.run_stream(chunks(source)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(one)
        tg.start_soon(one)
    assert reference.status == "ok"
    for result in results:
        assert_same(result, reference)
        check_invariants(result, host.method_specs())


@pytest.mark.parametrize("factory", guests())
async def test_a_tool_serialising_its_callers_never_times_out_a_claim(
    factory: GuestFactory,
) -> None:
    """Five reads of an async tool behind one connection (0.15 s each), ``call_timeout=0.5``:
    the early reads queue inside the tool, the later ones past the timeout. That timeout is
    the lane's doing (``LaneStopped``), never claimed; the program's own calls run."""
    await equal_both_ways(lambda: OneConnection(0.15), reads(5), factory, call_timeout=0.5)


@pytest.mark.parametrize("factory", guests())
async def test_abandoned_early_threads_never_fail_a_later_run(factory: GuestFactory) -> None:
    """A run whose first call fails leaves its early reads stuck in threads, twice; with the
    old shared count (``max_stuck=4`` here) the next run's own sync call was refused. Now the
    stuck early threads hold early slots only: the next run equals its twin."""
    db = SyncDb(0.0)
    host = Host(guest_factory=factory, threads=4, early_threads=2, max_stuck_threads=4)
    host.register("db", db)
    failing = "db.boom()\n" + "".join(f"s{i} = db.stall('k{i}')\n" for i in range(4))
    try:
        for _ in range(2):
            failed = await host.run_stream(chunks(failing))
            assert (
                failed.status == "error"
                and failed.error is not None
                and failed.error.type == "ValueError"
            )
        stats = host.thread_statistics()
        assert (stats.early_stuck, stats.stuck, stats.early_busy) == (2, 0, 2), stats
        later = "v = db.get('a')\n[v, db.get('b')]\n"
        reference = await host.run_source(later, speculate=False)
        streamed = await host.run_stream(chunks(later))
        assert (reference.status, reference.value) == ("ok", ["A", "B"])
        assert_same(streamed, reference)
        assert host.thread_statistics().refused == 0
    finally:
        db.release.set()
    with anyio.fail_after(10):  # the stuck threads return and give their early slots back
        while host.thread_statistics().early_busy:
            await anyio.sleep(0.01)
    assert host.thread_statistics().early_stuck == 0


async def test_a_session_turn_is_not_failed_by_an_earlier_turns_abandoned_threads() -> None:
    db = SyncDb(0.0)
    host = Host(threads=4, early_threads=2, max_stuck_threads=2)
    host.register("db", db)
    failing = "db.boom()\n" + "".join(f"s{i} = db.stall('k{i}')\n" for i in range(4))
    try:
        async with host.session() as session:
            for _ in range(2):
                turn = await session.run_stream(chunks(failing))
                assert turn.status == "error"
            later = await session.run_stream(chunks("db.get('z')\n"))
            assert (later.status, later.value) == ("ok", "Z"), later.error
    finally:
        db.release.set()


class SyncConnection:
    """A sync tool behind one connection: an early call abandoned in its thread keeps it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.lock = threading.Lock()

    @capability(effect=Effect.PURE, version="1")
    def get(self, key: str) -> str:
        with self.lock:
            time.sleep(self.seconds)
        return key.upper()


class Clock:
    @capability(effect=Effect.LIVE_READ, version="1")
    async def now(self) -> int:
        return 1


@pytest.mark.parametrize("factory", guests())
async def test_a_read_queued_inside_the_tool_behind_early_reads_runs_again(
    factory: GuestFactory,
) -> None:
    """The program's own read (its argument is known only at run time) waits inside a
    one-connection tool behind six early reads (their threads, abandoned at their own
    timeout, keep the connection), 0.9 s, past ``call_timeout=0.5``: that timeout is the
    early reads' doing, so the read runs again once they are done; the sequential run
    never waits and is ``ok``."""
    source = "k = clock.now()\nx = db.get(f'z{k}')\n" + reads(6)
    runs = []
    for streamed in (False, True):
        host = Host(guest_factory=factory, call_timeout=0.5, early_threads=6)
        host.register("db", SyncConnection(0.15))
        host.register("clock", Clock())
        if streamed:
            runs.append(await host.run_stream(TimedChunks(source, (len(source),), (0.3,))))
            check_invariants(runs[-1], host.method_specs())
        else:
            runs.append(await host.run_source(source, speculate=False))
    reference, result = runs
    assert reference.status == "ok"
    assert_same(result, reference)
    assert result.report.reruns >= 1, "the read that ran again is counted"

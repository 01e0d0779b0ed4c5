"""The Host's pool of ready Guests (``pysolate._guest._pool``): a run only ever gets a
Guest started for exactly its capabilities and limits, one Guest per run; a dead pooled
Guest (or one whose fork server died) is replaced by a fresh start; an idle one uses no
CPU; and none outlives its Host (``aclose``, the Host dropped, its event loop's end,
interpreter exit)."""

from __future__ import annotations

import gc
import os
import select
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import anyio
import pytest
from guest_levels import params

from pysolate import Effect, Host, capability
from pysolate._guest import _forked, _isolation, _pool, _reaper
from pysolate._guest._process import SubprocessGuest
from pysolate._guest_api import GuestLimits

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

FORKED = [
    p for p in params("rlimits", hidden_bwrap=False) if p.values[0] in ("namespaces", "landlock")
]  # type: ignore[attr-defined]
"""A forked level of each kind (bubblewrap's, Landlock's): only forked Guests are pooled."""

RLIMITS = "import resource\n(resource.getrlimit(resource.RLIMIT_CPU)[0], resource.getrlimit(resource.RLIMIT_AS)[0])"


class Tools:
    @capability(effect=Effect.PURE)
    def add(self, a: int, b: int) -> int:
        return a + b


class More:
    @capability(effect=Effect.PURE)
    def one(self) -> int:
        return 1


def host(
    level: str, size: int = 1, limits: GuestLimits | None = None, *, fork_server: bool = True
) -> Host:
    made = Host(
        isolation=level,
        guest_pool=size,
        limits=limits or GuestLimits(wall_time=20),
        instrument=None,
        fork_server=fork_server,
    )  # type: ignore[arg-type]
    made.register("tools", Tools())
    return made


def pool_of(made: Host) -> _pool.GuestPool:
    pool = made.guest_pool()
    assert pool is not None
    return pool


async def filled(
    made: Host, count: int = 1, limits: GuestLimits | None = None
) -> list[SubprocessGuest]:
    """The pooled Guests once ``count`` (of ``limits``, if given) wait (bounded: the test
    fails, it never hangs)."""
    with anyio.fail_after(20):
        while (
            len([g for g in pool_of(made).guests() if limits is None or g._limits == limits])
            < count
        ):
            await anyio.sleep(0.005)
    return pool_of(made).guests()


def pidfd_of(guest: SubprocessGuest) -> int:
    return os.pidfd_open(guest.pid)


def gone(pidfd: int, timeout: float = 10.0) -> bool:
    """Whether the process behind ``pidfd`` has exited (waiting at most ``timeout``)."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    try:
        return bool(poller.poll(int(timeout * 1000)))
    finally:
        os.close(pidfd)


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


@pytest.mark.parametrize("level", FORKED)
async def test_a_run_gets_a_pooled_guest_only_of_exactly_its_limits(level: str) -> None:
    first, other = (
        GuestLimits(wall_time=20, cpu_time=7),
        GuestLimits(wall_time=20, cpu_time=9, memory_bytes=600 * 2**20),
    )
    made = host(level, limits=first)
    fresh = await made.run_source(RLIMITS, speculate=False)
    assert fresh.status == "ok" and fresh.value[0] == 7  # type: ignore[index]
    await filled(made)
    stats = pool_of(made).stats
    assert (stats.taken, stats.fresh) == (0, 1)

    changed = await made.run_source(RLIMITS, speculate=False, limits=other)
    assert changed.status == "ok" and changed.value[0] == 9  # type: ignore[index]
    assert changed.value != fresh.value
    assert (stats.taken, stats.fresh) == (0, 2)  # the pooled Guest was of the other limits

    await filled(made, limits=other)  # refilled for the latest run's limits
    again = await made.run_source(RLIMITS, speculate=False, limits=other)
    assert again.value == changed.value and stats.taken == 1
    assert (
        again.isolation == changed.isolation
    )  # the pooled Guest applied every mechanism a fresh one did
    await made.aclose()


@pytest.mark.parametrize("level", FORKED)
async def test_a_capability_registered_later_is_never_missing_from_a_pooled_guest(
    level: str,
) -> None:
    made = host(level)
    assert (await made.run_source("tools.add(1, 2)", speculate=False)).value == 3
    await filled(made)
    made.register("more", More())
    result = await made.run_source("more.one() + tools.add(1, 1)", speculate=False)
    assert (result.status, result.value) == ("ok", 3)
    assert pool_of(made).stats.taken == 0
    await made.aclose()


@pytest.mark.parametrize("level", FORKED)
async def test_a_dead_pooled_guest_is_discarded_and_the_run_starts_a_fresh_one(level: str) -> None:
    made = host(level)
    await made.run_source("1", speculate=False)
    (pooled,) = await filled(made)
    watched = pidfd_of(pooled)  # before the kill: a reaped child has no pid to open
    pooled._kill()
    assert gone(watched)
    result = await made.run_source("tools.add(2, 3)", speculate=False)
    assert (result.status, result.value) == ("ok", 5)
    stats = pool_of(made).stats
    assert (stats.discarded, stats.taken, stats.fresh) == (1, 0, 2)
    (replacement,) = await filled(made)
    assert replacement is not pooled and _pool.idle(replacement)
    await made.aclose()


@pytest.mark.parametrize("level", FORKED)
async def test_when_the_fork_server_dies_its_pooled_guests_are_replaced(level: str) -> None:
    made = host(level)
    await made.run_source("1", speculate=False)
    (pooled,) = await filled(made)
    watched = pidfd_of(pooled)
    server = _forked.server_for(level).pid()
    assert server is not None
    os.kill(server, signal.SIGKILL)
    assert gone(watched)  # the pooled Guest died with its server
    result = await made.run_source("tools.add(4, 4)", speculate=False)
    assert (result.status, result.value) == ("ok", 8)
    assert "fork-server" in (result.isolation.mechanisms if result.isolation else ())
    assert pool_of(made).stats.discarded == 1 and pool_of(made).stats.taken == 0
    await made.aclose()


@pytest.mark.parametrize("level", FORKED[:1])
async def test_concurrent_runs_each_get_a_guest_of_their_own(
    level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = host(level, size=2)
    await made.run_source("1", speculate=False)
    await filled(made, 2)
    handed: list[SubprocessGuest] = []
    take = pool_of(made).take

    async def recording(capabilities: object, limits: GuestLimits) -> SubprocessGuest:
        guest = await take(capabilities, limits)  # type: ignore[arg-type]
        handed.append(guest)
        return guest

    monkeypatch.setattr(pool_of(made), "take", recording)
    results: list[object] = []

    async def one(n: int) -> None:
        results.append((await made.run_source(f"tools.add({n}, 0)", speculate=False)).value)

    async with anyio.create_task_group() as tasks:
        for n in range(8):
            tasks.start_soon(one, n)
    assert sorted(results) == list(range(8))  # type: ignore[type-var]
    assert len({id(guest) for guest in handed}) == 8  # (a Guest run twice would have raised)
    assert pool_of(made).stats.taken >= 2
    await made.aclose()


@pytest.mark.parametrize("level", FORKED)
async def test_an_idle_pooled_guest_uses_no_cpu(level: str) -> None:
    made = host(level)
    await made.run_source("1", speculate=False)
    (pooled,) = await filled(made)
    process = pooled._process
    assert isinstance(process, _forked.ForkedProcess)
    before = cpu_ticks(process.guest_pid)
    await anyio.sleep(0.5)  # 50 clock ticks: a Guest spinning in any way would show
    assert cpu_ticks(process.guest_pid) == before
    await made.aclose()


@pytest.mark.parametrize("level", FORKED)
async def test_closing_the_host_leaves_no_pooled_guest(level: str) -> None:
    made = host(level, size=2)
    await made.run_source("1", speculate=False)
    pidfds = [pidfd_of(guest) for guest in await filled(made, 2)]
    await made.aclose()
    assert all(gone(fd, 0) for fd in pidfds)  # dead and reaped when aclose returns
    assert pool_of(made).guests() == [] and pool_of(made).stats.unused == 2
    result = await made.run_source(
        "tools.add(1, 1)", speculate=False
    )  # a closed pool: fresh Guests
    assert result.value == 2 and pool_of(made).guests() == []


@pytest.mark.parametrize("level", FORKED[:1])
async def test_dropping_the_host_closes_its_pool(level: str) -> None:
    made = host(level)
    await made.run_source("1", speculate=False)
    (pooled,) = await filled(made)
    watched = pidfd_of(pooled)
    del made, pooled
    gc.collect()
    # The keeper kills it on a later turn of this loop: wait for the exit on the loop.
    with anyio.move_on_after(10):
        await anyio.wait_readable(watched)
    assert gone(watched, timeout=0)


@pytest.mark.parametrize("level", FORKED[:1])
def test_the_end_of_the_event_loop_closes_its_pooled_guests(level: str) -> None:
    made = host(level)
    pidfds: list[int] = []

    async def fill() -> None:
        await made.run_source("1", speculate=False)
        pidfds.extend(pidfd_of(guest) for guest in await filled(made))

    anyio.run(fill)
    assert pidfds and all(gone(fd) for fd in pidfds)  # killed as the loop ended, reaped off it
    assert pool_of(made).stats.unused == 1
    assert _reaper.drain(10)


def test_a_host_keeps_one_ready_guest_by_default_where_guests_are_forked() -> None:
    assert _pool.DEFAULT_SIZE == 1
    for level in ("namespaces", "landlock", "seccomp"):
        if not _isolation.machine().missing(level):
            pool = Host(isolation=level).guest_pool()
            assert pool is not None and pool.size == 1, level
    assert Host(isolation="rlimits").guest_pool() is None  # spawned: never pooled
    assert Host(isolation="landlock", fork_server=False).guest_pool() is None
    assert Host(isolation="landlock", guest_pool=0).guest_pool() is None


@pytest.mark.parametrize("level", FORKED[:1])
def test_an_event_loop_ended_without_aclose_leaves_nothing_behind(level: str) -> None:
    """Each loop ends with its pooled Guest still waiting; nothing awaited then, so nothing
    (a transport, a cgroup, a scratch directory) is left to be collected after the loop."""
    pidfds: list[int] = []
    for _ in range(3):
        made = host(level)

        async def fill(made: Host = made) -> None:
            await made.run_source("1", speculate=False)
            pidfds.extend(pidfd_of(guest) for guest in await filled(made))

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            anyio.run(fill)
            del made
            gc.collect()
    assert len(pidfds) == 3 and all(gone(fd) for fd in pidfds)
    assert _reaper.drain(10)


def test_no_pooled_guest_outlives_the_host_process() -> None:
    """The Host's loop still runs (in a thread) when the interpreter exits: nothing closed
    the pool, yet its Guests end (the ``atexit`` hook; a forked one also with its server)."""
    script = textwrap.dedent(f"""
        import sys, threading, anyio
        sys.path.insert(0, {str(ROOT / "tests" / "pysolate")!r})
        from test_guest_pool import host, filled
        pids = []
        ready = threading.Event()

        async def main():
            made = host("landlock")
            await made.run_source("1", speculate=False)
            pids.extend(guest.pid for guest in await filled(made))
            ready.set()
            await anyio.sleep_forever()

        threading.Thread(target=anyio.run, args=(main,), daemon=True).start()
        ready.wait(60)
        print(*pids, flush=True)
        sys.stdin.read()  # exits, the loop still running, once the test closes stdin
    """)
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT
    ) as child:
        assert child.stdout is not None and child.stdin is not None
        pids = [int(word) for word in child.stdout.readline().split()]
        pidfds = [os.pidfd_open(pid) for pid in pids]
        child.stdin.close()
        assert child.wait(20) == 0
    assert pids and all(gone(fd) for fd in pidfds)

"""Benchmark: subprocess Guest start-up and the broker's per-call round trip.

    .venv/bin/python benchmarks/guest.py [--starts N] [--calls N]

In one run it prints, for each isolation level this machine offers (docs/isolation.md:
namespaces = bubblewrap + Landlock + seccomp; landlock = Landlock + seccomp, no bubblewrap;
seccomp; rlimits — every one with its own user namespace or bwrap's, no privileges):

1. start-up: from ``start_subprocess_guest`` to the child's ``ready`` (median and p90 of N
   starts, the modes interleaved start by start so machine noise hits them alike), with
   the CPU per Guest (start, run of ``1``, reaped: Host + Guest), next to a bare
   ``python -I -S -B -c pass``. Where cgroup v2 lets it, the benchmark moves itself into a
   child cgroup of its own (``benchmarks/cgroup_cpu.py``) before any Guest starts, so every
   Guest cgroup, the fork servers and bubblewrap's sandboxed children (in another pid
   namespace, which ``RUSAGE_CHILDREN`` misses) sit beneath it, and the CPU is that
   cgroup's ``cpu.stat`` ``usage_usec`` delta (µs), the Host's share its ``process_time``.
   Elsewhere it falls back to ``RUSAGE_CHILDREN`` plus the fork servers' ``/proc`` stat in
   clock ticks (misses what bubblewrap's init reaps) and says so; the child's
   confinement (Landlock, the filter, the namespace) is inside it. The levels the fork
   server serves (``namespaces``, ``landlock``, ``seccomp``) run both forked (their default) and spawned;
   and ``namespaces pool`` / ``landlock pool``: a forked Guest taken from a ``GuestPool`` of 1
   (``Host(guest_pool=1)``, ``_guest._pool``). Its start-up is the *take* (pool full → a
   ready Guest in hand), which hides the start, it does not remove it: its CPU window holds
   the take, the run of ``1``, the reaping *and* the background refill that take caused (the
   benchmark waits for the pool to be full again before it reads the meter), so its CPU per
   Guest is still a whole start's;
   PSS per ready Guest (10 held at once, ``smaps_rollup`` of each Guest's process tree);
2. end of run: ``guest.run`` of the program ``1`` — send, execute, ``done``, the child's
   exit and reaping;
3. per-call round trip as the program sees it: 7 batches of N calls to a Host method that
   returns at once, each timed inside the Guest with ``time.perf_counter`` (so it is the
   broker cost: encode, frame, socket, pydantic validation, handler dispatch, reply,
   decode), median and best batch, for an int argument, a 1 KiB and a 100 KiB string;
   with the CPU time each side spends per call;
4. the Host's check of a ready Guest in ``/proc`` (``_guest._verify``, once per start, on
   the event loop): Host CPU per check, best of 5 x 300 on one ready Guest of each level;
5. Host CPU per call on the full broker path: a ``Host`` with one 0-latency async tool
   (effect ``unknown``, an int argument), ``run_source(speculate=False)`` of a program
   making N calls minus one making none, Host process CPU (``process_time``) per call,
   best of ``BATCHES``. That is everything the Host does for a call: the channel, frame
   validation, binding, keying, the receipt, the tool, the reply.

Targets: per-call round trip <= 200 µs (issue 4); Host CPU per call on the full path
<= 40 µs (issue 18). A summary table at the end puts the levels
side by side (ratios to the bare interpreter and to ``rlimits``).
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cgroup_cpu import CgroupMeter

from pysolate import Effect, Host, capability
from pysolate._guest import _forked, _isolation, _pool, _verify, start_subprocess_guest
from pysolate._guest._isolation import IsolationChoice
from pysolate._guest._process import SCRATCH_BYTES
from pysolate._guest_api import GuestLimits

CAPS = {"tools": ["echo"]}

BATCHES = 7
"""Round-trip batches per payload; median and best are reported (the machine is noisy)."""


async def echo(
    capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> object:
    return args[0]


class Tools:
    @capability(effect=Effect.UNKNOWN)
    async def echo(self, x: int) -> int:
        return x


async def host_cpu_per_call(isolation: IsolationChoice, calls: int) -> float:
    """Best-of-``BATCHES`` Host CPU seconds per call on the full broker path."""
    host = Host(
        guest_factory=functools.partial(start_subprocess_guest, isolation=isolation),
        limits=GuestLimits(wall_time=120, cpu_time=120, max_calls=10**7),
    )
    host.register("tools", Tools())

    async def cpu(n: int) -> float:
        c0 = time.process_time()
        result = await host.run_source(
            f"for _ in range({n}):\n    tools.echo(7)\n", speculate=False
        )
        assert result.status == "ok", result.error
        return time.process_time() - c0

    await cpu(10)  # warm caches
    return min([(await cpu(calls)) - (await cpu(0)) for _ in range(BATCHES)]) / calls


async def check_cost(isolation: IsolationChoice) -> float:
    """Best-of-5 Host CPU seconds of one ``_verify.verify_started`` of a ready Guest."""
    guest = await start_subprocess_guest(CAPS, GuestLimits(), isolation=isolation)
    try:
        plan = _isolation.plan(isolation, SCRATCH_BYTES)
        pid = await _verify.guest_pid(guest._process, plan)
        reported = guest.isolation.mechanisms
        best = []
        for _ in range(5):
            c0 = time.process_time()
            for _ in range(300):
                _verify.verify_started(
                    guest._process,
                    pid,
                    plan,
                    guest._limits,
                    guest._scratch,
                    SCRATCH_BYTES,
                    reported,
                )
            best.append((time.process_time() - c0) / 300)
        return min(best)
    finally:
        await guest.aclose()


def quantiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"median {statistics.median(ordered) * 1e3:7.2f} ms   p90 {p90 * 1e3:7.2f} ms"


def bare_interpreter(n: int) -> list[float]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(
            [_isolation.interpreter(), *_isolation.INTERPRETER_FLAGS, "-c", "pass"],
            check=True,
            env={},
        )
        samples.append(time.perf_counter() - t0)
    return samples


def children_cpu() -> float:
    """CPU of every Guest so far: reaped children of this process (spawned Guests, bwrap)
    and the fork server with the children it reaped (forked Guests)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = usage.ru_utime + usage.ru_stime
    for server in _forked.servers.values():  # the landlock/seccomp one and the namespaces one
        pid = server.pid()
        if pid is None:
            continue
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15]) / os.sysconf(
            "SC_CLK_TCK"
        )  # utime stime cutime cstime
    return total


@dataclass(frozen=True)
class Mode:
    """One way to start a Guest: a level, forked from the fork server or spawned."""

    label: str
    level: IsolationChoice
    fork: bool
    pool: bool = False


def modes(levels: list[IsolationChoice]) -> list[Mode]:
    """Every level, and the forked levels both forked (their default) and spawned."""
    found = []
    for level in levels:
        forkable = _isolation.plan(level, SCRATCH_BYTES).forkable
        found.append(Mode(f"{level}{' fork' if forkable else ''}", level, True))
        if forkable:
            found.append(Mode(f"{level} spawn", level, False))
            found.append(Mode(f"{level} pool", level, True, pool=True))
    return found


async def pool_full(pool: _pool.GuestPool) -> None:
    """Wait until the pool holds its ready Guest again (its refill done)."""
    with anyio.fail_after(30):
        while len(pool.guests()) < pool.size:
            await anyio.sleep(0.0005)


async def startups(
    chosen: list[Mode], starts: int, meter: CgroupMeter | None
) -> dict[str, tuple[list[float], float, float, list[float]]]:
    """Per mode: start-up seconds, Guest-side CPU per Guest (mean), Host CPU per Guest
    (mean), run-of-'1' seconds. The CPU spans start, run of '1' and reaping; with a
    ``meter`` the total is its cgroup delta and the Guest's share the total minus the Host's."""
    limits = GuestLimits(wall_time=120, cpu_time=120)
    pools = {
        mode.label: _pool.GuestPool(1, isolation=mode.level, fork_server=True)
        for mode in chosen
        if mode.pool
    }
    for mode in chosen:
        await (
            await start_subprocess_guest(CAPS, limits, isolation=mode.level, fork_server=mode.fork)
        ).aclose()  # warm caches
        if mode.pool:
            await (
                await pools[mode.label].take(CAPS, limits)
            ).aclose()  # a fresh start; the pool fills
            await pool_full(pools[mode.label])
    walls: dict[str, list[float]] = {mode.label: [] for mode in chosen}
    runs: dict[str, list[float]] = {mode.label: [] for mode in chosen}
    guest_cpu = dict.fromkeys(walls, 0.0)
    host_cpu = dict.fromkeys(walls, 0.0)
    rusage_cpu = dict.fromkeys(walls, 0.0)
    total = meter.seconds if meter is not None else children_cpu
    for _ in range(starts):
        for mode in chosen:
            c0, r0, h0, t0 = total(), children_cpu(), time.process_time(), time.perf_counter()
            if mode.pool:
                guest = await pools[mode.label].take(CAPS, limits)
            else:
                guest = await start_subprocess_guest(
                    CAPS, limits, isolation=mode.level, fork_server=mode.fork
                )
            walls[mode.label].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await guest.run("1", echo)
            runs[mode.label].append(time.perf_counter() - t0)
            await guest.aclose()
            if mode.pool:
                await pool_full(pools[mode.label])  # the refill's start is this Guest's CPU too
            await anyio.sleep(0.01)  # let the fork server reap it and its cgroup's stats flush
            host = time.process_time() - h0
            host_cpu[mode.label] += host
            guest_cpu[mode.label] += total() - c0 - (host if meter is not None else 0.0)
            rusage_cpu[mode.label] += children_cpu() - r0
    for label, pool in pools.items():
        print(f"  {label}: {pool.stats}")
        await pool.aclose()
    if meter is not None:
        print(
            "  Guest CPU per Guest the old way (RUSAGE_CHILDREN + fork servers' /proc stat), same starts: "
            + ", ".join(f"{label} {cpu / starts * 1e3:.2f} ms" for label, cpu in rusage_cpu.items())
        )
    return {
        label: (walls[label], guest_cpu[label] / starts, host_cpu[label] / starts, runs[label])
        for label in walls
    }


def tree_pss(pid: int) -> int:
    """PSS bytes of ``pid`` and its descendants (``smaps_rollup``; the Host runs as root or
    the same uid)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        pending += children.get(current, [])
        try:
            for line in Path(f"/proc/{current}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


async def pss_per_guest(mode: Mode, count: int) -> float:
    """Mean PSS bytes of ``count`` ready Guests held at once."""
    guests = [
        await start_subprocess_guest(
            CAPS, GuestLimits(), isolation=mode.level, fork_server=mode.fork
        )
        for _ in range(count)
    ]
    try:
        return statistics.mean(tree_pss(guest.pid) for guest in guests)
    finally:
        for guest in guests:
            await guest.aclose()


async def round_trips(isolation: IsolationChoice, calls: int) -> dict[str, float]:
    limits = GuestLimits(wall_time=120, cpu_time=120)
    medians = {}
    for label, argument in (
        ("int", "7"),
        ("1 KiB str", "'x' * 1024"),
        ("100 KiB str", "'x' * 102400"),
    ):
        n = calls if label != "100 KiB str" else max(1, calls // 10)
        source = (
            f"import time\na = {argument}\nfor _ in range(50):\n    tools.echo(a)\nbatches = []\n"
            f"for _ in range({BATCHES}):\n    t0, c0 = time.perf_counter(), time.process_time()\n"
            f"    for _ in range({n}):\n        tools.echo(a)\n"
            f"    batches.append(((time.perf_counter() - t0) / {n}, (time.process_time() - c0) / {n}))\nbatches"
        )
        guest = await start_subprocess_guest(CAPS, limits, isolation=isolation)
        try:
            c0 = time.process_time()
            outcome = await guest.run(source, echo)
            host_cpu = (time.process_time() - c0) / (n * BATCHES + 50)
        finally:
            await guest.aclose()
        assert outcome.status == "ok", outcome
        assert isinstance(outcome.value, list)
        walls = sorted(wall for wall, _ in outcome.value)
        guest_cpu = statistics.median(cpu for _, cpu in outcome.value)
        medians[label] = statistics.median(walls)
        print(
            f"  round trip, {label:<11}  median {statistics.median(walls) * 1e6:6.1f} µs, best {walls[0] * 1e6:6.1f} µs"
            f"  (CPU per call: Host {host_cpu * 1e6:5.1f} µs + Guest {guest_cpu * 1e6:5.1f} µs; {BATCHES} x {n} calls)"
        )
    return medians


async def main(starts: int, calls: int, only: list[str]) -> None:
    print(f"python {sys.version.split()[0]}, {_isolation.interpreter()}")
    print(f"machine: {_isolation.machine()}")
    meter = CgroupMeter.enter()  # before any Guest, so every Guest cgroup lands beneath it
    print(f"CPU per Guest: {meter.how if meter is not None else CgroupMeter.FALLBACK}")
    bare = bare_interpreter(starts)
    print(f"[bare interpreter -I -S -B -c pass]\n  start-up                {quantiles(bare)}")
    levels: list[IsolationChoice] = list(reversed(_isolation.machine().levels()))  # strongest first
    chosen = [mode for mode in modes(levels) if not only or mode.label in only]
    levels = [level for level in levels if any(mode.level == level for mode in chosen)]
    samples = await startups(chosen, starts, meter)
    pss = {
        mode.label: await pss_per_guest(mode, 10) for mode in chosen
    }  # (a pool mode's Guests are forked ones)
    trips: dict[str, dict[str, float]] = {}
    full: dict[str, float] = {}
    for isolation in levels:
        guest = await start_subprocess_guest(CAPS, GuestLimits(), isolation=isolation)
        await guest.aclose()
        print(f"[{isolation}] mechanisms: {', '.join(guest.isolation.mechanisms)}")
        print(
            f"  Host CPU to check a ready Guest in /proc (_verify, once per start): {await check_cost(isolation) * 1e6:5.0f} µs"
        )
        for mode in (m for m in chosen if m.level == isolation):
            start_times, guest_cpu, host_cpu, run_times = samples[mode.label]
            print(
                f"  {mode.label:<17} start-up (to ready)     {quantiles(start_times)}   CPU per Guest: {(guest_cpu + host_cpu) * 1e3:6.2f} ms = Guest {guest_cpu * 1e3:6.2f} + Host {host_cpu * 1e3:5.2f} (means)"
            )
            print(
                f"  {mode.label:<17} run of '1' (to reaped)  {quantiles(run_times)}   PSS per ready Guest {pss[mode.label] / 2**20:5.2f} MiB"
            )
        trips[isolation] = await round_trips(isolation, calls)
        full[isolation] = await host_cpu_per_call(isolation, calls)
        print(
            f"  Host CPU per call, full broker path (RunScope.handler, 0-latency tool, int): {full[isolation] * 1e6:5.1f} µs (target <= 40)"
        )
    base = statistics.median(bare)
    print(
        f"\nside by side (medians of {starts} interleaved starts per mode; CPU per Guest = Guest + Host: means; targets: start <= 3 ms, CPU <= 3 ms, PSS <= 3 MiB, Host/call <= 40 µs)"
    )
    print(
        f"  {'mode':<17} {'start ms':>9} {'x bare':>7} {'CPU ms':>7} {'Guest ms':>8} {'Host ms':>8} {'PSS MiB':>8} {'run ms':>7} {'call µs':>8} {'Host µs':>8}"
    )
    for mode in chosen:
        start_times, guest_cpu, host_cpu, run_times = samples[mode.label]
        start = statistics.median(start_times)
        print(
            f"  {mode.label:<17} {start * 1e3:9.2f} {start / base:7.2f} {(guest_cpu + host_cpu) * 1e3:7.2f} {guest_cpu * 1e3:8.2f} {host_cpu * 1e3:8.2f} "
            f"{pss[mode.label] / 2**20:8.2f} {statistics.median(run_times) * 1e3:7.2f} "
            f"{trips[mode.level]['int'] * 1e6:8.1f} {full[mode.level] * 1e6:8.1f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument(
        "--only",
        nargs="*",
        default=[],
        help="mode labels to run (e.g. 'landlock fork'); default all",
    )
    options = parser.parse_args()
    anyio.run(main, options.starts, options.calls, options.only)

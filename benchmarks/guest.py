"""Benchmark: subprocess Guest start-up and the broker's per-call round trip.

    .venv/bin/python benchmarks/guest.py [--starts N] [--calls N]

In one run it prints, for each isolation level this machine offers (docs/isolation.md:
namespaces = bubblewrap + Landlock + seccomp; landlock = Landlock + seccomp, no bubblewrap;
seccomp; rlimits — every one with its own user namespace or bwrap's, no privileges):

1. start-up: from ``start_subprocess_guest`` to the child's ``ready`` (median and p90 of N
   starts, the levels interleaved start by start so machine noise hits them alike), with
   the CPU the child and its helpers use per start, next to a bare ``python -I -S -B -c
   pass``; the child's confinement (Landlock, the filter, the namespace) is inside it;
2. end of run: ``guest.run`` of the program ``1`` — send, execute, ``done``, the child's
   exit and reaping;
3. per-call round trip as the program sees it: 7 batches of N calls to a Host method that
   returns at once, each timed inside the Guest with ``time.perf_counter`` (so it is the
   broker cost: encode, frame, socket, pydantic validation, handler dispatch, reply,
   decode), median and best batch, for an int argument, a 1 KiB and a 100 KiB string;
   with the CPU time each side spends per call;
4. Host CPU per call on the full broker path: a ``Host`` with one 0-latency async tool
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
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pysolate import Effect, Host, capability
from pysolate._guest import _isolation, start_subprocess_guest
from pysolate._guest._isolation import IsolationChoice
from pysolate._guest_api import GuestLimits

CAPS = {"tools": ["echo"]}

BATCHES = 7
"""Round-trip batches per payload; median and best are reported (the machine is noisy)."""


async def echo(capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
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
        result = await host.run_source(f"for _ in range({n}):\n    tools.echo(7)\n", speculate=False)
        assert result.status == "ok", result.error
        return time.process_time() - c0

    await cpu(10)  # warm caches
    return min([(await cpu(calls)) - (await cpu(0)) for _ in range(BATCHES)]) / calls


def quantiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"median {statistics.median(ordered) * 1e3:7.2f} ms   p90 {p90 * 1e3:7.2f} ms"


def bare_interpreter(n: int) -> list[float]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([_isolation.interpreter(), *_isolation.INTERPRETER_FLAGS, "-c", "pass"], check=True, env={})
        samples.append(time.perf_counter() - t0)
    return samples


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def startups(levels: list[IsolationChoice], starts: int) -> dict[str, tuple[list[float], list[float], list[float]]]:
    """Per level: start-up seconds, child CPU seconds per start, run-of-'1' seconds."""
    limits = GuestLimits(wall_time=120, cpu_time=120)
    for isolation in levels:
        await (await start_subprocess_guest(CAPS, limits, isolation=isolation)).aclose()  # warm caches
    samples: dict[str, tuple[list[float], list[float], list[float]]] = {level: ([], [], []) for level in levels}
    for _ in range(starts):
        for isolation in levels:
            start_times, cpu_times, run_times = samples[isolation]
            c0, t0 = children_cpu(), time.perf_counter()
            guest = await start_subprocess_guest(CAPS, limits, isolation=isolation)
            start_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await guest.run("1", echo)
            run_times.append(time.perf_counter() - t0)
            await guest.aclose()
            cpu_times.append(children_cpu() - c0)
    return samples


async def round_trips(isolation: IsolationChoice, calls: int) -> dict[str, float]:
    limits = GuestLimits(wall_time=120, cpu_time=120)
    medians = {}
    for label, argument in (("int", "7"), ("1 KiB str", "'x' * 1024"), ("100 KiB str", "'x' * 102400")):
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


async def main(starts: int, calls: int) -> None:
    print(f"python {sys.version.split()[0]}, {_isolation.interpreter()}")
    print(f"machine: {_isolation.machine()}")
    bare = bare_interpreter(starts)
    print(f"[bare interpreter -I -S -B -c pass]\n  start-up                {quantiles(bare)}")
    levels: list[IsolationChoice] = list(reversed(_isolation.machine().levels()))  # strongest first
    samples = await startups(levels, starts)
    trips: dict[str, dict[str, float]] = {}
    full: dict[str, float] = {}
    for isolation in levels:
        start_times, cpu_times, run_times = samples[isolation]
        guest = await start_subprocess_guest(CAPS, GuestLimits(), isolation=isolation)
        await guest.aclose()
        print(f"[{isolation}] mechanisms: {', '.join(guest.isolation.mechanisms)}")
        print(f"  start-up (to ready)     {quantiles(start_times)}   CPU per start {statistics.median(cpu_times) * 1e3:6.2f} ms")
        print(f"  run of '1' (to reaped)  {quantiles(run_times)}")
        trips[isolation] = await round_trips(isolation, calls)
        full[isolation] = await host_cpu_per_call(isolation, calls)
        print(f"  Host CPU per call, full broker path (RunScope.handler, 0-latency tool, int): {full[isolation] * 1e6:5.1f} µs (target <= 40)")
    base, weakest = statistics.median(bare), statistics.median(samples[levels[-1]][0])
    print(f"\nside by side (medians; {starts} interleaved starts per level)")
    print(f"  {'level':<11} {'start ms':>9} {'x bare':>7} {'x ' + levels[-1]:>10} {'CPU ms':>7} {'run ms':>7} {'call µs':>8} {'Host µs':>8}")
    for isolation in levels:
        start_times, cpu_times, run_times = samples[isolation]
        start = statistics.median(start_times)
        print(
            f"  {isolation:<11} {start * 1e3:9.2f} {start / base:7.2f} {start / weakest:10.2f} "
            f"{statistics.median(cpu_times) * 1e3:7.2f} {statistics.median(run_times) * 1e3:7.2f} {trips[isolation]['int'] * 1e6:8.1f} {full[isolation] * 1e6:8.1f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--calls", type=int, default=1000)
    options = parser.parse_args()
    anyio.run(main, options.starts, options.calls)

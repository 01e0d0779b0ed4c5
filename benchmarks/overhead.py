"""Benchmark: what Pysolate costs per call, whether Guest start-up hides, and scale.

    .venv/bin/python benchmarks/overhead.py [--guest KIND ...] [--calls N] [--runs N] [--scale-only] [--gc default|tuned ...]

``--guest`` takes one kind or more (isolated = the default level, namespaces forked;
seccomp; landlock (forked); landlock-spawn; in-process): every section runs for each, in
this one session, so the kinds are side by side (``--scale-only``: section 4 only).

In one run it prints:

1. **broker cost per call**, as the program sees it (timed inside the Guest with
   ``time.perf_counter`` over N calls to a tool that returns at once): *direct* (an
   ``unknown``-effect method: the broker runs it on demand) and *claimed* (a ``pure``
   method with literal arguments, every call already finished early, so each Guest call
   only claims and copies the early result). Target (issue 7): <= 200 µs.
   **1b**: the Host's CPU per call (``benchmarks/broker_cpu.py``; target, issue 18: <= 40
   µs), with ``--baseline REV`` side by side with that revision's Host.
2. **Guest start-up**: the cold start of a Guest (``run_source`` of ``1`` minus its run),
   and, in ``run_stream``, the gap between the seal and the Guest starting to run for a
   stream of 1 s (start-up hidden behind the stream) and for a single instant chunk
   (nothing to hide behind).
3. **1,000 tiny calls**: programs making 1,000 calls to a 0-latency ``pure`` tool, one
   loop of 1,000 (past ``MAX_ITERATIONS`` = 256, so discovery does not expand it and every
   call is direct) and four loops of 250 (expanded: every call claimed); sequential
   reference vs ``run_stream``, wall times and equality.
4. **scale**: N (default 200) concurrent ``run_stream`` runs in ONE Host, the read-only
   scenarios round-robin at recorded speed; wall time, peak memory of the Host process
   (max RSS) and of the Host with all its Guests (sampled by a separate process, so the
   sampling takes neither the Host's GIL nor the measured cgroup's CPU), and that every result equals
   its sequential twin (the twins run concurrently too, each one itself sequential); wall
   over the longest single run (issue 18 target <= 1.5x), runs per core (runs / cores x
   longest stream / wall, as docs/benchmarks.md counts them) and the CPU of the runs (Host
   + every Guest: a cgroup v2 of the benchmark's own, ``benchmarks/cgroup_cpu.py``, where
   one may be made), split into the Host process's own (``process_time``: its event loop
   is one thread, so above ~1 core it is the limit) and the fork servers'. A run that
   raises is counted and its first error printed, not propagated. The Host's cyclic GC is
   counted too (CPU, collections, the longest pause); ``--gc default tuned`` repeats the
   section under CPython's thresholds and under ``TUNED_GC`` (docs/scale-out.md), side by
   side (``--gc default tuned default tuned``: alternating).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from bench_tools import GuestKind, guest_factory, make_host
from broker_cpu import host_cpu_per_call, side_by_side
from cgroup_cpu import CgroupMeter
from latency import call_log, load

from pysolate import Effect, Host, LanePolicy, RunResult
from pysolate.streams import Recording, play
from pysolate.testing import Script, scripted_tool

TUNED_GC = (10_000, 10, 10)
"""The GC thresholds docs/scale-out.md recommends for a Host serving hundreds of runs (CPython's
default: 700, 10, 10): a young-generation collection every 10,000 net allocations instead of 700,
so the full ones, which scan every live object of every run, come about 14x less often."""
READ_ONLY = [
    "issue5_four_reads",
    "parallel_reads",
    "dependent_chain",
    "loop_known_list",
    "loop_listed_dir",
    "branches",
    "failing_read_caught",
]


def tiny_host(guest: GuestKind) -> Host:
    host = Host(guest_factory=guest_factory(guest))
    host.register(
        "tiny",
        scripted_tool(
            direct=Script(lambda x: x, effect=Effect.UNKNOWN),
            pure=Script(lambda x: x, effect=Effect.PURE, version="1"),
        ),
    )
    return host


async def chunks_then_pause(parts: list[str], pause: float) -> AsyncIterator[str]:
    """All but the last part at once, the last after ``pause`` (early work finishes)."""
    for part in parts[:-1]:
        yield part
    await anyio.sleep(pause)
    yield parts[-1]


def timed_calls(method: str, n: int) -> str:
    """A program timing ``n`` straight-line calls (literal arguments) from inside the Guest."""
    calls = "".join(f"tiny.{method}(x={i})\n" for i in range(n))
    return f"import time\nt0 = time.perf_counter()\n{calls}elapsed = time.perf_counter() - t0\n"


async def broker_cost(guest: GuestKind, n: int) -> None:
    print(f"1. broker cost per call ({n} calls, timed in the Guest)")
    for method, lane in (("direct", "direct"), ("pure", "claimed")):
        host = tiny_host(guest)
        body = timed_calls(method, n)
        result = await host.run_stream(
            chunks_then_pause([body, "elapsed\n"], 1.0),
            policy=LanePolicy(concurrency=64, budget=n + 10),
        )
        assert result.status == "ok", result.error
        lanes = [c.lane for c in result.calls]
        assert isinstance(result.value, float)
        print(
            f"   {lane:8} {result.value / n * 1e6:7.1f} µs per call   "
            f"({lanes.count(lane)}/{n} calls {lane}; target <= 200 µs)"
        )


async def guest_start(guest: GuestKind) -> None:
    print("2. Guest start-up")
    host = tiny_host(guest)
    cold = []
    for _ in range(5):
        t0 = time.perf_counter()
        result = await host.run_source("1", speculate=False)
        cold.append(time.perf_counter() - t0 - result.report.guest_seconds)
    print(
        f"   cold start (run_source('1') minus the run): median {statistics.median(cold) * 1e3:.1f} ms"
    )
    for label, parts, pause in (
        ("1 s stream", ["x = 1\n", "x\n"], 1.0),
        ("one instant chunk", ["x = 1\n", "x\n"], 0.0),
    ):
        gaps = []
        for _ in range(5):
            result = await host.run_stream(chunks_then_pause(parts, pause))
            assert result.timeline is not None
            sealed = next(m.at for m in result.timeline.marks if m.kind == "seal")
            started = min(b.start for b in result.timeline.lane("guest"))
            gaps.append(started - sealed)
        print(f"   {label:18} seal → Guest running: median {statistics.median(gaps) * 1e3:6.1f} ms")


async def tiny_calls(guest: GuestKind) -> None:
    print("3. 1,000 tiny calls (0-latency pure tool), sequential reference vs run_stream")
    programs = {
        "one loop of 1,000": "total = 0\nfor i in range(1000):\n    total += tiny.pure(x=i)\ntotal\n",
        "4 loops of 250": "".join(
            f"total{k} = 0\nfor i in range({k * 250}, {(k + 1) * 250}):\n    total{k} += tiny.pure(x=i)\n"
            for k in range(4)
        )
        + "total0 + total1 + total2 + total3\n",
    }
    for label, source in programs.items():
        host = tiny_host(guest)
        t0 = time.perf_counter()
        reference = await host.run_source(source, speculate=False)
        sequential = time.perf_counter() - t0
        t0 = time.perf_counter()
        streamed = await host.run_stream(
            chunks_then_pause([source], 0.0), policy=LanePolicy(concurrency=64, budget=2000)
        )
        speculative = time.perf_counter() - t0
        equal = (streamed.status, streamed.value, call_log(streamed)) == (
            reference.status,
            reference.value,
            call_log(reference),
        )
        rep = streamed.report
        print(
            f"   {label:18} sequential {sequential:.3f} s, run_stream {speculative:.3f} s "
            f"(claimed {rep.claimed}, direct {rep.direct}, physical {rep.physical}); equal: {equal}"
        )


def tree_rss(root: int) -> int:
    """Resident memory (bytes) of process ``root`` and all its descendants, from /proc."""
    parent: dict[int, int] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/statm") as f:
                rss[int(entry)] = int(f.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
        parent[int(entry)] = int(fields[1])
    total = 0
    for pid, size in rss.items():
        p = pid
        while p and p != root:
            p = parent.get(p, 0)
        if p == root:
            total += size
    return total


SAMPLE_EVERY = 0.5
"""Seconds between two samples of the process tree's memory (``TreeSampler``)."""


class TreeSampler:
    """The peak of ``tree_rss`` of this process while the scale runs, sampled by a separate,
    niced process: with 500 Guests one sample reads ~2,000 /proc files (~40 ms of CPU), and
    sampled from a thread of the Host every 0.1 s it took ~0.4 of a core and the Host's GIL
    from the event loop being measured."""

    def __init__(self, meter: CgroupMeter | None) -> None:
        code = (
            "import os, sys, select; sys.path.insert(0, sys.argv[1]); from overhead import tree_rss; os.nice(10); peak = 0\n"
            "while not select.select([sys.stdin], [], [], float(sys.argv[3]))[0]: peak = max(peak, tree_rss(int(sys.argv[2])))\n"
            "print(max(peak, tree_rss(int(sys.argv[2]))))"
        )
        here = str(Path(__file__).resolve().parent)
        self._process = subprocess.Popen(
            [sys.executable, "-c", code, here, str(os.getpid()), str(SAMPLE_EVERY)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        if meter is not None:  # out of the measured cgroup: its CPU is not the runs'
            with open(os.path.join(meter.origin, "cgroup.procs"), "w") as f:
                f.write(str(self._process.pid))

    def peak(self) -> int:
        """Stop sampling; the peak in bytes (the sampler's own memory included, a few MiB)."""
        out, _ = self._process.communicate("")
        return int(out)


async def sequential_twins(
    guest: GuestKind, recordings: dict[str, Recording], names: list[str]
) -> list[RunResult]:
    """Each run's sequential twin (``run_source(speculate=False)`` of its recording's text),
    all at once in a Host of their own."""
    twins_host, _ = make_host(guest=guest)
    twins: dict[int, RunResult] = {}

    async def twin(i: int) -> None:
        twins[i] = await twins_host.run_source(recordings[names[i]].text, speculate=False)

    async with anyio.create_task_group() as tg:
        for i in range(len(names)):
            tg.start_soon(twin, i)
    return [twins[i] for i in range(len(names))]


def equal_to_twins(results: list[RunResult | None], twins: list[RunResult]) -> int:
    """How many runs equal their sequential twin (status, value, output, error, calls)."""
    return sum(
        1
        for r, t in zip(results, twins, strict=True)
        if r is not None
        and (r.status, r.value, r.stdout, r.error, call_log(r))
        == (t.status, t.value, t.stdout, t.error, call_log(t))
    )


async def scale(
    guest: GuestKind, runs: int, meter: CgroupMeter | None, gc_setting: str = "default"
) -> None:
    print(
        f"4. scale [{guest}, GC {gc_setting}]: {runs} concurrent run_stream runs in one Host ({len(READ_ONLY)} read-only scenarios round-robin)"
    )
    recordings = {name: load(name) for name in READ_ONLY}
    host, _ = make_host(guest=guest)
    names = [READ_ONLY[i % len(READ_ONLY)] for i in range(runs)]
    results: list[RunResult | None] = [None] * runs

    raised: list[BaseException] = []

    async def one(i: int) -> None:
        try:
            results[i] = await host.run_stream(play(recordings[names[i]].chunks))
        except Exception as error:  # counted and reported: the scale run is what is measured
            raised.append(error)

    sampler = TreeSampler(meter)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cpu0 = meter.seconds() if meter is not None else None
    host0, servers0 = time.process_time(), servers_cpu()
    with collector(gc_setting) as collections:
        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(runs):
                tg.start_soon(one, i)
        wall = time.perf_counter() - t0
    peak_tree = sampler.peak()
    host_cpu, server_cpu = time.process_time() - host0, servers_cpu() - servers0
    await anyio.sleep(0.2)  # let the last Guests' cgroups flush their CPU into the meter's
    cpu = meter.seconds() - cpu0 if meter is not None and cpu0 is not None else None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    twins = await sequential_twins(guest, recordings, names)
    twin_wall = time.perf_counter() - t0
    equal = equal_to_twins(results, twins)
    longest = max(recordings[n].duration for n in names)
    own = [r.report.wall_seconds for r in results if r is not None] or [float("nan")]
    cores = os.cpu_count() or 1
    statuses = statistics.multimode([r.status.value for r in results if r is not None] or ["none"])
    print(
        f"   wall {wall:.2f} s (longest stream {longest:.2f} s; per-run median {statistics.median(own):.2f} s, "
        f"max {max(own):.2f} s); sequential twins, concurrently: {twin_wall:.2f} s"
    )
    print(
        f"   peak RSS: Host process {rss / 1024:.0f} MiB (before the runs: {rss0 / 1024:.0f} MiB); "
        f"Host + all Guest processes (sampled every {SAMPLE_EVERY:g} s out of process) {peak_tree / 2**20:.0f} MiB"
    )
    print(
        f"   wall / longest single run: {wall / longest:.2f}x (target <= 1.5x); runs per core: {runs / cores * longest / wall:.0f} "
        f"(runs / {cores} cores x longest stream / wall: the runs each core keeps up with their streams); CPU of the runs: "
        + (
            f"{cpu:.2f} s = {cpu / runs * 1e3:.1f} ms per run, {cpu / wall:.2f} cores busy (cgroup v2 usage_usec)"
            if cpu is not None
            else CgroupMeter.FALLBACK
        )
    )
    print(
        f"   of which the Host process {host_cpu:.2f} s ({host_cpu / runs * 1e3:.1f} ms per run, {host_cpu / wall:.2f} of a core: its event loop is one thread), "
        f"the fork servers themselves {server_cpu:.2f} s ({server_cpu / runs * 1e3:.2f} ms per run; /proc stat, 10 ms ticks)"
    )
    print(
        f"   of the Host's CPU, CPython's cyclic GC: {collections.seconds:.2f} s in {collections.count} collections "
        f"({collections.full} of the oldest generation, the longest {collections.longest * 1e3:.0f} ms: the event loop stands still meanwhile)"
    )
    print(
        f"   equal to the sequential twin: {equal}/{runs}; raised: {len(raised)}"
        + (f" (first: {raised[0]!r})" if raised else "")
        + f"; commonest status {statuses}"
    )


@dataclass
class Collections:
    """What CPython's cyclic garbage collector cost the Host process while the runs ran."""

    count: int = 0
    full: int = 0
    seconds: float = 0.0
    longest: float = 0.0


@contextlib.contextmanager
def collector(setting: str) -> Iterator[Collections]:
    """Measure the GC (``gc.callbacks``, process CPU) under ``setting``: ``default``
    (CPython's thresholds) or ``tuned`` (``TUNED_GC``, docs/scale-out.md); the thresholds
    in force before come back after."""
    seen = Collections()
    started = [0.0]

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.process_time()
            return
        took = time.process_time() - started[0]
        seen.count += 1
        seen.full += info["generation"] == 2
        seen.seconds += took
        seen.longest = max(seen.longest, took)

    before = gc.get_threshold()
    if setting == "tuned":
        gc.set_threshold(*TUNED_GC)
    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)
        gc.set_threshold(*before)


def servers_cpu() -> float:
    """CPU seconds the fork servers' own interpreters used so far (not their children's)."""
    from pysolate._guest import _forked

    total = 0.0
    for server in _forked.servers.values():
        pid = server.pid()
        if pid is not None:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return total


async def host_cpu(guest: GuestKind, baseline: str | None) -> None:
    """Host CPU per broker call (issue 18), this tree and ``baseline`` side by side."""
    if baseline is None:
        best = {"this tree": await host_cpu_per_call(2000, guest)}
    else:  # each tree in its own interpreter, alternating (benchmarks/broker_cpu.py)
        best = await anyio.to_thread.run_sync(side_by_side, baseline, 2000, 3, guest)
    print(
        "1b. Host CPU per broker call (0-latency async tool, int argument, process_time; target <= 40 µs)"
    )
    for label, seconds in best.items():
        print(f"   {label:12} {seconds * 1e6:6.1f} µs")


async def main(
    guests: list[GuestKind],
    calls: int,
    runs: int,
    baseline: str | None,
    scale_only: bool,
    gc_settings: list[str],
) -> None:
    meter = CgroupMeter.enter()  # before any Guest, so every Guest cgroup lands beneath it
    for guest in guests:
        if not scale_only:
            await broker_cost(guest, calls)
            await host_cpu(guest, baseline)
            await guest_start(guest)
            await tiny_calls(guest)
        for setting in gc_settings:
            await scale(guest, runs, meter, setting)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--guest",
        nargs="+",
        choices=["isolated", "seccomp", "landlock", "landlock-spawn", "in-process"],
        default=["isolated"],
    )
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument(
        "--scale-only", action="store_true", help="only section 4 (scale), for each --guest"
    )
    parser.add_argument(
        "--baseline", help="a git revision whose Host CPU per call is measured side by side (1b)"
    )
    parser.add_argument(
        "--gc",
        nargs="+",
        choices=["default", "tuned"],
        default=["default"],
        help="the Host's GC thresholds in section 4, one scale run each, side by side (tuned: TUNED_GC, docs/scale-out.md)",
    )
    options = parser.parse_args()
    anyio.run(
        main,
        options.guest,
        options.calls,
        options.runs,
        options.baseline,
        options.scale_only,
        options.gc,
    )

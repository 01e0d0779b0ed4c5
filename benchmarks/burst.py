"""Benchmark: a timeline of N concurrent ``run_stream`` runs — who is busy, who waits, when.

    .venv/bin/python benchmarks/burst.py [--runs 500] [--guest isolated] [--bin 0.25] [--profile] [--every 0.05]

``overhead.py --scale-only`` says how long the burst takes; this says where the wall goes.
The workload is the same (the read-only scenarios round-robin at recorded speed, one Host,
every result compared with its sequential twin). Measured alongside:

- **out of process**, every ``--every`` seconds, by a niced sampler outside the measured
  cgroup: the machine's busy cores (``/proc/stat``: user, system), the runs' cgroup's CPU
  (``cgroup_cpu.CgroupMeter``: the Host, the fork servers, every Guest), and the Host's
  event-loop thread: its CPU and its ``schedstat`` *runqueue wait* (runnable, but another
  task holds the core);
- **in the Host**: when each Guest was asked of the fork server and handed over, when its
  cgroup was entered, when it was ready, when it ran; the loop's lag (a 10 ms sleep's
  lateness); the loop thread's voluntary and involuntary context switches;
- per run, from its timeline: the seal against the recording's own length, the wait from
  seal to the Guest, the Guest's run.

``--profile``: a SIGPROF sampler of the loop thread's stack (process CPU time, not wall), the
functions by own and cumulative share. It perturbs the burst a little; take the figures
without it.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from bench_tools import GuestKind, make_host
from cgroup_cpu import CgroupMeter
from latency import load
from overhead import READ_ONLY, equal_to_twins, sequential_twins

from pysolate import RunResult
from pysolate._guest import _forked, _pool, _process, _start
from pysolate.streams import play

SAMPLER = r"""
import json, os, select, sys, time
os.nice(10)
host, cgroup, every = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
tick = os.sysconf("SC_CLK_TCK")
def numbers(path):
    with open(path) as f:
        return f.read()
samples = []
while not select.select([sys.stdin], [], [], every)[0]:
    stat = numbers(f"/proc/{host}/task/{host}/stat").rsplit(")", 1)[1].split()
    usage = dict(line.split() for line in numbers(cgroup + "/cpu.stat").splitlines())
    samples.append({
        "t": time.monotonic(),
        "machine": [int(x) for x in numbers("/proc/stat").splitlines()[0].split()[1:]],
        "loop": (int(stat[11]) + int(stat[12])) / tick,
        "sched": [int(x) for x in numbers(f"/proc/{host}/task/{host}/schedstat").split()[:2]],
        "cgroup": [int(usage[k]) / 1e6 for k in ("usage_usec", "user_usec", "system_usec")],
    })
print(json.dumps(samples))
"""
"""The out-of-process sampler (argv: the Host's pid, the meter's cgroup, the period)."""

STAMPS = ("fork asked", "fork got", "cgroup entered", "ready", "guest run")


@dataclass
class Recording:
    """What one burst left: samples, the Host's stamps and the loop's lags."""

    t0: float
    samples: list[dict[str, Any]]
    stamps: list[tuple[float, str]] = field(default_factory=list)
    lags: list[tuple[float, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Row:
    """One bin of the timeline (seconds from the burst's start; CPU in cores)."""

    start: float
    machine: float
    machine_system: float
    runs_cgroup: float
    loop: float
    loop_waiting: float
    lag_median_ms: float
    stamps: dict[str, int]


def rows(recording: Recording, width: float, cores: int) -> list[Row]:
    """The samples in bins of at least ``width`` seconds (the last may be shorter): cores
    busy by whom (of ``cores``), the loop's runqueue wait, its median lag, and how many of
    each stamp fell in the bin."""
    out: list[Row] = []
    samples = recording.samples
    first = 0
    for i in range(1, len(samples)):
        a, b = samples[first], samples[i]
        dt = b["t"] - a["t"]
        if dt < width - 1e-9 and i < len(samples) - 1:  # (sampling times are floats)
            continue
        ticks = [y - x for x, y in zip(a["machine"], b["machine"], strict=True)]
        total = sum(ticks) or 1
        busy = (total - ticks[3] - ticks[4]) / total * cores  # idle and iowait out
        lo, hi = a["t"] - recording.t0, b["t"] - recording.t0
        lags = [lag for at, lag in recording.lags if lo <= at - recording.t0 < hi]
        counts = collections.Counter(
            what for at, what in recording.stamps if lo <= at - recording.t0 < hi
        )
        out.append(
            Row(
                start=lo,
                machine=busy,
                machine_system=ticks[2] / total * cores,
                runs_cgroup=(b["cgroup"][0] - a["cgroup"][0]) / dt,
                loop=(b["loop"] - a["loop"]) / dt,
                loop_waiting=(b["sched"][1] - a["sched"][1]) / 1e9 / dt,
                lag_median_ms=statistics.median(lags) * 1e3 if lags else 0.0,
                stamps={what: counts[what] for what in STAMPS},
            )
        )
        first = i
    return out


class StackSampler:
    """SIGPROF (process CPU time) samples of the main thread's Python stack."""

    def __init__(self, every: float = 0.001) -> None:
        self.stacks: collections.Counter[tuple[str, ...]] = collections.Counter()
        self.every = every
        signal.signal(signal.SIGPROF, self._on)

    def _on(self, _signal: int, frame: FrameType | None) -> None:
        stack = []
        while frame is not None:
            stack.append(f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}")
            frame = frame.f_back
        self.stacks[tuple(stack)] += 1

    def start(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, self.every, self.every)

    def stop(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)

    def report(self, n: int = 25) -> None:
        total = sum(self.stacks.values()) or 1
        own: collections.Counter[str] = collections.Counter()
        cumulative: collections.Counter[str] = collections.Counter()
        for stack, count in self.stacks.items():
            own[stack[0]] += count
            for name in set(stack):
                cumulative[name] += count
        print(f"   loop thread stacks ({total} samples of process CPU); own:")
        for name, count in own.most_common(n):
            print(f"   {count / total * 100:5.1f}% {name}")
        print("   cumulative:")
        for name, count in cumulative.most_common(n):
            print(f"   {count / total * 100:5.1f}% {name}")


def stamp_guest_starts(stamps: list[tuple[float, str]]) -> None:
    """Wrap the Guest start's steps so each leaves a stamp (this process only)."""

    def stamped(
        function: Callable[..., Awaitable[Any]], before: str | None, after: str
    ) -> Callable[..., Awaitable[Any]]:
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            if before is not None:
                stamps.append((time.monotonic(), before))
            result = await function(*args, **kwargs)
            stamps.append((time.monotonic(), after))
            return result

        return wrapper

    _forked.fork_child = stamped(_forked.fork_child, "fork asked", "fork got")  # type: ignore[assignment]
    _start.enter_cgroup = stamped(_start.enter_cgroup, None, "cgroup entered")  # type: ignore[assignment]
    _pool.start_subprocess_guest = stamped(_pool.start_subprocess_guest, None, "ready")  # type: ignore[assignment]
    run = _process.SubprocessGuest.run

    async def stamped_run(self: _process.SubprocessGuest, *args: Any) -> Any:
        stamps.append((time.monotonic(), "guest run"))
        return await run(self, *args)

    _process.SubprocessGuest.run = stamped_run  # type: ignore[method-assign]


def _quantiles(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.3f} s, p90 {sorted(xs)[int(0.9 * len(xs))]:.3f} s, max {max(xs):.3f} s"


def context_switches() -> tuple[int, int]:
    """The calling thread's voluntary and involuntary context switches so far."""
    with open(f"/proc/self/task/{threading.get_native_id()}/status") as f:
        found = {k: int(v) for k, v in (line.split(":") for line in f if "ctxt_switches" in line)}
    return found["voluntary_ctxt_switches"], found["nonvoluntary_ctxt_switches"]


async def burst(guest: GuestKind, runs: int, width: float, every: float, profile: bool) -> None:
    meter = CgroupMeter.enter()
    if meter is None:
        raise SystemExit("burst.py needs a cgroup v2 of its own (CgroupMeter)")
    stamps: list[tuple[float, str]] = []
    stamp_guest_starts(stamps)
    recordings = {name: load(name) for name in READ_ONLY}
    host, _ = make_host(guest=guest)
    names = [READ_ONLY[i % len(READ_ONLY)] for i in range(runs)]
    results: list[RunResult | None] = [None] * runs
    sampler = subprocess.Popen(
        [sys.executable, "-c", SAMPLER, str(os.getpid()), meter.path, str(every)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    with open(os.path.join(meter.origin, "cgroup.procs"), "w") as f:
        f.write(str(sampler.pid))  # its CPU is not the runs'
    await anyio.sleep(0.3)
    lags: list[tuple[float, float]] = []
    done = anyio.Event()

    async def probe() -> None:
        while not done.is_set():
            t = time.monotonic()
            await anyio.sleep(0.01)
            lags.append((t, time.monotonic() - t - 0.01))

    async def one(i: int) -> None:
        results[i] = await host.run_stream(play(recordings[names[i]].chunks))

    stacks = StackSampler() if profile else None
    switches0, t0, thread0 = context_switches(), time.monotonic(), time.thread_time()
    async with anyio.create_task_group() as outer:
        outer.start_soon(probe)
        if stacks is not None:
            stacks.start()
        async with anyio.create_task_group() as tg:
            for i in range(runs):
                tg.start_soon(one, i)
        wall, thread = time.monotonic() - t0, time.thread_time() - thread0
        if stacks is not None:
            stacks.stop()
        switches = [b - a for a, b in zip(switches0, context_switches(), strict=True)]
        await anyio.sleep(2 * every)
        done.set()
    recording = Recording(
        t0, json.loads(sampler.communicate("")[0]), [s for s in stamps if s[0] <= t0 + wall], lags
    )
    recording.stamps = [s for s in recording.stamps if s[0] >= t0]
    equal = equal_to_twins(results, await sequential_twins(guest, recordings, names))
    longest = max(recordings[n].duration for n in names)
    print(
        f"burst [{guest}]: {runs} runs, wall {wall:.2f} s = {wall / longest:.2f}x the longest stream ({longest:.2f} s); equal {equal}/{runs}; load {os.getloadavg()[0]:.2f}"
    )
    print(
        f"   loop thread: {thread:.2f} s CPU = {thread / runs * 1e3:.2f} ms per run, {thread / wall:.2f} of a core; context switches: {switches[0]} voluntary, {switches[1]} involuntary"
    )
    print(
        f"   {'t (s)':>6} {'busy':>5} {'sys':>5} {'runs':>5} {'loop':>5} {'wait':>5} {'lag ms':>6}  "
        + " ".join(f"{s:>14}" for s in STAMPS)
    )
    for row in rows(recording, width, os.cpu_count() or 1):
        print(
            f"   {row.start:6.2f} {row.machine:5.2f} {row.machine_system:5.2f} {row.runs_cgroup:5.2f} {row.loop:5.2f} {row.loop_waiting:5.2f} {row.lag_median_ms:6.0f}  "
            + " ".join(f"{row.stamps[s]:>14}" for s in STAMPS)
        )
    print(
        "   busy: the machine's cores; sys: of which kernel; runs: the runs' cgroup (Host + fork servers + Guests);"
    )
    print(
        "   loop: the event-loop thread's CPU; wait: its time runnable on a runqueue (cores); lag: a 10 ms sleep's lateness"
    )
    seal = [
        s
        for r, n in zip(results, names, strict=True)
        if r is not None and r.timeline is not None
        for s in [next(m.at for m in r.timeline.marks if m.kind == "seal") - recordings[n].duration]
    ]
    print(f"   seal after the recording's own end: {_quantiles(seal)}")
    for label, kind in (
        ("ready", "ready"),
        ("cgroup entered", "cgroup entered"),
        ("fork got", "fork got"),
    ):
        at = sorted(t - t0 for t, what in recording.stamps if what == kind)
        if at:
            print(f"   {label}: first {at[0]:.2f} s, last {at[-1]:.2f} s ({len(at)})")
    if stacks is not None:
        stacks.report()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--guest", choices=["isolated", "seccomp", "landlock", "landlock-spawn"], default="isolated"
    )
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--bin", type=float, default=0.25, help="seconds per row of the timeline")
    parser.add_argument("--every", type=float, default=0.05, help="seconds between two samples")
    parser.add_argument(
        "--profile", action="store_true", help="SIGPROF stack samples of the loop thread"
    )
    options = parser.parse_args()
    anyio.run(burst, options.guest, options.runs, options.bin, options.every, options.profile)

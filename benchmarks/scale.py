"""Benchmark: Guests on Ray against local Guests, and whole runs on a HostPool, side by side.

    .venv/bin/python benchmarks/scale.py [--starts N] [--calls N] [--runs N] [--agents N]

One local Ray cluster (in-process, ``--agents`` node agents on this machine), one run:

1. start-up: factory call to a Guest ready for its source, median and p90 of N starts,
   local ``start_subprocess_guest`` vs ``RayGuestFactory``; and whether a Ray start still
   hides behind a 1 s stream (``run_stream``: seal to Guest running);
2. per call, as the program sees it: N calls to a Host method that returns at once, timed
   inside the Guest, best of 5 batches, int argument and a 1 KiB string; plus the Host
   process's CPU per call;
3. ``--runs`` concurrent ``run_stream`` runs (5 pure 20 ms reads and one unknown call each,
   streamed at about 200 tokens/s): wall time and runs/s for local Guests, Ray Guests and a
   2-worker ``HostPool``; every result compared with its sequential local twin.

Targets (issue 19): start-up ≤ +10 ms and hidden behind a 1 s stream; per call ≤ +250 µs on
loopback; all results equal.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pysolate import Effect, Host
from pysolate._guest import start_subprocess_guest
from pysolate._guest_api import GuestLimits
from pysolate._report._equivalence import differences
from pysolate.ray import HostPool, RayGuestFactory
from pysolate.testing import Script, scripted_tool

CAPS = {"tools": ["echo"]}
PROGRAM = (
    "docs = [kb.search(f'topic {i}') for i in range(5)]\n"
    "note = log.write(str(len(docs)))\n"
    "[d[0] for d in docs]\n"
)


async def echo(
    capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> object:
    return args[0]


def make_host(factory: object = None) -> Host:
    host = Host(guest_factory=factory, instrument=None)  # type: ignore[arg-type]
    host.register(
        "kb", scripted_tool(search=Script(lambda q: [q.upper()], effect=Effect.PURE, latency=0.02))
    )
    host.register("log", scripted_tool(write=Script(lambda text: len(text))))
    return host


async def chunks(text: str, rate: float = 200.0, size: int = 4) -> AsyncIterator[str]:
    for i in range(0, len(text), size):
        await anyio.sleep(1 / rate)
        yield text[i : i + size]


def quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


async def startup(factory: Callable[..., Awaitable[object]], n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        guest = await factory(CAPS, GuestLimits())
        times.append(time.perf_counter() - t0)
        await guest.aclose()  # type: ignore[attr-defined]
    return times


async def per_call(
    factory: Callable[..., Awaitable[object]], n: int, argument: str
) -> tuple[float, float]:
    """Best of 5 batches: (seconds per call in the Guest, Host CPU seconds per call)."""
    source = f"import time\nx = {argument}\nt0 = time.perf_counter()\nfor _ in range({n}):\n    tools.echo(x)\n(time.perf_counter() - t0) / {n}\n"
    best, cpu = float("inf"), float("inf")
    for _ in range(5):
        guest = await factory(CAPS, GuestLimits())
        c0 = time.process_time()
        outcome = await guest.run(source, echo)  # type: ignore[attr-defined]
        c1 = time.process_time()
        await guest.aclose()  # type: ignore[attr-defined]
        assert outcome.status == "ok", outcome.error
        best, cpu = min(best, float(outcome.value)), min(cpu, (c1 - c0) / n)
    return best, cpu


async def concurrent(run: Callable[[], Awaitable[object]], n: int) -> tuple[float, list[object]]:
    results: list[object] = []

    async def one() -> None:
        results.append(await run())

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(one)
    return time.perf_counter() - t0, results


async def main(args: argparse.Namespace) -> None:
    reference = await make_host().run_source(PROGRAM, speculate=False)
    print(
        f"Ray Guests vs local Guests, one run on {os.cpu_count()} cores ({args.agents} node agents)\n"
    )
    async with RayGuestFactory(
        agents=args.agents, init={"num_cpus": os.cpu_count()}
    ) as ray_factory:
        local_start = await startup(start_subprocess_guest, args.starts)
        ray_start = await startup(ray_factory, args.starts)
        (lm, lp), (rm, rp) = quantiles(local_start), quantiles(ray_start)
        print("start-up (factory → ready)   median      p90")
        print(f"  local Guest                 {lm * 1e3:6.1f} ms  {lp * 1e3:6.1f} ms")
        print(
            f"  Ray Guest                   {rm * 1e3:6.1f} ms  {rp * 1e3:6.1f} ms   (+{(rm - lm) * 1e3:.1f} ms, x{rm / lm:.2f})"
        )
        hidden = await make_host(ray_factory).run_stream(
            chunks(PROGRAM * 1, rate=len(PROGRAM) / 4)
        )  # ~1 s stream
        print(
            f"  behind a 1 s stream: Pysolate finished {hidden.report.wall_seconds:.2f} s after its first token, status {hidden.status}\n"
        )

        print(
            "per call (in the Guest, best of 5)   local      Ray        extra     Host CPU/call local → Ray"
        )
        for label, argument in (("int", "7"), ("1 KiB str", "'x' * 1024")):
            (lc, lcpu), (rc, rcpu) = (
                await per_call(start_subprocess_guest, args.calls, argument),
                await per_call(ray_factory, args.calls, argument),
            )
            print(
                f"  {label:<10}                         {lc * 1e6:6.0f} µs  {rc * 1e6:6.0f} µs  +{(rc - lc) * 1e6:4.0f} µs   {lcpu * 1e6:4.0f} → {rcpu * 1e6:4.0f} µs"
            )

        print(
            f"\n{args.runs} concurrent run_stream runs (5 pure 20 ms reads + 1 unknown call each)"
        )
        shapes: list[tuple[str, Callable[[], Awaitable[object]]]] = [
            ("local Guests, one Host", lambda: make_host().run_stream(chunks(PROGRAM))),
            ("Ray Guests, one Host", lambda: make_host(ray_factory).run_stream(chunks(PROGRAM))),
        ]
        async with HostPool(make_host, workers=2) as pool:
            shapes.append(
                (
                    "HostPool, 2 workers",
                    lambda: pool.run_stream(chunks(PROGRAM), key=os.urandom(4).hex()),
                )
            )
            base = None
            for name, run in shapes:
                wall, results = await concurrent(run, args.runs)
                equal = sum(1 for r in results if not differences(reference, r))  # type: ignore[arg-type]
                base = base or wall
                print(
                    f"  {name:<24} wall {wall:6.2f} s   {args.runs / wall:6.1f} runs/s   x{wall / base:.2f}   equal {equal}/{args.runs}"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--starts", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--agents", type=int, default=2)
    anyio.run(main, parser.parse_args())

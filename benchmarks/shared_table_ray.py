"""What a table shared by the workers of a ``HostPool`` would cost per call: a local estimate.

    .venv/bin/python benchmarks/shared_table_ray.py [--calls 2000]

The design is in ``docs/scale-out.md`` ("A table shared by the workers of a HostPool"): one
Ray actor (or a few, by key digest) holds settled successes and in-flight entries by exact
key, as the Host's own ``ObservationTable`` does per event loop. This prototype measures the
per-call price of asking such an actor, on a local one-node Ray cluster, side by side with
the Host's in-process table in the same run:

- a miss (``lookup`` of a key nobody settled: what every first call pays on top);
- a hit with a 1 KiB and a 64 KiB result (the tagged plain-data text a worker decodes into a
  fresh copy);
- a ``settle`` of a 1 KiB result (what the call that ran pays after its tool returned);
- 256 lookups at once (one worker's burst), per call.

Medians of ``--calls`` sequential round trips, best of 3; the actor is an async actor on the
same machine, so a real cluster adds its network round trip.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ray

from occurrences import CallKey
from scheduler._shared import ObservationTable


class SharedTable:
    """The prototype: settled tagged results by exact key text (digest, then the full key
    compared, so a digest collision can never serve another call)."""

    def __init__(self) -> None:
        self._settled: dict[str, tuple[str, str]] = {}

    async def lookup(self, digest: str, key: str) -> str | None:
        hit = self._settled.get(digest)
        return hit[1] if hit is not None and hit[0] == key else None

    async def settle(self, digest: str, key: str, tagged: str) -> None:
        self._settled[digest] = (key, tagged)


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def measure(calls: int) -> dict[str, float]:
    actor = ray.remote(SharedTable).options(num_cpus=0, max_concurrency=1000).remote()
    key = CallKey("docs", "search", "1", '["retry with backoff"]', "static")
    text = repr(key)
    small, large = "x" * 1024, "x" * 65536
    ray.get(actor.settle.remote("small", text, small))
    ray.get(actor.settle.remote("large", text, large))
    out: dict[str, float] = {}

    def timed(name: str, call: object) -> None:
        best = float("inf")
        for _ in range(3):
            samples = []
            for _ in range(calls):
                t0 = time.perf_counter()
                ray.get(call())  # type: ignore[operator]
                samples.append(time.perf_counter() - t0)
            best = min(best, _median_us(samples))
        out[name] = best

    timed("miss", lambda: actor.lookup.remote("none", text))
    timed("hit, 1 KiB", lambda: actor.lookup.remote("small", text))
    timed("hit, 64 KiB", lambda: actor.lookup.remote("large", text))
    timed("settle, 1 KiB", lambda: actor.settle.remote("other", text, small))
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        ray.get([actor.lookup.remote("small", text) for _ in range(256)])
        best = min(best, (time.perf_counter() - t0) / 256 * 1e6)
    out["256 at once, per call"] = best

    table = ObservationTable(ttl=600.0, max_entries=4096, max_chars=1 << 26, clock=time.monotonic)
    entry = table.open(key, "run", "formal")
    entry.probe.adopt()
    table.settle(entry, value=small, chars=len(small))
    samples = []
    for _ in range(calls * 10):
        t0 = time.perf_counter()
        table.find(key)
        samples.append(time.perf_counter() - t0)
    out["in-process ObservationTable.find"] = _median_us(samples)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        results = measure(args.calls)
    finally:
        ray.shutdown()
    print("| operation | median per call (µs) |\n|---|---:|")
    for name, us in results.items():
        print(f"| {name} | {us:.1f} |")


if __name__ == "__main__":
    main()

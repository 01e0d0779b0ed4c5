"""Benchmark: discovery + event graph, CPU per accepted statement, against parsing it.

    .venv/bin/python benchmarks/discovery.py [--repeats R] [--profile]

For every latency scenario (``make_scenarios.SCENARIOS``, the programs the latency benchmark
streams), each top-level statement is handed to a fresh ``EventGraph`` one at a time, as the
prefix parser accepts them, and its ready occurrences taken: discovery, argument evaluation
and keying included, no results delivered. Reported per statement, beside ``ast.parse`` of
the same statement's source (what the parser pays at least once per statement), and the
ratio of the two. ``--profile`` adds a cProfile of the whole set, by own time.

Times are process CPU time with the cyclic GC paused during each timed run, best of
``--repeats`` runs (expect a few percent of noise on a shared machine).
"""

from __future__ import annotations

import argparse
import ast
import cProfile
import gc
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_tools import public_methods, tool_specs
from make_scenarios import SCENARIOS

from occurrences import CallKey, MethodSpec, NotPlain, canonical_arguments
from scheduler import EventGraph

CAPABILITIES = {
    capability: {method: MethodSpec(tool.effect, "1") for method, tool in methods.items()}
    for capability, methods in public_methods(tool_specs()).items()
}


def key_for(capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]) -> CallKey | None:
    try:
        return CallKey(capability, method, "1", canonical_arguments({"args": args, "kwargs": kwargs}), "root")
    except NotPlain:
        return None


def discover(body: list[ast.stmt]) -> None:
    graph = EventGraph(CAPABILITIES, key_for)
    for statement in body:
        graph.add_statements([statement])
        graph.take_ready()


def best_microseconds(work: object, count: int, repeats: int) -> float:
    """Best-of-``repeats`` CPU time of ``work()``, in µs per one of ``count`` items.

    Not ``parser.timed``: its ``gc.collect()`` before each run leaves the caches cold, which
    for runs of a few hundred µs (a 7-statement scenario) shows as 1.5 to 3 times the time."""
    assert callable(work)
    best = float("inf")
    for _ in range(repeats):
        gc.disable()
        try:
            start = time.process_time_ns()
            work()
            best = min(best, time.process_time_ns() - start)
        finally:
            gc.enable()
    return best / count / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--profile", action="store_true")
    options = parser.parse_args()
    ratios, costs, total = [], [], 0.0
    print(f"{'scenario':24} {'stmts':>5} {'discovery µs':>12} {'parse µs':>9} {'ratio':>6}")
    for scenario in SCENARIOS:
        body = ast.parse(scenario.source).body
        sources = [ast.get_source_segment(scenario.source, s) or "" for s in body]
        cost = best_microseconds(lambda body=body: discover(body), len(body), options.repeats)
        parse = best_microseconds(lambda s=sources: [ast.parse(x) for x in s], len(body), options.repeats)
        ratios.append(cost / parse)
        costs.append(cost)
        total += cost * len(body)
        print(f"{scenario.name:24} {len(body):5} {cost:12.1f} {parse:9.1f} {cost / parse:6.1f}")
    print(f"{'median':24} {'':5} {statistics.median(costs):12.1f} {'':9} {statistics.median(ratios):6.1f}")
    print(f"{'all statements, ms':24} {'':5} {total / 1e3:12.2f}")
    if options.profile:
        bodies = [ast.parse(s.source).body for s in SCENARIOS]
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(5):
            for body in bodies:
                discover(body)
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()

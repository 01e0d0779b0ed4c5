"""Benchmark: the incremental event graph (discovery + frontier).

    .venv/bin/python benchmarks/graph.py [--repeats R] [--sizes 100,1000,10000]

In one run it prints:

1. per-update cost at 100, 1,000 and 10,000 nodes, for the three updates the graph sees:
   *add* (one accepted statement ``rI = docs.search("qI")`` discovered, evaluated, keyed,
   queued and taken), *complete* (a result delivered; its dependent ``docs.get(rI[0])``
   re-evaluated, keyed and made ready) and *drop* (a branch decided dead by a result);
   measured over the last 100 updates of a graph that already holds the given number of
   nodes. Flat means the graph's size does not leak into an update's cost.
2. chunk-to-ready latency: a program streamed in model-like chunks (1-8 characters)
   through ``PrefixParser``; for every chunk that completes a statement, the time from
   receiving the chunk to its occurrences being returned by ``take_ready`` (parsing,
   discovery, argument evaluation, keying included). Reported as median and p99 over the
   statements, for programs of 100, 1,000 and 10,000 statements.

Times are process CPU time with the cyclic GC paused during each timed run (as ``timeit``
does, and as ``benchmarks/parser.py``), best of ``--repeats`` runs.

Target (issue 3): flat per-update cost; chunk-to-ready median <= 1 ms.
"""

from __future__ import annotations

import argparse
import ast
import gc
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from occurrences import CallKey, Effect, MethodSpec, NotPlain, PrefixParser, canonical_arguments
from scheduler import EventGraph

CAPS = {
    "docs": {"search": MethodSpec(Effect.PURE, "1"), "get": MethodSpec(Effect.PURE, "1")},
    "workspace": {"read_text": MethodSpec(Effect.IMMUTABLE_READ, "1")},
}
WINDOW = 100


def key_for(
    capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> CallKey | None:
    try:
        return CallKey(
            capability, method, "1", canonical_arguments({"args": args, "kwargs": kwargs}), "root"
        )
    except NotPlain:
        return None


def per_update(size: int) -> dict[str, float]:
    """Microseconds per update, averaged over the last WINDOW updates at ``size`` nodes."""
    # One source, parsed once: occurrence identity is the source position.
    src = "".join(
        f'r{i} = docs.search("q{i}")\ndocs.get(r{i}[0], n={i})\nif r{i}:\n    workspace.read_text("a{i}")\n'
        for i in range(size)
    )
    body = ast.parse(src).body
    producers, consumers, branches = body[0::3], body[1::3], body[2::3]
    graph = EventGraph(CAPS, key_for)
    # Grow to size - WINDOW nodes per kind untimed, then time the last WINDOW of each.
    head = size - WINDOW
    for i in range(head):
        graph.add_statements([producers[i], consumers[i], branches[i]])
    graph.take_ready()
    t0 = time.process_time_ns()
    for i in range(head, size):
        graph.add_statements([producers[i]])
        graph.take_ready()
    t_add = time.process_time_ns() - t0
    for i in range(head, size):
        graph.add_statements([consumers[i], branches[i]])
    graph.take_ready()
    searches = [n for n in graph.nodes() if n.site.method == "search"][head:]
    for node in searches:
        graph.mark_dispatched(node.id)
    # Each completion: the consumer's arguments evaluated and it made ready, the branch
    # decided live (its read stays), so one result drives two dependents.
    t0 = time.process_time_ns()
    for node in searches[: WINDOW // 2]:
        graph.complete(node.id, ["x"])
        graph.take_ready()
    t_complete = time.process_time_ns() - t0
    # Each completion with an empty result: the branch dies, its read is dropped.
    t0 = time.process_time_ns()
    for node in searches[WINDOW // 2 :]:
        graph.complete(node.id, [])
        graph.take_ready()
    t_drop = time.process_time_ns() - t0
    half = WINDOW // 2
    return {
        "nodes": graph.statistics().nodes,
        "add": t_add / WINDOW / 1e3,
        "complete": t_complete / half / 1e3,
        "drop": t_drop / half / 1e3,
    }


def program(n: int) -> str:
    """A model-like program: reads, derived arguments, a data edge, a loop, a branch."""
    lines = ['base = "src/"']
    for i in range(n):
        kind = i % 5
        if kind == 0:
            lines.append(f'r{i} = docs.search(f"topic {{base}}{i}", limit={i % 7})')
        elif kind == 1:
            lines.append(f'text{i} = workspace.read_text(base + "file_{i}.py")')
        elif kind == 2:
            lines.append(f"first{i} = docs.get(r{i - 2}[0]) if r{i - 2} else None")
        elif kind == 3:
            lines.append(f'for name in ["a{i}", "b{i}"]:\n    workspace.read_text(base + name)')
        else:
            lines.append(f'if len(base) > 3:\n    docs.get("k{i}", mode="full")')
    return "\n".join(lines) + "\n"


def chunks(text: str, rng: random.Random) -> list[str]:
    out, i = [], 0
    while i < len(text):
        step = rng.randint(1, 8)
        out.append(text[i : i + step])
        i += step
    return out


def chunk_to_ready(statements: int, seed: int) -> dict[str, float]:
    """Microseconds from a statement-completing chunk to its occurrences being ready."""
    src = program(statements)
    pieces = chunks(src, random.Random(seed))
    parser = PrefixParser()
    graph = EventGraph(CAPS, key_for)
    latencies: list[float] = []
    for piece in pieces:
        t0 = time.process_time_ns()
        snapshot = parser.feed(piece)
        if snapshot is None:
            continue
        graph.add_statements(snapshot.new_statements)
        graph.take_ready()
        elapsed = (time.process_time_ns() - t0) / 1e3
        latencies.extend([elapsed] * len(snapshot.new_statements))
    latencies.sort()
    return {
        "statements": len(latencies),
        "median": statistics.median(latencies),
        "p99": latencies[int(0.99 * (len(latencies) - 1))],
        "nodes": graph.statistics().nodes,
    }


def paused(fn: Callable[..., dict[str, float]], *args: int) -> dict[str, float]:
    """Run ``fn`` with the cyclic garbage collector paused."""
    gc.collect()
    gc.disable()
    try:
        return fn(*args)
    finally:
        gc.enable()


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    per_update(WINDOW * 2)  # warm-up: imports, caches, first allocations
    print(
        f"Python {sys.version.split()[0]}; best of {args.repeats} runs; CPU microseconds, GC paused"
    )
    print(
        "\n| nodes per kind | total nodes | add | complete (2 dependents) | complete (branch dies) |"
    )
    print("|---:|---:|---:|---:|---:|")
    for size in sizes:
        runs = [paused(per_update, size) for _ in range(args.repeats)]
        best = {k: min(r[k] for r in runs) for k in ("add", "complete", "drop")}
        print(
            f"| {size:,} | {runs[0]['nodes']:,.0f} | {best['add']:.1f} | "
            f"{best['complete']:.1f} | {best['drop']:.1f} |"
        )
    print("\n| statements | nodes | chunk-to-ready median (us) | p99 (us) |")
    print("|---:|---:|---:|---:|")
    for size in sizes:
        runs = [paused(chunk_to_ready, size, args.seed + r) for r in range(args.repeats)]
        best = min(runs, key=lambda r: r["median"])
        print(f"| {size:,} | {best['nodes']:,.0f} | {best['median']:.0f} | {best['p99']:.0f} |")


if __name__ == "__main__":
    main()

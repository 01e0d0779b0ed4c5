"""Benchmark: discovery + event graph, CPU per accepted statement, against parsing it.

    .venv/bin/python benchmarks/discovery.py [--repeats R] [--profile]
    .venv/bin/python benchmarks/discovery.py --stream [--baseline REV] [--repeats R] [--profile]

For every latency scenario (``make_scenarios.SCENARIOS``, the programs the latency benchmark
streams), each top-level statement is handed to a fresh ``EventGraph`` one at a time, as the
prefix parser accepts them, and its ready occurrences taken: discovery, argument evaluation
and keying included, no results delivered. Reported per statement, beside ``ast.parse`` of
the same statement's source (what the parser pays at least once per statement), and the
ratio of the two. ``--profile`` adds a cProfile of the whole set, by own time.

Times are process CPU time with the cyclic GC paused during each timed run, best of
``--repeats`` runs (expect a few percent of noise on a shared machine).

``--stream`` measures instead what the Host pays per streamed run (issue 18 item 3): each
read-only recording of the scale benchmark (``overhead.READ_ONLY``) is fed chunk by chunk
to a ``PrefixParser`` and an ``EventGraph`` exactly as ``pysolate._run._stream_run`` does it
(accepted statements, then the provisional parse of the statement still streaming), with
every ready occurrence completed at once by the tool's own behaviour (a 0-latency tool).
No Guest, no broker, no lane: the parser, the provisional repair and discovery only.
``--baseline REV`` measures the same in a ``git archive`` of revision REV (main, say), in
alternating subprocesses so both see the same machine load.

``--lines`` (issue 36, items 5 and 7) measures what an unfinished block costs per new line:
a ``for`` over three known items whose body of N lines (one read each) streams in
5-character chunks, through the same pipeline as ``--stream``, against discovering the
whole program once as ``run_source`` does (the parser on the whole text, every statement
discovered, tools answering at once). Printed per body length: the streamed CPU per body
line (flat when each line costs that line), and streamed / whole. Then the worst hold of
the event loop while ``Host.run_stream`` runs (a heartbeat task sleeping 1 ms, its
lateness, from the first chunk to the result, with a subprocess Guest): for the 400-line
loop in 5-character chunks, and for 60 lines of heavy argument expressions in two chunks. ``--baseline REV`` as above (before vs after, side by side).
"""

from __future__ import annotations

import argparse
import ast
import cProfile
import gc
import json
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

# ``--root DIR`` (the baseline's subprocess): import the code under test from DIR instead.
sys.path.insert(
    0,
    sys.argv[sys.argv.index("--root") + 1]
    if "--root" in sys.argv
    else str(Path(__file__).resolve().parents[1]),
)
sys.path.insert(0, str(Path(__file__).resolve().parent))

import anyio
from bench_tools import make_host, public_methods, tool_specs
from make_scenarios import SCENARIOS

import occurrences
from occurrences import CallKey, MethodSpec, NotPlain, canonical_arguments
from occurrences.parser import PrefixParser
from pysolate.streams import read_recording
from scheduler import EventGraph, State

_ROOT = str(Path(occurrences.__file__).resolve().parents[1])  # the tree under test
READ_ONLY = [
    "issue5_four_reads",
    "parallel_reads",
    "dependent_chain",
    "loop_known_list",
    "loop_listed_dir",
    "branches",
    "failing_read_caught",
]
"""``overhead.READ_ONLY``, copied: a baseline revision's subprocess cannot import this tree's overhead.py
(``compare_stream`` checks the copy)."""
SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
BEHAVIOURS = {
    cap: {m: t.behaviour for m, t in methods.items()}
    for cap, methods in public_methods(tool_specs()).items()
}

CAPABILITIES = {
    capability: {method: MethodSpec(tool.effect, "1") for method, tool in methods.items()}
    for capability, methods in public_methods(tool_specs()).items()
}


def key_for(
    capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> CallKey | None:
    try:
        return CallKey(
            capability, method, "1", canonical_arguments({"args": args, "kwargs": kwargs}), "root"
        )
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


def answer(graph: EventGraph) -> None:
    """Run every ready occurrence at once with the tool's own behaviour (a 0-latency tool)."""
    while batch := graph.take_ready():
        for node in batch:
            if node.state is not State.READY:
                continue
            graph.mark_dispatched(node.id)
            try:
                result = BEHAVIOURS[node.site.capability][node.site.method](
                    *node.args, **node.kwargs
                )
            except Exception:
                graph.fail(node.id)
            else:
                graph.complete(node.id, result)


def stream(chunks: list[str]) -> None:
    """One streamed run as ``pysolate._run._stream_run.read_stream`` drives it, tools answering at once."""
    parser = PrefixParser()
    graph = EventGraph(CAPABILITIES, key_for)

    def pump() -> None:
        answer(graph)

    for text in chunks:
        snapshot = parser.feed(text)
        if snapshot is not None:
            graph.add_statements(snapshot.new_statements)
            pump()
        found = parser.pending()
        if found is not None:
            graph.add_provisional(found)
            pump()
    graph.add_statements(parser.close().new_statements)
    pump()


def measure_stream(repeats: int) -> dict[str, float]:
    """Scenario -> best-of-``repeats`` CPU µs per streamed run."""
    recordings = {
        name: [c.text for c in read_recording(SCENARIO_DIR / f"{name}.jsonl").chunks]
        for name in READ_ONLY
    }
    return {
        name: best_microseconds(lambda c=chunks: stream(c), 1, repeats)
        for name, chunks in recordings.items()
    }


def _subprocess_stream(root: str, repeats: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--stream-json", "--repeats", str(repeats), "--root", root],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {k: float(v) for k, v in json.loads(out).items()}


def compare_stream(baseline: str | None, repeats: int, rounds: int = 3) -> None:
    """Per-run CPU of the streaming pipeline, this tree beside ``baseline``'s, best of all rounds."""
    from overhead import READ_ONLY as SCALE_SCENARIOS  # this tree's: the copy must not drift

    if READ_ONLY != SCALE_SCENARIOS:
        raise SystemExit(f"READ_ONLY differs from overhead.READ_ONLY: {SCALE_SCENARIOS}")
    with tempfile.TemporaryDirectory() as tmp:
        roots = {"this tree": _ROOT}
        if baseline is not None:
            archive = subprocess.run(
                ["git", "-C", _ROOT, "archive", baseline], check=True, capture_output=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            roots = {baseline: tmp, **roots}
        best: dict[str, dict[str, float]] = {label: {} for label in roots}
        for _ in range(rounds):
            for label, root in roots.items():
                for name, us in _subprocess_stream(root, repeats).items():
                    best[label][name] = min(us, best[label].get(name, float("inf")))
    labels = list(roots)
    print(
        f"streaming pipeline, CPU µs per run, best of {rounds}x{repeats} (parser + provisional + discovery)"
    )
    print(
        f"{'scenario':24}"
        + "".join(f"{label:>14}" for label in labels)
        + ("   after/before" if baseline else "")
    )
    for name in READ_ONLY:
        row = [best[label][name] for label in labels]
        print(
            f"{name:24}"
            + "".join(f"{v:14.0f}" for v in row)
            + (f"{row[-1] / row[0]:15.2f}" if baseline else "")
        )
    means = [statistics.fmean(best[label].values()) for label in labels]
    print(
        f"{'mean per run':24}"
        + "".join(f"{v:14.0f}" for v in means)
        + (f"{means[-1] / means[0]:15.2f}" if baseline else "")
    )


BODY_LINES = (25, 50, 100, 200, 400)


def loop_program(lines: int) -> str:
    """A ``for`` over three known items with a body of ``lines`` reads."""
    body = "".join(f'    v{i} = docs.search(query=d + "{i}")\n' for i in range(lines))
    return 'items = ["a", "b", "c"]\nfor d in items:\n' + body + "done = 1\n"


def heavy_program() -> list[str]:
    """60 lines of heavy (bounded) argument expressions, in two chunks (issue 36, case 4)."""
    heavy = "sum(x % 7 for x in range(9999)) + sum(x % 5 for x in range(9999))"
    lines = [f"v{i} = docs.search(query=str({heavy} + {i}))\n" for i in range(60)]
    return ["".join(lines[:30]), "".join(lines[30:]) + "v59\n"]


def chunks_of(source: str, size: int = 5) -> list[str]:
    return [source[i : i + size] for i in range(0, len(source), size)]


def whole(source: str) -> None:
    """What ``run_source`` discovers: the parser on the whole text, then every statement."""
    parser = PrefixParser()
    parser.feed(source)
    graph = EventGraph(CAPABILITIES, key_for)
    graph.add_statements(parser.close().statements)
    answer(graph)


def measure_lines(repeats: int) -> dict[str, object]:
    """Per body length: best CPU µs of the whole program discovered once and streamed;
    and the worst event-loop holds (ms) of real streamed runs."""
    per: dict[str, tuple[float, float]] = {}
    for lines in BODY_LINES:
        source = loop_program(lines)
        chunks = chunks_of(source)
        once = best_microseconds(lambda s=source: whole(s), 1, repeats)
        streamed = best_microseconds(
            lambda c=chunks: stream(c), 1, max(1, repeats // (1 + lines // 100))
        )
        per[str(lines)] = (once, streamed)
    holds = {
        "loop400": anyio.run(worst_hold, chunks_of(loop_program(400))),
        "heavy60": anyio.run(worst_hold, heavy_program()),
    }
    return {"lines": per, "holds": holds}


async def worst_hold(chunks: list[str]) -> float:
    """The longest the event loop was held (ms) while ``Host.run_stream`` ran ``chunks``,
    from the first chunk to the result (the seal's discovery included, where the Host used
    to do it all at once): a heartbeat sleeping 1 ms at a time, its worst lateness. The
    Guest is a subprocess, so the program's own work is not on the Host's loop."""
    host, _ = make_host(0.0)
    worst = 0.0
    running = False

    async def chunks_paced() -> AsyncIterator[str]:
        for text in chunks:
            yield text
            await anyio.sleep(0)

    async def heartbeat() -> None:
        nonlocal worst
        while True:
            start = anyio.current_time()
            await anyio.sleep(0.001)
            if running:
                worst = max(worst, anyio.current_time() - start - 0.001)

    async with anyio.create_task_group() as tg:
        tg.start_soon(heartbeat)
        await anyio.sleep(0.01)
        running = True
        result = await host.run_stream(chunks_paced())
        running = False
        tg.cancel_scope.cancel()
    assert result.status.value == "ok", result.error
    return worst * 1e3


def compare_lines(baseline: str | None, repeats: int) -> None:
    """``measure_lines`` of this tree beside ``baseline``'s (subprocesses, one after the other)."""
    with tempfile.TemporaryDirectory() as tmp:
        roots = {"this tree": _ROOT}
        if baseline is not None:
            archive = subprocess.run(
                ["git", "-C", _ROOT, "archive", baseline], check=True, capture_output=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            roots = {baseline: tmp, **roots}
        got = {}
        for label, root in roots.items():
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--lines-json",
                    "--repeats",
                    str(repeats),
                    "--root",
                    root,
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            got[label] = json.loads(out)
    labels = list(roots)
    print(
        "an unfinished for-body of N lines in 5-character chunks: CPU per body line (µs), streamed / whole"
    )
    print(f"{'lines':>6}" + "".join(f"{label + ' µs/line':>24}{'ratio':>8}" for label in labels))
    for lines in BODY_LINES:
        row = ""
        for label in labels:
            once, streamed = got[label]["lines"][str(lines)]
            row += f"{streamed / lines:24.0f}{streamed / once:8.1f}"
        print(f"{lines:6}" + row)
    print("worst event-loop hold during Host.run_stream (ms)")
    for name in ("loop400", "heavy60"):
        print(f"{name:>10}" + "".join(f"{got[label]['holds'][name]:14.1f}" for label in labels))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--stream", action="store_true", help="per-run CPU of the streaming pipeline"
    )
    parser.add_argument(
        "--baseline", help="with --stream or --lines: a git revision measured side by side"
    )
    parser.add_argument(
        "--lines", action="store_true", help="cost per new line of an unfinished block; loop holds"
    )
    parser.add_argument("--lines-json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stream-json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.stream_json:
        print(json.dumps(measure_stream(options.repeats)))
        return
    if options.lines_json:
        print(json.dumps(measure_lines(options.repeats)))
        return
    if options.lines:
        compare_lines(options.baseline, options.repeats)
        if options.profile:
            chunks = chunks_of(loop_program(200))
            print_profile(lambda: stream(chunks), rounds=1, rows=30)
        return
    if options.stream:
        compare_stream(options.baseline, options.repeats)
        if options.profile:
            recordings = [
                [c.text for c in read_recording(SCENARIO_DIR / f"{n}.jsonl").chunks]
                for n in READ_ONLY
            ]
            print_profile(lambda: [stream(chunks) for chunks in recordings], rounds=20, rows=25)
        return
    ratios, costs, total = [], [], 0.0
    print(f"{'scenario':24} {'stmts':>5} {'discovery µs':>12} {'parse µs':>9} {'ratio':>6}")
    for scenario in SCENARIOS:
        body = ast.parse(scenario.source).body
        sources = [ast.get_source_segment(scenario.source, s) or "" for s in body]
        cost = best_microseconds(lambda body=body: discover(body), len(body), options.repeats)
        parse = best_microseconds(
            lambda s=sources: [ast.parse(x) for x in s], len(body), options.repeats
        )
        ratios.append(cost / parse)
        costs.append(cost)
        total += cost * len(body)
        print(f"{scenario.name:24} {len(body):5} {cost:12.1f} {parse:9.1f} {cost / parse:6.1f}")
    print(
        f"{'median':24} {'':5} {statistics.median(costs):12.1f} {'':9} {statistics.median(ratios):6.1f}"
    )
    print(f"{'all statements, ms':24} {'':5} {total / 1e3:12.2f}")
    if options.profile:
        bodies = [ast.parse(s.source).body for s in SCENARIOS]
        print_profile(lambda: [discover(body) for body in bodies], rounds=5, rows=20)


def print_profile(work: Callable[[], object], *, rounds: int, rows: int) -> None:
    """Run ``work`` ``rounds`` times under cProfile; print the top ``rows`` by own time."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(rounds):
        work()
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(rows)


if __name__ == "__main__":
    main()

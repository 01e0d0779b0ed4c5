"""Benchmark: each pass measured side by side with the pass off (issue 9).

    .venv/bin/python benchmarks/passes.py [--runs N] [--guest in-process|subprocess]

Every scenario runs ``run_stream`` twice per round, pass off then pass on, on fresh Hosts
(alternating, so drift hits both), for N rounds (default 7); it reports the median wall
time of each, their ratio, the physical calls each made, and checks that the pass-on
outcome equals the pass-off one. Scenarios:

1. **batch_fusion/loop**: 16 reads in a comprehension, streamed; the tool costs 20 ms per
   physical call plus 1 ms per item (a typical batched backend). ``loop-c16``: the same with
   ``LanePolicy(concurrency=16)`` (a batch's members give their lane slots to its sender,
   so both make one batch of 16).
   ``serial``: the same loop against a backend that takes one call at a time (one
   connection, a rate limit), where the number of physical calls is the latency.
2. **batch_fusion/lone**: 6 reads streamed one statement at a time, 30 ms apart, so no two
   are ever ready together: every read waits ``max_wait`` (2 ms) for partners that never
   come. The price of the pass when it cannot help.
3. **projection_pushdown**: ``fs.read_text(p).splitlines()[:5]`` of a 4 MB file; the tool
   costs 10 ms plus 5 ms per MB it returns, and the result crosses the broker to the Guest.
4. **pure_scalar_fold / pure_scalar_cse**: a closed 300-statement arithmetic program sent
   in one chunk (no tools). The pass's own cost (analysis, re-derivation, re-parse,
   re-compile) against what the Guest saves by not computing.

Timings are wall clock on a noisy machine: quote ratios from one run only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pysolate import Effect, Host, LanePolicy, RunResult, capability
from pysolate.passes import BatchLaw, BatchPolicy, PassConfig, ProjectionLaw
from pysolate.testing import in_process_guest


class CostedFiles:
    """Files whose physical calls cost ``base`` s + ``per_item`` s per item + ``per_mb`` s per MB."""

    def __init__(
        self,
        files: dict[str, str],
        base: float,
        per_item: float = 0.0,
        per_mb: float = 0.0,
        *,
        serial: bool = False,
    ) -> None:
        self._files, self._base, self._per_item, self._per_mb = files, base, per_item, per_mb
        self._serial = anyio.Lock() if serial else None  # a backend that takes one call at a time
        self.physical = 0

    async def _cost(self, items: int, chars: int) -> None:
        self.physical += 1
        seconds = self._base + self._per_item * items + self._per_mb * chars / 1e6
        if self._serial is None:
            await anyio.sleep(seconds)
            return
        async with self._serial:
            await anyio.sleep(seconds)

    @capability(
        effect=Effect.IMMUTABLE_READ,
        version="1",
        batch=BatchLaw("read_many", "path", "1"),
        projection=ProjectionLaw("read_lines", "limit", "1"),
    )
    async def read_text(self, path: str) -> str:
        await self._cost(1, len(self._files.get(path, "")))
        return self._files[path]

    @capability(effect=Effect.IMMUTABLE_READ, version="1")
    async def read_many(self, paths: list[str]) -> list[object]:
        await self._cost(len(paths), sum(len(self._files.get(p, "")) for p in paths))
        return [
            self._files[p] if p in self._files else FileNotFoundError(2, "No such file", p)
            for p in paths
        ]

    @capability(effect=Effect.IMMUTABLE_READ, version="1")
    async def read_lines(self, path: str, limit: int | None = None) -> list[str]:
        lines = self._files[path].splitlines()[:limit]
        await self._cost(1, sum(map(len, lines)))
        return lines


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    source: str
    chunks: Callable[[str], AsyncIterator[str]]
    files: Callable[[], CostedFiles]
    passes: PassConfig
    policy: LanePolicy | None = None  # both runs of the scenario use it


@dataclass(slots=True)
class Measured:
    scenario: str
    off: list[float]
    on: list[float]
    physical_off: int
    physical_on: int
    equal: bool
    passes: str


def streamed(chunk: int, pause: float) -> Callable[[str], AsyncIterator[str]]:
    async def chunks(source: str) -> AsyncIterator[str]:
        for i in range(0, len(source), chunk):
            yield source[i : i + chunk]
            await anyio.sleep(pause)

    return chunks


def by_line(pause: float) -> Callable[[str], AsyncIterator[str]]:
    async def chunks(source: str) -> AsyncIterator[str]:
        for line in source.splitlines(keepends=True):
            yield line
            await anyio.sleep(pause)

    return chunks


async def _once(source: str) -> AsyncIterator[str]:
    yield source


def fold_program(steps: int = 100) -> str:
    """A closed int64 program of 3 statements per step (values stay small)."""
    lines = ["a0 = 3", "b0 = 5"]
    for i in range(1, steps):
        lines.append(
            f"a{i} = (a{i - 1} * 3 + b{i - 1} - {i % 7}) - (a{i - 1} * 3 + b{i - 1}) + a{i - 1}"
        )
        lines.append(f"b{i} = a{i} * 2 - b{i - 1} + {i % 5}")
        lines.append(f"a{i} = a{i} - (b{i} * 2 - b{i} * 2)")
    lines.append(f"a{steps - 1} + b{steps - 1}")
    return "\n".join(lines) + "\n"


def cse_program(steps: int = 100) -> str:
    """A closed scalar program beyond int64 (so only CSE applies): one repeat per step."""
    lines = ["c = 123456789012345678901234567890123456789", "q0 = 7"]
    for i in range(1, steps):
        lines.append(f"p{i} = q{i - 1} * c")
        lines.append(f"q{i} = q{i - 1} * c - p{i} + {i}")
    lines.append(f"q{steps - 1} * c")
    return "\n".join(lines) + "\n"


SMALL = {f"f{i:02}.txt": f"file {i}\n" * 50 for i in range(16)}
BIG = {
    "big.log": "".join(f"{i:08} some log line that goes on for a while\n" for i in range(80_000))
}

SCENARIOS = [
    Scenario(
        "batch_fusion/loop",
        "paths = "
        + repr(sorted(SMALL))
        + "\ntexts = [fs.read_text(p) for p in paths]\n[len(t) for t in texts]\n",
        streamed(40, 0.002),
        lambda: CostedFiles(SMALL, 0.02, per_item=0.001),
        PassConfig(batch_fusion=BatchPolicy()),
    ),
    Scenario(
        "batch_fusion/loop-c16",
        "paths = "
        + repr(sorted(SMALL))
        + "\ntexts = [fs.read_text(p) for p in paths]\n[len(t) for t in texts]\n",
        streamed(40, 0.002),
        lambda: CostedFiles(SMALL, 0.02, per_item=0.001),
        PassConfig(batch_fusion=BatchPolicy()),
        LanePolicy(concurrency=16),
    ),
    Scenario(
        "batch_fusion/serial",
        "paths = "
        + repr(sorted(SMALL))
        + "\ntexts = [fs.read_text(p) for p in paths]\n[len(t) for t in texts]\n",
        streamed(40, 0.002),
        lambda: CostedFiles(SMALL, 0.02, per_item=0.001, serial=True),
        PassConfig(batch_fusion=BatchPolicy()),
    ),
    Scenario(
        "batch_fusion/lone",
        "".join(f"t{i} = fs.read_text('f{i:02}.txt')\n" for i in range(6)) + "[t0, t5]\n",
        by_line(0.03),
        lambda: CostedFiles(SMALL, 0.02, per_item=0.001),
        PassConfig(batch_fusion=BatchPolicy()),
    ),
    Scenario(
        "projection_pushdown",
        "head = fs.read_text('big.log').splitlines()[:5]\nprint(head[0])\nlen(head)\n",
        streamed(20, 0.002),
        lambda: CostedFiles(BIG, 0.01, per_mb=0.005),
        PassConfig(projection_pushdown=True),
    ),
    Scenario(
        "pure_scalar_fold",
        fold_program(),
        _once,
        lambda: CostedFiles({}, 0),
        PassConfig(pure_scalar_fold=True),
    ),
    Scenario(
        "pure_scalar_cse",
        cse_program(),
        _once,
        lambda: CostedFiles({}, 0),
        PassConfig(pure_scalar_cse=True),
    ),
]

BY_NAME = {s.name: s for s in SCENARIOS}


async def run(
    scenario: Scenario, passes: PassConfig | None, guest: str
) -> tuple[RunResult, float, int]:
    factory = in_process_guest if guest == "in-process" else None
    host = Host(guest_factory=factory, passes=passes)
    files = scenario.files()
    host.register("fs", files)
    t0 = time.perf_counter()
    result = await host.run_stream(scenario.chunks(scenario.source), policy=scenario.policy)
    return result, time.perf_counter() - t0, result.report.physical


def outcome(result: RunResult) -> tuple[object, ...]:
    return (result.status, result.value, result.stdout, result.error)


async def measure(scenario: Scenario, runs: int, guest: str) -> Measured:
    off: list[float] = []
    on: list[float] = []
    equal = True
    passes = ""
    p_off = p_on = 0
    for _ in range(runs):
        r_off, t_off, p_off = await run(scenario, None, guest)
        r_on, t_on, p_on = await run(scenario, scenario.passes, guest)
        off.append(t_off)
        on.append(t_on)
        equal &= outcome(r_off) == outcome(r_on)
        passes = ", ".join(
            f"{o.name}:{'applied' if o.applied else 'n/a'}" for o in r_on.report.passes
        )
    return Measured(scenario.name, off, on, p_off, p_on, equal, passes)


def source_pass_cost(
    runs: int,
) -> list[tuple[str, float, float, float]]:  # name, pass, before, after
    """CPU time of the source passes themselves, and of executing the program before/after."""
    import ast

    from pysolate.passes import PureScalarCSE, PureScalarFold, apply_source_passes

    rows = []
    for name, source, p in (
        ("pure_scalar_fold", BY_NAME["pure_scalar_fold"].source, PureScalarFold()),
        ("pure_scalar_cse", BY_NAME["pure_scalar_cse"].source, PureScalarCSE()),
    ):
        derived = apply_source_passes(source, ast.parse(source), [p], {}).source
        timings = []
        for _label, thunk in (
            ("pass", lambda s=source, q=p: apply_source_passes(s, ast.parse(s), [q], {})),
            ("before", lambda s=source: exec(compile(s, "<agent>", "exec"), {})),
            ("after", lambda s=derived: exec(compile(s, "<agent>", "exec"), {})),
        ):
            samples = []
            for _ in range(runs):
                t0 = time.process_time()
                for _ in range(20):
                    thunk()
                samples.append((time.process_time() - t0) / 20)
            timings.append(min(samples))
        rows.append((name, timings[0], timings[1], timings[2]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--guest", choices=("in-process", "subprocess"), default="subprocess")
    args = parser.parse_args()

    async def all_() -> list[Measured]:
        return [await measure(s, args.runs, args.guest) for s in SCENARIOS]

    results = anyio.run(all_)
    print(f"guest: {args.guest}; median of {args.runs} alternating rounds (wall, ms)")
    print(
        f"{'scenario':22} {'off':>9} {'on':>9} {'on/off':>7} {'phys off':>8} {'phys on':>8} {'equal':>6}  passes"
    )
    for m in results:
        off, on = statistics.median(m.off) * 1e3, statistics.median(m.on) * 1e3
        print(
            f"{m.scenario:22} {off:9.1f} {on:9.1f} {on / off:7.3f} {m.physical_off:8} {m.physical_on:8} "
            f"{'yes' if m.equal else 'NO':>6}  {m.passes}"
        )
    print(
        "\nsource passes, CPU per program (best of runs, µs): pass itself | exec before | exec after"
    )
    for name, cost, before, after in source_pass_cost(args.runs):
        print(f"{name:22} {cost * 1e6:9.0f} {before * 1e6:9.0f} {after * 1e6:9.0f}")


if __name__ == "__main__":
    main()

"""Benchmark: the Host CPU one run's tracing costs, per instrument, beside an earlier revision.

    .venv/bin/python benchmarks/tracing_cpu.py [--baseline REV] [--runs N] [--rounds N]

What is measured: a ``Host`` with an in-process Guest (so the whole run is this process's
CPU, ``time.process_time``) runs ``run_source`` of a program making four ``pure`` calls with
literal arguments (each starts early and is claimed) and one ``unknown`` call (run when the
program makes it): per run, the best of ``BATCHES`` batches of N runs, for each instrument:

- ``null``: ``NULL_INSTRUMENT``, the hooks do nothing (``Host(instrument=None)``);
- ``global, no SDK``: a default ``Host()``'s ``GLOBAL_INSTRUMENT`` with no SDK configured
  (one non-recording ``start_span`` per run, then the null hooks);
- ``OTel SDK``: ``OTelInstrument`` on an SDK ``TracerProvider`` with no span processor, so
  every span is recorded and nothing exported (what the instrument itself costs).

Second, the hooks alone (no Host, no run: one run's worth of hook calls, the sequence of
``tests/pysolate/test_tracing.py``'s ``_all_hooks``, 2,000 times), per instrument: what the
trace layer itself costs, without the run around it to add noise.

With ``--baseline REV`` the revision is exported (``git archive``) and measured in fresh
subprocesses alternating with this tree, round by round; the best round of each is kept.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BATCHES = 5
ROOT = Path(__file__).resolve().parents[1]
PROGRAM = "a = t.pure(1)\nb = t.pure(2)\nt.echo(3)\nc = t.pure(4)\nd = t.pure(5)\n[a, b, c, d]\n"
INSTRUMENTS = ("null", "global, no SDK", "OTel SDK")
HOOK_RUNS = 2000


def _hooks(instrument: object) -> None:
    """One run's worth of hooks (as the Host calls them)."""
    run = instrument.run_started(run_id="r")  # type: ignore[attr-defined]
    run.snapshot_accepted(statements=1, new_statements=1, chars=10)
    obs = run.observation_started("d", "m", call_id="p", lane="speculative", effect="pure")
    with obs.activated():
        pass
    obs.completed(result=1)
    run.sealed("h", statements=1, chars=10)
    claim = run.claimed("d", "m", call_id="c", observation=obs)
    claim.ended(result=1)
    obs.settled("claimed")
    formal = run.observation_started("d", "m", call_id="f", lane="formal", effect="unknown")
    with formal.activated():
        pass
    formal.completed(result=1)
    run.ended("ok", counts={"logical": 2})


async def cpu_per_run(runs: int) -> dict[str, float]:
    """Best-of-``BATCHES`` Host CPU seconds per run, by instrument."""
    from opentelemetry.sdk.trace import TracerProvider

    from pysolate import Effect, Host, capability
    from pysolate.testing import in_process_guest
    from pysolate.tracing import GLOBAL_INSTRUMENT, NULL_INSTRUMENT, OTelInstrument

    class Tools:
        @capability(effect=Effect.PURE)
        async def pure(self, x: int) -> int:
            return x

        @capability(effect=Effect.UNKNOWN)
        async def echo(self, x: int) -> int:
            return x

    instruments = {
        "null": NULL_INSTRUMENT,
        "global, no SDK": GLOBAL_INSTRUMENT,
        "OTel SDK": OTelInstrument(TracerProvider()),
    }
    best = {}
    for label, instrument in instruments.items():
        host = Host(guest_factory=in_process_guest, instrument=instrument)
        host.register("t", Tools())

        async def batch() -> float:
            c0 = time.process_time()
            for _ in range(runs):
                result = await host.run_source(PROGRAM)  # noqa: B023 (used at once)
                assert result.status == "ok", result.error
            return (time.process_time() - c0) / runs

        await batch()  # warm caches
        best[label] = min([await batch() for _ in range(BATCHES)])
    for label, instrument in instruments.items():
        times = []
        for _ in range(BATCHES):
            c0 = time.process_time()
            for _ in range(HOOK_RUNS):
                _hooks(instrument)
            times.append((time.process_time() - c0) / HOOK_RUNS)
        best[f"hooks, {label}"] = min(times)
    return best


def _measure_in(tree: Path, runs: int) -> dict[str, float]:
    code = (
        "import sys, anyio, json; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]);"
        "from tracing_cpu import cpu_per_run;"
        "print(json.dumps(anyio.run(cpu_per_run, int(sys.argv[3]))))"
    )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(tree), str(Path(__file__).resolve().parent), str(runs)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
    )
    import json

    return json.loads(out.stdout.strip().splitlines()[-1])


def side_by_side(baseline: str | None, runs: int, rounds: int) -> dict[str, dict[str, float]]:
    trees = {"this tree": ROOT}
    with tempfile.TemporaryDirectory() as tmp:
        if baseline is not None:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", baseline], check=True, capture_output=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            trees = {baseline: Path(tmp), **trees}
        best: dict[str, dict[str, float]] = {label: {} for label in trees}
        for _ in range(rounds):
            for label, tree in trees.items():
                for name, seconds in _measure_in(tree, runs).items():
                    best[label][name] = min(best[label].get(name, float("inf")), seconds)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", help="a git revision to measure side by side (e.g. main)")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    load = os.getloadavg()[0]
    results = side_by_side(options.baseline, options.runs, options.rounds)
    print(
        f"Host CPU per run (in-process Guest; 4 claimed pure calls + 1 direct; best of {options.rounds} rounds x "
        f"{BATCHES} batches of {options.runs} runs; load average {load:.2f} -> {os.getloadavg()[0]:.2f})"
    )
    print(f"  {'tree':<12} " + "  ".join(f"{name:>16}" for name in INSTRUMENTS))
    for label, row in results.items():
        print(f"  {label:<12} " + "  ".join(f"{row[name] * 1e6:13.0f} µs" for name in INSTRUMENTS))
    print(f"One run's hooks alone (13 hook calls, best of {BATCHES} x {HOOK_RUNS}):")
    for label, row in results.items():
        print(
            f"  {label:<12} "
            + "  ".join(f"{row['hooks, ' + name] * 1e6:13.1f} µs" for name in INSTRUMENTS)
        )


if __name__ == "__main__":
    main()

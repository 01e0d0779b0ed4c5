"""Benchmark: time from the model's first token to the program's result, per scenario.

    .venv/bin/python benchmarks/latency.py [--only NAME,...|session] [--no-session] [--speed X] [--latency-scale X]
                                           [--guest isolated|seccomp|in-process]
                                           [--no-peer | --peer-modes plain,eager,speculate]
                                           [--svg-dir DIR] [--no-branch-writes]
                                           [--anchor start|first-pull] [--exact-timers]

About 6 minutes with the peer's default modes (eager, speculate), 3 without the peer: the
streams are replayed in real time, once per measured system.

Each scenario (``benchmarks/scenarios/*.jsonl``, written by ``make_scenarios.py``) is a
recorded model stream of an agent program, and the tools (``bench_tools``) have set
latencies. In ONE run, one after the other, per scenario:

- **baseline**: replay the stream to its end, then ``run_source(src, speculate=False)`` in
  a fresh Guest (stream, then run sequentially: what an agent does without Pysolate);
- **Pysolate**: ``run_stream`` on the same stream replayed at recorded speed;
- **oracle**: the bound computed from the source and the chunk times alone (``oracle.py``;
  writes to the ``ws`` workspace's run-private branch run mid-stream in it, issue 17);
- **peer** (when ``pydantic-ai-harness`` is installed, ``pip install -e .[bench]`` in a venv of its own): the
  same program through Pydantic AI code mode (``peer.py``), in each mode asked for.

Each system's stream is replayed from its own t0 (``bench_tools.anchored``), as the peer's
always was; ``--exact-timers`` makes every system's waits end at their deadline
(``bench_tools.exact_sleep``) instead of ``anyio.sleep``'s rounded-up millisecond.

Then the session scenario (``session_bench``: turns in one session, one iterating over
what the last left, a rejected turn and its retry), summed over its turns.

It prints a table (baseline s, Pysolate s, oracle s, speed-up, share of the oracle saving
achieved = (baseline - Pysolate) / (baseline - oracle), physical/logical/orphaned, whether
the Pysolate result equals the baseline's, the peer), the "statement complete → eligible
call dispatched" latency (median / p99 over every early call of every scenario) and writes
one timeline SVG per scenario. Targets (issue 7) are reported, not asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from bench_tools import GuestKind, ToolSpec, anchored, exact_timers, final_state, make_host
from make_scenarios import SCENARIOS
from oracle import Oracle
from oracle import compute as compute_oracle
from rich.console import Console
from rich.table import Table

from pysolate import LanePolicy, RunResult, Workspace, render_svg
from pysolate._workspace._workspace import BranchState
from pysolate.streams import Chunk, Recording, play, read_recording

HERE = Path(__file__).resolve().parent
SCENARIO_DIR = HERE / "scenarios"
OUT_DIR = HERE / "out"
POLICY = LanePolicy(concurrency=32, budget=256)
"""The lane may run as many calls at once as the oracle does (it assumes no limit)."""
BRANCHED = frozenset({"ws"})
"""Capabilities whose writes go to a run-private branch: the oracle runs them mid-stream
(issue 17), as Pysolate may on a speculative layer."""
SCOPES = {"ws": "path"}
"""The scope argument of the ``ws`` methods (``Workspace`` declares ``scope="path"``)."""
ANCHOR_AT_START = True
"""Replay each system's stream on a schedule from its own t0 (``bench_tools.anchored``);
``--anchor first-pull``: from its first read of the stream, the rule before 2026-12-06."""


@dataclass(slots=True)
class Measured:
    """One scenario measured in one run."""

    name: str
    title: str
    baseline: float
    pysolate: float
    oracle: Oracle
    result: RunResult
    reference: RunResult
    mismatches: list[str]
    dispatch: list[float] = field(default_factory=list)
    peer: dict[str, PeerTime] = field(default_factory=dict)

    @property
    def speedup(self) -> float:
        return self.baseline / self.pysolate

    @property
    def share(self) -> float | None:
        """Share of the oracle saving achieved (None when no call may run early)."""
        if not any(c.eligible for c in self.oracle.calls):
            return None
        return (self.baseline - self.pysolate) / (self.baseline - self.oracle.end)


@dataclass(frozen=True, slots=True)
class PeerTime:
    seconds: float
    equal: bool
    note: str = ""


def load(name: str) -> Recording:
    return read_recording(SCENARIO_DIR / f"{name}.jsonl")


def scaled(chunks: Sequence[Chunk], speed: float) -> list[Chunk]:
    return [Chunk(c.t / speed, c.text) for c in chunks]


async def timed_play(
    chunks: Sequence[Chunk], receipts: list[float], t0: float | None = None
) -> AsyncIterator[str]:
    """Play at recorded speed from ``t0`` (``anchored``); note when each chunk is handed
    to the consumer."""
    async for text in anchored(chunks, t0):
        receipts.append(anyio.current_time())
        yield text


async def run_baseline(
    chunks: Sequence[Chunk], latency_scale: float, guest: GuestKind
) -> tuple[RunResult, float, object]:
    host, specs = make_host(latency_scale, guest=guest)
    t0 = anyio.current_time()
    parts = [text async for text in anchored(chunks, t0 if ANCHOR_AT_START else None)]
    result = await host.run_source("".join(parts), speculate=False)
    return result, anyio.current_time() - t0, final_state(specs)


async def run_pysolate(
    chunks: Sequence[Chunk], latency_scale: float, guest: GuestKind
) -> tuple[RunResult, float, object, list[float], dict[str, dict[str, ToolSpec]]]:
    host, specs = make_host(latency_scale, guest=guest)
    receipts: list[float] = []
    t0 = anyio.current_time()
    result = await host.run_stream(
        timed_play(chunks, receipts, t0 if ANCHOR_AT_START else None), policy=POLICY
    )
    return result, anyio.current_time() - t0, final_state(specs), receipts, specs


def call_log(result: RunResult) -> list[tuple[object, ...]]:
    return [
        (
            c.capability,
            c.method,
            c.args,
            c.kwargs,
            c.outcome,
            c.result,
            c.error and (c.error.type, c.error.message),
        )
        for c in result.calls
    ]


def mismatches(a: RunResult, a_state: object, b: RunResult, b_state: object) -> list[str]:
    """What differs between two runs under the correctness contract (empty: equal)."""
    out = [
        name
        for name, x, y in (
            ("status", a.status, b.status),
            ("value", a.value, b.value),
            ("stdout", a.stdout, b.stdout),
            ("error", a.error, b.error),
            ("calls", call_log(a), call_log(b)),
            ("state", a_state, b_state),
            ("workspaces", workspaces(a), workspaces(b)),
        )
        if x != y
    ]
    return out


def workspaces(result: RunResult) -> dict[str, dict[str, bytes]]:
    """Each workspace branch's final files (the ``ws`` capability's)."""
    return {name: ws.state_files() for name, ws in sorted(result.workspaces.items())}


def dispatch_latencies(result: RunResult, oracle: Oracle, receipts: list[float]) -> list[float]:
    """Per early call: from the moment it became dispatchable to its start, in seconds.

    Dispatchable = the chunk completing its statement was handed to Pysolate, and every
    call it depends on (oracle dataflow) had finished early. Calls waiting on a call the
    Guest made itself are left out (they were never dispatchable early).
    """
    if result.timeline is None or not receipts:
        return []
    stream_bars = result.timeline.lane("stream")
    if not stream_bars:
        return []
    base = receipts[0] - stream_bars[0].start  # run start, on anyio's clock
    observations = {o.id: o for o in result.observations}
    early_end: dict[int, float] = {}
    samples: list[float] = []
    for record, planned in zip(result.calls, oracle.calls, strict=False):
        obs = observations.get(record.observation_id) if record.observation_id is not None else None
        if (
            record.lane != "claimed"
            or obs is None
            or obs.lane != "speculative"
            or obs.started is None
        ):
            continue
        if obs.ended is not None:
            early_end[planned.index] = obs.ended
        if any(d not in early_end for d in planned.deps):
            continue
        chunk_at = (
            receipts[planned.complete_chunk] - base
            if planned.complete_chunk < len(receipts)
            else None
        )
        if chunk_at is None:
            continue
        trigger = max([chunk_at, *(early_end[d] for d in planned.deps)])
        samples.append(obs.started - trigger)
    return samples


async def measure(
    name: str,
    *,
    speed: float = 1.0,
    latency_scale: float = 1.0,
    guest: GuestKind = "isolated",
    peer_modes: Sequence[str] = (),
    svg_dir: Path | None = None,
) -> Measured:
    recording = load(name)
    chunks = scaled(recording.chunks, speed)
    title = str(recording.metadata.get("title", name))
    _, specs = make_host(latency_scale)
    oracle = compute_oracle(chunks, specs, early_writes=BRANCHED, scopes=SCOPES)
    reference, baseline, ref_state = await run_baseline(chunks, latency_scale, guest)
    result, wall, state, receipts, _ = await run_pysolate(chunks, latency_scale, guest)
    measured = Measured(
        name,
        title,
        baseline,
        wall,
        oracle,
        result,
        reference,
        mismatches(result, state, reference, ref_state),
    )
    measured.dispatch = dispatch_latencies(result, oracle, receipts)
    if peer_modes:
        from peer import run_peer

        for mode in peer_modes:
            outcome = await run_peer(
                name,
                mode,
                speed=speed,
                latency_scale=latency_scale,
                reference=reference,
                reference_state=ref_state,
            )
            measured.peer[mode] = PeerTime(outcome.seconds, outcome.equal, outcome.note)
    if svg_dir is not None and result.timeline is not None:
        svg_dir.mkdir(parents=True, exist_ok=True)
        label = (
            f"{title} — baseline {baseline:.2f} s, Pysolate {wall:.2f} s, oracle {oracle.end:.2f} s"
        )
        (svg_dir / f"{name}.svg").write_text(
            render_svg(result.timeline, title=label), encoding="utf-8"
        )
    return measured


def quantile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def table(rows: Sequence[Measured]) -> Table:
    modes = [m for m in ("plain", "eager", "speculate") if any(m in r.peer for r in rows)]
    t = Table(title="Latency: first token -> result (seconds, one run)")
    for col in (
        "scenario",
        "baseline",
        "Pysolate",
        "oracle",
        "speed-up",
        "share",
        "phys/log/orph",
        "= baseline",
    ):
        t.add_column(col, justify="left" if col == "scenario" else "right")
    for mode in modes:
        t.add_column(f"peer {mode}", justify="right")
    for r in rows:
        share = "n/a" if r.share is None else f"{r.share:.1%}"  # a decimal: issue 16's line is 99%
        rep = r.result.report
        cells = [
            r.name,
            f"{r.baseline:.2f}",
            f"{r.pysolate:.2f}",
            f"{r.oracle.end:.2f}",
            f"{r.speedup:.2f}x",
            share,
            f"{rep.physical}/{rep.logical}/{rep.orphaned}",
            "yes" if not r.mismatches else "NO: " + ",".join(r.mismatches),
        ]
        for mode in modes:
            p = r.peer.get(mode)
            cells.append("-" if p is None else f"{p.seconds:.2f}{'' if p.equal else ' (≠)'}")
        t.add_row(*cells)
    return t


def best_peer(
    r: Measured, modes: Sequence[str] = ("plain", "eager", "speculate")
) -> tuple[str, PeerTime] | None:
    """The peer's fastest mode among ``modes`` whose result equals the sequential one."""
    correct = {m: p for m, p in r.peer.items() if p.equal and m in modes}
    if not correct:
        return None
    mode = min(correct, key=lambda m: correct[m].seconds)
    return mode, correct[mode]


def summary(rows: Sequence[Measured]) -> list[str]:
    lines = []
    shares = [r.share for r in rows if r.share is not None]
    if shares:
        low = [f"{r.name} {r.share:.1%}" for r in rows if r.share is not None and r.share < 0.8]
        short = [f"{r.name} {r.share:.1%}" for r in rows if r.share is not None and r.share < 0.99]
        lines.append(
            f"share of the oracle saving: median {statistics.median(shares):.1%} (target >= 95%); "
            f"below 80%: {', '.join(low) or 'none'}; below 99% (issue 16): {', '.join(short) or 'none'}"
        )
    for r in rows:
        if r.share is None:
            lines.append(
                f"{r.name}: no saving possible; Pysolate / baseline = {r.pysolate / r.baseline:.3f} (target <= 1.00)"
            )
    samples = [s for r in rows for s in r.dispatch]
    if samples:
        lines.append(
            f"statement complete → eligible call dispatched: median {statistics.median(samples) * 1e3:.2f} ms, "
            f"p99 {quantile(samples, 0.99) * 1e3:.2f} ms over {len(samples)} early calls (targets <= 1 ms, <= 5 ms)"
        )
    for r in rows:
        for mode, p in r.peer.items():
            if not p.equal or p.note:
                lines.append(
                    f"peer {mode} on {r.name}: {p.seconds:.2f} s, equal={p.equal}: {p.note}"
                )
    if any(r.peer for r in rows):
        for label, modes in (
            ("any mode", ("plain", "eager", "speculate")),
            ("no effect before seal", ("plain", "speculate")),
        ):
            ahead = [
                f"{r.name} ({b[0]} {b[1].seconds:.2f} s vs {r.pysolate:.2f} s)"
                for r in rows
                if (b := best_peer(r, modes)) is not None and b[1].seconds < r.pysolate
            ]
            lines.append(
                f"peer with a correct result ahead of Pysolate ({label}): {', '.join(ahead) or 'none'}"
            )
    return lines


def peer_available() -> bool:
    try:
        import pydantic_ai_harness  # noqa: F401
    except ImportError:
        return False
    return True


async def main_async(args: argparse.Namespace) -> list[Measured]:
    names = args.only.split(",") if args.only else [s.name for s in SCENARIOS]
    modes: list[str] = []
    if not args.no_peer and peer_available():
        modes = [m for m in args.peer_modes.split(",") if m]
    rows = []
    for name in names:
        rows.append(
            await measure(
                name,
                speed=args.speed,
                latency_scale=args.latency_scale,
                guest=args.guest,
                peer_modes=modes,
                svg_dir=Path(args.svg_dir),
            )
        )
    return rows


async def rejected_after_write(latency_scale: float, guest: GuestKind) -> str:
    """``ws_read_after_write`` streamed with a syntax error at its end: its writes ran on a
    layer mid-stream, the stream does not seal, and the root must be left as it was."""
    chunks = [*load("ws_read_after_write").chunks]
    chunks.append(Chunk(chunks[-1].t + 0.02, "x = (\n"))
    host, _ = make_host(latency_scale, guest=guest)
    root = host.registration("ws").obj
    assert isinstance(root, Workspace)
    before = root.state_files()
    t0 = anyio.current_time()
    result = await host.run_stream(play(chunks), policy=POLICY)
    wall = anyio.current_time() - t0
    untouched = root.state_files() == before and root.state is BranchState.ROOT
    rep = result.report
    return (
        f"rejected stream after early writes (ws_read_after_write + a syntax error): {result.status.value} in {wall:.2f} s, "
        f"early writes {rep.early_writes}, discarded {rep.discarded}, branches returned {len(result.workspaces)}, "
        f"root untouched: {'yes' if untouched else 'NO'}"
    )


def session_lines(latency_scale: float, guest: GuestKind, speed: float = 1.0) -> list[str]:
    """The session scenario (``session_bench``): four turns in one session, summed."""
    from session_bench import measure_session

    m = anyio.run(measure_session, latency_scale, guest, speed)
    lines = [
        f"session (turn 2 iterates over turn 1's list; a typo turn, then its retry): baseline {m.baseline:.2f} s, "
        f"Pysolate {m.pysolate:.2f} s, oracle {m.oracle:.2f} s, speed-up {m.baseline / m.pysolate:.2f}x, "
        f"share of the oracle saving {m.share:.0%} (target >= 95%); physical/logical {m.physical}/{m.logical}, "
        f"early results reused from the rejected turn {m.reused}; equal to the sequential session: "
        + ("yes" if not m.mismatches else "NO: " + ",".join(m.mismatches))
    ]
    lines += [
        f"  turn {name:8} {status:8} baseline {b:.2f} s  Pysolate {p:.2f} s  oracle {o:.2f} s"
        for name, b, p, o, status in m.turns
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    parser.add_argument(
        "--speed", type=float, default=1.0, help="replay speed factor (1 = recorded)"
    )
    parser.add_argument("--latency-scale", type=float, default=1.0, help="tool latency factor")
    parser.add_argument(
        "--guest", choices=["isolated", "seccomp", "in-process"], default="isolated"
    )
    parser.add_argument("--no-peer", action="store_true", help="skip Pydantic AI code mode")
    parser.add_argument(
        "--peer-modes",
        default="eager,speculate",
        help="code mode's modes to run (plain,eager,speculate); plain is stream-then-run, like the baseline",
    )
    parser.add_argument("--svg-dir", default=str(OUT_DIR), help="where timeline SVGs go")
    parser.add_argument("--no-session", action="store_true", help="skip the session scenario")
    parser.add_argument(
        "--no-branch-writes",
        action="store_true",
        help="workspace writes wait for the program (the rule before issue 17)",
    )
    parser.add_argument(
        "--anchor",
        choices=["start", "first-pull"],
        default="start",
        help="replay a system's stream from its t0 (as a provider streams; the peer always is) or from its first read",
    )
    parser.add_argument(
        "--exact-timers",
        action="store_true",
        help="tools take exactly their latency and chunks come at their times (bench_tools.exact_sleep), for every system",
    )
    args = parser.parse_args(argv)
    exact_timers(args.exact_timers)
    global POLICY, ANCHOR_AT_START
    ANCHOR_AT_START = args.anchor == "start"
    if args.no_branch_writes:
        POLICY = dataclasses.replace(POLICY, branch_writes=False)
    started = time.perf_counter()
    console = Console(width=160)
    names = args.only.split(",") if args.only else None
    if names != ["session"]:
        if names is not None:
            args.only = ",".join(n for n in names if n != "session")
        rows = anyio.run(main_async, args)
        console.print(table(rows))
        for line in summary(rows):
            console.print(line)
        if names is None or "ws_read_after_write" in names:
            console.print(anyio.run(rejected_after_write, args.latency_scale, args.guest))
    if not args.no_session and (names is None or "session" in names):
        for line in session_lines(args.latency_scale, args.guest, args.speed):
            console.print(line)
    console.print(
        f"[dim]ran in {time.perf_counter() - started:.0f} s; SVGs in {args.svg_dir}[/dim]"
    )


if __name__ == "__main__":
    main()

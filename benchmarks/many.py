"""Many runs on one Host (issue 40): what sharing physical calls by exact key saves.

    .venv/bin/python benchmarks/many.py [--speed 2] [--latency-scale 0.5] [--repeat 3] [--only NAME,...]

Three workloads, each measured side by side in one run:

- **best-of-8**: per scenario of ``benchmarks/scenarios`` (the peer set), eight variants of
  its program (``variants``: variant 0 is the program; the others rename its variables,
  swap two independent statements, drop a statement nobody reads, and add one or two
  searches of their own), streamed at once at the recording's token rate;
- **rollouts**: 32 parallel rollouts of the demo program (``pysolate demo``'s reply,
  replayed 32 times at once), a fresh workspace branch each;
- **session retry**: a session turn rejected by a syntax error in its last lines while its
  reads run, then retried corrected (``RETRY_TURNS``), on a sharing Host and on one that
  does not share (whose rejected turn's running reads are cancelled with it).

Each set runs three ways: **shared** (all at once on one ``Host()``), **unshared** (all at
once on one ``Host(share=False)``, today's behaviour) and **alone** (each run by itself on
a fresh unshared Host, one after the other). Reported: logical calls (what the programs
made), physical calls (tool invocations, early ones included), the bound ``distinct keys +
failures`` (a physical call per distinct exact key of shareable calls, each call of any
other effect or on a run's own branch view its own key, plus one per failed call: failures
are never shared), the wall time per run against the run alone (target <= 1.05x) and the
Host CPU per run (``time.process_time`` over the set, divided by its runs) shared against
unshared. Walls and CPU are best-of-``--repeat``; every run's result must equal its run alone.

Scenarios whose programs write the benchmark's ``store`` (a Host object every run of a set
writes, so its runs are not independent rollouts even without sharing) and the 35-second
``long_program`` are left out.
"""

from __future__ import annotations

import argparse
import ast
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from bench_tools import GuestKind, anchored, guest_factory, make_host

from pysolate import Host, RunResult
from pysolate.streams import Chunk, read_recording, source_to_stream
from pysolate.testing import differences

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
LEFT_OUT = frozenset(
    {"live_and_writes", "no_eligible", "read_after_write", "reads_after_write", "long_program"}
)
"""Scenarios whose runs write one shared ``store`` (not independent rollouts), and the long one."""

VARIANTS = 8
ROLLOUTS = 32


# -- variants ---------------------------------------------------------------------------------


def _names(node: ast.AST, ctx: type[ast.expr_context]) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


class _Rename(ast.NodeTransformer):
    def __init__(self, names: set[str], suffix: str) -> None:
        self.names, self.suffix = names, suffix

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.names:
            node.id += self.suffix
        return node


def variant(source: str, index: int) -> str:
    """Variant ``index`` of ``source`` (0: the program itself): a best-of-N sample of one task."""
    tree = ast.parse(source)
    if index == 0:
        return ast.unparse(tree)
    rng = random.Random(index)
    body = tree.body
    if rng.random() < 0.5:  # rename every variable the program binds
        _Rename(_names(tree, ast.Store), f"_{index}").visit(tree)
    if rng.random() < 0.5:  # swap two adjacent independent assignments
        pairs = [
            j
            for j in range(len(body) - 2)
            if isinstance(body[j], ast.Assign)
            and isinstance(body[j + 1], ast.Assign)
            and not _names(body[j], ast.Store)
            & (_names(body[j + 1], ast.Load) | _names(body[j + 1], ast.Store))
            and not _names(body[j + 1], ast.Store) & _names(body[j], ast.Load)
        ]
        if pairs:
            j = rng.choice(pairs)
            body[j], body[j + 1] = body[j + 1], body[j]
    if rng.random() < 0.5:  # drop a statement whose bindings nobody reads
        droppable = [
            j
            for j in range(len(body) - 1)
            if isinstance(body[j], ast.Assign)
            and not _names(body[j], ast.Store)
            & set().union(*(_names(s, ast.Load) for s in body[j + 1 :]))
        ]
        if droppable:
            del body[rng.choice(droppable)]
    for k in range(1 + index % 2):  # a search or two of its own
        extra = ast.parse(
            f'extra_{index}_{k} = docs.search(query="variant {index} note {k}")'
        ).body[0]
        body.insert(rng.randrange(len(body)), extra)
    text = ast.unparse(tree)
    compile(text, "<variant>", "exec")
    return text


# -- one set of runs, three ways ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Plan:
    source: str
    chunks: list[Chunk]
    code: str = "raw"


@dataclass(slots=True)
class Phase:
    results: list[RunResult]
    walls: list[float]
    cpu: float
    """Host CPU seconds over the whole set."""

    @property
    def wall(self) -> float:
        return sum(self.walls) / len(self.walls)

    @property
    def cpu_per_run(self) -> float:
        return self.cpu / len(self.walls)

    @property
    def physical(self) -> int:
        return sum(r.report.physical for r in self.results)

    @property
    def logical(self) -> int:
        return sum(r.report.logical for r in self.results)


async def _one(host: Host, plan: Plan, t0: float) -> tuple[RunResult, float]:
    result = await host.run_stream(anchored(plan.chunks, t0), code=plan.code)  # type: ignore[arg-type]
    return result, anyio.current_time() - t0


async def at_once(new_host: Callable[[bool], Host], plans: Sequence[Plan], *, share: bool) -> Phase:
    """Every plan streamed at once on one Host."""
    host = new_host(share)
    out: list[tuple[RunResult, float] | None] = [None] * len(plans)
    cpu = time.process_time()
    t0 = anyio.current_time()

    async def run(i: int) -> None:
        out[i] = await _one(host, plans[i], t0)

    async with anyio.create_task_group() as tg:
        for i in range(len(plans)):
            tg.start_soon(run, i)
    cpu = time.process_time() - cpu
    await host.aclose()
    done = [o for o in out if o is not None]
    return Phase([r for r, _ in done], [w for _, w in done], cpu)


async def alone(new_host: Callable[[bool], Host], plans: Sequence[Plan]) -> Phase:
    """Each plan by itself on a fresh Host that does not share, one after the other (a plan
    equal to an earlier one, a rollout of the same program, is that one's run again)."""
    results: list[RunResult] = []
    walls: list[float] = []
    cpus: list[float] = []
    for i, plan in enumerate(plans):
        same = next((j for j in range(i) if plans[j] == plan), None)
        if same is None:
            start = time.process_time()
            result, wall = await _one(new_host(False), plan, anyio.current_time())
            results.append(result)
            walls.append(wall)
            cpus.append(time.process_time() - start)
        else:
            results.append(results[same])
            walls.append(walls[same])
            cpus.append(cpus[same])
    return Phase(results, walls, sum(cpus))


@dataclass(slots=True)
class Row:
    name: str
    runs: int
    logical: int
    shared_physical: int
    unshared_physical: int
    bound: int
    shared_wall: float
    unshared_wall: float
    alone_wall: float
    shared_cpu: float
    unshared_cpu: float
    alone_cpu: float
    equal: bool


def bound(results: Sequence[RunResult]) -> int:
    """Distinct keys + failures over a set's runs (see the module docstring)."""
    keys: set[object] = set()
    own = failures = 0
    for result in results:
        for call in result.calls:
            if call.effect is None or not call.effect.speculable:
                own += 1
                continue
            keys.add(
                (result.run_id, call.key)
                if call.key is not None and "+w" in call.key.view
                else call.key
            )
            failures += call.outcome == "error"
        for obs in result.observations:
            if obs.lane == "speculative" and obs.physical:  # early work, orphans included
                keys.add((result.run_id, obs.key) if "+w" in obs.key.view else obs.key)
    return len(keys) + own + failures


async def measure(
    name: str, new_host: Callable[[bool], Host], plans: Sequence[Plan], repeat: int
) -> Row:
    """The set three ways, best of ``repeat`` for walls and CPU (counts from the first)."""
    tries = [
        (
            await at_once(new_host, plans, share=True),
            await at_once(new_host, plans, share=False),
            await alone(new_host, plans),
        )
        for _ in range(repeat)
    ]
    shared, unshared, _ = tries[0]
    equal = all(
        not differences(got, want)
        for s, u, a in tries
        for phase in (s, u)
        for got, want in zip(phase.results, a.results, strict=True)
    )
    return Row(
        name,
        len(plans),
        shared.logical,
        shared.physical,
        unshared.physical,
        bound(shared.results),
        min(t[0].wall for t in tries),
        min(t[1].wall for t in tries),
        min(t[2].wall for t in tries),
        min(t[0].cpu_per_run for t in tries),
        min(t[1].cpu_per_run for t in tries),
        min(t[2].cpu_per_run for t in tries),
        equal,
    )


# -- the workloads ----------------------------------------------------------------------------


def best_of_8_plans(name: str, speed: float, n: int = VARIANTS) -> list[Plan]:
    recording = read_recording(SCENARIO_DIR / f"{name}.jsonl")
    rate = float(recording.metadata.get("tokens_per_second", 50)) * speed
    plans = []
    for i in range(n):
        source = variant(recording.text, i)
        plans.append(Plan(source, source_to_stream(source, tokens_per_second=rate, seed=i)))
    return plans


def rollout_plans(speed: float, n: int = ROLLOUTS) -> list[Plan]:
    from pysolate._cli._demo_command import DEMO_RECORDING

    chunks = [Chunk(c.t / speed, c.text) for c in read_recording(DEMO_RECORDING).chunks]
    return [Plan("", chunks, code="markdown") for _ in range(n)]


def scenario_host(latency_scale: float, guest: GuestKind) -> Callable[[bool], Host]:
    return lambda share: make_host(latency_scale, guest=guest, share=share)[0]


def demo_host(latency_scale: float, guest: GuestKind) -> Callable[[bool], Host]:
    from pysolate._demo import tools

    factory = guest_factory(guest)
    return lambda share: tools.make_host(
        docs_latency=0.5 * latency_scale,
        people_latency=0.3 * latency_scale,
        guest_factory=factory,
        share=share,
    )


@dataclass(slots=True)
class RetryRow:
    share: bool
    retry_wall: float
    retry_physical: int
    retry_served: int
    retry_carried: int
    """Its calls served by the rejected turn's settled early results (``Session.statistics().reused``)."""
    session_physical: int
    statuses: list[str]


_REPLY = """\
# Fetch the two status pages and the runbook, then summarise.
a = web.fetch(url="https://status.example.com/a")
b = web.fetch(url="https://status.example.com/b")
hits = docs.search(query="incident response runbook")
summary = {"a": a[:24], "b": b[:24], "runbook": hits[0]CLOSE
print(summary["runbook"])
summary
"""

RETRY_TURNS = ("seen = []", _REPLY.replace("CLOSE", ""), _REPLY.replace("CLOSE", "}"))
"""A session's turns: a setup, a reply whose last lines do not parse (rejected when its
stream ends, its three reads still running: they started a few lines before), and the
model's corrected retry."""


async def session_retry(
    latency_scale: float, guest: GuestKind, speed: float, repeat: int
) -> tuple[list[RetryRow], bool]:
    """``RETRY_TURNS`` on a sharing Host and on one that does not share: the retry's
    physical calls, the calls the rejected attempt's still-running reads served it, its wall
    time from its first token (best of ``repeat``)."""
    chunks = [
        source_to_stream(t, tokens_per_second=60 * speed, seed=n) for n, t in enumerate(RETRY_TURNS)
    ]
    rows, outcomes = [], []
    for share in (True, False):
        best: RetryRow | None = None
        for _ in range(repeat):
            host, _ = make_host(latency_scale, guest=guest, share=share)
            results, walls = [], []
            async with host.session() as session:
                for turn in chunks:
                    t0 = anyio.current_time()
                    results.append(await session.run_stream(anchored(turn, t0)))
                    walls.append(anyio.current_time() - t0)
                carried = session.statistics().reused
            retry = results[-1]
            row = RetryRow(
                share,
                walls[-1],
                retry.report.physical,
                retry.report.host_shared,
                carried,
                sum(r.report.physical for r in results),
                [r.status.value for r in results],
            )
            best = row if best is None or row.retry_wall < best.retry_wall else best
            outcomes.append(results)
        assert best is not None
        rows.append(best)
    equal = all(
        not differences(g, w) for got in outcomes for g, w in zip(got, outcomes[0], strict=True)
    )
    return rows, equal


# -- output -----------------------------------------------------------------------------------


def table(rows: Sequence[Row]) -> list[str]:
    lines = [
        "| set | runs | logical | physical shared | physical unshared | distinct keys + failures | "
        "wall/run shared ÷ alone | unshared ÷ alone | CPU/run shared ÷ unshared | equal |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.name} | {r.runs} | {r.logical} | {r.shared_physical} | {r.unshared_physical} | {r.bound} | "
            f"{r.shared_wall / r.alone_wall:.3f} | {r.unshared_wall / r.alone_wall:.3f} | "
            f"{r.shared_cpu / r.unshared_cpu:.2f} | {'yes' if r.equal else 'NO'} |"
        )
    return lines


def retry_table(rows: Sequence[RetryRow], equal: bool) -> list[str]:
    lines = [
        "| Host | retry wall (s) | retry physical | retry served by the rejected turn's running calls |"
        " retry served by its settled results | session physical | turns |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {'Host()' if r.share else 'Host(share=False)'} | {r.retry_wall:.3f} | {r.retry_physical} | "
            f"{r.retry_served} | {r.retry_carried} | {r.session_physical} | {', '.join(r.statuses)} |"
        )
    lines.append(f"\nevery turn equal on both Hosts: {'yes' if equal else 'NO'}")
    return lines


async def main_async(args: argparse.Namespace) -> None:
    names = sorted(p.stem for p in SCENARIO_DIR.glob("*.jsonl") if p.stem not in LEFT_OUT)
    if args.only:
        names = [n for n in names if n in set(args.only.split(","))]
    scenario = scenario_host(args.latency_scale, args.guest)
    rows = []
    for name in names:
        rows.append(
            await measure(
                name, scenario, best_of_8_plans(name, args.speed, args.variants), args.repeat
            )
        )
        print(table(rows[-1:])[-1], flush=True)
    if len(rows) > 1:
        total = Row("all best-of-8 sets", *(sum(getattr(r, f) for r in rows) for f in ("runs", "logical", "shared_physical", "unshared_physical", "bound")),
                    *(sum(getattr(r, f) for r in rows) / len(rows) for f in ("shared_wall", "unshared_wall", "alone_wall", "shared_cpu", "unshared_cpu", "alone_cpu")),
                    all(r.equal for r in rows))  # fmt: skip
        rows.append(total)
    if args.rollouts:
        rows.append(
            await measure(
                f"demo x {args.rollouts}",
                demo_host(args.latency_scale, args.guest),
                rollout_plans(args.speed, args.rollouts),
                args.repeat,
            )
        )
    print(
        f"\nspeed {args.speed}x, latency scale {args.latency_scale}, guest {args.guest}, best of {args.repeat}\n"
    )
    print("\n".join(table(rows)))
    retry, equal = await session_retry(args.latency_scale, args.guest, args.speed, args.repeat)
    print("\nsession retry\n")
    print("\n".join(retry_table(retry, equal)))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--speed", type=float, default=2.0, help="stream speed-up over the recordings"
    )
    parser.add_argument(
        "--latency-scale", type=float, default=0.5, help="tool latencies times this"
    )
    parser.add_argument(
        "--guest", default="in-process", choices=("isolated", "seccomp", "landlock", "in-process")
    )
    parser.add_argument("--repeat", type=int, default=3, help="best of N for walls and CPU")
    parser.add_argument("--variants", type=int, default=VARIANTS)
    parser.add_argument("--rollouts", type=int, default=ROLLOUTS)
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    anyio.run(main_async, parser.parse_args(argv))


if __name__ == "__main__":
    main()

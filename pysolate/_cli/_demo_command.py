"""``pysolate demo``: the bundled recorded reply, run the usual way and with Pysolate, side by side.

The two runs go one after the other, never overlapping, with live progress on a terminal,
and end with the check that their results are equal.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import anyio
from rich.console import Console, Group
from rich.live import Live

from .._report._equivalence import differences
from .._report._progress import Progress, ProgressInstrument, counted
from .._workspace._workspace import Workspace
from ..streams import replay, source_to_stream, write_recording
from ._guests import guests
from ._inputs import check_recording
from ._measure import Measured, measure_baseline, measure_stream
from ._output import print_json, print_table, run_json, write_timeline

DEMO_DIR = Path(__file__).parents[1] / "_demo"


DEMO_REPLY = DEMO_DIR / "agent_reply.md"


DEMO_RECORDING = DEMO_DIR / "agent_reply.jsonl"


DEMO_RATE = 50.0
"""Tokens per second of the bundled recording: a typical streaming rate of today's models."""


def regenerate_demo_recording() -> Path:
    """Write the demo's recording from its markdown reply at ``DEMO_RATE`` (deterministic)."""
    reply = DEMO_REPLY.read_text(encoding="utf-8")
    metadata = {
        "source": DEMO_REPLY.name,
        "tokens_per_second": DEMO_RATE,
        "seed": 0,
        "code": "markdown",
    }
    write_recording(
        DEMO_RECORDING, source_to_stream(reply, tokens_per_second=DEMO_RATE), metadata=metadata
    )
    return DEMO_RECORDING


def cmd_demo(args: argparse.Namespace, console: Console) -> int:
    if args.regenerate:
        path = regenerate_demo_recording()
        console.print(f"wrote {path}")
        return 0
    check_recording(str(DEMO_RECORDING))
    from .._demo import tools as demo_tools

    repo = _demo_repo(args.git)

    progress = (Progress("stream, then run"), Progress("pysolate"))

    async def both() -> tuple[Measured, Measured]:
        # One after the other, never overlapping, so neither run slows the other.
        runs = []
        async with guests(args.guests) as factory:
            for watch, measure in zip(progress, (measure_baseline, measure_stream), strict=True):
                workspace = Workspace.git(repo) if repo is not None else None
                host = demo_tools.make_host(guest_factory=factory, workspace=workspace)
                host.instrument = ProgressInstrument(host.instrument, watch)
                chunks = counted(replay(DEMO_RECORDING, speed=args.speed), watch)
                runs.append(await measure(host, chunks, code="markdown"))
        return runs[0], runs[1]

    if args.guests == "ray" and not args.json:
        console.print(
            "Starting Ray (a local cluster unless RAY_ADDRESS names one); Guests run under its node agents."
        )

    if args.json:
        baseline, fast = anyio.run(both)
    else:
        console.print(
            f"Replaying the bundled agent reply at {DEMO_RATE * args.speed:g} tokens/s, "
            "first the usual way (stream, then run), then with Pysolate..."
        )
        if console.is_terminal:
            with Live(
                get_renderable=lambda: Group(*(p.render() for p in progress)),
                console=console,
                refresh_per_second=10,
            ):
                baseline, fast = anyio.run(both)
        else:  # a pipe or a file: no redrawing, just where each run ended
            baseline, fast = anyio.run(both)
            console.print(Group(*(p.render() for p in progress)))
    differ = differences(baseline.result, fast.result)
    speedup = baseline.wall_seconds / fast.wall_seconds if fast.wall_seconds > 0 else math.inf
    write_timeline(args.timeline, fast, "pysolate demo", baseline, equal=not differ)
    commit = _commit(repo, fast) if repo is not None and not differ else None
    if args.json:
        print_json(
            {
                "baseline": run_json(baseline),
                "pysolate": run_json(fast),
                "speedup": round(speedup, 3),
                "equal": not differ,
                "differences": differ,
                **(
                    {"git": {"repo": str(repo), "ref": DEMO_REF, "commit": commit}}
                    if repo is not None
                    else {}
                ),
            }
        )
        return 0
    print_table(
        console,
        "Stream, then run  vs  Pysolate",
        ["Stream, then run", "Pysolate"],
        [baseline, fast],
    )
    console.print(
        f"Stream, then run: [bold]{baseline.wall_seconds:.2f} s[/]   "
        f"Pysolate: [bold]{fast.wall_seconds:.2f} s[/]   speed-up: [bold]{speedup:.2f}x[/]"
    )
    if differ:
        console.print(f"[bold red]Results differ[/] in: {', '.join(differ)}")
    else:
        console.print(
            "[bold green]Results equal[/] (status, value, stdout, error, call log, workspace changes)"
        )
    if commit is not None:
        console.print(
            f"Pysolate's changes are commit {commit[:12]} on {DEMO_REF} in {repo} (the work tree is untouched): "
            f"review it with [bold]git -C {repo} show {DEMO_REF}[/], take it with "
            f"[bold]git -C {repo} merge {DEMO_REF}[/] (in code: branch.apply(repo))."
        )
    return 0


DEMO_REF = "pysolate/demo"
"""The branch ``demo --git`` writes the Pysolate run's changes to."""


def _demo_repo(where: str | None) -> Path | None:
    """The repository ``demo --git`` runs on (made now), or None without ``--git``."""
    if where is None:
        return None
    from .._demo.tools import make_demo_repo

    return make_demo_repo(Path(where) if where else Path(tempfile.mkdtemp(prefix="pysolate-demo-")))


def _commit(repo: Path, fast: Measured) -> str:
    return fast.result.workspaces["workspace"].commit_to_git(
        DEMO_REF, "pysolate demo: the standup summary"
    )

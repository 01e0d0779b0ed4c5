"""Benchmark: each bundled framework example, the usual way vs with Pysolate, side by side.

    .venv/bin/python benchmarks/examples.py [--repeat N] [--only NAME,...]

Runs the examples in ``examples/`` as they ship (each model stand-in streams its program at
about 50 tokens/s; each search takes 0.5 s; the default subprocess Guest), loaded as modules
so their own agents, tools and Hosts are measured, in two modes:

- *stream, then run*: the same setup with Pysolate's streaming and speculation off
  (``stream=False, speculate=False``; smolagents: the model not wrapped by the executor;
  MCP: the whole stream collected, then ``run_source(speculate=False)``), so the program
  runs sequentially once the model is done — what running a code action normally means;
- *Pysolate*: as the example runs it.

The model streams in both modes (Pydantic AI is driven with an ``event_stream_handler``,
the Agents SDK with ``Runner.run_streamed``), so the only difference is Pysolate. Best of N
wall times of one agent step (the run, from the request to the agent's answer), their
ratio, and whether the two runs' results are equal (``pysolate.testing.differences``).
Results: docs/integrations.md, "How much each integration gains".
"""

from __future__ import annotations

import argparse
import asyncio
import io
import runpy
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pysolate import PysolateWarning, RunResult  # noqa: E402
from pysolate.testing import differences  # noqa: E402

Step = Callable[[bool], tuple[float, RunResult]]
"""One agent step in a mode (``True``: Pysolate): its wall seconds and its ``RunResult``."""


def example(name: str) -> dict[str, Any]:
    """The example's module globals (its ``__main__`` block does not run)."""
    return runpy.run_path(str(ROOT / "examples" / name), run_name="benchmark")


def pydantic_ai() -> tuple[Step, Callable[[], None]]:
    from pydantic_ai.messages import ModelRequest, ToolReturnPart

    ex = example("pydantic_ai_agent.py")
    agent, mode = ex["agent"], ex["code_mode"]

    async def drain(ctx: Any, events: Any) -> None:  # the model streams in both modes
        async for _ in events:
            pass

    def step(pysolate: bool) -> tuple[float, RunResult]:
        mode.stream = mode.speculate = pysolate
        t0 = time.monotonic()
        run = anyio.run(
            lambda: agent.run("How do retries and timeouts work?", event_stream_handler=drain)
        )
        wall = time.monotonic() - t0
        (part,) = [
            p
            for m in run.all_messages()
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        return wall, part.metadata

    return step, lambda: None


def smolagents() -> tuple[Step, Callable[[], None]]:
    from rich.console import Console

    ex = example("smolagents_agent.py")
    agent, executor = ex["agent"], ex["executor"]
    streaming, plain = agent.model, agent.model.model
    agent.logger.console = Console(file=io.StringIO())  # no live display of the stream

    def step(pysolate: bool) -> tuple[float, RunResult]:
        agent.model, executor.speculate = (streaming if pysolate else plain), pysolate
        t0 = time.monotonic()
        agent.run("How do retries and timeouts work?")
        return time.monotonic() - t0, executor.last_result

    return step, agent.cleanup


def openai_agents() -> tuple[Step, Callable[[], None]]:
    from agents import Runner

    ex = example("openai_agents_agent.py")
    agent, code = ex["agent"], ex["code"]

    async def run() -> None:
        streamed = Runner.run_streamed(agent, "How do retries and timeouts work?")
        async for _ in streamed.stream_events():
            pass

    def step(pysolate: bool) -> tuple[float, RunResult]:
        code.stream = code.speculate = pysolate
        t0 = time.monotonic()
        asyncio.run(run())
        return time.monotonic() - t0, code.last_result

    return step, lambda: None


def mcp() -> tuple[Step, Callable[[], None]]:
    ex = example("mcp_tools.py")

    async def run(pysolate: bool) -> tuple[float, RunResult]:
        async with ex["kb_host"]() as host:  # connected first: the step is the program's run
            t0 = time.monotonic()
            if pysolate:
                result = await host.run_stream(ex["model_stream"]())
            else:
                source = "".join([chunk async for chunk in ex["model_stream"]()])
                result = await host.run_source(source, speculate=False)
            return time.monotonic() - t0, result

    return (lambda pysolate: anyio.run(run, pysolate)), lambda: None


EXAMPLES: dict[str, Callable[[], tuple[Step, Callable[[], None]]]] = {
    "pydantic-ai": pydantic_ai,
    "smolagents": smolagents,
    "mcp": mcp,
    "openai-agents": openai_agents,
}


def measure(name: str, repeat: int) -> tuple[float, float, bool]:
    """Best-of-``repeat`` wall seconds, stream-then-run and Pysolate, alternating; and
    whether every Pysolate result equalled the stream-then-run one."""
    step, cleanup = EXAMPLES[name]()
    walls: dict[bool, list[float]] = {False: [], True: []}
    equal = True
    try:
        for _ in range(repeat):
            (base, reference), (fast, result) = step(False), step(True)
            walls[False].append(base)
            walls[True].append(fast)
            equal = equal and differences(result, reference) == []
    finally:
        cleanup()
    return min(walls[False]), min(walls[True]), equal


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--only", default=",".join(EXAMPLES), help="comma-separated: " + ", ".join(EXAMPLES)
    )
    args = parser.parse_args(argv)
    warnings.simplefilter(
        "ignore", PysolateWarning
    )  # the stream-then-run setups say they gain nothing
    print(f"best of {args.repeat}, wall seconds of one agent step")
    print(f"{'example':<14} {'stream, then run':>17} {'Pysolate':>9} {'ratio':>6}  equal")
    for name in args.only.split(","):
        base, fast, equal = measure(name, args.repeat)
        print(
            f"{name:<14} {base:>17.2f} {fast:>9.2f} {base / fast:>5.2f}x  {'yes' if equal else 'NO'}"
        )


if __name__ == "__main__":
    main()

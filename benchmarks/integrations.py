"""Benchmark: one agent step through each framework integration, Pysolate vs stream-then-run.

    .venv/bin/python benchmarks/integrations.py [--repeat N] [--guest in-process|subprocess]

A scripted model streams a code action at ~50 tokens/s (4 characters a token) that loops
over three topics, searching each (a qualified pure tool, 0.5 s), then saves a note (an
unqualified tool): through a smolagents ``CodeAgent`` (``PysolateExecutor``, the reply's
``<code>`` block) and a Pydantic AI ``Agent`` (``PysolateCodeMode``, the ``run_code`` call's
JSON argument). Side by side in one run, best of N, it prints the step's wall time and the
time after the model's last token for

- stream, then run: the code runs once the model is done, sequentially (``stream=False``,
  ``speculate=False``: what running the code action after the reply amounts to);
- Pysolate: the code streams through Pysolate while the model writes it.

The ratio is stream-then-run / Pysolate for the time after the last token, and for the
whole step. Results: docs/benchmarks.md, "Framework integrations".
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from smolagents import CodeAgent, Model, tool
from smolagents.models import ChatMessage, ChatMessageStreamDelta

from pysolate import Effect, Host, PysolateWarning
from pysolate.integrations.pydantic_ai import PysolateCodeMode
from pysolate.integrations.smolagents import PysolateExecutor
from pysolate.testing import in_process_guest

PROGRAM = """notes = []
for topic in ["retries", "timeouts", "backoff"]:
    pages = search(topic)
    notes.append(topic + ": " + pages[0])
save_note("\\n".join(notes))
len(notes)"""
CHARS_PER_TOKEN = 4
TOKENS_PER_SECOND = 50
SEARCH_SECONDS = 0.5


def search_result(topic: str) -> list[str]:
    return [f"{topic} page 1", f"{topic} page 2"]


class Clock:
    """When the model's last token went out."""

    stream_end = 0.0


def host_factory(guest: str) -> Callable[[], Host]:
    return (lambda: Host(guest_factory=in_process_guest)) if guest == "in-process" else Host


# -- smolagents ---------------------------------------------------------------------------


class ScriptedModel(Model):
    def __init__(self, text: str, clock: Clock) -> None:
        super().__init__(model_id="scripted")
        self.text, self.clock = text, clock

    def generate(
        self, messages: list[Any], stop_sequences: list[str] | None = None, **kwargs: Any
    ) -> ChatMessage:
        raise AssertionError("the benchmark streams")

    def generate_stream(
        self, messages: list[Any], stop_sequences: list[str] | None = None, **kwargs: Any
    ) -> Iterator[ChatMessageStreamDelta]:
        for i in range(0, len(self.text), CHARS_PER_TOKEN):
            time.sleep(1 / TOKENS_PER_SECOND)
            yield ChatMessageStreamDelta(content=self.text[i : i + CHARS_PER_TOKEN])
        self.clock.stream_end = time.monotonic()


def smolagents_step(pysolate: bool, make_host: Callable[[], Host]) -> tuple[float, float]:
    @tool
    def search(topic: str) -> list:
        """Search the docs.

        Args:
            topic: what to look for.
        """
        time.sleep(SEARCH_SECONDS)
        return search_result(topic)

    @tool
    def save_note(text: str) -> str:
        """Save a note.

        Args:
            text: the note.
        """
        return "saved"

    clock = Clock()
    model = ScriptedModel(
        f"Thought: search each topic.\n<code>\n{PROGRAM}\nfinal_answer(len(notes))\n", clock
    )
    executor = PysolateExecutor(make_host(), effects={"search": Effect.PURE}, speculate=pysolate)
    agent = CodeAgent(
        tools=[search, save_note],
        model=executor.streaming(model) if pysolate else model,
        executor=executor,
        stream_outputs=True,
        verbosity_level=-1,
        max_steps=1,
    )
    agent.logger.console = Console(file=io.StringIO())  # no live display of the stream
    try:
        t0 = time.monotonic()
        assert agent.run("go") == 3
        t1 = time.monotonic()
    finally:
        agent.cleanup()
    return t1 - t0, t1 - clock.stream_end


# -- Pydantic AI --------------------------------------------------------------------------


def pydantic_ai_step(pysolate: bool, make_host: Callable[[], Host]) -> tuple[float, float]:
    clock = Clock()
    ended: list[float] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if any(
            isinstance(p, ToolReturnPart)
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
        ):
            ended.append(time.monotonic())
            yield "done"
            return
        arguments = json.dumps({"code": PROGRAM})
        yield {0: DeltaToolCall(name="run_code", tool_call_id="call_1")}
        for i in range(0, len(arguments), CHARS_PER_TOKEN):
            await anyio.sleep(1 / TOKENS_PER_SECOND)
            yield {0: DeltaToolCall(json_args=arguments[i : i + CHARS_PER_TOKEN])}
        clock.stream_end = time.monotonic()

    mode = PysolateCodeMode(
        make_host(), effects={"search": Effect.PURE}, stream=pysolate, speculate=pysolate
    )
    agent = Agent(FunctionModel(stream_function=stream), capabilities=[mode])

    @agent.tool_plain
    async def search(topic: str) -> list[str]:
        """Search the docs."""
        await anyio.sleep(SEARCH_SECONDS)
        return search_result(topic)

    @agent.tool_plain
    def save_note(text: str) -> str:
        """Save a note."""
        return "saved"

    async def main() -> float:
        t0 = time.monotonic()
        await agent.run("go")
        return t0

    t0 = anyio.run(main)
    (t1,) = ended  # the tool's result reached the model
    return t1 - t0, t1 - clock.stream_end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--guest", choices=["in-process", "subprocess"], default="subprocess")
    args = parser.parse_args()
    warnings.simplefilter(
        "ignore", PysolateWarning
    )  # the stream-then-run setups say they gain nothing
    make_host = host_factory(args.guest)
    print(
        f"{len(PROGRAM)} characters at {TOKENS_PER_SECOND} tokens/s, 3 searches of {SEARCH_SECONDS} s, guest {args.guest}, best of {args.repeat}"
    )
    print(f"{'framework':<12} {'mode':<16} {'step s':>7} {'after last token s':>19}")
    for name, step in (("smolagents", smolagents_step), ("pydantic-ai", pydantic_ai_step)):
        rows = {}
        for pysolate in (False, True):
            runs = [step(pysolate, make_host) for _ in range(args.repeat)]
            rows[pysolate] = (min(r[0] for r in runs), min(r[1] for r in runs))
            label = "Pysolate" if pysolate else "stream, then run"
            print(f"{name:<12} {label:<16} {rows[pysolate][0]:>7.2f} {rows[pysolate][1]:>19.2f}")
        (base_step, base_after), (fast_step, fast_after) = rows[False], rows[True]
        print(
            f"{name:<12} {'ratio':<16} {base_step / fast_step:>7.2f} {base_after / fast_after:>19.2f}"
        )


if __name__ == "__main__":
    main()

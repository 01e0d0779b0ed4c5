"""Benchmark: the raw-SDK agent loops of examples/*_agent_loop.py, Pysolate vs stream-then-run.

    .venv/bin/python benchmarks/agent_loops.py [--repeat N]

The loop of each example against its local fake model (examples/fake_llm.py: 50 tokens/s,
4 characters a token): the model calls ``run_code`` with a program that makes two searches
(a ``pure`` tool, 0.5 s each), gets the result, and answers. Side by side in one run, best
of N, through the default isolated subprocess Guest, for OpenAI Chat Completions (sync
client, ``SyncHost``), OpenAI Responses (sync) and Anthropic Messages (async client,
``Host``):

- stream, then run: the reply is read to its end (``get_final_*()``), then the call's
  ``code`` runs sequentially (``run_source(code, speculate=False)``): running the tool call
  after the reply;
- Pysolate: the loop as the example has it (``run_stream(stream, code=tool.code)``).

Printed: the whole loop's wall time (both model turns), and the time from the code call's
last event to the run's result. Results: docs/benchmarks.md, "Raw-SDK agent loops".
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import anyio
import openai

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "examples")]

from fake_llm import FakeModel  # noqa: E402

from pysolate import CodeTool, Effect, Host, RunResult, SyncHost, capability  # noqa: E402

PROGRAM = (
    'hits = docs.search("retries") + docs.search("timeouts")\nprint(len(hits), "hits")\nhits[0]\n'
)
SEARCH_SECONDS = 0.5


class Docs:
    @capability(effect=Effect.PURE, version="1")
    async def search(self, query: str) -> list[str]:
        """Search the documentation; the titles of the matching pages."""
        await anyio.sleep(SEARCH_SECONDS)
        return [f"{query}: page 1", f"{query}: page 2"]


def make_host() -> Host:
    host = Host()
    host.register("docs", Docs())
    return host


def run(
    host: SyncHost, tool: CodeTool, stream: Any, final: Any, arguments: Any, pysolate: bool
) -> tuple[RunResult, Any]:
    """One turn's run and the whole reply, as each mode gets them."""
    if pysolate:
        result = host.run_stream(stream, code=tool.code)
        return result, final()
    reply = final()
    code = arguments(reply)
    return (
        host.run_source(code, speculate=False)
        if code is not None
        else host.run_stream([], code=tool.code)
    ), reply


def chat_code(completion: Any) -> str | None:
    calls = completion.choices[0].message.tool_calls
    return json.loads(calls[0].function.arguments)["code"] if calls else None


def responses_code(response: Any) -> str | None:
    return next(
        (json.loads(i.arguments)["code"] for i in response.output if i.type == "function_call"),
        None,
    )


def chat(pysolate: bool) -> tuple[float, float]:
    model = FakeModel(PROGRAM)
    client = openai.OpenAI(api_key="unused", http_client=model.sync_client())
    with SyncHost(make_host()) as host:
        tool, after = CodeTool(host), 0.0
        messages: list[Any] = [{"role": "user", "content": "How do retries work?"}]
        started = time.monotonic()
        while True:
            with client.chat.completions.stream(
                model="gpt-5", messages=messages, tools=[tool.openai_chat()]
            ) as stream:
                result, completion = run(
                    host, tool, stream, stream.get_final_completion, chat_code, pysolate
                )
            if not (reply := tool.openai_chat_reply(completion, result)):
                return time.monotonic() - started, after
            after = time.monotonic() - model.last_sent
            messages += reply


def responses(pysolate: bool) -> tuple[float, float]:
    model = FakeModel(PROGRAM)
    client = openai.OpenAI(api_key="unused", http_client=model.sync_client())
    with SyncHost(make_host()) as host:
        tool, after, previous = CodeTool(host), 0.0, None
        items: list[Any] = [{"role": "user", "content": "How do retries work?"}]
        started = time.monotonic()
        while True:
            with client.responses.stream(
                model="gpt-5",
                input=items,
                tools=[tool.openai_responses()],
                previous_response_id=previous,
            ) as stream:
                result, response = run(
                    host, tool, stream, stream.get_final_response, responses_code, pysolate
                )
            if not (items := tool.openai_responses_reply(response, result)):
                return time.monotonic() - started, after
            after, previous = time.monotonic() - model.last_sent, response.id


def messages(pysolate: bool) -> tuple[float, float]:
    async def main() -> tuple[float, float]:
        model = FakeModel(PROGRAM)
        client = anthropic.AsyncAnthropic(api_key="unused", http_client=model.async_client())
        async with make_host() as host:
            tool, after = CodeTool(host), 0.0
            history: list[Any] = [{"role": "user", "content": "How do retries work?"}]
            started = time.monotonic()
            while True:
                async with client.messages.stream(
                    model="claude-sonnet-4-5",
                    max_tokens=1024,
                    messages=history,
                    tools=[tool.anthropic()],
                ) as stream:
                    if pysolate:
                        result = await host.run_stream(stream, code=tool.code)
                        message = await stream.get_final_message()
                    else:
                        message = await stream.get_final_message()
                        use = next((b for b in message.content if b.type == "tool_use"), None)
                        code = use.input["code"] if use is not None else None  # type: ignore[index]
                        result = await (
                            host.run_source(code, speculate=False)
                            if code
                            else host.run_stream([], code=tool.code)
                        )
                if not (reply := tool.anthropic_reply(message, result)):
                    return time.monotonic() - started, after
                after = time.monotonic() - model.last_sent
                history += reply

    return anyio.run(main)


LOOPS = {
    "OpenAI chat (sync)": chat,
    "OpenAI Responses (sync)": responses,
    "Anthropic (async)": messages,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"2 searches of {SEARCH_SECONDS} s, 50 tokens/s, subprocess Guest, best of {args.repeat}")
    print(f"{'API':<26} {'mode':<16} {'loop s':>7} {'after the call s':>17}")
    for name, loop in LOOPS.items():
        rows = {}
        for pysolate in (False, True):
            runs = [loop(pysolate) for _ in range(args.repeat)]
            rows[pysolate] = (min(r[0] for r in runs), min(r[1] for r in runs))
            label = "Pysolate" if pysolate else "stream, then run"
            print(f"{name:<26} {label:<16} {rows[pysolate][0]:>7.2f} {rows[pysolate][1]:>17.2f}")
        print(
            f"{name:<26} {'ratio':<16} {rows[False][0] / rows[True][0]:>7.2f} {rows[False][1] / rows[True][1]:>17.2f}"
        )


if __name__ == "__main__":
    main()

"""Pydantic AI: a `run_code` tool streamed through Pysolate while the model writes it.

The agent's own tools become the program's functions; `effects` says which may start
early. Runs offline with a FunctionModel that streams the tool call the way a provider
does; for a real model use e.g. `Agent("openai:gpt-5", ...)`. docs/integrations.md explains it.
"""

import json

import anyio
from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ToolReturnPart
from pydantic_ai.models.function import DeltaToolCall, FunctionModel

from pysolate import Effect
from pysolate.integrations.pydantic_ai import PysolateCodeMode

PROGRAM = (
    'pages = [search(q) for q in ["retries", "timeouts"]]\nsave_note(pages[0][0])\nlen(pages)\n'
)


async def model(messages, info):  # a stand-in for a provider's streamed response
    if any(
        isinstance(p, ToolReturnPart)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
    ):
        yield "Found two pages of results."
        return
    arguments = json.dumps({"code": PROGRAM})
    yield {0: DeltaToolCall(name="run_code", tool_call_id="call_1")}
    for i in range(0, len(arguments), 4):  # about 50 tokens per second
        await anyio.sleep(0.02)
        yield {0: DeltaToolCall(json_args=arguments[i : i + 4])}


code_mode = PysolateCodeMode(
    effects={"search": Effect.PURE}
)  # save_note stays unknown: never early
agent = Agent(FunctionModel(stream_function=model), capabilities=[code_mode])


@agent.tool_plain
async def search(query: str) -> list[str]:
    """Search the docs."""
    await anyio.sleep(0.5)  # a slow search backend
    return [f"{query}: page 1", f"{query}: page 2"]


@agent.tool_plain
def save_note(text: str) -> str:
    """Save a note for the user."""
    return f"saved {text!r}"


async def main() -> None:
    run = await agent.run("How do retries and timeouts work?")
    (part,) = [
        p
        for m in run.all_messages()
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    result = part.metadata  # the RunResult; the model saw part.content
    print(part.content)
    print(result.status, result.report.counts())
    print(run.output)


if __name__ == "__main__":
    anyio.run(main)

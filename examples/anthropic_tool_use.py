"""Anthropic tool use: the program is the streamed `code` input of a `run_code` tool_use block.

Runs offline against a local fake of the Messages API (examples/fake_llm.py); for the real
API drop `http_client=` and use a real model name. docs/integrations.md explains it.
"""

import anyio
from anthropic import AsyncAnthropic
from fake_llm import anthropic_messages

from pysolate import Effect, Host, capability
from pysolate.streams import ToolCallCode

RUN_CODE = {
    "name": "run_code",
    "description": "Run a Python program; docs.search(query) -> list[str] is available.",
    "input_schema": {
        "type": "object",
        "properties": {"code": {"type": "string"}},
        "required": ["code"],
    },
}


class Docs:
    @capability(effect=Effect.PURE, version="1")  # same query, same answer: may start early
    async def search(self, query: str) -> list[str]:
        await anyio.sleep(0.5)  # a slow search backend
        return [f"{query}: page 1", f"{query}: page 2"]


PROGRAM = (
    'hits = docs.search("retries") + docs.search("timeouts")\nprint(len(hits), "hits")\nhits[0]\n'
)


async def main() -> None:
    host = Host()
    host.register("docs", Docs())
    client = AsyncAnthropic(api_key="unused", http_client=anthropic_messages(PROGRAM))
    async with client.messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        messages=[{"role": "user", "content": "How do retries work?"}],
        tools=[RUN_CODE],
    ) as stream:
        result = await host.run_stream(stream, code=ToolCallCode("run_code"))
    print(result.stdout, end="")
    print(result.status, repr(result.value), result.report.counts())
    print(f"{result.report.time_saved:.1f} s of search time hidden behind the stream")


anyio.run(main)

"""OpenAI function calling: the program is the streamed `code` argument of a `run_code` call.

Runs offline against a local fake of the Chat Completions API (examples/fake_llm.py); for the
real API drop `http_client=` and use a real model name. docs/integrations.md explains it.
"""

import anyio
from fake_llm import openai_chat
from openai import AsyncOpenAI

from pysolate import Effect, Host, capability
from pysolate.streams import ToolCallCode

RUN_CODE = {
    "type": "function",
    "function": {
        "name": "run_code",
        "description": "Run a Python program; docs.search(query) -> list[str] is available.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string"}},
            "required": ["code"],
        },
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
    client = AsyncOpenAI(api_key="unused", http_client=openai_chat(PROGRAM))
    stream = await client.chat.completions.create(
        model="gpt-5",
        messages=[{"role": "user", "content": "How do retries work?"}],
        tools=[RUN_CODE],
        stream=True,
    )
    result = await host.run_stream(stream, code=ToolCallCode("run_code"))
    print(result.stdout, end="")
    print(result.status, repr(result.value), result.report.counts())
    print(f"{result.report.time_saved:.1f} s of search time hidden behind the stream")


anyio.run(main)

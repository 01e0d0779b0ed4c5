"""A complete agent loop with the Anthropic SDK's async client: ask, stream, run, reply,
repeat until the model stops calling the tool.

`CodeTool(host)` generates the `run_code` tool from the Host's registrations (its
description lists `docs.search` with its signature, effect and docstring) and the messages
that answer each tool use. The searches start while the model is still writing the call.
Runs offline against a local fake model (examples/fake_llm.py); for the real API drop
`http_client=` and use a real model name. docs/integrations.md explains it.
"""

import anyio
from anthropic import AsyncAnthropic
from fake_llm import FakeModel

from pysolate import CodeTool, Effect, Host, capability


class Docs:
    @capability(effect=Effect.PURE, version="1")  # same query, same answer: may start early
    async def search(self, query: str) -> list[str]:
        """Search the documentation; the titles of the matching pages."""
        await anyio.sleep(0.5)  # a slow search backend
        return [f"{query}: page 1", f"{query}: page 2"]


PROGRAM = (
    'hits = docs.search("retries") + docs.search("timeouts")\nprint(len(hits), "hits")\nhits[0]\n'
)


async def main() -> None:
    async with Host() as host:
        host.register("docs", Docs())
        client = AsyncAnthropic(api_key="unused", http_client=FakeModel(PROGRAM).async_client())
        # The loop: 9 lines, and one that prints what each run did.
        tool = CodeTool(host)
        messages = [{"role": "user", "content": "How do retries work?"}]
        while True:
            async with client.messages.stream(
                model="claude-sonnet-4-5",
                max_tokens=1024,
                messages=messages,
                tools=[tool.anthropic()],
            ) as stream:
                result = await host.run_stream(stream, code=tool.code)
                message = await stream.get_final_message()
            if not (reply := tool.anthropic_reply(message, result)):
                break
            messages += reply
            print(result.status, repr(result.value), result.report.counts())
        print(message.content[0].text)


anyio.run(main)

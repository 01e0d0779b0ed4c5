"""A complete agent loop with the OpenAI SDK's sync client: ask, stream, run, reply, repeat
until the model stops calling the tool.

`CodeTool(host)` generates the `run_code` tool from the Host's registrations (its
description lists `docs.search` with its signature, effect and docstring) and the messages
that answer each call; `SyncHost` runs the streamed program with the same semantics as
`await Host().run_stream(...)`. The searches start while the model is still writing the
call. Runs offline against a local fake model (examples/fake_llm.py); for the real API drop
`http_client=` and use a real model name. docs/integrations.md explains it.
"""

import time

from fake_llm import FakeModel
from openai import OpenAI

from pysolate import CodeTool, Effect, SyncHost, capability


class Docs:
    @capability(effect=Effect.PURE, version="1")  # same query, same answer: may start early
    def search(self, query: str) -> list[str]:
        """Search the documentation; the titles of the matching pages."""
        time.sleep(0.5)  # a slow search backend
        return [f"{query}: page 1", f"{query}: page 2"]


PROGRAM = (
    'hits = docs.search("retries") + docs.search("timeouts")\nprint(len(hits), "hits")\nhits[0]\n'
)

with SyncHost() as host:
    host.register("docs", Docs())
    client = OpenAI(api_key="unused", http_client=FakeModel(PROGRAM).sync_client())
    # The loop: 9 lines, and one that prints what each run did.
    tool = CodeTool(host)
    messages = [{"role": "user", "content": "How do retries work?"}]
    while True:
        with client.chat.completions.stream(
            model="gpt-5", messages=messages, tools=[tool.openai_chat()]
        ) as stream:
            result = host.run_stream(stream, code=tool.code)
            completion = stream.get_final_completion()
        if not (reply := tool.openai_chat_reply(completion, result)):
            break
        messages += reply
        print(result.status, repr(result.value), result.report.counts())
    print(completion.choices[0].message.content)

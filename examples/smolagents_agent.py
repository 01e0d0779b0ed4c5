"""smolagents: a CodeAgent whose code actions run in Pysolate, overlapped with the stream.

Runs offline with a scripted model that streams its reply the way a provider does; for a
real model use e.g. `LiteLLMModel(...)` or `InferenceClientModel(...)` in its place.
docs/integrations.md explains it.
"""

import time

from smolagents import CodeAgent, Model, tool
from smolagents.models import ChatMessage, ChatMessageStreamDelta, MessageRole

from pysolate import Effect
from pysolate.integrations.smolagents import PysolateExecutor

REPLY = """Thought: I will search for both topics, then answer.
<code>
pages = [search(q) for q in ["retries", "timeouts"]]
print(pages)
final_answer(f"{len(pages)} topics found")
</code>"""


class ScriptedModel(Model):  # a stand-in for a real model
    def generate(self, messages, stop_sequences=None, **kwargs):
        return ChatMessage(role=MessageRole.ASSISTANT, content=REPLY)

    def generate_stream(self, messages, stop_sequences=None, **kwargs):
        text = REPLY.split("</code>")[0]  # the provider stops at the stop sequence
        for i in range(0, len(text), 4):  # about 50 tokens per second
            time.sleep(0.02)
            yield ChatMessageStreamDelta(content=text[i : i + 4])


@tool
def search(query: str) -> list:
    """Search the docs.

    Args:
        query: what to look for.
    """
    time.sleep(0.5)  # a slow search backend
    return [f"{query}: page 1", f"{query}: page 2"]


executor = PysolateExecutor(
    effects={"search": Effect.PURE}
)  # every other tool stays unknown: never early
agent = CodeAgent(
    tools=[search],
    model=executor.streaming(ScriptedModel(model_id="scripted")),
    executor=executor,
    stream_outputs=True,
    verbosity_level=0,
)


def main() -> None:
    try:
        print(agent.run("How do retries and timeouts work?"))
        print(executor.last_result.report.counts())  # the last code action's run
    finally:
        agent.cleanup()


if __name__ == "__main__":
    main()

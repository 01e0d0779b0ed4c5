"""OpenAI Agents SDK: a `run_code` tool streamed through Pysolate while the model writes it.

The agent's own function tools become the program's functions; `effects` says which may
start early. Runs offline with a local `Model` that streams the tool call's arguments the
way the Responses API does; for a real model use e.g. `Agent(..., model="gpt-5")`.
docs/integrations.md explains it.
"""

import asyncio
import json

from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
from agents.testing import assistant_message, function_call
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
)

from pysolate import Effect
from pysolate.integrations.openai_agents import PysolateCodeTool

PROGRAM = (
    'pages = [search(q) for q in ["retries", "timeouts"]]\nsave_note(pages[0][0])\nlen(pages)\n'
)


set_tracing_disabled(True)  # offline: no trace export


class FakeModel(Model):  # a stand-in for a provider: streams a run_code call, then answers
    def reply(self, input):
        if any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in input):
            return assistant_message("Found two pages of results.")
        return function_call("run_code", {"code": PROGRAM}, call_id="call_1")

    async def get_response(self, system_instructions, input, *args, **kwargs):
        return ModelResponse(output=[self.reply(input)], usage=Usage(), response_id="resp_1")

    async def stream_response(self, system_instructions, input, *args, **kwargs):
        item, n = self.reply(input), 0
        if item.type == "function_call":
            arguments, item.arguments = item.arguments, ""
            yield ResponseOutputItemAddedEvent(
                type="response.output_item.added", item=item, output_index=0, sequence_number=n
            )
            for n, i in enumerate(range(0, len(arguments), 4), 1):  # about 50 tokens per second
                await asyncio.sleep(0.02)
                delta = arguments[i : i + 4]
                yield ResponseFunctionCallArgumentsDeltaEvent(
                    type="response.function_call_arguments.delta",
                    item_id="fc_1",
                    output_index=0,
                    delta=delta,
                    sequence_number=n,
                )
            item.arguments = arguments
            yield ResponseOutputItemDoneEvent(
                type="response.output_item.done", item=item, output_index=0, sequence_number=n + 1
            )
        response = Response(
            id="resp_1",
            created_at=0,
            model="fake",
            object="response",
            output=[item],
            tool_choice="auto",
            tools=[],
            parallel_tool_calls=False,
            status="completed",
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=n + 2
        )


@function_tool
async def search(query: str) -> list[str]:
    """Search the docs."""
    await asyncio.sleep(0.5)  # a slow search backend
    return [f"{query}: page 1", f"{query}: page 2"]


@function_tool
def save_note(text: str) -> str:
    """Save a note for the user."""
    return f"saved {text!r}"


code = PysolateCodeTool(effects={"search": Effect.PURE})  # save_note stays unknown: never early
agent = code.agent(Agent(name="assistant", tools=[search, save_note], model=FakeModel()))


async def main() -> None:
    run = Runner.run_streamed(agent, "How do retries and timeouts work?")
    async for _ in run.stream_events():
        pass
    result = code.last_result  # the RunResult; the model saw its JSON form
    print(json.dumps({"value": result.value, "stdout": result.stdout}))
    print(result.status, result.report.counts())
    print(run.final_output)


if __name__ == "__main__":
    asyncio.run(main())

"""Quickstart: run a model's code action while it streams (docs/quickstart.md)."""

import anyio

from pysolate import Effect, Host, capability
from pysolate.streams import play, source_to_stream, text_chunks


class Weather:
    @capability(effect=Effect.PURE, version="1")  # same city, same answer: may start early
    async def forecast(self, city: str) -> str:
        await anyio.sleep(0.5)  # a slow remote API
        return f"sunny in {city}"


async def main(llm_stream) -> None:
    host = Host()
    host.register("weather", Weather())
    result = await host.run_stream(text_chunks(llm_stream), code="markdown")
    print(result.stdout, end="")  # what the program printed
    print(result.status, result.report.counts())


# A stand-in for your model's stream, e.g. `await client.chat.completions.create(..., stream=True)`.
REPLY = (
    'Checking both.\n```python\nprint(weather.forecast("Oslo"), weather.forecast("Rome"))\n```\n'
)
anyio.run(main, play(source_to_stream(REPLY, tokens_per_second=50)))

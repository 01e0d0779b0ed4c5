"""Sessions: an agent's turns in one Guest that keeps its globals (docs/sessions.md).

Turn 1 lists the notes, turn 2 reads each one (its reads start while turn 2 still streams:
``paths`` is a list turn 1 left), turn 3 has a typo and is rejected (nothing changes), and
its retry reuses the reads turn 3 already made.
"""

import anyio

from pysolate import Effect, Host, capability
from pysolate.streams import play, source_to_stream

NOTES = {
    "mon.md": "Monday: retry fix",
    "tue.md": "Tuesday: cache bug",
    "wed.md": "Wednesday: rate limits",
}


class Notes:
    @capability(effect=Effect.IMMUTABLE_READ, version="1")
    async def list(self) -> list[str]:
        await anyio.sleep(0.2)
        return sorted(NOTES)

    @capability(effect=Effect.IMMUTABLE_READ, version="1")
    async def read(self, name: str) -> str:
        await anyio.sleep(0.5)  # a slow remote store
        return NOTES[name]


TURNS = [
    "paths = notes.list()\nlen(paths)\n",
    "texts = {}\nfor p in paths:\n    texts[p] = notes.read(p)\ntopics = [t.split(': ')[1] for t in texts.values()]\ntopics\n",
    "first = notes.read(paths[0])\nshout = first.upper()\nreport = {'first': shout, 'topics': topics\nreport\n",
    "first = notes.read(paths[0])\nshout = first.upper()\nreport = {'first': shout, 'topics': topics}\nreport\n",
]


async def main() -> None:
    host = Host()
    host.register("notes", Notes())
    async with host.session() as session:
        for n, source in enumerate(TURNS, 1):
            result = await session.run_stream(play(source_to_stream(source, tokens_per_second=40)))
            counts = result.report.counts()
            print(
                f"turn {n}: {result.status} {result.value!r} claimed={counts['claimed']} physical={counts['physical']}"
            )
        print("reused from the rejected turn:", session.statistics().reused)


anyio.run(main)

"""``python -m pysolate.ray._smoke``: one local Ray cluster, a few runs through Ray Guests,
each equal to the same run through a local Guest. Prints one JSON line; exit status 0 when
all are equal. The default test suite runs it in a fresh interpreter (Ray's driver state is
per process), so CI exercises real Ray on every run."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio

from pysolate import Effect, Host
from pysolate._report._equivalence import differences
from pysolate.testing import Script, scripted_tool

from ._factory import RayGuestFactory

PROGRAMS = (
    "hits = [docs.search(q) for q in ('a', 'b')]\nprint(len(hits))\nhits\n",
    "x = docs.search('c')\nclock.now()\n1 / 0\n",
)


def _host(factory: RayGuestFactory | None = None) -> Host:
    host = Host(guest_factory=factory, instrument=None)
    host.register(
        "docs",
        scripted_tool(
            search=Script(lambda query: [query.upper()], effect=Effect.PURE, latency=0.01)
        ),
    )
    host.register("clock", scripted_tool(now=Script(lambda: 7, effect=Effect.LIVE_READ)))
    return host


async def _chunks(text: str) -> AsyncIterator[str]:
    for i in range(0, len(text), 6):
        await anyio.sleep(0.002)
        yield text[i : i + 6]


async def main() -> dict[str, Any]:
    runs, differ, claimed = 0, [], 0
    async with RayGuestFactory(agents=1, init={"num_cpus": 1}) as factory:
        for source in PROGRAMS:
            local = await _host().run_source(source, speculate=False)
            for remote in (
                await _host(factory).run_source(source),
                await _host(factory).run_stream(_chunks(source)),
            ):
                runs += 1
                differ += differences(local, remote)
                claimed += remote.report.claimed
        left = [(await agent.stats.remote())["alive_pids"] for agent in factory.agents]
    return {"runs": runs, "differences": differ, "claimed": claimed, "left": left}


if __name__ == "__main__":
    # Twice, each in its own event loop: the local cluster the first started must serve the
    # second (it once died with the first loop's worker thread, ``_cluster``).
    first, second = anyio.run(main), anyio.run(main)
    result = {key: first[key] + second[key] for key in first}
    print(json.dumps(result))
    sys.exit(0 if not result["differences"] and result["runs"] == 2 * len(PROGRAMS) * 2 else 1)

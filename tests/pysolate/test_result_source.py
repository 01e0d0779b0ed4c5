"""``RunResult.source``: the sealed source that ran, the same from every entry point."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pysolate import Effect, Host
from pysolate.testing import Script, in_process_guest, scripted_tool

pytestmark = pytest.mark.anyio

PROGRAM = "hits = docs.search('q')\nlen(hits)\n"


def _host() -> Host:
    host = Host(guest_factory=in_process_guest, instrument=None)
    host.register("docs", scripted_tool(search=Script(lambda query: [query], effect=Effect.PURE)))
    return host


async def _chunks(text: str, size: int = 7) -> AsyncIterator[str]:
    for i in range(0, len(text), size):
        yield text[i : i + size]


@pytest.mark.parametrize("speculate", [False, True])
async def test_run_source_carries_its_source(speculate: bool) -> None:
    result = await _host().run_source(PROGRAM, speculate=speculate)
    assert result.status == "ok" and result.source == PROGRAM


async def test_run_stream_carries_the_sealed_program_not_the_reply() -> None:
    reply = f"Here you go:\n\n```python\n{PROGRAM}```\n\nThat counts the hits.\n"
    result = await _host().run_stream(_chunks(reply), code="markdown")
    assert result.status == "ok" and result.source == PROGRAM


async def test_a_program_that_raises_still_carries_its_source() -> None:
    source = "docs.search('q')\n1 / 0\n"
    result = await _host().run_stream(_chunks(source))
    assert result.status == "error" and result.source == source


async def test_nothing_sealed_means_no_source() -> None:
    host = _host()
    assert (await host.run_source("x = (\n")).source is None
    assert (await host.run_stream(_chunks("x = (\n"))).source is None

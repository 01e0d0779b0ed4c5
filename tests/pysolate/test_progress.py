"""Live progress counts what the run's hooks report and still traces through the instrument it wraps."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pysolate import Effect, Host
from pysolate._report._progress import Progress, ProgressInstrument, counted
from pysolate.testing import Script, in_process_guest, scripted_tool
from pysolate.tracing import OTelInstrument

pytestmark = pytest.mark.anyio

PROGRAM = "a = docs.search('a')\nb = docs.search('b')\nclock.now()\n[a, b]\n"


async def _chunks(text: str) -> AsyncIterator[str]:
    for i in range(0, len(text), 4):
        await anyio.sleep(0.001)
        yield text[i : i + 4]


async def test_progress_counts_tokens_statements_early_work_and_claims() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    progress = Progress("pysolate")
    host = Host(
        guest_factory=in_process_guest,
        instrument=ProgressInstrument(OTelInstrument(provider), progress),
    )
    host.register(
        "docs",
        scripted_tool(search=Script(lambda query: [query], effect=Effect.PURE, latency=0.01)),
    )
    host.register("clock", scripted_tool(now=Script(lambda: 7, effect=Effect.LIVE_READ)))
    result = await host.run_stream(counted(_chunks(PROGRAM), progress))
    assert result.status == "ok"
    assert progress.tokens == len(range(0, len(PROGRAM), 4))
    assert progress.statements == 4 and progress.sealed
    assert progress.early_started == progress.early_done == 2
    assert progress.claims == result.report.claimed == 2
    assert progress.program_calls == 1, "the live read ran only when the program made it"
    assert progress.status == "ok"
    names = sorted(s.name for s in exporter.get_finished_spans())
    assert names.count("execute_tool docs.search") == 2 and names.count("claim docs.search") == 2
    assert "pysolate.run" in names
    text = progress.render().plain
    assert "tokens   16" in text and "claimed  2" in text and text.endswith("ok")

"""Traces of a speculating run, driven through ``Host.run_stream``.

One ``execute_tool`` span per *physical* observation (early ones with lane ``speculative``
and a disposition), one ``claim`` span per logical call served by early work, linked to the
span it claimed; orphaned early work is not an error; nothing about arguments without opt-in.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from pysolate import Effect, Host, LanePolicy
from pysolate.testing import Script, in_process_guest, scripted_tool
from pysolate.tracing import OTelInstrument
from pysolate.tracing import attributes as A

pytestmark = pytest.mark.anyio

SOURCE = (
    "a = docs.search('a')\n"
    "if clock.now() > 100:\n"
    "    docs.search('unused')\n"
    "b = docs.search('b')\n"
    "a + b\n"
)


async def chunks(text: str) -> AsyncIterator[str]:
    for i in range(0, len(text), 5):
        await anyio.sleep(0.002)
        yield text[i : i + 5]


async def traced_run(record_payloads: bool = False) -> tuple[list, object]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    host = Host(
        guest_factory=in_process_guest,
        instrument=OTelInstrument(provider, record_payloads=record_payloads),
    )
    host.register(
        "docs",
        scripted_tool(search=Script(lambda query: [query], effect=Effect.PURE, latency=0.01)),
    )
    host.register("clock", scripted_tool(now=Script(lambda: 7, effect=Effect.LIVE_READ)))
    result = await host.run_stream(chunks(SOURCE), policy=LanePolicy(allow_discardable=True))
    provider.shutdown()
    return list(exporter.get_finished_spans()), result


async def test_physical_spans_claim_spans_and_links() -> None:
    spans, result = await traced_run()
    assert result.status == "ok" and result.value == ["a", "b"]
    tools = [s for s in spans if s.name == "execute_tool docs.search"]
    claims = [s for s in spans if s.name == "claim docs.search"]
    assert len(tools) == 3 and result.report.physical == 4, "one span per physical observation"
    assert {s.attributes[A.LANE] for s in tools} == {"speculative"}
    (live,) = [s for s in spans if s.name == "execute_tool clock.now"]
    assert live.attributes[A.LANE] == "formal" and A.DISPOSITION not in live.attributes
    dispositions = sorted(str(s.attributes[A.DISPOSITION]) for s in tools)
    assert dispositions == ["claimed", "claimed", "orphaned"]
    assert all(s.attributes[A.GEN_AI_OPERATION_NAME] == "execute_tool" for s in tools)
    assert all(s.status.status_code is not StatusCode.ERROR for s in tools), (
        "orphaned work is not an error"
    )
    assert len(claims) == 2
    tool_ids = {s.context.span_id for s in tools}
    for claim in claims:
        (link,) = claim.links
        assert link.context.span_id in tool_ids
        assert link.attributes[A.LINK_RELATION] == A.LINK_CLAIMS
    (run,) = [s for s in spans if s.name == "pysolate.run"]
    assert run.attributes[A.COUNT_PREFIX + "claimed"] == 2
    assert run.attributes[A.COUNT_PREFIX + "orphaned"] == 1


async def test_arguments_and_results_only_with_opt_in() -> None:
    spans, _ = await traced_run()
    assert not any(A.GEN_AI_TOOL_CALL_ARGUMENTS in s.attributes for s in spans)
    assert not any(A.GEN_AI_TOOL_CALL_RESULT in s.attributes for s in spans)
    spans, _ = await traced_run(record_payloads=True)
    assert any(A.GEN_AI_TOOL_CALL_ARGUMENTS in s.attributes for s in spans)

"""What a default Host traces, and what a caller can tell it about the enclosing code action."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import textwrap

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pysolate import Effect, Host
from pysolate.testing import Script, in_process_guest, in_process_session, scripted_tool
from pysolate.tracing import (
    NULL_INSTRUMENT,
    OTelInstrument,
    code_action,
    current_code_action,
    current_session_turn,
)
from pysolate.tracing import attributes as A

pytestmark = pytest.mark.anyio

PROGRAM = "a = docs.search('a')\nb = docs.search('b')\na + b\n"


def _host(instrument: OTelInstrument) -> Host:
    host = Host(guest_factory=in_process_guest, instrument=instrument)
    host.register("docs", scripted_tool(search=Script(lambda query: [query], effect=Effect.PURE)))
    return host


@pytest.fixture
def traced() -> tuple[InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, provider


def test_a_default_host_traces_through_a_globally_configured_sdk() -> None:
    """An application that sets the global provider, as the OpenTelemetry docs say, gets
    spans from ``Host()`` without configuring Pysolate (run in a fresh interpreter: the global
    provider can be set once per process)."""
    script = textwrap.dedent(
        """
        import anyio, json
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from pysolate import Effect, Host
        from pysolate.testing import Script, in_process_guest, scripted_tool

        host = Host(guest_factory=in_process_guest)          # built before the SDK exists
        host.register("docs", scripted_tool(search=Script(lambda q: [q], effect=Effect.PURE)))
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        result = anyio.run(host.run_source, "docs.search('x')\\n")
        quiet = Host(guest_factory=in_process_guest, instrument=None)
        quiet.register("docs", scripted_tool(search=Script(lambda q: [q], effect=Effect.PURE)))
        before = len(exporter.get_finished_spans())
        anyio.run(quiet.run_source, "docs.search('x')\\n")
        print(json.dumps({
            "status": str(result.status),
            "spans": sorted(s.name for s in exporter.get_finished_spans()[:before]),
            "after_opt_out": len(exporter.get_finished_spans()) - before,
        }))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["status"] == "ok"
    assert {"execute_tool docs.search", "pysolate.run"} <= set(report["spans"])
    assert report["after_opt_out"] == 0, "instrument=None records nothing"


def test_instrument_none_is_the_null_instrument() -> None:
    assert Host(instrument=None).instrument is NULL_INSTRUMENT


async def test_tool_call_ids_are_unique_across_runs(traced) -> None:
    exporter, provider = traced
    host = _host(OTelInstrument(provider))
    await host.run_source(PROGRAM, speculate=False)
    await host.run_source(PROGRAM, speculate=False)
    ids = [
        s.attributes[A.GEN_AI_TOOL_CALL_ID]
        for s in exporter.get_finished_spans()
        if s.name.startswith("execute_tool")
    ]
    assert len(ids) == 4 and len(set(ids)) == 4


async def test_code_action_ids_reach_the_run_and_every_span(traced) -> None:
    exporter, provider = traced
    host = _host(OTelInstrument(provider))
    with code_action(conversation_id="conv-7"), code_action(tool_call_id="call_abc123"):
        result = await host.run_source(PROGRAM)
    assert result.status == "ok"
    spans = exporter.get_finished_spans()
    (run,) = [s for s in spans if s.name == "pysolate.run"]
    assert run.attributes[A.GEN_AI_TOOL_CALL_ID] == "call_abc123"
    assert {s.attributes[A.GEN_AI_CONVERSATION_ID] for s in spans} == {"conv-7"}
    assert len(spans) >= 3
    assert current_code_action().tool_call_id is None, "the block ends with the with"


async def test_session_turns_carry_the_session_id_and_their_number(traced) -> None:
    """Every turn's run span names its session and its turn (a rejected turn counts, and the
    sequential path too); runs outside a session and another session's turns do not mix."""
    exporter, provider = traced
    host = Host(
        guest_factory=in_process_guest,
        session_factory=in_process_session,
        instrument=OTelInstrument(provider),
    )
    host.register("docs", scripted_tool(search=Script(lambda query: [query], effect=Effect.PURE)))
    async with host.session() as first, host.session() as second:
        await first.run_source(PROGRAM)
        await first.run_source("x = (\n")  # rejected: still turn 2
        await second.run_source(PROGRAM)
        await first.run_source("a\n", speculate=False)
        assert current_session_turn() is None
    await host.run_source(PROGRAM)
    runs = [s.attributes for s in exporter.get_finished_spans() if s.name == "pysolate.run"]
    turns = [(r.get(A.SESSION_ID), r.get(A.TURN), r[A.STATUS]) for r in runs]
    assert first.id != second.id
    assert turns == [
        (first.id, 1, "ok"),
        (first.id, 2, "rejected"),
        (second.id, 1, "ok"),
        (first.id, 3, "ok"),
        (None, None, "ok"),
    ]


async def test_concurrent_runs_keep_their_own_code_action(traced) -> None:
    import anyio

    exporter, provider = traced
    host = _host(OTelInstrument(provider))

    async def one(call_id: str) -> None:
        with code_action(tool_call_id=call_id):
            await anyio.sleep(0)
            await host.run_source(PROGRAM, speculate=False)

    async with anyio.create_task_group() as tg:
        for call_id in ("call_1", "call_2"):
            tg.start_soon(one, call_id)
    runs = sorted(
        s.attributes[A.GEN_AI_TOOL_CALL_ID]
        for s in exporter.get_finished_spans()
        if s.name == "pysolate.run"
    )
    assert runs == ["call_1", "call_2"]


async def test_the_tracer_names_the_package_and_its_version(traced) -> None:
    exporter, provider = traced
    await _host(OTelInstrument(provider)).run_source(PROGRAM, speculate=False)
    scopes = {
        (s.instrumentation_scope.name, s.instrumentation_scope.version)
        for s in exporter.get_finished_spans()
    }
    assert scopes == {("pysolate", importlib.metadata.version("pysolate"))}
    assert {s.instrumentation_scope.schema_url for s in exporter.get_finished_spans()} == {
        A.SCHEMA_URL
    }

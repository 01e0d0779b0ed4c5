"""The tracing instrument, driven hook by hook exactly as the Host will drive it."""

from __future__ import annotations

import asyncio
import enum
import logging
import sys
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, StatusCode

from pysolate import Effect, RunStatus, ToolFailure
from pysolate.tracing import (
    MAX_PAYLOAD_CHARS,
    NULL_INSTRUMENT,
    OTelInstrument,
    error_type,
    source_hash,
)
from pysolate.tracing import attributes as A
from pysolate.tracing._interface import NULL_CLAIM, NULL_OBSERVATION, NULL_RUN


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    yield tp
    tp.shutdown()


def by_name(exporter: InMemorySpanExporter) -> dict[str, list[ReadableSpan]]:
    spans: dict[str, list[ReadableSpan]] = {}
    for span in exporter.get_finished_spans():
        spans.setdefault(span.name, []).append(span)
    return spans


def by_call_id(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    """Tool and claim spans by the Host's per-run call id (the exported id is prefixed with
    the run id, which every span of the run carries)."""
    found = {}
    for span in exporter.get_finished_spans():
        if (
            span.name == "pysolate.run"
            or not span.attributes
            or A.GEN_AI_TOOL_CALL_ID not in span.attributes
        ):
            continue
        prefix = f"{span.attributes[A.RUN_ID]}-"
        call_id = str(span.attributes[A.GEN_AI_TOOL_CALL_ID])
        assert call_id.startswith(prefix)
        found[call_id.removeprefix(prefix)] = span
    return found


SOURCE = 'a = docs.search("x")\nb = docs.search("y")\nworkspace.write_text("out", a)\n'


def drive_realistic_run(instrument: OTelInstrument) -> None:
    """A run as the Host drives it: two early reads (one claimed, one orphaned), a failing
    formal write, a program that raised."""
    run = instrument.run_started(run_id="run-1")
    run.snapshot_accepted(statements=1, new_statements=1, chars=21)
    p1 = run.observation_started(
        "docs",
        "search",
        call_id="p1",
        lane="speculative",
        effect="pure",
        call_key="k1",
        arguments={"query": "x"},
    )
    run.snapshot_accepted(statements=2, new_statements=1, chars=42)
    p2 = run.observation_started(
        "docs",
        "search",
        call_id="p2",
        lane="speculative",
        effect="pure",
        call_key="k2",
        arguments={"query": "z"},
    )
    p1.completed(result=["hit"])
    p2.completed(result=["other"])
    run.sealed(source_hash(SOURCE), statements=3, chars=len(SOURCE))
    claim = run.claimed(
        "docs", "search", call_id="c1", observation=p1, call_key="k1", arguments={"query": "x"}
    )
    claim.ended(result=["hit"])
    p1.settled("claimed")
    formal = run.observation_started(
        "workspace",
        "write_text",
        call_id="f1",
        lane="formal",
        effect="write",
        call_key="k3",
        arguments={"path": "out", "text": "hit"},
    )
    formal.completed(error=ToolFailure("PermissionError", "out: read-only"))
    p2.settled("orphaned")
    run.ended(
        "error",
        counts={"logical": 3, "physical": 3, "claimed": 1, "orphaned": 1},
        error_type="PermissionError",
    )


def test_realistic_run_names_kinds_and_parents(provider, exporter):
    drive_realistic_run(OTelInstrument(provider))
    spans = by_name(exporter)
    assert sorted((name, len(v)) for name, v in spans.items()) == [
        ("claim docs.search", 1),
        ("execute_tool docs.search", 2),
        ("execute_tool workspace.write_text", 1),
        ("pysolate.run", 1),
    ]
    assert all(s.kind is SpanKind.INTERNAL for s in exporter.get_finished_spans())
    (run,) = spans["pysolate.run"]
    assert run.parent is None
    for span in exporter.get_finished_spans():
        if span is not run:
            assert span.parent is not None and span.parent.span_id == run.context.span_id
            assert span.context.trace_id == run.context.trace_id


def test_run_span_carries_source_hash_status_counts_and_events(provider, exporter):
    drive_realistic_run(OTelInstrument(provider))
    (run,) = by_name(exporter)["pysolate.run"]
    attrs = dict(run.attributes or {})
    assert A.GEN_AI_OPERATION_NAME not in attrs  # a code run is not a GenAI operation
    assert attrs[A.RUN_ID] == "run-1"
    assert attrs[A.SOURCE_HASH] == source_hash(SOURCE)
    assert attrs[A.STATUS] == "error"
    assert attrs["pysolate.count.logical"] == 3
    assert attrs["pysolate.count.orphaned"] == 1
    assert run.status.status_code is StatusCode.ERROR
    assert attrs[A.ERROR_TYPE] == "PermissionError"
    assert [e.name for e in run.events] == [
        "pysolate.snapshot",
        "pysolate.snapshot",
        "pysolate.seal",
    ]
    assert run.events[1].attributes == {
        A.SNAPSHOT_STATEMENTS: 2,
        A.SNAPSHOT_NEW_STATEMENTS: 1,
        A.SNAPSHOT_CHARS: 42,
    }
    assert run.events[2].attributes[A.SOURCE_HASH] == source_hash(SOURCE)


def test_physical_spans_carry_genai_and_pysolate_attributes(provider, exporter):
    drive_realistic_run(OTelInstrument(provider))
    spans = by_call_id(exporter)
    assert dict(spans["p1"].attributes or {}) == {
        A.GEN_AI_OPERATION_NAME: "execute_tool",
        A.GEN_AI_TOOL_NAME: "docs.search",
        A.GEN_AI_TOOL_CALL_ID: "run-1-p1",
        A.GEN_AI_TOOL_TYPE: "function",
        A.CAPABILITY: "docs",
        A.METHOD: "search",
        A.RUN_ID: "run-1",
        A.CALL_KEY: "k1",
        A.LANE: "speculative",
        A.EFFECT: "pure",
        A.DISPOSITION: "claimed",
    }
    assert spans["p2"].attributes[A.DISPOSITION] == "orphaned"
    assert spans["f1"].attributes[A.LANE] == "formal"
    assert spans["f1"].attributes[A.EFFECT] == "write"
    assert A.DISPOSITION not in spans["f1"].attributes


def test_claim_span_links_to_the_physical_span_it_claimed(provider, exporter):
    drive_realistic_run(OTelInstrument(provider))
    spans = by_call_id(exporter)
    claim = spans["c1"]
    assert claim.name == "claim docs.search"
    assert A.GEN_AI_OPERATION_NAME not in claim.attributes  # not a second tool execution
    assert claim.attributes[A.CLAIMED_OBSERVATION] == "run-1-p1"
    (link,) = claim.links
    assert link.context.span_id == spans["p1"].context.span_id
    assert link.context.trace_id == spans["p1"].context.trace_id
    assert link.attributes == {A.LINK_RELATION: A.LINK_CLAIMS}
    assert not spans["p2"].links and not spans["f1"].links


def test_failure_is_error_but_orphaned_and_claimed_work_is_not(provider, exporter):
    drive_realistic_run(OTelInstrument(provider))
    spans = by_call_id(exporter)
    assert spans["f1"].status.status_code is StatusCode.ERROR
    assert spans["f1"].attributes[A.ERROR_TYPE] == "PermissionError"
    assert spans["f1"].status.description is None  # messages only on opt-in
    assert not spans["f1"].events  # no exception events: discouraged by the conventions
    for call_id in ("p1", "p2", "c1"):
        assert spans[call_id].status.status_code is StatusCode.UNSET
        assert A.ERROR_TYPE not in spans[call_id].attributes


def test_nothing_about_payloads_is_recorded_without_opt_in(provider, exporter):
    drive_realistic_run(OTelInstrument(provider))
    for span in exporter.get_finished_spans():
        keys = set(span.attributes or {})
        assert A.GEN_AI_TOOL_CALL_ARGUMENTS not in keys
        assert A.GEN_AI_TOOL_CALL_RESULT not in keys
        text = repr(dict(span.attributes or {}))
        assert '"x"' not in text and "hit" not in text and "read-only" not in text


def test_payloads_recorded_on_opt_in(provider, exporter):
    drive_realistic_run(OTelInstrument(provider, record_payloads=True))
    spans = by_call_id(exporter)
    assert spans["p1"].attributes[A.GEN_AI_TOOL_CALL_ARGUMENTS] == '{"query": "x"}'
    assert spans["p1"].attributes[A.GEN_AI_TOOL_CALL_RESULT] == '["hit"]'
    assert spans["c1"].attributes[A.GEN_AI_TOOL_CALL_RESULT] == '["hit"]'
    assert A.GEN_AI_TOOL_CALL_RESULT not in spans["f1"].attributes  # it failed
    assert spans["f1"].status.description == "PermissionError: out: read-only"


def test_payloads_are_bounded_and_tolerate_non_json_values(provider, exporter):
    run = OTelInstrument(provider, record_payloads=True).run_started(run_id="r")
    obs = run.observation_started(
        "ws",
        "read_bytes",
        call_id="p",
        lane="formal",
        effect="immutable_read",
        arguments={"path": "a", "blob": b"\x00\x01", "pair": (1, 2)},
    )
    obs.completed(result="y" * (MAX_PAYLOAD_CHARS * 2))
    run.ended("ok")
    span = by_call_id(exporter)["p"]
    assert span.attributes[A.GEN_AI_TOOL_CALL_ARGUMENTS] == (
        '{"path": "a", "blob": "b\'\\\\x00\\\\x01\'", "pair": [1, 2]}'
    )
    result = span.attributes[A.GEN_AI_TOOL_CALL_RESULT]
    assert len(result) == MAX_PAYLOAD_CHARS and result.endswith("[truncated]")


def test_early_span_lasts_the_execution_not_until_its_disposition(provider, exporter):
    """Claimed after completion: the span ends at the completion time."""
    run = OTelInstrument(provider).run_started(run_id="r")
    obs = run.observation_started("d", "m", call_id="p", lane="speculative", effect="pure")
    obs.completed()
    assert not exporter.get_finished_spans()  # still open: disposition not yet known
    claim = run.claimed("d", "m", call_id="c", observation=obs)
    claim.ended()
    obs.settled("claimed")
    run.ended("ok")
    spans = by_call_id(exporter)
    assert spans["p"].end_time <= spans["c"].start_time
    assert spans["p"].attributes[A.DISPOSITION] == "claimed"


def test_claim_while_early_work_still_runs_ends_at_its_completion(provider, exporter):
    run = OTelInstrument(provider).run_started(run_id="r")
    obs = run.observation_started("d", "m", call_id="p", lane="speculative", effect="pure")
    claim = run.claimed("d", "m", call_id="c", observation=obs)
    obs.settled("claimed")
    assert "p" not in by_call_id(exporter)
    obs.completed(error=KeyError("k"))
    claim.ended(error=KeyError("k"))
    run.ended("error", error_type="KeyError")
    spans = by_call_id(exporter)
    assert spans["p"].attributes[A.DISPOSITION] == "claimed"
    assert spans["p"].status.status_code is StatusCode.ERROR
    assert spans["c"].status.status_code is StatusCode.ERROR
    assert spans["c"].attributes[A.ERROR_TYPE] == "KeyError"
    assert spans["p"].end_time <= spans["c"].end_time


def test_cancelled_early_work_ends_at_once_and_is_not_an_error(provider, exporter, caplog):
    run = OTelInstrument(provider).run_started(run_id="r")
    obs = run.observation_started("d", "m", call_id="p", lane="speculative", effect="pure")
    obs.settled("cancelled")
    assert by_call_id(exporter)["p"].attributes[A.DISPOSITION] == "cancelled"
    with caplog.at_level(logging.WARNING, logger="pysolate.tracing"):
        obs.completed(error=asyncio.CancelledError())  # the cancellation arriving afterwards
    run.ended("ok")
    span = by_call_id(exporter)["p"]
    assert span.status.status_code is StatusCode.UNSET
    assert A.ERROR_TYPE not in span.attributes
    assert not caplog.records  # a hook on an ended span is expected, not misuse


def test_cancellation_exception_is_not_an_error(provider, exporter):
    run = OTelInstrument(provider).run_started(run_id="r")
    obs = run.observation_started("d", "m", call_id="p", lane="formal", effect="pure")
    obs.completed(error=asyncio.CancelledError())
    run.ended("aborted")
    span = by_call_id(exporter)["p"]
    assert span.status.status_code is StatusCode.UNSET
    (run_span,) = by_name(exporter)["pysolate.run"]
    assert run_span.attributes[A.ERROR_TYPE] == "_OTHER"


def test_late_work_ends_when_it_completes(provider, exporter):
    run = OTelInstrument(provider).run_started(run_id="r")
    obs = run.observation_started("d", "m", call_id="p", lane="speculative", effect="pure")
    obs.settled("late")
    assert "p" not in by_call_id(exporter)
    obs.completed()
    assert by_call_id(exporter)["p"].attributes[A.DISPOSITION] == "late"
    run.ended("ok")


def test_run_end_closes_every_open_span(provider, exporter):
    """Abandoned work (a thread still running, an unsettled result) never leaks a span."""
    run = OTelInstrument(provider).run_started(run_id="r")
    running = run.observation_started("d", "m", call_id="p1", lane="speculative", effect="pure")
    done = run.observation_started("d", "m", call_id="p2", lane="speculative", effect="pure")
    done.completed()
    claim = run.claimed("d", "m", call_id="c", observation=running)
    run.ended("aborted")
    assert set(by_call_id(exporter)) == {"p1", "p2", "c"}
    running.completed()  # the thread finishing after the run: recorded nowhere, no error
    claim.ended()
    assert len(exporter.get_finished_spans()) == 4


def test_misuse_is_ignored_and_logged_never_raised(provider, exporter, caplog):
    run = OTelInstrument(provider).run_started(run_id="r")
    formal = run.observation_started("d", "m", call_id="f", lane="formal", effect="write")
    early = run.observation_started("d", "m", call_id="p", lane="speculative", effect="pure")
    with caplog.at_level(logging.WARNING, logger="pysolate.tracing"):
        formal.settled("orphaned")  # formal work has no disposition
        early.completed()
        early.completed()  # twice
        early.settled("orphaned")
        early.settled("claimed")  # after it ended: ignored silently
    assert len(caplog.records) == 2
    formal.completed()
    run.ended("ok")
    assert A.DISPOSITION not in by_call_id(exporter)["f"].attributes
    assert by_call_id(exporter)["p"].attributes[A.DISPOSITION] == "orphaned"


def test_activated_observation_parents_the_tools_own_spans(provider, exporter):
    run = OTelInstrument(provider).run_started(run_id="r")
    obs = run.observation_started("d", "m", call_id="p", lane="formal", effect="pure")
    with obs.activated(), provider.get_tracer("tool").start_as_current_span("http GET"):
        pass
    obs.completed()
    run.ended("ok")
    (inner,) = by_name(exporter)["http GET"]
    assert inner.parent is not None
    assert inner.parent.span_id == by_call_id(exporter)["p"].context.span_id


def test_exception_inside_activated_is_reported_only_through_completed(provider, exporter):
    run = OTelInstrument(provider).run_started(run_id="r")
    obs = run.observation_started("d", "m", call_id="p", lane="formal", effect="pure")
    with pytest.raises(FileNotFoundError), obs.activated():
        raise FileNotFoundError("secret/path")
    obs.completed(error=FileNotFoundError("secret/path"))
    run.ended("ok")
    span = by_call_id(exporter)["p"]
    assert not span.events
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description is None
    assert span.attributes[A.ERROR_TYPE] == "FileNotFoundError"


def test_run_span_nests_under_the_callers_current_span(provider, exporter):
    with provider.get_tracer("agent").start_as_current_span("agent loop") as outer:
        run = OTelInstrument(provider).run_started(run_id="r")
    run.ended("ok")
    (span,) = by_name(exporter)["pysolate.run"]
    assert span.parent is not None and span.parent.span_id == outer.get_span_context().span_id


def test_agent_name_is_recorded_on_the_run_span(provider, exporter):
    OTelInstrument(provider, agent_name="coder").run_started(run_id="r").ended("ok")
    (span,) = exporter.get_finished_spans()
    assert span.name == "pysolate.run"
    assert span.attributes[A.GEN_AI_AGENT_NAME] == "coder"
    assert span.status.status_code is StatusCode.UNSET


def test_str_enums_from_host_and_scheduler_become_plain_strings(provider, exporter):
    class Disposition(enum.StrEnum):  # the shape of scheduler's Disposition
        ORPHANED = "orphaned"

    class Lane(enum.StrEnum):
        SPECULATIVE = "speculative"

    run = OTelInstrument(provider).run_started(run_id="r")
    obs = run.observation_started(
        "d", "m", call_id="p", lane=Lane.SPECULATIVE, effect=Effect.IMMUTABLE_READ
    )
    obs.completed()
    obs.settled(Disposition.ORPHANED)
    run.ended(RunStatus.OK)
    span = by_call_id(exporter)["p"]
    (run_span,) = by_name(exporter)["pysolate.run"]
    values = [
        span.attributes[A.LANE],
        span.attributes[A.EFFECT],
        span.attributes[A.DISPOSITION],
        run_span.attributes[A.STATUS],
    ]
    assert values == ["speculative", "immutable_read", "orphaned", "ok"]
    assert all(type(v) is str for v in values)
    assert run_span.status.status_code is StatusCode.UNSET


def test_error_type_names():
    class Custom(Exception):
        pass

    assert error_type(None) is None
    assert error_type(asyncio.CancelledError()) is None
    assert error_type(KeyboardInterrupt()) is None
    assert error_type(ValueError("v")) == "ValueError"
    assert error_type(ToolFailure("FileNotFoundError", "nope")) == "FileNotFoundError"
    assert error_type(Custom()) == f"{__name__}.test_error_type_names.<locals>.Custom"
    assert error_type("TimeoutError") == "TimeoutError"
    assert error_type("") == "_OTHER"


def test_source_hash_is_stable_and_short():
    assert source_hash("x = 1\n") == source_hash("x = 1\n")
    assert source_hash("x = 1\n") != source_hash("x = 2\n")
    assert len(source_hash("")) == 16


class CountingTracer:
    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer
        self.started = 0

    def start_span(self, *args, **kwargs):
        self.started += 1
        return self.tracer.start_span(*args, **kwargs)


def test_unsampled_run_costs_one_start_span_and_falls_back_to_null_hooks(exporter):
    tp = TracerProvider(sampler=ALWAYS_OFF)
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    instrument = OTelInstrument(tp)
    counting = CountingTracer(instrument._tracer)
    instrument._tracer = counting  # type: ignore[assignment]
    run = instrument.run_started(run_id="r")
    assert run is NULL_RUN
    obs = run.observation_started("d", "m", call_id="p", lane="speculative", effect="pure")
    run.claimed("d", "m", call_id="c", observation=obs).ended()
    run.ended("ok")
    assert counting.started == 1
    assert exporter.get_finished_spans() == ()


def test_no_sdk_configured_means_null_hooks():
    """The global provider with no SDK (the API's no-op) yields non-recording spans."""
    assert OTelInstrument(trace.NoOpTracerProvider()).run_started(run_id="r") is NULL_RUN


def _all_hooks(instrument) -> int:
    """One run's worth of hooks; returns how many hook calls it made."""
    run = instrument.run_started(run_id="r")
    run.snapshot_accepted(statements=1, new_statements=1, chars=10)
    obs = run.observation_started("d", "m", call_id="p", lane="speculative", effect="pure")
    with obs.activated():
        pass
    obs.completed(result=1)
    run.sealed("h", statements=1, chars=10)
    claim = run.claimed("d", "m", call_id="c", observation=obs)
    claim.ended(result=1)
    obs.settled("claimed")
    run.ended("ok", counts={"logical": 1})
    return 10


def test_null_instrument_costs_one_call_per_hook_and_allocates_nothing():
    """Counted, not timed: the profiler sees exactly the hook calls and nothing beneath."""
    calls: list[str] = []

    def profiler(frame, event, arg):
        if event == "call":
            calls.append(frame.f_code.co_name)
        elif event == "c_call":
            calls.append(getattr(arg, "__name__", "?"))

    sys.setprofile(profiler)
    try:
        hooks = _all_hooks(NULL_INSTRUMENT)
    finally:
        sys.setprofile(None)
    hook_calls = [c for c in calls if c not in ("_all_hooks", "setprofile")]
    # nullcontext's __enter__/__exit__ are the two calls beyond the hooks themselves.
    assert len(hook_calls) == hooks + 2, hook_calls
    run = NULL_INSTRUMENT.run_started(run_id="r")
    assert run is NULL_RUN
    assert (
        run.observation_started("d", "m", call_id="p", lane="formal", effect="pure")
        is NULL_OBSERVATION
    )
    assert run.claimed("d", "m", call_id="c", observation=NULL_OBSERVATION) is NULL_CLAIM

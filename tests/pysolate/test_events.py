"""The run's event stream: every recording is a listener, told the run in the documented order."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import anyio
import pytest

from pysolate import Effect, Host
from pysolate._report._progress import Progress, ProgressInstrument
from pysolate.testing import Script, in_process_guest, scripted_tool
from pysolate.tracing import NULL_RUN, Instrument, ObservationTrace, RunTrace
from pysolate.tracing import events as E

PROGRAM = "a = docs.search('a')\nb = docs.search('b')\nclock.now()\n[a, b]\n"


class Recording(E.Listener):
    def __init__(self, log: list[str] | None = None) -> None:
        self.events: list[E.Event] = []
        self.log = log if log is not None else []

    def received(self, event: E.Event) -> None:
        self.events.append(event)

    def activated(self, observation: ObservationTrace):
        @contextmanager
        def active() -> Iterator[None]:
            self.log.append(f"enter {id(self)}")
            yield
            self.log.append(f"exit {id(self)}")

        return active()


class Recorder(E.StreamInstrument):
    def __init__(self, count: int = 1) -> None:
        self.count = count
        self.runs: list[tuple[E.RunStarted, list[Recording]]] = []

    def listeners(self, started: E.RunStarted) -> tuple[E.Listener, ...]:
        log: list[str] = []
        made = [Recording(log) for _ in range(self.count)]
        self.runs.append((started, made))
        return tuple(made)


async def _chunks(text: str) -> AsyncIterator[str]:
    for i in range(0, len(text), 4):
        await anyio.sleep(0.001)
        yield text[i : i + 4]


def _host(instrument: Instrument) -> Host:
    host = Host(guest_factory=in_process_guest, instrument=instrument)
    host.register(
        "docs", scripted_tool(search=Script(lambda q: [q], effect=Effect.PURE, latency=0.01))
    )
    host.register("clock", scripted_tool(now=Script(lambda: 7, effect=Effect.LIVE_READ)))
    return host


def _assert_in_order(events: list[E.Event]) -> None:
    """The invariant of ``pysolate.tracing.events``, checked over one run's events."""
    assert isinstance(events[-1], E.RunEnded)
    assert not any(isinstance(e, E.RunEnded) for e in events[:-1])
    started: dict[int, E.ObservationStarted] = {}
    completed: set[int] = set()
    settled: set[int] = set()
    claims: set[int] = set()
    for event in events:
        match event:
            case E.ObservationStarted():
                started[id(event.observation)] = event
            case E.ObservationCompleted():
                assert id(event.observation) in started and id(event.observation) not in completed
                completed.add(id(event.observation))
            case E.ObservationSettled():
                assert started[id(event.observation)].early and id(event.observation) not in settled
                settled.add(id(event.observation))
            case E.Claimed():
                assert id(event.observation) in started
                claims.add(id(event.claim))
            case E.ClaimEnded():
                claims.remove(id(event.claim))


@pytest.mark.anyio
async def test_a_run_reaches_its_listener_as_events_in_the_documented_order() -> None:
    recorder = Recorder()
    result = await _host(recorder).run_stream(_chunks(PROGRAM))
    assert result.status == "ok"
    ((started, (listener,)),) = recorder.runs
    assert started.run_id == result.run_id
    events = listener.events
    _assert_in_order(events)
    kinds = [type(e).__name__ for e in events]
    assert (
        kinds.count("ObservationStarted") == 3
        and kinds.count("Claimed") == kinds.count("ClaimEnded") == 2
    )
    assert kinds.index("SnapshotAccepted") < kinds.index("Sealed")
    lanes = sorted(e.lane for e in events if isinstance(e, E.ObservationStarted))
    assert lanes == ["formal", "speculative", "speculative"]
    assert [e.disposition for e in events if isinstance(e, E.ObservationSettled)] == [
        "claimed",
        "claimed",
    ]
    ended = events[-1]
    assert (
        isinstance(ended, E.RunEnded)
        and ended.status == "ok"
        and ended.counts == result.report.counts()
    )


def test_hooks_out_of_order_never_reach_a_listener(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder()
    run = recorder.run_started(run_id="r")
    formal = run.observation_started("d", "m", call_id="f", lane="formal", effect="write")
    early = run.observation_started("d", "m", call_id="p", lane="speculative", effect="pure")
    with caplog.at_level(logging.WARNING, logger="pysolate.tracing"):
        formal.settled("orphaned")  # formal work has no disposition: logged
        early.completed()
        early.completed()  # twice: logged
        early.settled("orphaned")
        early.settled("claimed")  # after it ended: silent
        claim = run.claimed("d", "m", call_id="c", observation=early)
        claim.ended()
        claim.ended()
        run.ended("ok")
        formal.completed()  # after the run ended: silent
        run.snapshot_accepted(statements=1, new_statements=1, chars=1)
        assert (
            run.observation_started("d", "m", call_id="x", lane="formal", effect="pure")
            is not early
        )
        run.ended("ok")  # twice: logged
    assert len(caplog.records) == 3
    ((_, (listener,)),) = recorder.runs
    kinds = [type(e).__name__ for e in listener.events]
    assert kinds == ["ObservationStarted", "ObservationStarted", "ObservationCompleted", "ObservationSettled",
                     "Claimed", "ClaimEnded", "RunEnded"]  # fmt: skip


def test_a_run_no_listener_wants_costs_the_null_hooks() -> None:
    assert Recorder(count=0).run_started(run_id="r") is NULL_RUN


def test_every_listener_is_current_while_the_tool_runs() -> None:
    recorder = Recorder(count=2)
    run = recorder.run_started(run_id="r")
    obs = run.observation_started("d", "m", call_id="p", lane="formal", effect="pure")
    with obs.activated():
        pass
    ((_, (first, second)),) = recorder.runs
    assert first.log == [
        f"enter {id(first)}",
        f"enter {id(second)}",
        f"exit {id(second)}",
        f"exit {id(first)}",
    ]


class HookStyle(Instrument):
    """An instrument written against the hooks, not the events."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def run_started(
        self, *, run_id: str, agent_name: str | None = None, isolation: str | None = None
    ) -> RunTrace:
        calls = self.calls

        class Obs(ObservationTrace):
            def completed(self, *, error=None, result=None) -> None:
                calls.append(f"completed {result}")

            def settled(self, disposition: str) -> None:
                calls.append(f"settled {disposition}")

        class Run(RunTrace):
            def observation_started(
                self, capability: str, method: str, **kw: object
            ) -> ObservationTrace:
                calls.append(f"started {kw['lane']}")
                return Obs()

            def ended(self, status: str, **kw: object) -> None:
                calls.append(f"ended {status}")

        calls.append("run")
        return Run()


@pytest.mark.anyio
async def test_a_hook_style_instrument_records_beside_another_listener() -> None:
    """``listeners_of`` drives any ``Instrument``'s hooks from the events (``HookListener``)."""
    hooks, progress = HookStyle(), Progress("pysolate")
    result = await _host(ProgressInstrument(hooks, progress)).run_stream(_chunks(PROGRAM))
    assert result.status == "ok" and progress.claims == 2 and progress.status == "ok"
    assert hooks.calls[0] == "run" and hooks.calls[-1] == "ended ok"
    assert sorted(c for c in hooks.calls if c.startswith("started")) == ["started formal", "started speculative",
                                                                         "started speculative"]  # fmt: skip
    assert hooks.calls.count("settled claimed") == 2 and hooks.calls.count("completed 7") == 1


def test_a_call_served_by_an_untraced_run_is_recorded_without_a_link() -> None:
    """``served_by`` may be another run's null handle (that run was not sampled)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from pysolate.tracing import NULL_INSTRUMENT, OTelInstrument
    from pysolate.tracing import attributes as A

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    untraced = NULL_INSTRUMENT.run_started(run_id="r0").observation_started(
        "d", "m", call_id="p", lane="speculative", effect="pure"
    )
    run = OTelInstrument(provider).run_started(run_id="r1")
    shared = run.observation_started(
        "d",
        "m",
        call_id="p",
        lane="speculative",
        effect="pure",
        shared_from="r0",
        served_by=untraced,
    )
    shared.completed(result=1)
    shared.settled("claimed")
    run.ended("ok")
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "shared d.m"]
    assert (
        span.attributes[A.SHARED_FROM] == "r0"
        and A.SERVED_BY not in span.attributes
        and not span.links
    )

"""The timeline and the observation records of a run are listeners of its event stream: they
equal what was built from the closed lane and the receipts before, a listener given the
events of a run again reproduces them, and a run no other listener follows keeps the null
hooks at its call sites."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from test_branch_writes import FILES as BRANCH_FILES
from test_branch_writes import PROGRAM as BRANCH_PROGRAM
from test_branch_writes import R, SlowWorkspace, Stream, W, script
from test_sharing import make_host, run_many

from occurrences import tool_name
from pysolate import Effect, Host, RunResult
from pysolate._report._result import ObservationRecord
from pysolate._report._timeline import Bar
from pysolate._run._run import Run
from pysolate._run._run_record import RecordsListener, TimelineListener
from pysolate.testing import Script, in_process_guest, scripted_tool
from pysolate.tracing import NULL_RUN, Instrument
from pysolate.tracing import events as E

pytestmark = pytest.mark.anyio

PROGRAM = "a = docs.search('a')\nb = docs.search('b')\nn = clock.now()\n[a, b, n]\n"


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[Run]:
    """Every ``Run`` made while the test runs, to read its lane and scope afterwards."""
    made: list[Run] = []
    init = Run.__init__

    def keep(self: Run, *args: object, **kwargs: object) -> None:
        init(self, *args, **kwargs)  # type: ignore[arg-type]
        made.append(self)

    monkeypatch.setattr(Run, "__init__", keep)
    return made


def _host(instrument: Instrument | None = None) -> Host:
    host = Host(guest_factory=in_process_guest, instrument=instrument)
    host.register(
        "docs", scripted_tool(search=Script(lambda q: [q], effect=Effect.PURE, latency=0.01))
    )
    host.register("clock", scripted_tool(now=Script(lambda: 7, effect=Effect.LIVE_READ)))
    return host


async def _chunks(text: str) -> AsyncIterator[str]:
    for i in range(0, len(text), 5):
        await anyio.sleep(0.001)
        yield text[i : i + 5]


def _old_observations(run: Run) -> tuple[ObservationRecord, ...]:
    """``RunResult.observations`` as ``_run_record.observations`` built it from the lane."""
    lane, base = run.lane, run.scope.started_at
    dispositions = lane.dispositions()
    return tuple(
        ObservationRecord(
            id=obs.id,
            capability=obs.key.capability,
            method=obs.key.method,
            lane=obs.lane,
            key=obs.key,
            physical=obs.physical,
            claims=obs.claims,
            disposition=dispositions[obs.id].value if obs.id in dispositions else None,
            started=None if obs.started is None else obs.started - base,
            ended=None if obs.finished is None else obs.finished - base,
            layer=obs.layer,
            shared_from=obs.shared_from,
        )
        for obs in lane.observations()
    )


def _old_end_lanes(run: Run) -> tuple[list[Bar], list[Bar]]:
    """The early work's bars and the calls' bars, as ``_run_record.draw`` drew them from the
    lane and the receipts at the end of the run."""
    lane, scope = run.lane, run.scope
    base, dispositions = scope.started_at, lane.dispositions()
    early = []
    for obs in lane.observations():
        if obs.lane != "speculative" or obs.started is None:
            continue
        end = obs.finished if obs.finished is not None else obs.started
        label = tool_name(obs.key.capability, obs.key.method) + (
            "" if obs.layer is None else f" (layer {obs.layer})"
        )
        kind = dispositions[obs.id].value
        if obs.shared_from is not None:
            label, kind = f"{label} (run {obs.shared_from[:8]})", "shared"
        early.append(
            Bar("speculative", label, obs.started - base, max(obs.started - base, end - base), kind)
        )
    calls = []
    for call in scope.calls:
        label = tool_name(call.capability, call.method)
        if call.lane == "claimed":
            calls.append(Bar("claims", label, call.started, max(call.started, call.ended), "claim"))
        elif call.shared_from is not None:
            calls.append(
                Bar(
                    "guest",
                    f"{label} (run {call.shared_from[:8]})",
                    call.started,
                    max(call.started, call.ended),
                    "shared",
                )
            )
        else:
            calls.append(Bar("guest", label, call.started, max(call.started, call.ended), "formal"))
    return early, calls


def assert_as_before(run: Run, result: RunResult) -> None:
    """The result's timeline and records equal the old construction's from the same run."""
    assert result.observations == _old_observations(run)
    timeline = result.timeline
    assert timeline is not None
    early, calls = _old_end_lanes(run)
    stream = list(timeline.lane("stream"))
    guest = [b for b in timeline.bars if b.kind == "guest"]
    assert list(timeline.bars) == [*stream, *early, *guest, *calls]
    assert len(stream) == 1  # (none of these streams is cut: each is read to its end)
    if result.guest_status is not None:
        (bar,) = guest
        assert bar.end - bar.start == result.report.guest_seconds and bar.label == "sealed program"
    else:
        assert guest == []
    assert timeline.end == result.report.wall_seconds
    kinds = [m.kind for m in timeline.marks]
    sealed = result.status != "rejected"
    assert kinds == ["snapshot"] * (len(kinds) - sealed) + ["seal"] * sealed


async def test_a_streamed_run_speculating(runs: list[Run]) -> None:
    result = await _host().run_stream(_chunks(PROGRAM))
    assert result.status == "ok" and result.report.claimed == 2
    assert_as_before(runs[-1], result)


@pytest.mark.parametrize("speculate", [True, False])
async def test_a_whole_source(runs: list[Run], speculate: bool) -> None:
    result = await _host().run_source(PROGRAM, speculate=speculate)
    assert result.status == "ok" and (result.report.claimed == 2) is speculate
    assert_as_before(runs[-1], result)


@pytest.mark.parametrize("source", ["x = (\n", "return 1\n"])
async def test_a_rejected_source(runs: list[Run], source: str) -> None:
    result = await _host().run_stream(_chunks(source))
    assert result.status == "rejected"
    assert_as_before(runs[-1], result)


async def test_runs_sharing_a_call(runs: list[Run]) -> None:
    host, _ = make_host()
    results = await run_many(host, "a = docs.search('x')\n" + "# thinking\n" * 4 + "a\n", 2)
    assert any(c.shared_from for r in results for c in r.calls)
    by_id = {run.run_id: run for run in runs}
    for result in results:
        assert_as_before(by_id[result.run_id], result)


async def test_early_writes_on_branch_layers(runs: list[Run]) -> None:
    guest = script((W, "a.txt", "one"), (R, "a.txt"), (W, "b.txt", "OTHER"))
    host = Host(guest_factory=guest)
    host.register("workspace", SlowWorkspace.from_files(BRANCH_FILES))
    result = await host.run_stream(Stream(BRANCH_PROGRAM + "\n"))
    assert any(o.layer is not None for o in result.observations)
    assert_as_before(runs[-1], result)


class Recording(E.Listener):
    def __init__(self) -> None:
        self.events: list[E.Event] = []

    def received(self, event: E.Event) -> None:
        self.events.append(event)


class Recorder(E.StreamInstrument):
    def __init__(self) -> None:
        self.made: list[Recording] = []

    def listeners(self, started: E.RunStarted) -> tuple[E.Listener, ...]:
        self.made.append(Recording())
        return (self.made[-1],)


RECORD = (E.ObservationRecorded, E.CallsRecorded)


@pytest.mark.parametrize("whole", [False, True])
async def test_a_listener_given_a_runs_events_again_draws_the_same_timeline_and_records(
    runs: list[Run], whole: bool
) -> None:
    recorder = Recorder()
    host = _host(recorder)
    result = await (host.run_source(PROGRAM) if whole else host.run_stream(_chunks(PROGRAM)))
    assert result.status == "ok" and result.report.claimed == 2
    (recording,) = recorder.made
    timeline, records = TimelineListener(), RecordsListener()
    for event in recording.events:
        timeline.received(event)
        records.received(event)
    assert timeline.timeline() == result.timeline and records.observations() == result.observations
    assert_as_before(runs[-1], result)
    assert runs[-1].scope.trace is runs[-1].stream  # a listener follows calls: they are reported
    # The record comes last before the end, after every call's events.
    kinds = [type(e) for e in recording.events]
    first = next(i for i, kind in enumerate(kinds) if kind in RECORD)
    assert all(kind in RECORD for kind in kinds[first:-1]) and kinds[-1] is E.RunEnded
    assert (
        kinds[first:-1].count(E.ObservationRecorded) == len(result.observations)
        and kinds[-2] is E.CallsRecorded
    )
    assert kinds.index(E.GuestStarted) < kinds.index(E.GuestEnded) < first
    assert kinds.index(E.TokensArrived) < kinds.index(E.Sealed) < kinds.index(E.GuestStarted)


async def test_an_untraced_run_gives_its_call_sites_the_null_hooks(runs: list[Run]) -> None:
    """Its own listeners read only the record: no event is made per call."""
    result = await _host().run_stream(_chunks(PROGRAM))
    assert result.status == "ok" and result.report.claimed == 2
    (run,) = runs
    assert run.stream.followers == () and run.scope.trace is NULL_RUN
    assert_as_before(run, result)

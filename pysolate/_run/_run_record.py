"""What a run leaves behind, derived from its event stream: the timeline and the records of
its physical observations are two listeners of it (``TimelineListener``,
``RecordsListener``), beside the Host's (OpenTelemetry spans, progress).

Neither follows calls (``Listener.follows_calls``): what they draw and keep of the run's
work comes from its record, which ``record`` emits once the lane closed (one
``ObservationRecorded`` per observation of the lane, then the receipts in one
``CallsRecorded``), so an untraced run makes no event per call. The rest comes as it happens:
the accepted snapshots, the tokens, the seal, the Guest's start and end, the run's end.

Also here: how the trace of a run that raises instead of returning a result ends
(``account_interrupted``), and how early work's traces get their dispositions.
"""

from __future__ import annotations

from collections.abc import Sequence

from occurrences import tool_name
from scheduler import SpeculativeLane

from .._calls._broker import RunScope
from .._report._result import ObservationRecord
from .._report._timeline import Timeline, TimelineRecorder
from ..tracing import RunTrace
from ..tracing.events import (
    CallsRecorded,
    Event,
    EventStream,
    GuestEnded,
    GuestStarted,
    Listener,
    ObservationRecorded,
    RecordedCall,
    RunEnded,
    Sealed,
    SnapshotAccepted,
    TokensArrived,
)


def record(
    stream: EventStream, lane: SpeculativeLane, base: float, calls: Sequence[RecordedCall]
) -> None:
    """Emit the run's record into ``stream``: each observation of the closed ``lane`` with
    its final disposition (its times made relative to ``base``, the run's start), then the
    receipts of its ``calls``."""
    dispositions = lane.dispositions()
    for obs in lane.observations():
        disposition = dispositions.get(obs.id)
        stream.report(
            ObservationRecorded(
                obs.id,
                obs.key.capability,
                obs.key.method,
                obs.lane,
                obs.key,
                obs.physical,
                obs.claims,
                None if disposition is None else disposition.value,
                None if obs.started is None else obs.started - base,
                None if obs.finished is None else obs.finished - base,
                obs.layer,
                obs.shared_from,
            )
        )
    stream.report(CallsRecorded(calls))


class TimelineListener(Listener):
    """Draws the run's ``Timeline`` (``pysolate._report._timeline``) from its events.

    Lanes are drawn row by row in the order bars are added: the tokens, the early work, the
    sealed program, then the calls it made, which is why the Guest's bar waits for the
    receipts (it is the first row of the ``guest`` lane)."""

    __slots__ = ("_end", "_guest", "_guest_started", "_recorder")
    follows_calls = False

    def __init__(self) -> None:
        self._recorder = TimelineRecorder()
        self._guest_started: float | None = None
        self._guest: tuple[float, float] | None = None
        self._end = 0.0

    def received(self, event: Event) -> None:
        match event:  # (the run's record first: an event per observation)
            case ObservationRecorded(lane="speculative"):
                self._early(event)
            case CallsRecorded():
                self._calls(event)
            case SnapshotAccepted() if event.at is not None:
                self._recorder.mark(
                    "stream", f"{event.statements} statements", event.at, "snapshot"
                )
            case TokensArrived():
                self._recorder.bar("stream", "tokens", event.first, event.last, "stream")
            case Sealed() if event.at is not None:
                self._recorder.mark("stream", "sealed", event.at, "seal")
            case GuestStarted():
                self._guest_started = event.at
            case GuestEnded() if self._guest_started is not None:
                self._guest = (self._guest_started, event.at)
            case RunEnded() if event.at is not None:
                self._end = event.at

    def _early(self, event: ObservationRecorded) -> None:
        started, kind = event.started, event.disposition
        if started is None or kind is None:  # (cancelled before it started: never ran)
            return
        end = event.ended if event.ended is not None else started
        label = tool_name(event.capability, event.method)
        if event.layer is not None:
            label += f" (layer {event.layer})"
        if event.shared_from is not None:
            label, kind = f"{label} (run {event.shared_from[:8]})", "shared"
        self._recorder.bar("speculative", label, started, end, kind)

    def _calls(self, event: CallsRecorded) -> None:
        timeline = self._recorder
        if self._guest is not None:
            timeline.bar("guest", "sealed program", *self._guest, "guest")
        for call in event.calls:
            label = tool_name(call.capability, call.method)
            if call.lane == "claimed":
                timeline.bar("claims", label, call.started, call.ended, "claim")
            elif call.shared_from is not None:
                timeline.bar(
                    "guest",
                    f"{label} (run {call.shared_from[:8]})",
                    call.started,
                    call.ended,
                    "shared",
                )
            else:
                timeline.bar("guest", label, call.started, call.ended, "formal")

    def timeline(self) -> Timeline:
        """The picture so far (the whole run's once it ended)."""
        return self._recorder.freeze(self._end)


class RecordsListener(Listener):
    """Keeps ``RunResult.observations``: one ``ObservationRecord`` per recorded observation."""

    __slots__ = ("_records",)
    follows_calls = False

    def __init__(self) -> None:
        self._records: list[ObservationRecord] = []

    def received(self, event: Event) -> None:
        if type(event) is ObservationRecorded:
            self._records.append(
                ObservationRecord(
                    id=event.id,
                    capability=event.capability,
                    method=event.method,
                    lane=event.lane,
                    key=event.key,
                    physical=event.physical,
                    claims=event.claims,
                    disposition=event.disposition,
                    started=event.started,
                    ended=event.ended,
                    layer=event.layer,
                    shared_from=event.shared_from,
                )
            )

    def observations(self) -> tuple[ObservationRecord, ...]:
        return tuple(self._records)


def account_interrupted(
    trace: RunTrace, scope: RunScope, lane: SpeculativeLane | None, exc: BaseException
) -> None:
    """End the trace of a run that raises instead of returning a result (the caller
    cancelled it; a Host bug): the lane is closed by now, so every early observation gets
    its disposition on its span, and every formal call started has its span (an
    interrupted one also an ``unknown`` receipt in the scope). The run span ends
    ``aborted`` with the counts and the exception's type."""
    early = lane.observations() if lane is not None else []
    counts = {
        "logical": len(scope.calls),
        "physical": scope.physical
        + sum(1 for o in early if o.lane == "speculative" and o.physical),
    }
    if lane is not None:
        settle_traces(scope, lane)
        stats = lane.statistics()
        counts.update(cancelled=stats.cancelled, late=stats.late, orphaned=stats.orphaned)
    trace.ended("aborted", counts=counts, error_type=type(exc).__name__)


def settle_traces(scope: RunScope, lane: SpeculativeLane) -> None:
    for obs_id, disposition in lane.dispositions().items():
        span = scope.early_traces.get(obs_id)
        if span is not None:
            span.settled(disposition.value)

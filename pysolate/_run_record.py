"""What a speculating run leaves behind once its lane closed: the timeline's lanes known only
at the end, the records of its physical observations, and the dispositions on their traces.

Split from ``_stream_run`` so the run's coordination (stream, lane, seal, Guest) stays one
readable module; these read the closed lane and the run's scope and build nothing else.
"""

from __future__ import annotations

from occurrences import tool_name
from scheduler import SpeculativeLane

from ._broker import RunScope
from ._result import ObservationRecord
from ._timeline import TimelineRecorder
from .tracing import RunTrace


def draw(
    timeline: TimelineRecorder,
    lane: SpeculativeLane,
    scope: RunScope,
    guest_started: float | None,
    guest_ended: float | None,
) -> None:
    """Add the lanes known only at the end: early work with dispositions, Guest, claims.
    Work another run's physical call served (``shared_from``) is drawn as ``shared`` and
    names that run."""
    base = scope.started_at
    dispositions = lane.dispositions()
    for obs in lane.observations():
        if obs.lane != "speculative" or obs.started is None:
            continue
        end = obs.finished if obs.finished is not None else obs.started
        label = tool_name(obs.key.capability, obs.key.method) + ("" if obs.layer is None else f" (layer {obs.layer})")
        kind = dispositions[obs.id].value
        if obs.shared_from is not None:
            label, kind = f"{label} (run {obs.shared_from[:8]})", "shared"
        timeline.bar("speculative", label, obs.started - base, end - base, kind)
    if guest_started is not None and guest_ended is not None:
        timeline.bar("guest", "sealed program", guest_started, guest_ended, "guest")
    for call in scope.calls:
        label = tool_name(call.capability, call.method)
        if call.lane == "claimed":
            timeline.bar("claims", label, call.started, call.ended, "claim")
        elif call.shared_from is not None:
            timeline.bar("guest", f"{label} (run {call.shared_from[:8]})", call.started, call.ended, "shared")
        else:
            timeline.bar("guest", label, call.started, call.ended, "formal")


def observations(lane: SpeculativeLane, base: float) -> tuple[ObservationRecord, ...]:
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


def account_interrupted(trace: RunTrace, scope: RunScope, lane: SpeculativeLane | None, exc: BaseException) -> None:
    """End the trace of a run that raises instead of returning a result (the caller
    cancelled it; a Host bug): the lane is closed by now, so every early observation gets
    its disposition on its span, and every formal call started has its span (an
    interrupted one also an ``unknown`` receipt in the scope). The run span ends
    ``aborted`` with the counts and the exception's type."""
    early = lane.observations() if lane is not None else []
    counts = {"logical": len(scope.calls), "physical": scope.physical + sum(1 for o in early if o.lane == "speculative" and o.physical)}
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


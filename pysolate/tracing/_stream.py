"""The event stream of a run: the hooks the Host calls, turned into events for listeners.

``StreamInstrument`` is the instrument every recording builds on: when a run starts it asks
for the run's listeners, and hands back the null run when there are none (an unsampled
OpenTelemetry run costs no more than that question). Otherwise the run is an
``EventStream``: each hook becomes one event of ``_events.py``, checked against the
lifecycle there (one transition function, ``_next_phase``) and given to every listener in
turn (the events of a call to those that follow calls). A listener is thus never told about
a hook out of order, and never has to check.

A run owns one stream (``stream_of``): its own listeners (the timeline, the observation
records) beside those of the trace the Host's instrument started. The run's call sites are
given ``for_calls``: the stream when a listener follows calls, else the null hooks, so an
untraced run pays for its record at its end and for nothing per call.

A hook out of order is ignored and logged, never raised: a tracing mistake must never
change a run's outcome. Hooks after the run ended are expected (a tool thread finishing
late) and ignored silently.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext

from ._events import (
    CallsRecorded,
    Claimed,
    ClaimEnded,
    Event,
    GuestEnded,
    GuestStarted,
    Listener,
    ObservationCompleted,
    ObservationRecorded,
    ObservationSettled,
    ObservationStarted,
    RunEnded,
    RunStarted,
    Sealed,
    SnapshotAccepted,
    TokensArrived,
)
from ._interface import (
    NO_RESULT,
    NULL_CLAIM,
    NULL_OBSERVATION,
    NULL_RUN,
    ClaimTrace,
    Disposition,
    Instrument,
    Lane,
    ObservationTrace,
    RunTrace,
)

_log = logging.getLogger("pysolate.tracing")
_NO_CONTEXT: AbstractContextManager[object] = nullcontext()  # reusable: it holds no state


class _Phase(enum.Enum):
    """Lifecycle of one observation."""

    RUNNING = enum.auto()
    """Executing; disposition unknown."""
    COMPLETED = enum.auto()
    """Early work finished; it waits for its disposition."""
    SETTLED = enum.auto()
    """Early work has its disposition (e.g. claimed) but is still executing."""
    ENDED = enum.auto()


class _Move(enum.Enum):
    COMPLETE = enum.auto()
    SETTLE = enum.auto()


def _next_phase(phase: _Phase, move: _Move, *, early: bool) -> _Phase | None:
    """The one transition function of observations; None for an illegal move."""
    if move is _Move.COMPLETE:
        if phase is _Phase.RUNNING:
            return _Phase.COMPLETED if early else _Phase.ENDED
        if phase is _Phase.SETTLED:
            return _Phase.ENDED
        return None
    if not early:
        return None
    if phase is _Phase.RUNNING:
        return _Phase.SETTLED
    if phase is _Phase.COMPLETED:
        return _Phase.ENDED
    return None


class _StreamObservation(ObservationTrace):
    __slots__ = ("_early", "_phase", "_stream")

    def __init__(self, stream: EventStream, *, early: bool) -> None:
        self._stream = stream
        self._early = early
        self._phase = _Phase.RUNNING

    def activated(self) -> AbstractContextManager[object]:
        return self._stream.activated(self)

    def _move(self, move: _Move, what: str) -> bool:
        if self._stream.closed:
            return False
        nxt = _next_phase(self._phase, move, early=self._early)
        if nxt is None:
            if self._phase is not _Phase.ENDED:  # hooks after the observation ended are expected
                _log.warning(
                    "tracing: %s ignored on %s observation in phase %s",
                    what,
                    "early" if self._early else "formal",
                    self._phase.name,
                )
            return False
        self._phase = nxt
        return True

    def completed(
        self, *, error: BaseException | str | None = None, result: object = NO_RESULT
    ) -> None:
        if self._move(_Move.COMPLETE, "completed"):
            self._stream.emit_call(ObservationCompleted(self, error, result))

    def settled(self, disposition: Disposition) -> None:
        was_running = self._phase is _Phase.RUNNING
        if self._move(_Move.SETTLE, "settled"):
            if was_running and disposition == "cancelled":
                self._phase = _Phase.ENDED  # its completion, if it comes, is not reported
            self._stream.emit_call(ObservationSettled(self, disposition))


class _StreamClaim(ClaimTrace):
    __slots__ = ("_ended", "_stream")

    def __init__(self, stream: EventStream) -> None:
        self._stream = stream
        self._ended = False

    def ended(
        self, *, error: BaseException | str | None = None, result: object = NO_RESULT
    ) -> None:
        if not self._ended and not self._stream.closed:
            self._ended = True
            self._stream.emit_call(ClaimEnded(self, error, result))


class EventStream(RunTrace):
    """One run's hooks as events, in order, to ``listeners`` (see ``_events.py``); the
    events of a call to ``followers`` only, those of them that follow calls."""

    __slots__ = ("closed", "followers", "listeners", "started")

    def __init__(self, started: RunStarted, listeners: tuple[Listener, ...]) -> None:
        self.started = started
        self.listeners = listeners
        self.followers = tuple(li for li in listeners if li.follows_calls)
        self.closed = False

    @property
    def for_calls(self) -> RunTrace:
        """What the run's call sites report to: this stream, or the null hooks when no
        listener follows calls (the broker then takes its untraced path)."""
        return self if self.followers else NULL_RUN

    def emit(self, event: Event) -> None:
        for listener in self.listeners:
            listener.received(event)

    def emit_call(self, event: Event) -> None:
        for listener in self.followers:
            listener.received(event)

    def report(
        self, event: TokensArrived | GuestStarted | GuestEnded | ObservationRecorded | CallsRecorded
    ) -> None:
        """An event the run states itself (no hook carries it), unless the run ended."""
        if not self.closed:
            self.emit(event)

    def activated(self, observation: ObservationTrace) -> AbstractContextManager[object]:
        contexts = [
            c for c in (li.activated(observation) for li in self.followers) if c is not None
        ]
        if not contexts:
            return _NO_CONTEXT
        if len(contexts) == 1:
            return contexts[0]
        return _all_of(contexts)

    def snapshot_accepted(
        self, *, statements: int, new_statements: int, chars: int, at: float | None = None
    ) -> None:
        if not self.closed:
            self.emit(SnapshotAccepted(statements, new_statements, chars, at))

    def sealed(
        self, source_hash: str, *, statements: int, chars: int, at: float | None = None
    ) -> None:
        if not self.closed:
            self.emit(Sealed(source_hash, statements, chars, at))

    def observation_started(
        self,
        capability: str,
        method: str,
        *,
        call_id: str,
        lane: Lane,
        effect: str,
        call_key: str | None = None,
        arguments: Mapping[str, object] | None = None,
        shared_from: str | None = None,
        served_by: ObservationTrace | None = None,
    ) -> ObservationTrace:
        if self.closed or not self.followers:
            return NULL_OBSERVATION
        event = ObservationStarted(
            _StreamObservation(self, early=lane != "formal"),
            capability,
            method,
            call_id,
            lane,
            effect,
            call_key,
            arguments,
            shared_from,
            served_by,
        )
        self.emit_call(event)
        return event.observation

    def claimed(
        self,
        capability: str,
        method: str,
        *,
        call_id: str,
        observation: ObservationTrace,
        call_key: str | None = None,
        arguments: Mapping[str, object] | None = None,
    ) -> ClaimTrace:
        if self.closed or not self.followers:
            return NULL_CLAIM
        claim = _StreamClaim(self)
        self.emit_call(
            Claimed(claim, capability, method, call_id, observation, call_key, arguments)
        )
        return claim

    def ended(
        self,
        status: str,
        *,
        counts: Mapping[str, int] | None = None,
        error_type: str | None = None,
        at: float | None = None,
    ) -> None:
        if self.closed:
            _log.warning("tracing: run ended twice")
            return
        self.closed = True
        self.emit(RunEnded(status, counts, error_type, at))


@contextmanager
def _all_of(contexts: list[AbstractContextManager[object]]) -> Iterator[None]:
    with ExitStack() as stack:
        for context in contexts:
            stack.enter_context(context)
        yield


class StreamInstrument(Instrument):
    """An instrument whose runs are event streams: ``listeners`` says who receives a run.

    Subclasses override ``listeners``; returning none declines the run, which then costs
    the null hooks only."""

    __slots__ = ()

    def listeners(self, started: RunStarted) -> tuple[Listener, ...]:
        """The listeners of the run ``started`` describes (none: it is not recorded)."""
        return ()

    def run_started(
        self, *, run_id: str, agent_name: str | None = None, isolation: str | None = None
    ) -> RunTrace:
        started = RunStarted(run_id, agent_name, isolation)
        listeners = self.listeners(started)
        return EventStream(started, listeners) if listeners else NULL_RUN


def stream_of(trace: RunTrace, listeners: tuple[Listener, ...], run_id: str) -> EventStream:
    """Run ``run_id``'s one stream: ``listeners`` (the run's own) beside those of ``trace``,
    the trace the Host's instrument started (an ``EventStream``'s listeners; a hook-style
    trace driven from the events, ``HookListener``; none for the null run)."""
    if isinstance(trace, EventStream):
        return EventStream(trace.started, (*listeners, *trace.listeners))
    started = RunStarted(run_id)
    if trace is NULL_RUN:
        return EventStream(started, listeners)
    return EventStream(started, (*listeners, HookListener(trace)))


def listeners_of(instrument: Instrument, started: RunStarted) -> tuple[Listener, ...]:
    """``instrument``'s listeners of a run, so another instrument can share the run with it:
    its own, or its hooks driven from the events (``HookListener``)."""
    if isinstance(instrument, StreamInstrument):
        return instrument.listeners(started)
    run = instrument.run_started(
        run_id=started.run_id, agent_name=started.agent_name, isolation=started.isolation
    )
    return () if run is NULL_RUN else (HookListener(run),)


class HookListener(Listener):
    """Drives a hook-style ``RunTrace`` (any ``Instrument``'s) from a run's events.

    ``served_by`` reaches it only when it traced the serving call itself (in this run)."""

    __slots__ = ("_claims", "_observations", "_run")

    def __init__(self, run: RunTrace) -> None:
        self._run = run
        self._observations: dict[ObservationTrace, ObservationTrace] = {}
        self._claims: dict[ClaimTrace, ClaimTrace] = {}

    def activated(self, observation: ObservationTrace) -> AbstractContextManager[object] | None:
        inner = self._observations.get(observation)
        return None if inner is None else inner.activated()

    def received(self, event: Event) -> None:
        run = self._run
        match event:
            case ObservationStarted():
                served_by = (
                    None if event.served_by is None else self._observations.get(event.served_by)
                )
                self._observations[event.observation] = run.observation_started(
                    event.capability,
                    event.method,
                    call_id=event.call_id,
                    lane=event.lane,
                    effect=event.effect,
                    call_key=event.call_key,
                    arguments=event.arguments,
                    shared_from=event.shared_from,
                    served_by=served_by,
                )
            case ObservationCompleted():
                self._observations[event.observation].completed(
                    error=event.error, result=event.result
                )
            case ObservationSettled():
                self._observations[event.observation].settled(event.disposition)
            case Claimed():
                self._claims[event.claim] = run.claimed(
                    event.capability,
                    event.method,
                    call_id=event.call_id,
                    observation=self._observations.get(event.observation, NULL_OBSERVATION),
                    call_key=event.call_key,
                    arguments=event.arguments,
                )
            case ClaimEnded():
                self._claims.pop(event.claim).ended(error=event.error, result=event.result)
            case SnapshotAccepted():
                run.snapshot_accepted(
                    statements=event.statements,
                    new_statements=event.new_statements,
                    chars=event.chars,
                )
            case Sealed():
                run.sealed(event.source_hash, statements=event.statements, chars=event.chars)
            case RunEnded():
                run.ended(event.status, counts=event.counts, error_type=event.error_type)

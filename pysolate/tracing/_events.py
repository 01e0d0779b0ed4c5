"""A run's lifecycle as typed events: the one stream every recording of a run derives from.

The Host reports a run through the hooks of ``_interface.py``; a ``StreamInstrument``
(``_stream.py``) turns each hook into one frozen event below and hands it, in order, to every
``Listener`` of the run: OpenTelemetry spans (``_otel.py``), live progress
(``pysolate._report._progress``), any hook-style ``Instrument`` (``HookListener``). The run itself
adds its own listeners (the timeline and the observation records, ``pysolate._run._run_record``)
and the events only it knows: when the tokens arrived and the Guest ran, and at its end the
record of each observation and the receipts. An observation or a claim is named by the
handle its hook returned (compared by identity), so a listener keys its own state by it.

The events of one call (``ObservationStarted`` to ``ClaimEnded``) reach only the listeners
that follow calls (``Listener.follows_calls``): when none does, the call sites are given the
null hooks and an untraced run makes no event per call.

The order of the events is stated once, in ``pysolate.tracing.events`` (the public face of
this module and ``_stream.py``); ``_stream.py`` keeps it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol, TypeAlias

from occurrences import CallKey

from ._interface import ClaimTrace, Disposition, Lane, ObservationTrace


@dataclass(frozen=True, slots=True, eq=False)
class RunStarted:
    """A run starts (first chunk, or ``run_source``); see ``Instrument.run_started``."""

    run_id: str
    agent_name: str | None = None
    isolation: str | None = None


@dataclass(frozen=True, slots=True, eq=False)
class SnapshotAccepted:
    """The accepted complete prefix grew (``Snapshot.statements``, ``.new_statements``, ``.end``);
    ``at``: when, in seconds since the run started (None when reported through the hook,
    which carries no time)."""

    statements: int
    new_statements: int
    chars: int
    at: float | None = None


@dataclass(frozen=True, slots=True, eq=False)
class Sealed:
    """The complete source parsed and is sealed (``source_hash`` of it); ``at`` as above."""

    source_hash: str
    statements: int
    chars: int
    at: float | None = None


@dataclass(frozen=True, slots=True, eq=False)
class ObservationStarted:
    """A physical observation starts (``served_by``: another run's, for ``shared_from``)."""

    observation: ObservationTrace
    capability: str
    method: str
    call_id: str
    lane: Lane
    effect: str
    call_key: str | None = None
    arguments: Mapping[str, object] | None = None
    shared_from: str | None = None
    served_by: ObservationTrace | None = None

    @property
    def early(self) -> bool:
        """Early work (speculative or branch): it will also settle with a disposition."""
        return self.lane != "formal"


@dataclass(frozen=True, slots=True, eq=False)
class ObservationCompleted:
    """The execution finished: returned ``result`` (or ``NO_RESULT``) or raised ``error``."""

    observation: ObservationTrace
    error: BaseException | str | None
    result: object


@dataclass(frozen=True, slots=True, eq=False)
class ObservationSettled:
    """Early work's final disposition: claimed, cancelled, late, orphaned or discarded."""

    observation: ObservationTrace
    disposition: Disposition


@dataclass(frozen=True, slots=True, eq=False)
class Claimed:
    """A logical Guest call claims ``observation`` (early work of this run)."""

    claim: ClaimTrace
    capability: str
    method: str
    call_id: str
    observation: ObservationTrace
    call_key: str | None = None
    arguments: Mapping[str, object] | None = None


@dataclass(frozen=True, slots=True, eq=False)
class ClaimEnded:
    """The Guest received the claimed value (or the claimed failure, ``error``)."""

    claim: ClaimTrace
    error: BaseException | str | None
    result: object


@dataclass(frozen=True, slots=True, eq=False)
class RunEnded:
    """The run is over with ``status``; whatever is still open ends with it. ``at``: its
    wall time (``RunReport.wall_seconds``; None when reported through the hook)."""

    status: str
    counts: Mapping[str, int] | None = None
    error_type: str | None = None
    at: float | None = None


@dataclass(frozen=True, slots=True, eq=False)
class TokensArrived:
    """The program's text was read to its end: it arrived from ``first`` to ``last``, in
    seconds since the run started (one instant for a source given whole)."""

    first: float
    last: float


@dataclass(frozen=True, slots=True, eq=False)
class GuestStarted:
    """The Guest was given the sealed program ``at`` seconds after the run started."""

    at: float


@dataclass(frozen=True, slots=True, eq=False)
class GuestEnded:
    """The Guest returned the program's outcome ``at`` seconds after the run started."""

    at: float


@dataclass(frozen=True, slots=True, eq=False)
class ObservationRecorded:
    """One physical observation of the run's lane (early or formal) as it ended, once the
    lane closed: the facts of ``RunResult.observations``' record of it (``ObservationRecord``
    says what each means). Times are seconds since the run started."""

    id: int
    capability: str
    method: str
    lane: Literal["speculative", "formal"]
    key: CallKey
    physical: bool
    claims: int
    disposition: Disposition | None
    started: float | None
    ended: float | None
    layer: int | None = None
    shared_from: str | None = None


class RecordedCall(Protocol):
    """What a listener reads of a receipt (``pysolate.CallRecord`` is one)."""

    @property
    def capability(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def lane(self) -> str: ...
    @property
    def started(self) -> float: ...
    @property
    def ended(self) -> float: ...
    @property
    def shared_from(self) -> str | None: ...


@dataclass(frozen=True, slots=True, eq=False)
class CallsRecorded:
    """The receipts of every call the program made (``RunResult.calls``), in program order:
    one event for all of them, so recording a call costs the run nothing per call."""

    calls: Sequence[RecordedCall]


Event: TypeAlias = (
    SnapshotAccepted
    | Sealed
    | ObservationStarted
    | ObservationCompleted
    | ObservationSettled
    | Claimed
    | ClaimEnded
    | RunEnded
    | TokensArrived
    | GuestStarted
    | GuestEnded
    | ObservationRecorded
    | CallsRecorded
)
"""Every event a listener receives (``RunStarted`` is given when it is asked for)."""


class Listener:
    """One run's receiver of events; subclasses override ``received`` (and ``activated``)."""

    __slots__ = ()

    follows_calls: ClassVar[bool] = True
    """Whether it receives the events of each call (``ObservationStarted``,
    ``ObservationCompleted``, ``ObservationSettled``, ``Claimed``, ``ClaimEnded``, and
    ``activated``). A listener that reads only the run's record says False, so a run no
    other listener follows keeps the null hooks."""

    def received(self, event: Event) -> None:
        """One event of the run, in the order of the invariant above."""

    def activated(self, observation: ObservationTrace) -> AbstractContextManager[object] | None:
        """A context to run the tool inside (a span made current), or None for none."""
        return None

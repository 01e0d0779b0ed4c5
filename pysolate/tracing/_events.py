"""A run's lifecycle as typed events: the one stream every recording of a run derives from.

The Host reports a run through the hooks of ``_interface.py``; a ``StreamInstrument``
(``_stream.py``) turns each hook into one frozen event below and hands it, in order, to every
``Listener`` of the run: OpenTelemetry spans (``_otel.py``), live progress
(``pysolate._progress``), any hook-style ``Instrument`` (``HookListener``). The events carry
what the hooks carry and no more; an observation or a claim is named by the handle its hook
returned (compared by identity), so a listener keys its own state by it.

The order of the events is stated once, in ``pysolate.tracing.events`` (the public face of
this module and ``_stream.py``); ``_stream.py`` keeps it.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TypeAlias

from ._interface import ClaimTrace, Disposition, Lane, ObservationTrace


@dataclass(frozen=True, slots=True, eq=False)
class RunStarted:
    """A run starts (first chunk, or ``run_source``); see ``Instrument.run_started``."""

    run_id: str
    agent_name: str | None = None
    isolation: str | None = None


@dataclass(frozen=True, slots=True, eq=False)
class SnapshotAccepted:
    """The accepted complete prefix grew (``Snapshot.statements``, ``.new_statements``, ``.end``)."""

    statements: int
    new_statements: int
    chars: int


@dataclass(frozen=True, slots=True, eq=False)
class Sealed:
    """The complete source parsed and is sealed (``source_hash`` of it)."""

    source_hash: str
    statements: int
    chars: int


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
    """The run is over with ``status``; whatever is still open ends with it."""

    status: str
    counts: Mapping[str, int] | None = None
    error_type: str | None = None


Event: TypeAlias = (
    SnapshotAccepted
    | Sealed
    | ObservationStarted
    | ObservationCompleted
    | ObservationSettled
    | Claimed
    | ClaimEnded
    | RunEnded
)
"""Every event a listener receives (``RunStarted`` is given when it is asked for)."""


class Listener:
    """One run's receiver of events; subclasses override ``received`` (and ``activated``)."""

    __slots__ = ()

    def received(self, event: Event) -> None:
        """One event of the run, in the order of the invariant above."""

    def activated(self, observation: ObservationTrace) -> AbstractContextManager[object] | None:
        """A context to run the tool inside (a span made current), or None for none."""
        return None

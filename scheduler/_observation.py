"""Physical observations: one real execution of a capability method, and how it ended.

Invariant (DESIGN.md, dispositions): every *early* observation ends in exactly one
``Disposition`` — ``claimed`` if at least one Guest call took its result, otherwise
``cancelled`` (stopped before it completed), ``late`` (it could not be stopped, e.g. a thread,
or it completed after cancellation was requested) or ``orphaned`` (completed in time, never
claimed). Formal observations (made for the Guest's own call) are claimed by that call.
Early work on a speculative layer of a run's branch (``scheduler._branches``) may also end
``discarded``: the layer it ran on was dropped (a formal write did not claim its write, or
the run ended first), so nothing it did or saw can reach the program.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Literal

import anyio

from occurrences import CallKey, OccurrenceId


class ObservationState(enum.StrEnum):
    QUEUED = "queued"
    """Dispatched, waiting for a concurrency slot; nothing has executed yet."""
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    """Stopped before it completed; the tool did not finish."""
    ABANDONED = "abandoned"
    """Cancellation was requested but the work (a thread) could not be interrupted."""


_MOVES: dict[ObservationState, frozenset[ObservationState]] = {
    ObservationState.QUEUED: frozenset({ObservationState.RUNNING, ObservationState.CANCELLED}),
    ObservationState.RUNNING: frozenset(
        {
            ObservationState.SUCCEEDED,
            ObservationState.FAILED,
            ObservationState.CANCELLED,
            ObservationState.ABANDONED,
        }
    ),
    ObservationState.SUCCEEDED: frozenset(),
    ObservationState.FAILED: frozenset(),
    ObservationState.CANCELLED: frozenset(),
    ObservationState.ABANDONED: frozenset(),
}


class IllegalObservationMove(RuntimeError):
    """A bug: an observation was moved along an edge its lifecycle does not have."""


class Disposition(enum.StrEnum):
    CLAIMED = "claimed"
    CANCELLED = "cancelled"
    LATE = "late"
    ORPHANED = "orphaned"
    DISCARDED = "discarded"
    """Ran on a speculative branch layer that was dropped (``scheduler._branches``)."""


class Probe:
    """Shared between the lane and the code that executes a call.

    The executor sets ``in_thread`` before it hands the call to a worker thread and
    ``thread_done`` when that thread returns, so the lane can tell a cancelled call (never
    finished) from an abandoned thread that runs on (``late``). Plain attributes written from
    the worker thread: a bool store is atomic under the GIL and the lane only reads them.
    """

    __slots__ = ("in_thread", "thread_done")

    def __init__(self) -> None:
        self.in_thread = False
        self.thread_done = False


@dataclass(slots=True, eq=False)
class Observation:
    """One physical execution (or its placeholder while queued)."""

    id: int
    key: CallKey
    lane: Literal["speculative", "formal"]
    node_ids: list[OccurrenceId] = field(default_factory=list)  # occurrences it serves (speculative)
    state: ObservationState = ObservationState.QUEUED
    value: object = None
    error: BaseException | None = None  # the tool's exception, re-raised per claim
    started: float | None = None  # None while queued: nothing physical happened yet
    finished: float | None = None
    claims: int = 0
    cancel_requested: bool = False
    # Set on early work on a speculative branch layer: the layer's version it ran on (a
    # write: the version it made). None for work on a root or the run's own view.
    layer: int | None = None
    discarded: bool = False  # its layer was dropped: never claimed from then on
    probe: Probe = field(default_factory=Probe)
    done: anyio.Event = field(default_factory=anyio.Event)

    def move(self, new: ObservationState) -> None:
        if new not in _MOVES[self.state]:
            raise IllegalObservationMove(f"observation {self.id}: {self.state} -> {new}")
        self.state = new

    @property
    def physical(self) -> bool:
        """True once the tool was actually invoked."""
        return self.started is not None

    @property
    def settled(self) -> bool:
        return self.state in (ObservationState.SUCCEEDED, ObservationState.FAILED)

    def disposition(self) -> Disposition:
        """How this early observation ended; meaningful once the lane is closed."""
        if self.claims:
            return Disposition.CLAIMED
        if self.discarded:
            return Disposition.DISCARDED
        if self.state is ObservationState.ABANDONED:
            return Disposition.LATE
        if self.state is ObservationState.CANCELLED or self.state is ObservationState.QUEUED:
            return Disposition.CANCELLED
        if self.state is ObservationState.RUNNING:
            # Only possible if the lane is inspected before close(): nothing stopped it yet.
            return Disposition.CANCELLED
        return Disposition.LATE if self.cancel_requested else Disposition.ORPHANED
